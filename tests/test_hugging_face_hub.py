"""Hugging Face Hub ids as presets (`hf://owner/name`, `owner/name`, `bert-base-uncased`), served by a real local
HTTP server laid out as the Hub is (`<owner>/<name>/resolve/<revision>/<file>`; `HF_ENDPOINT` points at it)."""

import json
import os
import shutil

import numpy as np
import pytest
from local_http_server import serve_directory

from keras_bert_impl import BertBackbone, BertTokenClassifier
from keras_bert_impl.checkpoints.download import DownloadError
from keras_bert_impl.checkpoints.hugging_face_hub import hub_model_id
from keras_bert_impl.checkpoints.loading import resolve_preset
from keras_bert_impl.checkpoints.sentence_transformers import embedding_settings

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_FILES = ("config.json", "vocab.txt", "model.safetensors", "tokenizer_config.json", "special_tokens_map.json")
# How sentence-transformers embeds with it (BertTextEmbedder's defaults): fetched where the repository has them.
SENTENCE_TRANSFORMERS_FILES = ("sentence_bert_config.json", "modules.json", "1_Pooling/config.json")


def _publish(hub, repo, source, files, revision="main"):
    """Puts `files` of the directory `source` where the Hub serves them."""
    target = hub / repo / "resolve" / revision
    target.mkdir(parents=True)
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / name, target / name)
    return target


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """`(hub directory, its URL, the request paths)`; the preset cache in tmp_path."""
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "hub"
    root.mkdir()
    with serve_directory(root) as (url, requests):
        monkeypatch.setenv("HF_ENDPOINT", url)
        yield root, url, requests


def test_the_forms_of_a_hub_id():
    assert hub_model_id("hf://dslim/bert-base-NER") == ("dslim/bert-base-NER", "main")
    assert hub_model_id("hf://dslim/bert-base-NER@refs/pr/3") == ("dslim/bert-base-NER", "refs/pr/3")
    assert hub_model_id("dslim/bert-base-NER") == ("dslim/bert-base-NER", "main")
    assert hub_model_id("bert-base-cased") == ("google-bert/bert-base-cased", "main")
    for not_hub in ("bert_base_en_uncased", "/abs/dir", "./model", "a/b/c", "bert-base-uncasedd"):
        assert hub_model_id(not_hub) is None, not_hub
    with pytest.raises(ValueError) as error:
        hub_model_id("hf://bert-base-uncased")
    assert str(error.value) == ("Preset 'hf://bert-base-uncased': a Hugging Face Hub id is hf://owner/name or "
                                "hf://owner/name@revision (e.g. hf://google-bert/bert-base-uncased).")


def test_a_hub_id_downloads_once_into_the_cache_and_loads_as_the_directory(hub, minilm_dir, tmp_path, capfd,
                                                                          monkeypatch):
    root, _, requests = hub
    _publish(root, MINILM, minilm_dir, MINILM_FILES + SENTENCE_TRANSFORMERS_FILES + ("tokenizer.json", "README.md"))
    backbone = BertBackbone.from_preset(f"hf://{MINILM}")
    cached = tmp_path / "cache" / "hf--sentence-transformers--all-MiniLM-L6-v2"
    # What a BERT preset needs, not the whole repository.
    assert sorted(os.listdir(cached)) == sorted(MINILM_FILES + ("sentence_bert_config.json", "modules.json",
                                                                "1_Pooling"))
    assert embedding_settings(cached) == {"sequence_length": 256, "pooling": "mean", "normalize": True}
    assert (cached / "model.safetensors").read_bytes() == (minilm_dir / "model.safetensors").read_bytes()
    for ours, reference in zip(backbone.get_weights(), BertBackbone.from_preset(str(minilm_dir)).get_weights()):
        np.testing.assert_array_equal(ours, reference)
    assert "Downloading model.safetensors:" in capfd.readouterr().err
    count = len(requests)
    assert resolve_preset(MINILM).location == str(cached)  # from_pretrained's form; the cache, no request
    assert len(requests) == count
    assert requests.authorization[f"/{MINILM}/resolve/main/config.json"] is None  # no token, no header
    # BERT's unprefixed names are the Hub's google-bert/ repositories; HF_TOKEN goes along, as huggingface_hub sends it.
    _publish(root, "google-bert/bert-base-uncased", minilm_dir, MINILM_FILES)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    assert resolve_preset("bert-base-uncased").location == str(tmp_path / "cache" / "hf--google-bert--bert-base-uncased")
    assert requests.authorization["/google-bert/bert-base-uncased/resolve/main/model.safetensors"] == (
        "Bearer hf_test_token")
    # HF_HUB_OFFLINE, as huggingface_hub reads it: the cache serves, and nothing else is fetched.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    count = len(requests)
    assert resolve_preset(f"hf://{MINILM}").location == str(cached)
    with pytest.raises(OSError) as error:
        resolve_preset("hf://someone/not-cached")
    assert str(error.value) == (
        f"Hugging Face model 'someone/not-cached' (revision main) is not in the cache "
        f"({tmp_path / 'cache' / 'hf--someone--not-cached'}) and HF_HUB_OFFLINE is set, so it is not downloaded: "
        "unset it, or put the model's directory there (config.json, vocab.txt, model.safetensors).")
    assert len(requests) == count


