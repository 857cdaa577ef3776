"""keras-hub is an optional extra: without it, a keras-hub preset fails with a one-line message saying what to install."""

import json
import sys

import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import keras_hub as keras_hub_checkpoints
from keras_bert_impl.checkpoints.loading import load_backbone, resolve_preset

CONFIG = {
    "vocabulary_size": 64,
    "num_layers": 1,
    "num_heads": 2,
    "hidden_dim": 8,
    "intermediate_dim": 16,
    "dropout": 0.0,
    "max_sequence_length": 16,
    "num_segments": 2,
}
HANDLE = "kaggle://keras/bert/keras/bert_tiny_en_uncased/2"
INSTALL = 'pip install keras-hub (or pip install "keras_bert_impl[keras-hub]")'


@pytest.fixture
def without_keras_hub(monkeypatch):
    """`import keras_hub` raises ImportError, as where keras-hub is not installed."""
    for name in [n for n in sys.modules if n == "keras_hub" or n.startswith("keras_hub.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "keras_hub", None)


@pytest.fixture
def keras_hub_preset_dir(tmp_path):
    """A keras-hub `BertBackbone` preset's config.json, as `save_to_preset` writes it."""
    directory = tmp_path / "keras_hub_preset"
    directory.mkdir()
    config = {
        "module": "keras_hub.src.models.bert.bert_backbone",
        "class_name": "BertBackbone",
        "config": {"name": "bert_backbone", "trainable": True, "dtype": "float32", **CONFIG},
        "registered_name": "keras_hub>BertBackbone",
    }
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


def _check_message(error, location):
    message = str(error)
    assert "\n" not in message
    assert message == (
        f"Loading the keras-hub preset {location} needs keras-hub, which is not installed: {INSTALL}."
    )


def test_keras_hub_preset_directory_weights_need_keras_hub(without_keras_hub, keras_hub_preset_dir):
    with pytest.raises(ImportError) as info:
        BertBackbone.from_preset(str(keras_hub_preset_dir))
    _check_message(info.value, keras_hub_preset_dir)
    # The architecture alone is read from config.json, without keras-hub.
    backbone = load_backbone(BertBackbone, str(keras_hub_preset_dir), load_weights=False)
    assert backbone.num_layers == 1 and backbone.hidden_dim == 8


def test_keras_hub_handle_needs_keras_hub(without_keras_hub):
    for read in (keras_hub_checkpoints.read_backbone_config, keras_hub_checkpoints.read_tokenizer_assets):
        with pytest.raises(ImportError) as info:
            read(HANDLE)
        _check_message(info.value, HANDLE)


def test_preset_whose_only_source_is_keras_hub_says_what_to_install(without_keras_hub, tmp_path, monkeypatch):
    from keras_bert_impl.presets import backbone_presets

    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(backbone_presets, "keras_hub_only_test_preset", {
        "config": CONFIG,
        "sources": [{"format": "keras_hub", "handle": HANDLE, "sha256": {}}],
        "metadata": {"lowercase": True},
    })
    with pytest.raises(ValueError, match=r"every source failed") as info:
        resolve_preset("keras_hub_only_test_preset")
    assert f"keras_hub ({HANDLE}): Loading the keras-hub preset {HANDLE} needs keras-hub" in str(info.value)
    assert INSTALL in str(info.value)
