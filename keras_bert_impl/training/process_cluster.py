"""What several JAX or PyTorch processes share (`--strategy multiworker`): the cluster flags, the batch split,
and the line a process prints when it loses the others.

`--coordinator_address host:port` (process 0's), `--num_processes N` and
`--process_id I`: all three, or none (the cluster then comes from the environment:
Cloud TPU or SLURM for JAX, `torchrun` for PyTorch). Each process then makes an equal
part of every global batch.
"""

import contextlib

CLUSTER_FLAGS = ("coordinator_address", "num_processes", "process_id")


def check_cluster_flags(runtime, environment, coordinator_address=None, num_processes=None, process_id=None):
    """Checks the three cluster flags; returns the dict of those given (empty: read the environment).

    `runtime` ("JAX", "PyTorch") and `environment` (where the cluster is found
    without flags) only shape the message.

    Example:
    >>> check_cluster_flags("JAX", "Cloud TPU, SLURM", "10.0.0.1:1234", 2, 1)
    {'coordinator_address': '10.0.0.1:1234', 'num_processes': 2, 'process_id': 1}
    >>> check_cluster_flags("JAX", "Cloud TPU, SLURM", "10.0.0.1:1234", 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: --process_id must be in [0, --num_processes=2), got 2
    """
    given = {name: value for name, value in zip(CLUSTER_FLAGS, (coordinator_address, num_processes, process_id))
             if value is not None}
    if given and len(given) != len(CLUSTER_FLAGS):
        missing = [f"--{name}" for name in CLUSTER_FLAGS if name not in given]
        raise ValueError(
            f"--strategy multiworker on {runtime}: {', '.join('--' + k for k in given)} given without "
            f"{', '.join(missing)}; pass all of --coordinator_address host:port, --num_processes and "
            f"--process_id, or none of them to read the cluster from the environment ({environment})"
        )
    if given:
        if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
            raise ValueError(f"--num_processes must be a positive integer, got {num_processes!r}")
        if isinstance(process_id, bool) or not isinstance(process_id, int) or not 0 <= process_id < num_processes:
            raise ValueError(f"--process_id must be in [0, --num_processes={num_processes}), got {process_id!r}")
        if ":" not in str(coordinator_address):
            raise ValueError(f"--coordinator_address must be host:port (process 0's), got {coordinator_address!r}")
    return given


def split_global_batch(global_batch_size, num_processes, runtime):
    """Examples each of `num_processes` processes contributes to a global batch; refuses an uneven split.

    Example:
    >>> split_global_batch(64, 4, "JAX")
    16
    """
    if global_batch_size % num_processes:
        raise ValueError(
            f"--global_batch_size={global_batch_size} is not divisible by the {num_processes} {runtime} processes: "
            "each process must contribute the same number of examples"
        )
    return global_batch_size // num_processes


def lost_process_message(runtime, index, count, error, latest_checkpoint):
    """The one line a process left behind prints: who it is, the runtime's first sentence, how to resume.

    Example:
    >>> lost_process_message("JAX", 0, 2, RuntimeError("Connection reset by peer. More text."), None)
    '--strategy multiworker on JAX: process 0 of 2 lost the others during training (Connection reset by peer); restart the same command on every process: the run starts again from step 0 (no checkpoint yet)'
    """
    cause = " ".join(str(error).split()).split(". ")[0][:200]
    where = f"resumes from {latest_checkpoint}" if latest_checkpoint else "starts again from step 0 (no checkpoint yet)"
    return (f"--strategy multiworker on {runtime}: process {index} of {count} lost the others during training "
            f"({cause}); restart the same command on every process: the run {where}")


# What the collectives say in the processes left behind when a peer process is gone (gloo between CPUs, NCCL
# between GPUs; under JAX and PyTorch alike), and what JAX's coordination service says once its heartbeats stop.
LOST_PEER_SIGNS = ("Connection reset by peer", "Connection closed by peer", "Gloo all-reduce failed",
                   "NCCL operation", "NCCL communicator was aborted", "heartbeat timeout", "tasks are unhealthy",
                   "remote worker")


def lost_peer_report(error):
    """The exception, `error` or one it was raised from, whose text reports a peer process that has gone; else None.

    Example:
    >>> lost_peer_report(RuntimeError("[pair.cc:537] Read error [127.0.0.1]:4010: Connection reset by peer."))
    RuntimeError('[pair.cc:537] Read error [127.0.0.1]:4010: Connection reset by peer.')
    >>> lost_peer_report(RuntimeError("CUDA out of memory")) is None
    True
    >>> try:
    ...     try:
    ...         raise RuntimeError("Gloo AllGather failed: Connection reset by peer")
    ...     except RuntimeError as cause:
    ...         raise ValueError("could not read the metric") from cause
    ... except ValueError as error:
    ...     lost_peer_report(error)
    RuntimeError('Gloo AllGather failed: Connection reset by peer')
    """
    seen = set()
    while error is not None and id(error) not in seen:
        if any(sign in str(error) for sign in LOST_PEER_SIGNS):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def lost_peers_as_one_line(processes, latest_checkpoint):
    """Within it, an error that says another process has gone becomes `processes`' one-line `LostProcessError`.

    Wrap everything a job of several processes does together (training, the final
    evaluation, the export, the last barrier): wherever the collective fails, the
    process left behind raises the line that names the checkpoint a restart resumes from.

    Args:
        processes: the job's `jax_processes` or `torch_processes` module (`strategy.process_group`), or None in
            one process (then nothing is changed).
        latest_checkpoint: a function that returns the newest checkpoint's path (or None), asked only on an error.
    """
    try:
        yield
    except Exception as error:
        lost = processes.lost_process_error(error, latest_checkpoint()) if processes is not None else None
        if lost is None:
            raise
        raise lost from error


def take_rows_of_each_batch(dataset, index, count):
    """This process's rows of every global batch of `dataset` (a `tf.data.Dataset` of `(x, y, sample_weight)`).

    Every process builds the same global batches (same files, same seed) and feeds rows
    `[index * n, (index + 1) * n)` of each, `n = rows // count`; a global batch of fewer
    than `count` rows is skipped, and the last `rows % count` rows of a batch that does not
    split evenly are left out (at most `count - 1` examples, reshuffled every epoch), so that
    every process feeds the same number of equal batches and the processes together feed
    the global batch. Needs TensorFlow (tf.data).

    Example:
    >>> import tensorflow as tf
    >>> batches = tf.data.Dataset.from_tensor_slices(tf.range(11)).batch(4)   # [0..3] [4..7] [8, 9, 10]
    >>> [b.numpy().tolist() for b in take_rows_of_each_batch(batches, index=1, count=2)]
    [[2, 3], [6, 7], [9]]
    >>> [b.numpy().tolist() for b in take_rows_of_each_batch(batches, index=0, count=4)]
    [[0], [4]]
    """
    if count == 1:
        return dataset
    import tensorflow as tf

    def rows_of(batch):
        return tf.shape(tf.nest.flatten(batch)[0])[0]

    def take(*batch):
        n = rows_of(batch) // count

        def cut(tensor):
            return tensor[index * n:(index + 1) * n]

        rows = tf.nest.map_structure(cut, batch)
        return rows if len(rows) > 1 else rows[0]

    return dataset.filter(lambda *batch: rows_of(batch) >= count).map(take)
