"""The JAX and PyTorch multi-process plumbing without a cluster: flags, batch split, fine-tuning's checks.

The real two-process runs are in tests/test_distributed_training.py.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from test_distributed_training import _free_ports

from keras_bert_impl.tasks.classification.run import ClassificationConfig
from keras_bert_impl.training import torch_processes
from keras_bert_impl.training.finetuning import finetune
from keras_bert_impl.training.finetuning_processes import config_of_this_process
from keras_bert_impl.training.jax_processes import initialize_jax_processes, per_process_batch_size
from keras_bert_impl.training.pretraining_errors import LostProcessError
from keras_bert_impl.training.strategy import (
    STRATEGY_NAMES,
    TorchProcessesStrategy,
    check_finetuning_strategy,
    get_strategy,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_processes=2), r"--num_processes given without --coordinator_address, --process_id"),
    (dict(coordinator_address="127.0.0.1:1", process_id=0), r"without --num_processes"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=2), r"--process_id must be in \[0, "),
    (dict(coordinator_address="127.0.0.1:1", num_processes=0, process_id=0), r"--num_processes must be a positive"),
    (dict(coordinator_address="node0", num_processes=2, process_id=0), r"--coordinator_address must be host:port"),
])
def test_cluster_flags_are_checked_before_jax_is_touched(kwargs, message):
    pytest.importorskip("jax")
    with pytest.raises(ValueError, match=message):
        initialize_jax_processes(**kwargs)


def test_each_process_feeds_an_equal_part_of_the_global_batch():
    assert per_process_batch_size(256, num_processes=8) == 32
    with pytest.raises(ValueError, match=r"--global_batch_size=10 is not divisible by the 4 JAX processes"):
        per_process_batch_size(10, num_processes=4)


@pytest.mark.parametrize("backend, runs", [
    ("tensorflow", STRATEGY_NAMES),
    ("jax", ("auto", "cpu", "gpu", "mirrored", "multiworker")),
    ("torch", ("auto", "cpu", "gpu", "multiworker")),
])
def test_fine_tuning_strategies_per_backend(backend, runs):
    for name in STRATEGY_NAMES:
        if name in runs:
            assert check_finetuning_strategy(name, backend=backend) == name
        else:
            with pytest.raises(ValueError, match=rf"--strategy {name} is not available for fine-tuning on "
                                                 rf"KERAS_BACKEND={backend} .*use auto, cpu, gpu"):
                check_finetuning_strategy(name, backend=backend)


def _recipe(args, **env):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu", **env))


def test_finetune_recipe_names_the_missing_cluster_flags_before_any_work(tmp_path):
    proc = _recipe(["recipes/finetune_glue.py", "--task", "sst2", "--data_dir", str(tmp_path),
                    "--model_dir", str(tmp_path / "out"), "--strategy", "multiworker", "--num_processes", "2"],
                   KERAS_BACKEND="jax")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --strategy multiworker on JAX: --num_processes given without --coordinator_address, --process_id; "
        "pass all of --coordinator_address host:port, --num_processes and --process_id, or none of them to read the "
        "cluster from the environment (Cloud TPU, SLURM)")
    assert not os.path.exists(tmp_path / "out")


def test_finetune_recipe_refuses_cluster_flags_without_multiworker(tmp_path):
    proc = _recipe(["recipes/finetune_conll.py", "--data_dir", str(tmp_path), "--model_dir", str(tmp_path / "out"),
                    "--preset", "bert_tiny_en_uncased",
                    "--coordinator_address", "127.0.0.1:1234", "--num_processes", "2", "--process_id", "0"],
                   KERAS_BACKEND="torch")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --coordinator_address, --num_processes, --process_id: the cluster flags go with --strategy "
        "multiworker under KERAS_BACKEND=jax or torch (here --strategy auto, backend 'torch'; TensorFlow's workers "
        "come from TF_CONFIG).")
    assert not os.path.exists(tmp_path / "out")


def test_fine_tuning_refuses_a_batch_that_does_not_split_over_the_processes():
    config = ClassificationConfig(task="rte", data_dir="glue", model_dir="runs/rte", batch_size=8)
    with pytest.raises(ValueError) as info:
        config_of_this_process(config, TorchProcessesStrategy(3))
    assert str(info.value) == ("--batch_size=8 is not divisible by the 3 PyTorch processes: each process feeds an "
                               "equal part of every batch (try 6)")


def test_finetune_with_several_processes_takes_global_tf_data_batches():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError) as info:
        finetune(model, [np.zeros((8, 4))], epochs=1, learning_rate=1e-3, strategy=TorchProcessesStrategy(2),
                 loss="mse")
    assert str(info.value) == ("finetune with 2 PyTorch processes takes a tf.data.Dataset of global batches (each "
                               "process feeds its rows of each), got list")


def test_fine_tuning_turns_a_lost_process_into_one_line():
    """A collective that fails because another process is gone becomes a `LostProcessError` naming the restart."""
    pytest.importorskip("torch")
    import tensorflow as tf

    class PeerGone(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            raise RuntimeError("[pair.cc:538] Read error [127.0.0.1]:4010: Connection reset by peer. More text")

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    data = tf.data.Dataset.from_tensor_slices((np.zeros((8, 4)), np.zeros((8, 2)))).batch(4)
    with pytest.raises(LostProcessError) as info:
        finetune(model, data, epochs=1, learning_rate=1e-3, strategy=TorchProcessesStrategy(2), loss="mse",
                 callbacks=[PeerGone()], verbose=0)
    assert str(info.value) == (
        "--strategy multiworker on PyTorch: process 0 of 1 lost the others during training ([pair.cc:538] Read "
        "error [127.0.0.1]:4010: Connection reset by peer); restart the same command on every process: the run "
        "starts again from step 0 (no checkpoint yet)")


def test_a_lost_peer_reported_through_another_error_is_still_one_line():
    """Keras or TensorFlow may wrap the collective's failure (seen: "Gloo AllGather failed" reaching the recipe as
    a bare `error: UNKNOWN: ...` line, and a normal exit into JAX's shutdown barrier): the cause still counts."""
    pytest.importorskip("jax")
    from keras_bert_impl.training import jax_processes
    from keras_bert_impl.training.process_cluster import lost_peers_as_one_line

    with pytest.raises(LostProcessError) as info:
        with lost_peers_as_one_line(jax_processes, lambda: "/runs/a/checkpoints/ckpt-000000010"):
            try:
                raise RuntimeError("UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error [127.0.0.1]:5043: "
                                   "Connection reset by peer")
            except RuntimeError as cause:
                raise ValueError("could not read the logs") from cause
    assert str(info.value) == (
        "--strategy multiworker on JAX: process 0 of 1 lost the others during training (UNKNOWN: Gloo AllGather "
        "failed: [pair.cc:538] Read error [127.0.0.1]:5043: Connection reset by peer); restart the same command on "
        "every process: the run resumes from /runs/a/checkpoints/ckpt-000000010")
    with pytest.raises(ValueError, match="a bad value"):  # anything else passes unchanged
        with lost_peers_as_one_line(jax_processes, lambda: None):
            raise ValueError("a bad value")


