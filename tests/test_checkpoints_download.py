"""Downloads against a real HTTP server on 127.0.0.1: progress, sha256, truncation, zip-slip, preset sources."""

import hashlib
import os
import zipfile

import pytest

from keras_bert_impl.checkpoints import resolve_preset, resolve_tokenizer_assets
from keras_bert_impl.checkpoints.download import DownloadError, download_file, download_files, extract_zip
from keras_bert_impl.presets import backbone_presets
from local_http_server import serve_directory


@pytest.fixture
def served(tmp_path, data_slices):
    """A served folder holding a real data file (a slice of the STS-B dev set) and its digest."""
    root = tmp_path / "served"
    root.mkdir()
    data = (data_slices / "glue" / "STS-B" / "dev.tsv").read_bytes()
    (root / "dev.tsv").write_bytes(data)
    (root / "dev_truncated.tsv").write_bytes(data[: len(data) // 2])
    return root, data, hashlib.sha256(data).hexdigest()


def test_download_with_progress_and_sha256(served, tmp_path, capfd):
    root, data, digest = served
    with serve_directory(root) as (url, requests):
        path = download_file(f"{url}/dev.tsv", tmp_path / "out" / "dev.tsv", sha256=digest)
        assert open(path, "rb").read() == data
        # A verified file is not downloaded again.
        download_file(f"{url}/dev.tsv", tmp_path / "out" / "dev.tsv", sha256=digest)
        assert requests == ["/dev.tsv"]
    err = capfd.readouterr().err
    assert f"Downloading dev.tsv: {len(data) / 1024:.1f} KB/{len(data) / 1024:.1f} KB (100%)" in err
    assert "/s\n" in err
    assert os.listdir(tmp_path / "out") == ["dev.tsv"]


def test_truncated_download_fails_sha256_and_is_deleted(served, tmp_path):
    root, data, digest = served
    actual = hashlib.sha256(data[: len(data) // 2]).hexdigest()
    with serve_directory(root) as (url, _):
        with pytest.raises(DownloadError) as info:
            download_file(f"{url}/dev_truncated.tsv", tmp_path / "out" / "dev.tsv", sha256=digest, progress_stream=None)
    message = str(info.value)
    assert f"sha256 mismatch for {url}/dev_truncated.tsv: expected {digest}, got {actual}" in message
    assert "Deleted the partial file" in message and "dev.tsv.part" in message
    assert os.listdir(tmp_path / "out") == []


def test_connection_that_breaks_off_is_reported_and_deleted(served, tmp_path):
    root, data, _ = served
    lies = {"/broken.tsv": (len(data), data[:1000])}
    with serve_directory(root, lies=lies) as (url, _):
        with pytest.raises(DownloadError) as info:
            download_file(f"{url}/broken.tsv", tmp_path / "out" / "broken.tsv", progress_stream=None)
    assert f"got 1000 of {len(data)} bytes" in str(info.value) or "broke off after 1000 bytes" in str(info.value)
    assert os.listdir(tmp_path / "out") == []


def _zip_with(path, name, info_mode=None):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("release/vocab.txt", "[PAD]\n")
        member = zipfile.ZipInfo(name)
        if info_mode is not None:
            member.external_attr = info_mode << 16
        archive.writestr(member, "payload")
    return path


@pytest.mark.parametrize(
    "member, mode, reason",
    [
        ("../escaped.txt", None, "would be written outside"),
        ("release/../../escaped.txt", None, "would be written outside"),
        ("/tmp/escaped_absolute.txt", None, "would be written outside"),
        ("release/link", 0o120777, "symbolic link"),
    ],
)
def test_zip_slip_is_refused_and_nothing_extracted(tmp_path, member, mode, reason):
    archive = _zip_with(tmp_path / "evil.zip", member, mode)
    target = tmp_path / "extract" / "preset"
    with pytest.raises(ValueError) as info:
        extract_zip(archive, target)
    assert f"Refusing to extract zip member {member!r}" in str(info.value) and reason in str(info.value)
    assert not target.exists() and os.listdir(tmp_path / "extract") == []
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "extract" / "escaped.txt").exists()


def test_huggingface_source_downloads_into_cache_with_table_digest(minilm_dir, tmp_path, monkeypatch, capfd):
    """The real MiniLM files served locally, checked against the sha256 recorded in the preset table."""
    table_source = backbone_presets["all_minilm_l6_v2_en"]["sources"][1]
    assert table_source["format"] == "huggingface"
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    files = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
    with serve_directory(minilm_dir) as (url, requests):
        monkeypatch.setitem(
            backbone_presets,
            "test_minilm_hf",
            dict(
                backbone_presets["all_minilm_l6_v2_en"],
                sources=[dict(table_source, urls={name: f"{url}/{name}" for name in files})],
            ),
        )
        resolved = resolve_preset("test_minilm_hf")
        cached = tmp_path / "cache" / "test_minilm_hf"
        assert resolved.location == str(cached) and resolved.format == "huggingface"
        assert sorted(os.listdir(cached)) == sorted(files)
        assert (cached / "model.safetensors").read_bytes() == (minilm_dir / "model.safetensors").read_bytes()
        assert resolve_tokenizer_assets("test_minilm_hf") == {"vocabulary": str(cached / "vocab.txt"), "lowercase": True}
        assert len(requests) == len(files)  # the second lookup used the cache
    assert "Downloading model.safetensors:" in capfd.readouterr().err


def test_failed_file_set_leaves_no_cache_entry(served, tmp_path):
    root, data, digest = served
    cache_dir = tmp_path / "cache" / "some_preset"
    with serve_directory(root) as (url, _):
        with pytest.raises(DownloadError, match="sha256 mismatch"):
            download_files(
                {"dev.tsv": f"{url}/dev.tsv", "vocab.txt": f"{url}/dev_truncated.tsv"},
                cache_dir,
                sha256={"vocab.txt": digest},
                progress_stream=None,
            )
    assert not cache_dir.exists() and os.listdir(tmp_path / "cache") == []


def test_every_source_failing_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with serve_directory(empty) as (url, _):
        monkeypatch.setitem(
            backbone_presets,
            "test_unreachable",
            {
                "metadata": {"description": "", "params": 0, "lowercase": True},
                "config": {},
                "sources": [
                    {"format": "google_zip", "url": f"{url}/uncased_L-2_H-128_A-2.zip", "sha256": {}},
                    {"format": "python_package", "package": "no_such_package_xyz", "sha256": {}},
                ],
            },
        )
        with pytest.raises(ValueError) as info:
            resolve_preset("test_unreachable")
    message = str(info.value)
    assert "Could not obtain preset 'test_unreachable'; every source failed" in message
    assert "google_zip" in message and "404" in message
    assert "Python package 'no_such_package_xyz' is not installed" in message
    assert str(tmp_path / "cache" / "test_unreachable") in message


def test_a_download_that_is_not_a_zip_is_deleted_and_reported(served, tmp_path):
    from keras_bert_impl.checkpoints.download import download_google_zip

    root, data, _ = served
    (root / "release.zip").write_bytes(data)  # a real file, but not a zip archive
    cache_dir = tmp_path / "cache" / "some_preset"
    with serve_directory(root) as (url, _):
        with pytest.raises(DownloadError, match=r"release\.zip did not give a valid zip archive"):
            download_google_zip(f"{url}/release.zip", cache_dir, progress_stream=None)
    assert not cache_dir.exists() and os.listdir(tmp_path / "cache" / ".downloads") == []
