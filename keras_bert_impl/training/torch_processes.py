"""Several PyTorch processes as one data-parallel job: GPU nodes, or processes of one host.

PyTorch's own distributed runtime does the work: `torch.distributed.init_process_group`
connects the processes (every process runs the same program; NCCL between GPUs,
gloo between CPUs), each process trains a full copy of the model on its own part
of the global batch, and the optimizer averages the gradients of all processes
with one all-reduce per step before it clips and applies them
(`optimizers/global_clipping.py`), so every process takes the same step. Each process
reads its own disjoint shard of the data (`input_context`, the same
`tf.distribute.InputContext` sharding as TensorFlow's multi-worker pipelines and
the JAX processes'), and `global_batch_size / processes` rows of each batch.

`torchrun` sets the cluster in the environment (`MASTER_ADDR`, `MASTER_PORT`,
`RANK`, `WORLD_SIZE`, `LOCAL_RANK`); without it, pass all three of
`coordinator_address`, `num_processes` and `process_id`, as for JAX:

    initialize_torch_processes("10.0.0.1:1234", num_processes=2, process_id=0)  # or () under torchrun
    strategy = get_strategy("multiworker")  # a TorchProcessesStrategy

This module imports no TensorFlow until `input_context` or `local_rows` is called.
"""

import contextlib
import os

from keras_bert_impl.training.pretraining_errors import LostProcessError
from keras_bert_impl.training.process_cluster import (
    check_cluster_flags,
    lost_peer_report,
    lost_process_message,
    split_global_batch,
)
from keras_bert_impl.training.torch_random_state import draw_own_stream

RUNTIME = "PyTorch"
TORCHRUN_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")


def initialize_torch_processes(coordinator_address=None, num_processes=None, process_id=None,
                               initialization_timeout=300):
    """Joins this process to the others with `torch.distributed.init_process_group`; returns `(index, count)`.

    Pass all three of `coordinator_address` (`host:port` of process 0, which listens
    there), `num_processes` and `process_id`, or none of them: the cluster is then read
    from the environment `torchrun` sets. On a machine with GPUs the processes talk
    over NCCL and process `LOCAL_RANK` (else `process_id` modulo the GPUs) uses GPU
    `LOCAL_RANK`; without GPUs over gloo. Calling it again returns the existing group
    (it must then name the same cluster).

    Raises:
        ValueError: some but not all of the three given, out-of-range values, or no
            cluster in the environment when none is given (one line naming the flags).
        RuntimeError: the other processes did not join within `initialization_timeout` seconds.

    Example:
    >>> initialize_torch_processes(num_processes=2)
    Traceback (most recent call last):
    ...
    ValueError: --strategy multiworker on PyTorch: --num_processes given without --coordinator_address, --process_id; pass all of --coordinator_address host:port, --num_processes and --process_id, or none of them to read the cluster from the environment (torchrun)
    """
    given = check_cluster_flags("PyTorch", "torchrun", coordinator_address, num_processes, process_id)
    import datetime

    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        if given and (dist.get_world_size(), dist.get_rank()) != (num_processes, process_id):
            raise RuntimeError(
                f"PyTorch is already connected as process {dist.get_rank()} of {dist.get_world_size()}, "
                f"not {process_id} of {num_processes}"
            )
        return dist.get_rank(), dist.get_world_size()
    if given:
        init_method, rank, world_size = f"tcp://{coordinator_address}", process_id, num_processes
    else:
        missing = [name for name in TORCHRUN_VARIABLES if not os.environ.get(name)]
        if missing:
            raise ValueError(
                f"--strategy multiworker on PyTorch found no cluster in the environment ({', '.join(missing)} not "
                "set); launch with torchrun, or pass --coordinator_address host:port --num_processes N "
                "--process_id I on every process"
            )
        init_method, rank, world_size = "env://", int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank % gpus)))
    try:
        dist.init_process_group("nccl" if gpus else "gloo", init_method=init_method, rank=rank,
                                world_size=world_size, timeout=datetime.timedelta(seconds=initialization_timeout))
    except (RuntimeError, ValueError) as error:
        text = " ".join(str(error).split())
        raise RuntimeError(
            f"--strategy multiworker on PyTorch: could not join the cluster at "
            f"{coordinator_address or 'the torchrun environment'} as process {rank} of {world_size} ({text[:300]})"
        ) from None
    return dist.get_rank(), dist.get_world_size()


def is_multiprocess():
    """True in a PyTorch job of several processes (`torch.distributed` up with more than one process)."""
    import keras

    if keras.backend.backend() != "torch":
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def process_index():
    """This process's rank (0 without `torch.distributed`)."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def process_count():
    """The number of PyTorch processes (1 without `torch.distributed`)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def per_process_batch_size(global_batch_size, num_processes=None):
    """Examples each process contributes to a global batch: `global_batch_size / processes`.

    Example:
    >>> per_process_batch_size(64, num_processes=4)
    16
    """
    num_processes = process_count() if num_processes is None else num_processes
    return split_global_batch(global_batch_size, num_processes, "PyTorch")


