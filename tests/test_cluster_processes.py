"""The JAX and PyTorch multi-process plumbing without a cluster: flags, batch split, fine-tuning --strategy.

The real two-process runs are in tests/test_distributed_training.py.
"""

import os
import subprocess
import sys

import pytest

from test_distributed_training import _free_ports

from keras_bert_impl.training import torch_processes
from keras_bert_impl.training.jax_processes import initialize_jax_processes, per_process_batch_size
from keras_bert_impl.training.strategy import STRATEGY_NAMES, check_finetuning_strategy, get_strategy

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
    ("jax", ("auto", "cpu", "gpu", "mirrored")),
    ("torch", ("auto", "cpu", "gpu")),
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


def test_finetune_recipe_refuses_multiworker_on_jax_in_one_line(tmp_path):
    proc = _recipe(["recipes/finetune_glue.py", "--task", "sst2", "--data_dir", str(tmp_path),
                    "--model_dir", str(tmp_path / "out"), "--strategy", "multiworker"], KERAS_BACKEND="jax")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --strategy multiworker is not available for fine-tuning on KERAS_BACKEND=jax (several JAX "
        "processes are for recipes/pretrain.py only); use auto, cpu, gpu, mirrored (every device of this machine, "
        "keras DataParallel), or KERAS_BACKEND=tensorflow for --strategy multiworker")
    assert not os.path.exists(tmp_path / "out")


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
    assert torch_processes.all_reduce_mean(grads)[0] is grads[0]  # one process: the gradients as they are


def test_pretrain_recipe_refuses_fp16_across_torch_processes_before_any_work(tmp_path):
    proc = _recipe(["recipes/pretrain.py", "--strategy", "multiworker", "--mixed_precision", "fp16",
                    "--model_dir", str(tmp_path / "run")], KERAS_BACKEND="torch")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: --mixed_precision fp16 with --strategy multiworker on PyTorch: loss scaling decides each process's "
        "step before the gradients are averaged; use --mixed_precision bf16 or none")
    assert not os.path.exists(tmp_path / "run")


def test_finetune_recipe_refuses_multiworker_on_torch_in_one_line():
    with pytest.raises(ValueError) as info:
        check_finetuning_strategy("multiworker", backend="torch")
    assert str(info.value) == (
        "--strategy multiworker is not available for fine-tuning on KERAS_BACKEND=torch (several PyTorch processes "
        "are for recipes/pretrain.py only); use auto, cpu, gpu (one device), or KERAS_BACKEND=tensorflow for "
        "--strategy multiworker")


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
