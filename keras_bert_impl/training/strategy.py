"""Choosing where training runs: TPU, several GPUs, several workers, or one device.

On the TensorFlow backend this returns a `tf.distribute` strategy; on JAX a
`keras.distribution.DataParallel` wrapped to look like one (`.scope()`,
`.num_replicas_in_sync`); on PyTorch one device, or several processes
(`TorchProcessesStrategy`). TensorFlow is imported only when the TensorFlow
backend asks for a strategy.
"""

import contextlib
import json
import os
import socket
import urllib.parse

import keras

from keras_bert_impl.training.replica_dropout import draw_own_masks_on_every_replica

STRATEGY_NAMES = ("auto", "cpu", "gpu", "mirrored", "multiworker", "tpu")


class SingleDeviceStrategy:
    """Stand-in strategy for JAX / PyTorch on one device: a no-op scope and 1 replica."""

    num_replicas_in_sync = 1

    def __init__(self, device="default"):
        self.device = device

    def scope(self):
        return contextlib.nullcontext()

    def __repr__(self):
        return f"SingleDeviceStrategy(device={self.device!r})"


class JaxDataParallelStrategy:
    """`keras.distribution.DataParallel` over JAX devices, with a strategy-like interface.

    The distribution is also set globally (`keras.distribution.set_distribution`)
    so that `model.fit` shards each global batch across the devices.

    With several JAX processes (`--strategy multiworker`, after
    `jax.distributed.initialize`) `devices` are the devices of every process and
    `num_processes > 1`: each process then feeds its *local* part of the global
    batch (`global_batch_size / num_processes` rows, from its own shard of the
    data), which Keras joins into one global array; the distribution does not
    re-shard the datasets (`auto_shard_dataset=False`).
    """

    def __init__(self, devices=None, num_processes=1):
        self.devices = list(devices or keras.distribution.list_devices())
        self.num_processes = num_processes
        self.distribution = keras.distribution.DataParallel(
            devices=self.devices, auto_shard_dataset=num_processes == 1)
        keras.distribution.set_distribution(self.distribution)

    @property
    def num_replicas_in_sync(self):
        return len(self.devices)

    def scope(self):
        return self.distribution.scope()

    def __repr__(self):
        return f"JaxDataParallelStrategy(devices={self.devices!r})"


class TorchProcessesStrategy:
    """Several PyTorch processes (`torch.distributed`), each training a full copy of the model on its rows.

    Each process feeds `global_batch_size / num_processes` rows of every global batch
    from its own shard of the data; the optimizer averages the gradients over the
    processes before it clips and applies them (`training/optimizer.py`), so the
    processes take identical steps, the step one device would take on the global
    batch. Made by `get_strategy("multiworker")` under `KERAS_BACKEND=torch`.
    """

    def __init__(self, num_processes):
        self.num_processes = num_processes

    @property
    def num_replicas_in_sync(self):
        return self.num_processes

    def scope(self):
        return contextlib.nullcontext()

    def __repr__(self):
        return f"TorchProcessesStrategy(num_processes={self.num_processes})"


def process_group(strategy):
    """The module of the job's processes (`jax_processes` or `torch_processes`), or None in one process.

    Both have the same functions: `process_index`, `process_count`,
    `per_process_batch_size`, `input_context`, `local_rows`, `start_from_process_zero`,
    `predicting_everywhere`, `check_same_on_every_process`, `barrier`, `lost_process_error`.

    Example:
    >>> process_group(SingleDeviceStrategy("cpu")) is None
    True
    """
    if getattr(strategy, "num_processes", 1) <= 1:
        return None
    if isinstance(strategy, TorchProcessesStrategy):
        from keras_bert_impl.training import torch_processes

        return torch_processes
    from keras_bert_impl.training import jax_processes

    return jax_processes


def several_processes_joined():
    """Whether this process has joined a JAX or PyTorch job of several processes (`--strategy multiworker`).

    Example:
    >>> several_processes_joined()
    False
    """
    from keras_bert_impl.training import jax_processes, torch_processes

    return jax_processes.is_multiprocess() or torch_processes.is_multiprocess()


def predicting_everywhere(strategy):
    """A context in which `model.predict` gives every process all the outputs (a no-op in one process).

    Several JAX processes train on their rows of each global batch; within it each
    feeds the whole batch instead (`jax_processes.predicting_everywhere`), so every
    process scores the whole dev set alike. PyTorch processes hold whole models: nothing changes.

    Example:
    >>> with predicting_everywhere(SingleDeviceStrategy("cpu")):
    ...     pass
    """
    group = process_group(strategy)
    return group.predicting_everywhere() if group else contextlib.nullcontext()