@pytest.mark.slow
def test_a_fine_tuned_tagger_on_the_hub_loads_with_its_head_and_tags(hub, tmp_path):
    # What BertTokenClassifier.from_preset("dslim/bert-base-NER") does: the trained head and id2label come along.
    root, _, _ = hub
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    trained = BertTokenClassifier.from_preset("all_minilm_l6_v2_en", label_names=tags)
    trained.save_huggingface(tmp_path / "exported")
    _publish(root, "someone/minilm-ner", tmp_path / "exported", ("config.json", "vocab.txt", "model.safetensors"))
    loaded = BertTokenClassifier.from_preset("someone/minilm-ner")
    assert loaded.label_names == tags and loaded.heads_loaded
    text = ["Peter Blackburn lives in Paris."]
    np.testing.assert_allclose(loaded.predict(text, verbose=0), trained.predict(text, verbose=0), atol=1e-5)
    # A repository with pytorch_model.bin only, as older models on the Hub (transformers' safe_serialization=False):
    # read without torch, nothing in the pickle run, the head and its tags loaded as well.
    import torch
    from safetensors.numpy import load_file

    older = _publish(root, "someone/older-ner", tmp_path / "exported", ("config.json", "vocab.txt"))
    torch.save({k: torch.from_numpy(v) for k, v in load_file(tmp_path / "exported" / "model.safetensors").items()},
               older / "pytorch_model.bin")
    from_pickle = BertTokenClassifier.from_preset("hf://someone/older-ner")
    assert from_pickle.label_names == tags and from_pickle.heads_loaded
    np.testing.assert_array_equal(from_pickle.predict(text, verbose=0), loaded.predict(text, verbose=0))
    assert sorted(os.listdir(tmp_path / "cache" / "hf--someone--older-ner")) == [
        "config.json", "pytorch_model.bin", "vocab.txt"]