def input_context():
    """The `tf.distribute.InputContext` of this process: pipeline `process_index()` of `process_count()`."""
    import tensorflow as tf

    count = process_count()
    return tf.distribute.InputContext(num_input_pipelines=count, input_pipeline_id=process_index(),
                                      num_replicas_in_sync=count)


def local_rows(dataset, strategy):
    """The held-out feed of one process: the whole global batches (returned as they are).

    Every process holds the same weights, so each evaluating the same global batches
    gives every process the one-process metrics, with no gather of metric states.
    """
    return dataset


def start_from_process_zero(model):
    """Sets `model`'s weights to process 0's in every process and gives each process dropout masks of its own.

    Call after building (or restoring) the model and before training: the processes
    then take identical steps (`broadcast_from_first_process`, `draw_own_dropout`).
    Returns `model`.
    """
    broadcast_from_first_process(model.weights)
    draw_own_dropout(model)
    return model


def predicting_everywhere():
    """Nothing to switch on PyTorch: each process holds the whole model, so its `predict` returns every output.

    (JAX's twin makes its global `DataParallel` read whole batches.) Every process
    scores the whole dev set with the same weights and gets the same metrics.
    """
    return contextlib.nullcontext()


def broadcast_from_first_process(variables):
    """Sets every Keras variable in `variables` to process 0's value (after building or restoring a model)."""
    if not is_multiprocess():
        return
    import torch
    import torch.distributed as dist

    with torch.no_grad():
        for variable in variables:
            value = variable.value
            dist.broadcast(value.data, src=0)


def draw_own_dropout(model, index=None):
    """Gives this process dropout masks of its own; returns the number of seeded dropout states offset.

    Every process seeds alike (`--seed`), so without this, row i of every process
    would get the same dropout mask, where one device on the global batch draws a
    mask per row. Two sources of masks are made this process's own:

    - PyTorch's global generators, which Keras's unseeded dropout (all of BERT's)
      draws from on PyTorch: reseeded on processes > 0 (`torch_random_state.draw_own_stream`);
    - the model's seeded dropout states (`seed_generator_state` variables): offset
      by the process index.

    Process 0 keeps its seeds, so its streams are the one-process run's. A resumed run
    restores each process's generators from the checkpoint after this
    (`torch_random_state.restore_from_checkpoint_entry`), and offsets the restored
    (process 0's) seed states again.

    Example:
    >>> import keras
    >>> layer = keras.layers.Dropout(0.1, seed=7)
    >>> before = keras.ops.convert_to_numpy(layer.seed_generator.state.value)
    >>> draw_own_dropout(layer, index=2)
    1
    >>> (keras.ops.convert_to_numpy(layer.seed_generator.state.value) - before).tolist()
    [2, 0]
    """
    import keras
    import numpy as np

    index = process_index() if index is None else index
    draw_own_stream(index)
    states = [v for v in model.non_trainable_variables if v.path.endswith("seed_generator_state")]
    for state in states:
        value = keras.ops.convert_to_numpy(state.value).astype(np.int64)
        value[0] = (value[0] + index + 2 ** 31) % 2 ** 32 - 2 ** 31  # the seed word; int32 wraps around
        state.assign(value.astype(state.dtype))
    return len(states)


def check_same_on_every_process(what, value, hint):
    """Raises `RuntimeError` on every process unless all PyTorch processes hold the same int `value`."""
    import torch
    import torch.distributed as dist

    device = _collective_device()
    values = [torch.zeros((), dtype=torch.int64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(values, torch.tensor(int(value), dtype=torch.int64, device=device))
    values = [int(v) for v in values]
    if len(set(values)) > 1:
        raise RuntimeError(
            f"The {len(values)} PyTorch processes disagree on {what}: {values} (process 0, 1, ...); check {hint}"
        )


def barrier(name):
    """Waits until every PyTorch process reaches this point (`name` says which, for the reader)."""
    import torch.distributed as dist

    dist.barrier()


def _collective_device():
    import torch
    import torch.distributed as dist

    return torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")


def lost_process_error(error, latest_checkpoint):
    """A one-line `LostProcessError` for a collective that failed because another process stopped, else None.

    gloo and NCCL raise a `RuntimeError` ("Connection reset by peer", "Connection closed
    by peer"; a `torch.distributed.DistError` in some versions) in the processes left
    behind when one crashes or is killed; the run can only go on by restarting every
    process, which resumes from `latest_checkpoint`.

    Example:
    >>> import torch.distributed as dist
    >>> print(lost_process_error(dist.DistBackendError("[pair.cc:553] Connection closed by peer [10.0.0.2]:52142. "
    ...                                                "This is typically caused by a remote worker crashing."),
    ...                          "/runs/a/checkpoints/ckpt-000000020"))
    --strategy multiworker on PyTorch: process 0 of 1 lost the others during training ([pair.cc:553] Connection closed by peer [10.0.0.2]:52142); restart the same command on every process: the run resumes from /runs/a/checkpoints/ckpt-000000020
    >>> lost_process_error(ValueError("a bad value"), None) is None
    True
    """
    import torch.distributed as dist

    report = error if isinstance(error, dist.DistError) else lost_peer_report(error)
    if report is None:
        return None
    return LostProcessError(lost_process_message("PyTorch", process_index(), process_count(), report,
                                                 latest_checkpoint))
