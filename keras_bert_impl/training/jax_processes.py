"""Several JAX processes as one data-parallel job: GPU nodes, TPU VM pod slices, or processes of one host.

JAX's own distributed runtime does the work: `jax.distributed.initialize`
connects the processes (every process runs the same program), after which
`jax.devices()` lists the devices of *all* processes and a
`keras.distribution.DataParallel` over them trains with one all-reduce of the
gradients per step, inside the compiled train step. Each process feeds only its
local part of the global batch (`per_process_batch_size`), read from its own
disjoint shard of the data (`input_context`, the same `tf.distribute.InputContext`
sharding as TensorFlow's multi-worker pipelines); Keras assembles the global
batch with `jax.make_array_from_process_local_data`.

CPU processes exchange gradients over gloo (`jax_cpu_collectives_implementation`,
the default of JAX 0.10; set here explicitly for older JAX). Steps must be compiled: eager
steps over several devices can deadlock XLA's CPU collectives.

    initialize_jax_processes("10.0.0.1:1234", num_processes=2, process_id=0)  # or () on Cloud TPU / SLURM
    strategy = get_strategy("multiworker")  # DataParallel over every process's devices
"""

import contextlib

from keras_bert_impl.training.pretraining_errors import LostProcessError
from keras_bert_impl.training.process_cluster import (
    check_cluster_flags,
    lost_peer_report,
    lost_process_message,
    split_global_batch,
    take_rows_of_each_batch,
)

RUNTIME = "JAX"


def initialize_jax_processes(coordinator_address=None, num_processes=None, process_id=None,
                             initialization_timeout=300):
    """Connects this process to the others with `jax.distributed.initialize`; returns `(index, count)`.

    Pass all three of `coordinator_address` (`host:port` of process 0), `num_processes`
    and `process_id`, or none of them: JAX then reads the cluster from the environment
    (a Cloud TPU VM pod slice, SLURM, Open MPI, Kubernetes...). Calling it again in the
    same process returns the existing connection (it must then name the same cluster).
    It must run before the first JAX computation of the process.

    Raises:
        ValueError: some but not all of the three given, out-of-range values, or no
            cluster in the environment when none is given (one line naming the flags).
        RuntimeError: JAX already ran a computation in this process, or the
            coordinator did not answer within `initialization_timeout` seconds.
    """
    import jax

    given = check_cluster_flags("JAX", "Cloud TPU, SLURM", coordinator_address, num_processes, process_id)

    if jax.distributed.is_initialized():
        if given and (jax.process_count(), jax.process_index()) != (num_processes, process_id):
            raise RuntimeError(
                f"JAX is already connected as process {jax.process_index()} of {jax.process_count()}, "
                f"not {process_id} of {num_processes}"
            )
        return jax.process_index(), jax.process_count()

    if jax.config.jax_cpu_collectives_implementation in (None, "none"):
        # CPU processes need a collectives library for their all-reduce (gloo is JAX 0.10's default).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                                   process_id=process_id, initialization_timeout=initialization_timeout)
    except ValueError as error:
        if given:
            raise
        raise ValueError(
            "--strategy multiworker on JAX found no cluster in the environment "
            f"({' '.join(str(error).split())}); pass --coordinator_address host:port --num_processes N "
            "--process_id I on every process (or run on a Cloud TPU VM pod slice or under SLURM)"
        ) from None
    except RuntimeError as error:
        text = " ".join(str(error).split())
        if "before any JAX" in text:
            raise RuntimeError(
                "--strategy multiworker on JAX: jax.distributed.initialize must run before the process's "
                f"first JAX computation ({text})"
            ) from None
        raise RuntimeError(
            f"--strategy multiworker on JAX: could not join the cluster at {coordinator_address or 'the environment'} "
            f"as process {process_id} of {num_processes} ({text[:300]})"
        ) from None
    seed_every_process_alike()
    return jax.process_index(), jax.process_count()


def seed_every_process_alike():
    """Seeds Keras (Python, NumPy, the backend) with one seed drawn by process 0, on every process; returns it.

    Every variable of a multi-process distribution, the state of each dropout
    layer's seed generator included, must start equal on all processes (JAX
    checks it: "passed to device_put is not the same on each process"), and an
    unseeded generator draws its own seed in each process. Process 0 draws from
    Python's `random`, so a seed set before joining still makes the run
    repeatable, and `keras.utils.set_random_seed` afterwards still rules.
    """
    import random

    import keras
    import numpy as np
    from jax.experimental import multihost_utils

    seed = int(multihost_utils.broadcast_one_to_all(np.int32(random.randrange(2**31 - 1))))
    keras.utils.set_random_seed(seed)
    return seed


def process_index():
    """This process's index among the JAX processes (0 without `jax.distributed`)."""
    import jax

    return jax.process_index()


def process_count():
    """The number of JAX processes (1 without `jax.distributed`)."""
    import jax

    return jax.process_count()


