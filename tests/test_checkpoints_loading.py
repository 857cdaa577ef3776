"""Preset resolution, format detection and tokenizer assets (no model building here)."""

import json
import os

import pytest

from keras_bert_impl.checkpoints import loading
from keras_bert_impl.checkpoints.loading import detect_format, resolve_preset, resolve_tokenizer_assets


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_minilm_name_resolves_offline_to_installed_package(minilm_dir, empty_cache):
    resolved = resolve_preset("all_minilm_l6_v2_en")
    assert resolved.format == "huggingface"
    assert os.path.samefile(resolved.location, minilm_dir)
    assert resolved.name == "all_minilm_l6_v2_en"


def test_tokenizer_assets_of_minilm_name_and_directory(minilm_dir, empty_cache):
    by_name = resolve_tokenizer_assets("all_minilm_l6_v2_en")
    by_dir = resolve_tokenizer_assets(str(minilm_dir))
    for assets in (by_name, by_dir):
        assert os.path.samefile(assets["vocabulary"], minilm_dir / "vocab.txt")
        assert assets["lowercase"] is True


def test_tokenizer_casing_from_tokenizer_json_and_vocabulary(minilm_dir, tmp_path):
    # An HF directory without tokenizer_config.json: casing from tokenizer.json's normalizer.
    hf = tmp_path / "hf_no_tokenizer_config"
    hf.mkdir()
    for name in ("config.json", "vocab.txt"):
        (hf / name).write_bytes((minilm_dir / name).read_bytes())
    (hf / "model.safetensors").symlink_to(minilm_dir / "model.safetensors")
    tokenizer = json.loads((minilm_dir / "tokenizer.json").read_text())
    tokenizer["normalizer"]["lowercase"] = False
    (hf / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert resolve_tokenizer_assets(str(hf))["lowercase"] is False
    # Neither file: the (uncased) vocabulary decides.
    (hf / "tokenizer.json").unlink()
    assert resolve_tokenizer_assets(str(hf))["lowercase"] is True
    # A cased vocabulary (capitalised pieces) gives lowercase=False.
    (hf / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nThe\nthe\n##s\n")
    assert resolve_tokenizer_assets(str(hf))["lowercase"] is False


def test_unknown_preset_lists_closest_names(empty_cache):
    with pytest.raises(ValueError) as info:
        resolve_preset("bert_base_en_uncase")
    message = str(info.value)
    assert "Unknown preset 'bert_base_en_uncase'" in message
    assert "Closest names: bert_base_en_uncased" in message


def test_missing_directory_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="does_not_exist"):
        resolve_preset(str(tmp_path / "does_not_exist"))


def test_unrecognised_directory_says_what_is_expected(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError) as info:
        detect_format(tmp_path)
    assert "notes.txt" in str(info.value) and "bert_config.json" in str(info.value)


def test_non_bert_huggingface_config_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(ValueError, match="model_type='roberta'"):
        detect_format(tmp_path)


def test_a_pytorch_model_bin_directory_is_hugging_face_sharded_or_not(minilm_dir, tmp_path):
    (tmp_path / "config.json").write_bytes((minilm_dir / "config.json").read_bytes())
    (tmp_path / "pytorch_model.bin").write_bytes(b"read by torch_weights")
    assert detect_format(tmp_path) == "huggingface"
    (tmp_path / "pytorch_model.bin").unlink()
    (tmp_path / "pytorch_model.bin.index.json").write_text("{}")  # (loading it: tests/test_hugging_face_hub.py)
    assert detect_format(tmp_path) == "huggingface"
    (tmp_path / "pytorch_model.bin.index.json").unlink()
    with pytest.raises(ValueError) as info:
        detect_format(tmp_path)
    assert str(info.value) == (
        f"{tmp_path} has a Hugging Face BERT config.json but no weights: expected model.safetensors (or "
        "model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json).")


def test_cache_directory_is_used_before_sources(minilm_dir, empty_cache):
    cached = empty_cache / "bert_tiny_en_uncased"
    cached.mkdir(parents=True)
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        (cached / name).write_bytes((minilm_dir / name).read_bytes())
    (cached / "model.safetensors").symlink_to(minilm_dir / "model.safetensors")
    assert loading.preset_cache_root() == str(empty_cache)
    resolved = resolve_preset("bert_tiny_en_uncased")
    assert resolved.location == str(cached) and resolved.format == "huggingface"


def test_a_config_alone_builds_the_architecture_when_no_weights_are_wanted(minilm_dir, tmp_path):
    """`from_preset(directory, load_weights=False)`: a Hugging Face config.json without weights is enough (the
    random-weight speed runs of benchmarks/squad.py carry only the config to a GPU machine)."""
    from keras_bert_impl.models.backbone import BertBackbone

    (tmp_path / "config.json").write_bytes((minilm_dir / "config.json").read_bytes())
    backbone = BertBackbone.from_preset(str(tmp_path), load_weights=False)
    assert (backbone.num_layers, backbone.hidden_dim, backbone.vocabulary_size) == (6, 384, 30522)
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset(str(tmp_path))
    assert str(error.value) == (f"{tmp_path} has a Hugging Face BERT config.json but no weights: expected "
                                "model.safetensors (or model.safetensors.index.json, pytorch_model.bin, "
                                "pytorch_model.bin.index.json).")