def get_strategy(name="auto", tpu=None, devices=None, connect_timeout=10.0, coordinator_address=None,
                 num_processes=None, process_id=None):
    """Returns the distribution strategy called `name` for the current Keras backend.

    Args:
        name: one of
            - `"tpu"`: `TPUClusterResolver(tpu or "local")`, connect,
              initialise the TPU system, `TPUStrategy`. Fails within seconds
              when no TPU answers.
            - `"mirrored"`: synchronous data parallelism over all local GPUs
              (`MirroredStrategy`; or `devices`). Under JAX:
              `keras.distribution.DataParallel` over the local devices.
            - `"multiworker"`: several processes (machines). TensorFlow:
              `MultiWorkerMirroredStrategy`, cluster from the `TF_CONFIG`
              environment variable. JAX: `jax.distributed.initialize` (from
              `coordinator_address`, `num_processes`, `process_id`, or with
              none of them from the cluster's environment: Cloud TPU, SLURM),
              then `keras.distribution.DataParallel` over the devices of all
              processes (`keras_bert_impl.training.jax_processes`). PyTorch:
              `torch.distributed.init_process_group` (from the same three
              arguments, or from `torchrun`'s environment), then one process
              per device, gradients averaged by the optimizer
              (`TorchProcessesStrategy`, `training.torch_processes`).
            - `"cpu"`, `"gpu"`: one device. `"auto"`: one device (the first
              GPU if there is one, else the CPU); under JAX, DataParallel
              when more than one local device is visible.
        tpu: TPU name or `grpc://host:port` address for `"tpu"` (default: a
            TPU attached to this VM, `"local"`).
        devices: explicit device list for `"mirrored"` (e.g. logical CPUs).
        connect_timeout: seconds to wait for a TPU worker's port to answer.
        coordinator_address, num_processes, process_id: the JAX or PyTorch cluster of
            `"multiworker"` (`host:port` of process 0, the number of processes,
            this one's index); all three or none.

    Returns:
        An object with `.scope()` and `.num_replicas_in_sync`.

    Example:
    >>> strategy = get_strategy("cpu")
    >>> strategy.num_replicas_in_sync
    1
    """
    if name not in STRATEGY_NAMES:
        raise ValueError(
            f"Unknown strategy {name!r}: expected one of {', '.join(STRATEGY_NAMES)}."
        )
    backend = keras.backend.backend()
    cluster = [f"--{flag}" for flag, value in (("coordinator_address", coordinator_address),
                                                ("num_processes", num_processes), ("process_id", process_id))
               if value is not None]
    if cluster and (backend not in ("jax", "torch") or name != "multiworker"):
        raise ValueError(
            f"{', '.join(cluster)}: the cluster flags go with --strategy multiworker under KERAS_BACKEND=jax or "
            f"torch (here --strategy {name}, backend {backend!r}; TensorFlow's workers come from TF_CONFIG)."
        )
    if backend == "tensorflow":
        return _tensorflow_strategy(name, tpu, devices, connect_timeout)
    if backend == "jax" and name == "multiworker":
        from keras_bert_impl.training.jax_processes import initialize_jax_processes

        _, count = initialize_jax_processes(coordinator_address, num_processes, process_id)
        return JaxDataParallelStrategy(keras.distribution.list_devices(), num_processes=count)
    if backend == "torch" and name == "multiworker":
        from keras_bert_impl.training.torch_processes import initialize_torch_processes

        _, count = initialize_torch_processes(coordinator_address, num_processes, process_id)
        return TorchProcessesStrategy(count)
    if name == "tpu" and backend == "jax":
        raise ValueError(
            "--strategy tpu is TensorFlow's TPUStrategy (KERAS_BACKEND=tensorflow); on JAX use --strategy auto "
            "on one TPU VM (DataParallel over its TPU cores) or --strategy multiworker on a TPU VM pod slice."
        )
    if name in ("tpu", "multiworker"):
        raise ValueError(
            f"--strategy {name} needs KERAS_BACKEND=tensorflow (tf.distribute) or, for multiworker, jax or torch; "
            f"the current backend is {backend!r}."
        )
    if backend == "jax":
        local = keras.distribution.list_devices()
        if name == "mirrored" or (name == "auto" and len(local) > 1 and devices is None):
            return JaxDataParallelStrategy(devices or local)
        if name == "gpu" and not _jax_gpus():
            raise ValueError("--strategy gpu: JAX sees no GPU on this machine (use cpu).")
        return SingleDeviceStrategy(name)
    if name == "mirrored":
        raise ValueError(
            "--strategy mirrored is not supported on the torch backend (one process drives one device); for "
            "several GPUs start one process per GPU: torchrun --nproc_per_node N recipes/pretrain.py --strategy "
            "multiworker, or use KERAS_BACKEND=tensorflow (MirroredStrategy) or jax (DataParallel)."
        )
    if name == "gpu" and not _torch_sees_a_gpu():
        raise ValueError("--strategy gpu: PyTorch sees no GPU on this machine (use cpu).")
    return SingleDeviceStrategy(name)