def test_pretrain_recipe_names_the_missing_cluster_flags_on_jax(tmp_path):
    proc = _recipe(["recipes/pretrain.py", "--strategy", "multiworker", "--num_processes", "2",
                    "--model_dir", str(tmp_path / "run")], KERAS_BACKEND="jax")
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --strategy multiworker on JAX: --num_processes given without "
                           "--coordinator_address, --process_id"), last
    assert not os.path.exists(tmp_path / "run" / "checkpoints")


def test_cluster_flags_without_jax_or_torch_multiworker_are_refused():
    with pytest.raises(ValueError) as info:
        get_strategy("cpu", num_processes=2, process_id=0)
    assert str(info.value) == (
        "--num_processes, --process_id: the cluster flags go with --strategy multiworker under KERAS_BACKEND=jax "
        "or torch (here --strategy cpu, backend 'tensorflow'; TensorFlow's workers come from TF_CONFIG).")


def test_torch_cluster_flags_are_checked_before_torch_is_touched():
    with pytest.raises(ValueError) as info:
        torch_processes.initialize_torch_processes(coordinator_address="127.0.0.1:1", process_id=0)
    assert str(info.value) == (
        "--strategy multiworker on PyTorch: --coordinator_address, --process_id given without --num_processes; "
        "pass all of --coordinator_address host:port, --num_processes and --process_id, or none of them to read "
        "the cluster from the environment (torchrun)")
    with pytest.raises(ValueError, match=r"^--process_id must be in \[0, --num_processes=2\), got 5$"):
        torch_processes.initialize_torch_processes("127.0.0.1:1", num_processes=2, process_id=5)


def test_torch_without_flags_or_torchrun_names_what_is_missing(monkeypatch):
    pytest.importorskip("torch")
    for name in torch_processes.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError) as info:
        torch_processes.initialize_torch_processes()
    assert str(info.value) == (
        "--strategy multiworker on PyTorch found no cluster in the environment (MASTER_ADDR, MASTER_PORT, RANK, "
        "WORLD_SIZE not set); launch with torchrun, or pass --coordinator_address host:port --num_processes N "
        "--process_id I on every process")


def test_torch_processes_split_the_global_batch_and_average_nothing_alone():
    torch = pytest.importorskip("torch")
    assert torch_processes.per_process_batch_size(256, num_processes=8) == 32
    with pytest.raises(ValueError, match=r"^--global_batch_size=10 is not divisible by the 4 PyTorch processes: "):
        torch_processes.per_process_batch_size(10, num_processes=4)
    grads = [torch.ones(3), None]
    from keras_bert_impl.optimizers.global_clipping import mean_over_torch_processes

    assert mean_over_torch_processes(grads)[0] is grads[0]  # one process: the gradients as they are


