"""Own preset directories and Hugging Face export are written atomically: complete or not at all."""

import json
import os

import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import resolve_tokenizer_assets, save_huggingface

pytestmark = pytest.mark.multibackend

SMALL = dict(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8)


@pytest.fixture(scope="module")
def backbone():
    return BertBackbone(**SMALL)


def test_refuses_to_overwrite_foreign_files(backbone, tmp_path):
    target = tmp_path / "my_project"
    target.mkdir()
    (target / "notes.md").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"Refusing to overwrite .*my_project: it already holds \['notes.md'\]"):
        backbone.save_to_preset(target)
    assert os.listdir(target) == ["notes.md"]
    with pytest.raises(FileExistsError, match="notes.md"):
        save_huggingface(backbone, target)


def test_failed_save_leaves_nothing_behind(backbone, tmp_path):
    target = tmp_path / "preset"
    with pytest.raises(FileNotFoundError, match=r"vocabulary='.*no_such_vocab.txt' is not a file"):
        backbone.save_to_preset(target, vocabulary=str(tmp_path / "no_such_vocab.txt"))
    assert os.listdir(tmp_path) == []  # neither the preset nor a temporary directory


def test_resave_replaces_earlier_preset(backbone, tmp_path):
    target = tmp_path / "preset"
    backbone.save_to_preset(target, vocabulary=["[PAD]", "[UNK]", "The", "dog"], lowercase=False)
    assert resolve_tokenizer_assets(str(target))["lowercase"] is False
    other = BertBackbone(**dict(SMALL, hidden_dim=12))
    other.save_to_preset(target)
    assert sorted(os.listdir(target)) == ["config.json", "model.weights.h5"]
    assert BertBackbone.from_preset(str(target)).hidden_dim == 12
    assert [p for p in os.listdir(tmp_path) if p != "preset"] == []


def test_preset_without_vocabulary_has_no_tokenizer_assets(backbone, tmp_path):
    backbone.save_to_preset(tmp_path / "preset")
    with pytest.raises(FileNotFoundError, match="saved without a vocabulary"):
        resolve_tokenizer_assets(str(tmp_path / "preset"))


def test_newer_format_version_is_refused(backbone, tmp_path):
    backbone.save_to_preset(tmp_path / "preset")
    config_path = tmp_path / "preset" / "config.json"
    config = json.loads(config_path.read_text())
    config["format_version"] = 99
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="format_version=99; this keras_bert_impl reads up to 1"):
        BertBackbone.from_preset(str(tmp_path / "preset"))


def test_load_weights_false_builds_architecture_only(backbone, tmp_path):
    backbone.save_to_preset(tmp_path / "preset")
    fresh = BertBackbone.from_preset(str(tmp_path / "preset"), load_weights=False, dropout=0.0)
    assert fresh.architecture_config() == dict(backbone.architecture_config(), dropout=0.0)
    assert not hasattr(fresh, "load_report")