def is_multiprocess():
    """True in a JAX job of several processes (`keras.backend.backend() == "jax"` and `jax.distributed` up)."""
    import keras

    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.distributed.is_initialized() and jax.process_count() > 1


def per_process_batch_size(global_batch_size, num_processes=None):
    """Examples each process contributes to a global batch: `global_batch_size / processes`.

    Example:
    >>> per_process_batch_size(64, num_processes=4)
    16
    """
    num_processes = process_count() if num_processes is None else num_processes
    return split_global_batch(global_batch_size, num_processes, "JAX")


def input_context(num_replicas=None):
    """The `tf.distribute.InputContext` of this process: pipeline `process_index()` of `process_count()`.

    `pretraining_dataset(..., input_context=input_context())` then reads only this
    process's disjoint shard (by file when there are at least as many files as
    processes, else by document), as a TensorFlow multi-worker pipeline does.
    """
    import jax
    import tensorflow as tf

    return tf.distribute.InputContext(
        num_input_pipelines=jax.process_count(),
        input_pipeline_id=jax.process_index(),
        num_replicas_in_sync=num_replicas or jax.device_count(),
    )



def local_rows(dataset, strategy):
    """`dataset` of global `(x, y, sample_weight)` batches -> this process's rows of each (or `dataset` itself).

    For held-out data: every process builds the same global batches and feeds
    rows `[index * n, (index + 1) * n)` of each, so the global batch Keras
    assembles is exactly the one-process batch (same metrics as one process).
    """
    count = getattr(strategy, "num_processes", 1)
    if dataset is None or count == 1:
        return dataset
    return take_rows_of_each_batch(dataset, process_index(), count)


def start_from_process_zero(model):
    """Nothing to do on JAX: the weights are global arrays, one value on every device of every process.

    (PyTorch's twin broadcasts process 0's weights.) Dropout draws its masks for the
    global batch inside the compiled step, so every row gets its own mask.
    """
    return model


def _replicated_batches(devices):
    """A `keras.distribution.DataParallel` that treats each process's batch as the whole batch, on every device."""
    import keras
    from keras.distribution import TensorLayout

    class ReplicatedBatches(keras.distribution.DataParallel):
        def get_data_layout(self, data_shape):
            return TensorLayout([None] * len(data_shape), self.device_mesh)

    return ReplicatedBatches(devices=devices, auto_shard_dataset=False)


@contextlib.contextmanager
def predicting_everywhere():
    """Within it, `model.predict` (and `evaluate`) in every process reads whole batches and returns every output.

    Training feeds each process's rows of a global batch (`DataParallel`), and so
    would prediction: each process would hold a part of the outputs, and Keras's
    `predict` cannot turn a global array into NumPy. Here each process feeds the
    whole batch, replicated on every device, so its outputs are whole: every
    process scores the whole dev set with the same weights and gets the same
    metrics, as one process would (the compute is repeated, not split).
    """
    import keras

    with _replicated_batches(keras.distribution.list_devices()).scope():
        yield


def check_same_on_every_process(what, value, hint):
    """Raises `RuntimeError` on every process unless all JAX processes hold the same int `value`."""
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    values = np.asarray(multihost_utils.process_allgather(np.asarray(value, np.int64))).reshape(-1)
    if len(set(values.tolist())) > 1:
        raise RuntimeError(
            f"The {jax.process_count()} JAX processes disagree on {what}: {values.tolist()} (process 0, 1, ...); "
            f"check {hint}"
        )


def barrier(name):
    """Waits until every JAX process reaches the barrier `name` (`multihost_utils.sync_global_devices`)."""
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def lost_process_error(error, latest_checkpoint):
    """A one-line `LostProcessError` for an error that says another process stopped (`lost_peer_report`), else None.

    Any exception qualifies whose text, or that of an exception it was raised
    from, names the lost peer: a collective fails inside the compiled step
    (`JaxRuntimeError`), but also where Keras or TensorFlow read a result and wrap the failure.

    Example:
    >>> import jax
    >>> print(lost_process_error(jax.errors.JaxRuntimeError(
    ...     "UNKNOWN: Gloo all-reduce failed: [pair.cc:538] Read error [10.0.0.2]:19142: Connection reset by peer"),
    ...     "/runs/a/checkpoints/ckpt-000000020"))  # doctest: +NORMALIZE_WHITESPACE
    --strategy multiworker on JAX: process 0 of 1 lost the others during training (UNKNOWN: Gloo all-reduce
    failed: [pair.cc:538] Read error [10.0.0.2]:19142: Connection reset by peer); restart the same command on
    every process: the run resumes from /runs/a/checkpoints/ckpt-000000020
    """
    import jax

    report = lost_peer_report(error)
    if report is None:
        return None
    return LostProcessError(lost_process_message("JAX", jax.process_index(), jax.process_count(), report,
                                                 latest_checkpoint))