def _jax_gpus():
    """JAX's GPU devices; none (not JAX's `RuntimeError: Unknown backend: 'gpu' requested`) where it has no GPU."""
    try:
        return keras.distribution.list_devices("gpu")
    except RuntimeError:
        return []


def _torch_sees_a_gpu():
    """Whether PyTorch has a CUDA (or ROCm) device: without one, Keras's torch backend runs on the CPU unasked."""
    import torch

    return torch.cuda.is_available()


def check_finetuning_strategy(name, backend=None):
    """Refuses, in one line, a `--strategy` the fine-tuning recipes do not run on this backend; returns `name`.

    The fine-tuning recipes (GLUE, CoNLL, SQuAD) take every `STRATEGY_NAMES` value on
    TensorFlow. On JAX: `auto`, `cpu`, `gpu`, `mirrored` (every device of this machine)
    and `multiworker` (several JAX processes); `tpu` is TensorFlow's TPUStrategy (on a TPU
    VM, `auto` gives DataParallel over its TPU cores). On PyTorch: one device (`auto`,
    `cpu`, `gpu`) or several processes (`multiworker`, under `torchrun`); `mirrored`
    has no PyTorch twin in one process.

    Example:
    >>> check_finetuning_strategy("multiworker", backend="torch")
    'multiworker'
    >>> check_finetuning_strategy("mirrored", backend="torch")
    Traceback (most recent call last):
    ...
    ValueError: --strategy mirrored is not available for fine-tuning on KERAS_BACKEND=torch (one PyTorch process drives one device); use auto, cpu, gpu (one device), multiworker (one process per device: torchrun --nproc_per_node N), or KERAS_BACKEND=tensorflow for --strategy mirrored
    """
    backend = backend or keras.backend.backend()
    if name not in STRATEGY_NAMES:
        raise ValueError(f"Unknown --strategy {name!r}: expected one of {', '.join(STRATEGY_NAMES)}.")
    refused = {"jax": ("tpu",), "torch": ("mirrored", "tpu")}.get(backend, ())
    if name in refused:
        runs = {"jax": "auto, cpu, gpu, mirrored (every device of this machine, keras DataParallel), multiworker "
                       "(several JAX processes)",
                "torch": "auto, cpu, gpu (one device), multiworker (one process per device: torchrun "
                         "--nproc_per_node N)"}[backend]
        where = ("one PyTorch process drives one device" if name == "mirrored"
                 else "it is a tf.distribute strategy")
        raise ValueError(
            f"--strategy {name} is not available for fine-tuning on KERAS_BACKEND={backend} ({where}); "
            f"use {runs}, or KERAS_BACKEND=tensorflow for --strategy {name}"
        )
    return name


def check_global_batch_size(global_batch_size, num_replicas):
    """Returns the per-replica batch size; raises if the global batch does not split evenly.

    Example:
    >>> check_global_batch_size(32, 4)
    8
    """
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size <= 0:
        raise ValueError(f"--global_batch_size must be a positive int, got {global_batch_size!r}.")
    if global_batch_size % num_replicas:
        lower = global_batch_size - global_batch_size % num_replicas
        raise ValueError(
            f"--global_batch_size={global_batch_size} is not divisible by the "
            f"{num_replicas} replicas of the strategy: each replica must get the same "
            f"number of examples (try {lower or num_replicas} or {lower + num_replicas})."
        )
    return global_batch_size // num_replicas


