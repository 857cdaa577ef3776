"""recipes/pretrain.py end to end in real subprocesses: exact resume after SIGKILL, TensorBoard, bad input."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(REPO, "recipes", "pretrain.py")
CORPUS = os.path.join(REPO, "keras_bert_impl", "assets", "corpus")
NUM_STEPS, CHECKPOINT_EVERY = 8, 2
SCALAR_TAGS = {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "learning_rate",
               "gradient_norm", "sequences_per_second", "tokens_per_second"}


def _command(model_dir, vocab, tmp_path, *extra):
    config = tmp_path / "micro_bert.json"
    if not config.exists():
        config.write_text(json.dumps({"num_layers": 1, "num_heads": 2, "hidden_dim": 16,
                                      "intermediate_dim": 32, "max_sequence_length": 64, "dropout": 0.1}))
    return [sys.executable, RECIPE, "--config", str(config), "--vocab", str(vocab),
            "--train_files", os.path.join(CORPUS, "train.txt"),
            "--validation_files", os.path.join(CORPUS, "valid.txt"),
            "--sequence_length", "32", "--max_predictions_per_seq", "5", "--global_batch_size", "4",
            "--num_steps", str(NUM_STEPS), "--warmup_steps", "2", "--checkpoint_every", str(CHECKPOINT_EVERY),
            "--log_every", "2", "--validation_steps", "1", "--jit_compile", "false", "--deterministic",
            "--verbose", "2", "--model_dir", str(model_dir), *extra]


def _env():
    return dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(command, timeout=400):
    return subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=timeout)


def _model_arrays(checkpoint):
    with np.load(os.path.join(checkpoint, "variables.npz")) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def vocab(minilm_dir):
    return minilm_dir / "vocab.txt"


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, vocab):
    tmp_path = tmp_path_factory.mktemp("reference")
    model_dir = tmp_path / "run"
    result = _run(_command(model_dir, vocab, tmp_path))
    assert result.returncode == 0, result.stderr[-4000:]
    return tmp_path, model_dir, result


def test_uninterrupted_run_reports_and_exports(reference_run):
    _, model_dir, result = reference_run
    assert "Held-out MLM accuracy:" in result.stdout
    assert f"TensorBoard logs: {model_dir}/logs" in result.stdout
    assert f"Exported backbone: {model_dir}/export" in result.stdout
    assert {"config.json", "model.weights.h5", "vocab.txt"} <= set(os.listdir(model_dir / "export"))
    kept = sorted(os.listdir(model_dir / "checkpoints"))
    assert kept == [f"ckpt-{s:09d}" for s in (4, 6, 8)]  # the last 3 of 2, 4, 6, 8


def test_sigkill_then_restart_ends_with_identical_weights(reference_run, vocab):
    tmp_path, reference_dir, _ = reference_run
    model_dir = tmp_path / "killed"
    command = _command(model_dir, vocab, tmp_path)
    proc = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = model_dir / "checkpoints" / "ckpt-000000004" / "state.json"
    deadline = time.time() + 400
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Whatever the kill interrupted, every visible checkpoint is complete.
    for name in os.listdir(model_dir / "checkpoints"):
        if name.startswith("ckpt-"):
            assert (model_dir / "checkpoints" / name / "state.json").exists()
            _model_arrays(model_dir / "checkpoints" / name)  # loads without error
    result = _run(command)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Resumed from" in result.stdout
    resumed = _model_arrays(model_dir / "checkpoints" / "ckpt-000000008")
    reference = _model_arrays(reference_dir / "checkpoints" / "ckpt-000000008")
    assert resumed.keys() == reference.keys()
    worst = max(float(np.max(np.abs(resumed[k].astype("float64") - reference[k]))) for k in reference
                if resumed[k].dtype.kind == "f")
    assert worst <= 1e-6, worst


def test_event_files_hold_scalars_hparams_and_text(reference_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, model_dir, _ = reference_run
    train = EventAccumulator(str(model_dir / "logs" / "train"), size_guidance={"tensors": 0})
    train.Reload()
    tags = set(train.Tags()["tensors"])
    assert SCALAR_TAGS <= tags, SCALAR_TAGS - tags
    for tag in SCALAR_TAGS:
        values = [float(np.asarray(__import__("tensorflow").make_ndarray(e.tensor_proto))) for e in train.Tensors(tag)]
        assert values and all(np.isfinite(values)), tag
    assert "masked_word_guesses" in tags
    text = train.Tensors("masked_word_guesses")[-1].tensor_proto.string_val[0].decode()
    assert "| masked | top-5 guesses |" in text
    assert "hparams" in train.PluginTagToContent("hparams") or train.PluginTagToContent("hparams")
    validation = EventAccumulator(str(model_dir / "logs" / "validation"), size_guidance={"tensors": 0})
    validation.Reload()
    assert {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"} <= set(validation.Tags()["tensors"])


def test_model_dir_of_a_different_config_is_refused(reference_run, vocab):
    tmp_path, model_dir, _ = reference_run
    result = _run(_command(model_dir, vocab, tmp_path, "--sequence_length", "16"))
    assert result.returncode == 1
    assert "holds a run with a different configuration; refusing to resume" in result.stderr
    assert "sequence_length: 32 in" in result.stderr and "vs 16 now" in result.stderr


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path, vocab):
    model_dir = tmp_path / "nan"
    result = _run(_command(model_dir, vocab, tmp_path, "--learning_rate", "1e30"))
    assert result.returncode == 1
    assert "Training loss is nan at step" in result.stderr or "Training loss is inf at step" in result.stderr
    kept = sorted(n for n in os.listdir(model_dir / "checkpoints") if n.startswith("ckpt-"))
    assert kept, result.stderr[-2000:]
    assert f"The last good checkpoint is {model_dir}/checkpoints/{kept[-1]}" in result.stderr
    arrays = _model_arrays(model_dir / "checkpoints" / kept[-1])
    assert all(np.all(np.isfinite(a)) for a in arrays.values() if a.dtype.kind == "f")


def test_global_batch_not_divisible_by_replicas_is_refused():
    from keras_bert_impl.training.strategy import check_global_batch_size

    with pytest.raises(ValueError, match="--global_batch_size=7 is not divisible by the 2 replicas"):
        check_global_batch_size(7, 2)
