"""`--steps_per_execution auto|N` (training/steps_per_execution.py): what `auto` becomes, its one-line errors, and a
pretraining run that runs several steps a call on request (the CPU's auto stays 1)."""

import pathlib
import subprocess
import sys

import pytest

from keras_bert_impl.training.steps_per_execution import (
    check_steps_per_execution,
    on_accelerator,
    resolve_steps_per_execution,
)

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_auto_is_20_on_an_accelerator_dividing_checkpoints_and_logs():
    assert resolve_steps_per_execution("auto", 500, 20, accelerator=True) == 20
    assert resolve_steps_per_execution("auto", 1000, 50, accelerator=True) == 10
    assert resolve_steps_per_execution("auto", 150, 25, accelerator=True) == 5
    assert resolve_steps_per_execution("auto", 12, 8, accelerator=True) == 4
    assert resolve_steps_per_execution("auto", 7, 20, accelerator=True) == 1  # nothing divides a checkpoint of 7
    assert resolve_steps_per_execution("auto", 500, 20, accelerator=False) == 1
    assert resolve_steps_per_execution(8, 64, 20, accelerator=False) == 8  # a number is kept


@pytest.mark.parametrize("value, message", [
    (0, "--steps_per_execution=0: expected auto or an integer >= 1"),
    ("twenty", "--steps_per_execution='twenty': expected auto or an integer >= 1"),
    (3, "--checkpoint_every=500 must be a multiple of --steps_per_execution=3"),
])
def test_a_bad_value_is_one_line_naming_the_flag(value, message):
    with pytest.raises(ValueError) as caught:
        check_steps_per_execution(value, 500)
    assert str(caught.value) == message


def test_this_machine_has_no_accelerator():
    for backend in ("tensorflow", "torch"):
        assert on_accelerator(backend=backend) is False


def test_auto_on_a_jax_gpu(monkeypatch):
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert on_accelerator(backend="jax") is True
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert on_accelerator(backend="jax") is False


def test_the_recipe_refuses_a_bad_value_in_one_line():
    result = subprocess.run([sys.executable, str(REPO / "recipes" / "pretrain.py"), "--steps_per_execution", "many"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: argument --steps_per_execution: expected auto or an integer >= 1, got 'many' (see --help)")


@pytest.mark.slow
def test_a_pretraining_run_reports_its_steps_per_execution(tmp_path):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    common = dict(num_steps=4, checkpoint_every=4, warmup_steps=1, validation_steps=1, global_batch_size=8,
                  log_every=2, verbose=0)
    result = run_pretraining(PretrainingConfig(model_dir=str(tmp_path / "auto"), **common))
    assert result["steps_per_execution"] == 1 and result["model"].steps_per_execution == 1  # auto on this CPU
    # --profile_steps 2,4 with two steps a call: the calls start at steps 1 and 3, never at 2; the trace still
    # starts (at 3) and stops (at 4).
    result = run_pretraining(PretrainingConfig(model_dir=str(tmp_path / "two"), steps_per_execution=2,
                                               profile_steps="2,4", **common))
    assert result["steps_per_execution"] == 2 and result["model"].steps_per_execution == 2
    assert result["step"] == 4 and len(result["history"]["loss"]) == 1
    traces = list(pathlib.Path(result["logs_dir"], "profile").rglob("*.xplane.pb"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0