def resolve_jit_compile(jit_compile, strategy, backend=None):
    """What `--jit_compile auto` means for a pretraining step: XLA wherever one compiled program runs it.

    Keras's own `"auto"` leaves XLA *off* for TensorFlow on CPU-only machines
    and under any `tf.distribute` strategy. The pretraining step has static
    shapes, so one compile serves the whole run, and XLA ran it 1.8x faster on
    2 CPU cores (docs/pretraining.md). So for pretraining, `"auto"` is:
    - TensorFlow with one replica (the CPU, or one GPU): `True`;
    - TensorFlow with several replicas (`MirroredStrategy`,
      `MultiWorkerMirroredStrategy`, `TPUStrategy`): Keras's choice (`"auto"`);
      a TPU compiles every step with XLA anyway;
    - JAX: `True` (JAX steps are compiled programs);
    - PyTorch: `False` (`True` would mean `torch.compile`).
    `True` and `False` are returned as given.

    Example:
    >>> resolve_jit_compile("auto", SingleDeviceStrategy("cpu"), backend="tensorflow")
    True
    >>> resolve_jit_compile("auto", SingleDeviceStrategy("cpu"), backend="torch")
    False
    >>> resolve_jit_compile(False, SingleDeviceStrategy("cpu"), backend="jax")
    False
    """
    if jit_compile != "auto":
        return jit_compile
    backend = backend or keras.backend.backend()
    if backend == "torch":
        return False
    if backend == "jax":
        return True
    return True if strategy.num_replicas_in_sync == 1 else "auto"


def _tensorflow_strategy(name, tpu, devices, connect_timeout):
    import tensorflow as tf

    draw_own_masks_on_every_replica()  # else every replica draws the same dropout masks (Keras 3 on tf.distribute)
    if name == "tpu":
        return _tpu_strategy(tf, tpu, connect_timeout)
    if name == "multiworker":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError(
                "--strategy multiworker needs the TF_CONFIG environment variable "
                '(e.g. {"cluster": {"worker": ["host1:port", "host2:port"]}, '
                '"task": {"type": "worker", "index": 0}}).'
            )
        try:
            json.loads(os.environ["TF_CONFIG"])
        except json.JSONDecodeError as error:
            raise ValueError(f"TF_CONFIG is not valid JSON: {error}") from None
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices)
    gpus = tf.config.list_logical_devices("GPU")
    if name == "gpu" and not gpus:
        raise ValueError("--strategy gpu: TensorFlow sees no GPU on this machine (use cpu).")
    if name == "cpu" and gpus:
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    # One device: TensorFlow's default strategy (ops go to GPU:0 when there is
    # one). Unlike OneDeviceStrategy it leaves datasets undistributed, so the
    # tf.data iterator fit() reads from can be checkpointed exactly.
    return tf.distribute.get_strategy()


class NoTPUError(RuntimeError):
    """No TPU answered at `target` (`--tpu`, default "local"); `reason` is the cause's first sentence.

    A `RuntimeError` whose message gives pretrain.py's advice (its `--tpu` flag); the fine-tuning recipes, which
    have no `--tpu`, turn it into their own one line from `target` and `reason`.

    Example:
    >>> str(NoTPUError("local", "NotFoundError: TPUs not found in the cluster", "Name one with --tpu."))
    "No TPU was found at --tpu 'local' (NotFoundError: TPUs not found in the cluster). Name one with --tpu."
    """

    def __init__(self, target, reason, hint):
        self.target, self.reason, self.hint = target, reason, hint
        super().__init__(f"No TPU was found at --tpu {target!r} ({reason}). {hint}")

    def __reduce__(self):
        return type(self), (self.target, self.reason, self.hint)


def _first_sentence(text):
    """The first sentence of the first line of `text` (TensorFlow's TPU errors go on for a screen)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.split(". ")[0].rstrip(".")


def _tpu_strategy(tf, tpu, connect_timeout):
    target = tpu or "local"
    hint = (
        "Name one with --tpu: the TPU's name (on Google Cloud, e.g. --tpu my-tpu-v3-8), "
        "its address (--tpu grpc://10.0.0.2:8470), or run on a TPU VM for --tpu local."
    )
    if target.startswith("grpc://"):
        _check_reachable(target, connect_timeout, hint)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=target)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as error:  # NotFoundError, URLError, ValueError, ... all mean "no TPU"
        first = _first_sentence(str(error))
        raise NoTPUError(target, f"{type(error).__name__}: {first}" if first else type(error).__name__,
                         hint) from None
    return tf.distribute.TPUStrategy(resolver)


def _check_reachable(address, timeout, hint):
    parsed = urllib.parse.urlparse(address)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 8470), timeout=timeout):
            pass
    except OSError as error:
        raise NoTPUError(address, f"nothing answers on {parsed.hostname}:{parsed.port or 8470}: {error}",
                         hint) from None
