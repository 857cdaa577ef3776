"""get_strategy and check_global_batch_size: one device, TPU fail-fast, bad input."""

import os
import subprocess
import sys
import time

import pytest

from keras_bert_impl.training.strategy import check_global_batch_size, get_strategy


def test_cpu_strategy_has_one_replica_and_a_scope():
    strategy = get_strategy("cpu")
    assert strategy.num_replicas_in_sync == 1
    with strategy.scope():
        pass


def test_unknown_strategy_name_is_rejected():
    with pytest.raises(ValueError, match="Unknown strategy 'tpus'"):
        get_strategy("tpus")


def test_global_batch_must_split_evenly_across_replicas():
    assert check_global_batch_size(32, 8) == 4
    with pytest.raises(ValueError, match=r"--global_batch_size=10 is not divisible by the 4 replicas .*try 8 or 12"):
        check_global_batch_size(10, 4)


def test_multiworker_without_tf_config_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        get_strategy("multiworker")


@pytest.mark.parametrize("tpu", [None, "grpc://127.0.0.1:1"])
def test_tpu_strategy_without_tpu_fails_fast_with_a_hint(tpu):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"No TPU was found at --tpu .*Name one with --tpu"):
        get_strategy("tpu", tpu=tpu)
    # Fast: seconds, not the minutes of a TPU search. (20 s failed once on a loaded 2-core machine: 24.6 s.)
    assert time.monotonic() - start < 90


def test_pretrain_recipe_with_tpu_strategy_exits_fast_with_the_message(tmp_path):
    recipe = os.path.join(os.path.dirname(__file__), "..", "recipes", "pretrain.py")
    if not os.path.exists(recipe):
        pytest.skip("recipes/pretrain.py not written yet")
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, recipe, "--strategy", "tpu", "--model_dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "KERAS_BACKEND": "tensorflow"},
    )
    assert result.returncode != 0
    assert "No TPU was found" in result.stderr and "--tpu" in result.stderr
    assert time.monotonic() - start < 90  # interpreter + TensorFlow start-up included


def test_resolve_jit_compile_turns_xla_on_where_one_program_runs_the_step():
    """Pretraining's `--jit_compile auto`: XLA on one TF replica and on JAX (Keras's own auto is off on CPU-only TF)."""
    from keras_bert_impl.training.strategy import SingleDeviceStrategy, resolve_jit_compile

    class TwoReplicas:
        num_replicas_in_sync = 2

    one = SingleDeviceStrategy("cpu")
    assert resolve_jit_compile("auto", one, backend="tensorflow") is True
    assert resolve_jit_compile("auto", TwoReplicas(), backend="tensorflow") == "auto"  # Keras decides
    assert resolve_jit_compile("auto", TwoReplicas(), backend="jax") is True
    assert resolve_jit_compile("auto", one, backend="torch") is False
    for explicit in (True, False):
        assert resolve_jit_compile(explicit, one, backend="tensorflow") is explicit


def test_tpu_strategy_without_tpu_raises_no_tpu_error_with_a_short_reason():
    from keras_bert_impl.training.strategy import NoTPUError

    with pytest.raises(NoTPUError) as raised:
        get_strategy("tpu", tpu="grpc://127.0.0.1:1")
    assert raised.value.target == "grpc://127.0.0.1:1"
    assert raised.value.reason.startswith("nothing answers on 127.0.0.1:1: ")
    assert "\n" not in str(raised.value)


def _as_backend(monkeypatch, backend):
    import keras

    monkeypatch.setattr(keras.backend, "backend", lambda: backend)


def test_jax_gpu_strategy_without_a_gpu_is_one_line(monkeypatch):
    """JAX's list_devices("gpu") raises `RuntimeError: Unknown backend: 'gpu' requested ...` on a CPU-only machine."""
    import keras

    def list_devices(device_type=None):
        if device_type == "gpu":
            raise RuntimeError("Unknown backend: 'gpu' requested, but no platforms that are instances of gpu are "
                               "present. Platforms present are: cpu")
        return ["cpu:0"]

    _as_backend(monkeypatch, "jax")
    monkeypatch.setattr(keras.distribution, "list_devices", list_devices)
    with pytest.raises(ValueError) as raised:
        get_strategy("gpu")
    assert str(raised.value) == "--strategy gpu: JAX sees no GPU on this machine (use cpu)."


def test_torch_gpu_strategy_without_a_gpu_is_refused(monkeypatch):
    """It used to train on the CPU without a word, where TensorFlow and JAX refuse."""
    torch = pytest.importorskip("torch")
    _as_backend(monkeypatch, "torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError) as raised:
        get_strategy("gpu")
    assert str(raised.value) == "--strategy gpu: PyTorch sees no GPU on this machine (use cpu)."
    assert get_strategy("cpu").num_replicas_in_sync == 1
