"""`--compilation_cache auto|none|DIR` (training/compilation_cache.py): JAX's persistent XLA cache, on where it pays
(a GPU or TPU), written by one process and read by the next, and one line where it cannot be used."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from keras_bert_impl.training.compilation_cache import default_directory, resolve_compilation_cache

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_auto_is_the_default_folder_on_a_jax_accelerator_only(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_directory() == str(tmp_path / "keras_bert_impl" / "jax_compilation_cache")
    assert resolve_compilation_cache("auto", backend="jax", accelerator=True) == default_directory()
    assert resolve_compilation_cache("auto", backend="jax", accelerator=False) is None
    for backend in ("tensorflow", "torch"):
        assert resolve_compilation_cache("auto", backend=backend, accelerator=True) is None
        assert resolve_compilation_cache("none", backend=backend) is None


def test_a_folder_off_jax_is_one_line():
    with pytest.raises(ValueError) as caught:
        resolve_compilation_cache("/tmp/xla", backend="tensorflow")
    assert str(caught.value) == ("--compilation_cache='/tmp/xla': the persistent compilation cache is JAX's "
                                 "(KERAS_BACKEND=tensorflow); use auto or none")


_PREDICT = """
import json, sys
from keras_bert_impl.training.compilation_cache import enable_compilation_cache
print(json.dumps({"directory": enable_compilation_cache(sys.argv[1])}))
import numpy as np
from keras_bert_impl import BertBackbone, BertClassifier
backbone = BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                        max_sequence_length=16)
model = BertClassifier(backbone, num_classes=2)
model.predict_on_batch({"token_ids": np.ones((2, 16), "int32"), "segment_ids": np.zeros((2, 16), "int32"),
                        "padding_mask": np.ones((2, 16), "int32")})
"""


def test_one_process_writes_the_compiled_predict_step_and_the_next_reuses_it(tmp_path):
    cache = tmp_path / "cache"
    # JAX caches programs that took >= 1 s to compile; this tiny one takes less, so the threshold goes to 0.
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")

    def run():
        result = subprocess.run([sys.executable, "-c", _PREDICT, str(cache)], env=env, capture_output=True,
                                text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[0])

    assert run() == {"directory": str(cache)}
    entries = sorted(cache.glob("jit_predict_step-*"))
    assert len(entries) == 1
    written = entries[0].stat().st_mtime_ns
    run()
    assert sorted(cache.glob("jit_predict_step-*")) == entries  # the same key: the same shapes and program
    assert entries[0].stat().st_mtime_ns == written  # read, not compiled and written again


def test_the_recipe_refuses_a_cache_folder_off_jax_in_one_line(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, str(REPO / "recipes" / "finetune_glue.py"), "--task", "rte", "--data_dir", str(tmp_path),
         "--model_dir", str(tmp_path / "out"), "--compilation_cache", str(tmp_path / "xla")],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --compilation_cache={str(tmp_path / 'xla')!r}: the persistent compilation cache is JAX's "
        "(KERAS_BACKEND=tensorflow); use auto or none")
