"""A checkpoint directory on a remote file system (`gs://bucket/run/export`, any scheme `tf.io.gfile` reads),
copied into the cache before it loads: what lets `BertBackbone.from_preset("gs://...")`, the fine-tuning recipes'
`--init_checkpoint gs://...` and pretraining's phase 2 (`--init_checkpoint gs://b/phase1/export`) read the export of
a run whose `--model_dir` is a bucket.

Each file of the directory (its subfolders aside: a checkpoint's files are at its top) is copied to
`<cache>/remote/<scheme>/<path>` through a temporary name (`atomic_files.atomic_save`), and copied again only when
the remote file's size or modification time changed since (an export written again by a run that went on has the
same sizes). TensorFlow reads the remote file system: without it, one line says so.

Example:
>>> is_remote_directory("gs://bucket/run/export"), is_remote_directory("hf://google-bert/bert-base-uncased")
(True, False)
>>> is_remote_directory("runs/export")
False
"""

import json
import os

from keras_bert_impl.checkpoints.atomic_files import atomic_save, atomic_write_json

_RECORD = ".remote_files.json"  # {name: [size, mtime_nsec]} of the remote files the cache entry holds


def is_remote_directory(preset):
    """Whether `preset` is a remote path (`scheme://...`) other than a Hugging Face Hub id (`hf://`)."""
    preset = os.fspath(preset)
    return "://" in preset and not preset.startswith("hf://")


def fetch_remote_directory(url, cache_root):
    """Copies the files of the remote directory `url` into the cache (those that changed); returns the local
    directory.

    Raises:
        FileNotFoundError: `url` is no directory.
        OSError: the remote file system failed (one line naming `url` and the reason).
        ImportError: TensorFlow, which reads remote file systems, is not installed.
    """
    try:
        import tensorflow as tf
    except ImportError:
        raise ImportError(f"Preset directory {url}: reading a remote directory needs TensorFlow (tf.io.gfile); "
                          "pip install tensorflow, or copy the directory to a local disk and pass that") from None

    url = url.rstrip("/")
    scheme, rest = url.split("://", 1)
    local = os.path.join(cache_root, "remote", scheme, *[p for p in rest.split("/") if p not in ("", ".", "..")])
    try:
        if not tf.io.gfile.isdir(url):
            raise FileNotFoundError(f"Preset directory {url} does not exist.")
        os.makedirs(local, exist_ok=True)
        record_path = os.path.join(local, _RECORD)
        record = _read_record(record_path)
        for name in sorted(tf.io.gfile.listdir(url)):
            name = name.rstrip("/")
            source = f"{url}/{name}"
            if tf.io.gfile.isdir(source):
                continue
            stat = tf.io.gfile.stat(source)
            signature = [stat.length, stat.mtime_nsec]
            target = os.path.join(local, name)
            if record.get(name) == signature and os.path.isfile(target) and os.path.getsize(target) == stat.length:
                continue
            atomic_save(target, lambda temporary: tf.io.gfile.copy(source, temporary, overwrite=True))
            record[name] = signature
            atomic_write_json(record_path, record)
    except tf.errors.OpError as error:
        raise OSError(f"Preset directory {url}: {' '.join(error.message.split())[:300]}") from None
    return local


def _read_record(path):
    try:
        with open(path) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        return {}
