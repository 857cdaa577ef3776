"""Under the JAX and PyTorch backends, TensorFlow (which only tokenizes and batches text there) sees no GPU: it takes
no CUDA context and no GPU memory from the model's backend. Before, nothing hid them, and on a GPU machine where
TensorFlow finds CUDA its first op reserved most of the memory JAX had left.

This machine has no GPU, so the tests record the call that hides them (TensorFlow's `set_visible_devices`), made as
the package's text modules are imported, before TensorFlow runs an op.
"""

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
import tensorflow as tf
calls = []
tf.config.set_visible_devices = lambda devices, device_type=None: calls.append([list(devices), device_type])
import {module}
print(json.dumps(calls))
"""


def _calls(backend, module):
    env = dict(os.environ, KERAS_BACKEND=backend)
    done = subprocess.run([sys.executable, "-c", _PROBE.format(module=module)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend, module", [
    ("jax", "keras_bert_impl.text.classifier_preprocessor"),  # what fit/predict on raw text import
    pytest.param("jax", "keras_bert_impl.data.pretraining", marks=pytest.mark.slow),  # pretrain.py's pipeline
    pytest.param("torch", "keras_bert_impl.text.classifier_preprocessor", marks=pytest.mark.slow),
])
def test_the_text_modules_hide_the_gpus_from_tensorflow_under_jax_and_pytorch(backend, module):
    pytest.importorskip(backend)
    assert _calls(backend, module) == [[[], "GPU"]]  # once per process, before any TensorFlow op


def test_under_tensorflow_the_gpus_stay_the_models():
    assert _calls("tensorflow", "keras_bert_impl.text.classifier_preprocessor") == []