def test_pretrain_recipe_refuses_fp16_across_torch_processes_before_any_work(tmp_path):
    proc = _recipe(["recipes/pretrain.py", "--strategy", "multiworker", "--mixed_precision", "fp16",
                    "--model_dir", str(tmp_path / "run")], KERAS_BACKEND="torch")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --mixed_precision fp16 with --strategy multiworker on PyTorch: loss scaling decides each process's "
        "step before the gradients are averaged; use --mixed_precision bf16 or none")
    assert not os.path.exists(tmp_path / "run")


def test_fine_tuning_refuses_mirrored_on_torch_and_points_to_torchrun():
    with pytest.raises(ValueError) as info:
        check_finetuning_strategy("mirrored", backend="torch")
    assert str(info.value) == (
        "--strategy mirrored is not available for fine-tuning on KERAS_BACKEND=torch (one PyTorch process drives one "
        "device); use auto, cpu, gpu (one device), multiworker (one process per device: torchrun --nproc_per_node N), "
        "or KERAS_BACKEND=tensorflow for --strategy mirrored")
    assert check_finetuning_strategy("multiworker", backend="torch") == "multiworker"
    assert check_finetuning_strategy("multiworker", backend="jax") == "multiworker"


def test_mirrored_on_torch_points_to_one_process_per_gpu(monkeypatch):
    monkeypatch.setattr("keras.backend.backend", lambda: "torch")
    with pytest.raises(ValueError) as info:
        get_strategy("mirrored")
    assert str(info.value) == (
        "--strategy mirrored is not supported on the torch backend (one process drives one device); for several "
        "GPUs start one process per GPU: torchrun --nproc_per_node N recipes/pretrain.py --strategy multiworker, "
        "or use KERAS_BACKEND=tensorflow (MirroredStrategy) or jax (DataParallel).")


def test_jax_recipe_checks_its_flags_before_waiting_for_the_other_processes(tmp_path):
    """The recipe joins the JAX cluster before anything touches JAX; a bad flag still fails at once, alone."""
    pytest.importorskip("jax")
    proc = _recipe(["recipes/pretrain.py", "--strategy", "multiworker", "--coordinator_address", "127.0.0.1:1",
                    "--num_processes", "2", "--process_id", "0", "--num_steps", "0",
                    "--model_dir", str(tmp_path / "run")], KERAS_BACKEND="jax")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "error: --num_steps=0: must be an integer >= 1"
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.slow
def test_a_torch_process_that_finds_no_coordinator_says_where_it_looked():
    pytest.importorskip("torch")
    script = (
        "from keras_bert_impl.training.torch_processes import initialize_torch_processes\n"
        "try:\n"
        "    initialize_torch_processes('127.0.0.1:PORT', num_processes=2, process_id=1, initialization_timeout=3)\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
    )
    port = _free_ports(1)[0]
    proc = subprocess.run([sys.executable, "-c", script.replace("PORT", str(port))], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=dict(os.environ, KERAS_BACKEND="torch"))
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"--strategy multiworker on PyTorch: could not join the cluster at 127.0.0.1:{port} as "
                           "process 1 of 2 ("), line
    assert "timed out" in line


def test_a_recipe_leaves_with_one_line_when_it_loses_the_other_processes():
    code = ("import sys; sys.path.insert(0, 'recipes')\n"
            "from command_line import exit_on_user_error\n"
            "from keras_bert_impl.training.pretraining_errors import LostProcessError\n"
            "def job():\n"
            "    raise LostProcessError('--strategy multiworker on PyTorch: process 0 of 2 lost the others during "
            "training (Connection reset by peer); restart the same command on every process: the run starts again "
            "from step 0 (no checkpoint yet)')\n"
            "exit_on_user_error(job)\n"
            "print('not reached')\n")
    proc = _recipe(["-c", code], KERAS_BACKEND="torch")
    assert proc.returncode == 2 and "not reached" not in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --strategy multiworker on PyTorch: process 0 of 2 lost the others during training (Connection reset "
        "by peer); restart the same command on every process: the run starts again from step 0 (no checkpoint yet)")


@pytest.mark.parametrize("raised, status, last_line", [
    ("ValueError('--vocab x.txt: no such file')", 2, "error: --vocab x.txt: no such file"),
    ("KeyError('a bug')", 1, "error: the traceback above ended this process of the multiworker job"),
])
def test_a_process_of_a_multiworker_job_leaves_at_once_skipping_the_shutdown_barrier(raised, status, last_line):
    """In a job of several processes every error ends the process with `os._exit`: the exit handlers, where JAX's
    `jax.distributed.shutdown` waits at its barrier for processes that may be gone, do not run."""
    code = ("import atexit, sys; sys.path.insert(0, 'recipes')\n"
            "import command_line, interruption\n"
            "interruption.several_processes_joined = lambda: True  # as after joining a JAX or PyTorch job\n"
            "atexit.register(lambda: print('the shutdown barrier ran'))\n"
            "def job():\n"
            f"    raise {raised}\n"
            "command_line.exit_on_user_error(job)\n")
    proc = _recipe(["-c", code], KERAS_BACKEND="torch")
    assert proc.returncode == status, proc.stderr[-2000:]
    assert "the shutdown barrier ran" not in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == last_line
    assert ("Traceback (most recent call last)" in proc.stderr) == (status == 1)