def test_hub_failures_are_one_line_and_leave_no_cache_entry(hub, minilm_dir, tmp_path):
    root, url, requests = hub
    with pytest.raises(DownloadError) as error:
        BertBackbone.from_preset("nobody/no-such-model")
    assert str(error.value) == (
        f"Hugging Face model 'nobody/no-such-model' (revision main) could not be fetched: "
        f"{url}/nobody/no-such-model/resolve/main/config.json answered HTTP 404 File not found. Check the id; a "
        "private or gated model needs HF_TOKEN set (and no local directory nobody/no-such-model exists).")
    roberta = _publish(root, "someone/roberta", minilm_dir, ("config.json", "vocab.txt", "model.safetensors"))
    config = json.loads((roberta / "config.json").read_text())
    (roberta / "config.json").write_text(json.dumps(dict(config, model_type="roberta")))
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset("hf://someone/roberta")
    assert str(error.value) == ("Hugging Face model 'someone/roberta' has model_type='roberta'; only BERT checkpoints "
                                "(model_type 'bert') load into BertBackbone.")
    assert not any(path.startswith("/someone/roberta/resolve/main/model") for path in requests)  # refused first
    _publish(root, "someone/no-weights", minilm_dir, ("config.json", "vocab.txt"))
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset("hf://someone/no-weights")
    assert str(error.value) == (
        "Hugging Face model 'someone/no-weights' has none of model.safetensors, model.safetensors.index.json, "
        "pytorch_model.bin, pytorch_model.bin.index.json (revision main): no weights that load (TensorFlow / Flax "
        "weights only?).")
    _publish(root, "someone/no-vocab", minilm_dir, ("config.json", "model.safetensors"))
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset("hf://someone/no-vocab")
    assert str(error.value) == ("Hugging Face model 'someone/no-vocab' has no vocab.txt (revision main): the "
                                "WordPiece vocabulary is needed for the tokenizer.")
    assert os.listdir(tmp_path / "cache") == []


def _shard(state, directory, kind, parts=3):
    """Writes `state` (name -> NumPy array) as transformers writes a sharded checkpoint: `parts` files and the index
    (`model.safetensors.index.json` or `pytorch_model.bin.index.json`) mapping each tensor to its file."""
    import torch
    from safetensors.numpy import save_file

    names = sorted(state)
    weight_map = {}
    for part in range(parts):
        if kind == "safetensors":
            file_name = f"model-{part + 1:05d}-of-{parts:05d}.safetensors"
            save_file({n: state[n] for n in names[part::parts]}, str(directory / file_name))
        else:
            file_name = f"pytorch_model-{part + 1:05d}-of-{parts:05d}.bin"
            torch.save({n: torch.from_numpy(np.ascontiguousarray(state[n])) for n in names[part::parts]},
                       directory / file_name)
        weight_map.update({n: file_name for n in names[part::parts]})
    index = "model.safetensors.index.json" if kind == "safetensors" else "pytorch_model.bin.index.json"
    (directory / index).write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return sorted(set(weight_map.values())) + [index]


@pytest.mark.parametrize("kind", ["pytorch_model.bin", "safetensors"])
def test_a_sharded_checkpoint_loads_from_a_directory_and_from_the_hub(kind, hub, minilm_dir, tmp_path):
    """Sharded weights, as transformers saves a model above its shard size: pytorch_model-0000k-of-0000n.bin files
    with their index were refused ("convert them once to safetensors"), and neither kind downloaded from the Hub
    ("neither model.safetensors nor pytorch_model.bin")."""
    from safetensors.numpy import load_file

    root, _, requests = hub
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    for name in ("config.json", "vocab.txt"):
        shutil.copy(minilm_dir / name, sharded / name)
    files = _shard(load_file(str(minilm_dir / "model.safetensors")), sharded, kind)
    reference = BertBackbone.from_preset(str(minilm_dir)).get_weights()
    for ours, expected in zip(BertBackbone.from_preset(str(sharded)).get_weights(), reference):
        np.testing.assert_array_equal(ours, expected)
    _publish(root, "someone/sharded", sharded, ("config.json", "vocab.txt", *files))
    for ours, expected in zip(BertBackbone.from_preset("hf://someone/sharded").get_weights(), reference):
        np.testing.assert_array_equal(ours, expected)
    assert sorted(os.listdir(tmp_path / "cache" / "hf--someone--sharded")) == sorted(["config.json", "vocab.txt", *files])
    # A shard the index names but the directory lacks: one line naming both.
    (sharded / files[0]).unlink()
    with pytest.raises(FileNotFoundError) as error:
        BertBackbone.from_preset(str(sharded))
    assert str(error.value) == (f"{sharded / files[-1]} names the shard {files[0]}, but {sharded / files[0]} does not "
                                "exist.")
