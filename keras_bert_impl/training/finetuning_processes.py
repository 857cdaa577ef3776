"""A fine-tuning job of several processes (`--strategy multiworker`: TensorFlow workers, JAX or PyTorch processes):
which process this is, its config (one writer: the others get private folders), and the inputs and evaluation each
process runs (`finetuning.finetune` uses them).

Example:
>>> from keras_bert_impl.training.strategy import SingleDeviceStrategy
>>> this_process(SingleDeviceStrategy("cpu")) is None  # one process
True
"""

import atexit
import dataclasses
import shutil
import tempfile

import keras

from keras_bert_impl.training.process_cluster import take_rows_of_each_batch
from keras_bert_impl.training.strategy import process_group


def config_of_this_process(config, strategy):
    """`config` (a task's run config, with `model_dir` and `batch_size`) as this process of the job runs it.

    In one process: `config` itself. With several processes (`--strategy multiworker`:
    TensorFlow workers, JAX or PyTorch processes), process 0 writes the run's files to `model_dir`, and
    every other process gets a private temporary `model_dir`, removed when it exits,
    so that no two processes write the same file while all run the same code (on
    JAX, saving a model creates variables, which every process of a distribution
    must do together); and the batch size must split evenly over the processes, as
    each feeds an equal part of every batch.

    Example:
    >>> import types
    >>> from keras_bert_impl.training.strategy import SingleDeviceStrategy
    >>> config = types.SimpleNamespace(model_dir="/runs/rte", batch_size=32)
    >>> config_of_this_process(config, SingleDeviceStrategy("cpu")) is config
    True
    """
    this = this_process(strategy)
    if this is None:
        return config
    index, count, runtime = this
    if config.batch_size % count:
        raise ValueError(
            f"--batch_size={config.batch_size} is not divisible by the {count} {runtime} processes: each "
            f"process feeds an equal part of every batch (try {max(count, config.batch_size - config.batch_size % count)})"
        )
    if index == 0:
        return config
    return dataclasses.replace(config, model_dir=private_directory(index))


_private_directories = []  # this process's private folders (`private_directory`) not yet removed


def private_directory(index):
    """A new temporary folder for the files of process `index` > 0, removed when it exits (`remove_private_directories`)."""
    private = tempfile.mkdtemp(prefix=f"keras_bert_impl_process{index}_")
    _private_directories.append(private)
    atexit.register(remove_private_directories, private)
    return private


def remove_private_directories(*folders):
    """Removes `folders` (default: all) of this process's private folders, the files of a process > 0 of a job of
    several (`config_of_this_process`): at exit, and before a process of several leaves with `os._exit`, which runs
    no exit handler (`recipes/interruption.leave`). Each is removed once; what is gone already is skipped.

    Example:
    >>> import os
    >>> folder = private_directory(1)
    >>> remove_private_directories(folder); os.path.exists(folder)
    False
    """
    for folder in folders or list(_private_directories):
        if folder in _private_directories:
            _private_directories.remove(folder)
            shutil.rmtree(folder, ignore_errors=True)


def this_process(strategy):
    """`(index, count, runtime)` of this process in a job of several (JAX, PyTorch, TensorFlow workers), else None."""
    group = process_group(strategy)
    if group is not None:
        return group.process_index(), strategy.num_processes, group.RUNTIME
    workers = tensorflow_workers(strategy)
    if workers > 1:
        return tensorflow_worker_index(strategy), workers, "TensorFlow"
    return None


def tensorflow_workers(strategy):
    """The number of workers (the chief included) of a TensorFlow `MultiWorkerMirroredStrategy`, else 1."""
    if strategy is None or keras.backend.backend() != "tensorflow":
        return 1
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return 1
    cluster = resolver.cluster_spec().as_dict()
    return len(cluster.get("chief", [])) + len(cluster.get("worker", []))


def tensorflow_worker_index(strategy):
    """This worker's place among all (the chief first): its input pipeline id, 0 for the writer."""
    resolver = strategy.cluster_resolver
    has_chief = bool(resolver.cluster_spec().as_dict().get("chief"))
    return resolver.task_id + (1 if has_chief and resolver.task_type == "worker" else 0)


def distribute_to_workers(model, rows, global_batches, strategy, skip_batches=0):
    """TensorFlow workers: each feeds its rows of the same global batches (as JAX and PyTorch processes do).

    Builds the compiled `model`'s metrics from this worker's first rows (Keras's own build
    cannot reduce a dict of per-worker tensors, `multiworker_patches`) and returns the
    per-worker pipelines as one distributed dataset, each starting `skip_batches` into the
    stream (a resumed run: the finished epochs' batches).
    """
    from keras_bert_impl.training.multiworker_patches import (
        build_before_distributed_fit,
        patch_multiworker_metric_reduction,
    )

    patch_multiworker_metric_reduction()
    first = next(iter(rows))
    build_before_distributed_fit(model, strategy, keras.tree.map_structure(lambda t: t.numpy(), first))
    return strategy.distribute_datasets_from_function(
        lambda context: take_rows_of_each_batch(global_batches, context.input_pipeline_id,
                                                context.num_input_pipelines).repeat().skip(skip_batches))


def predicting_everywhere(eval_fn, group):
    """`eval_fn` run by every process of `group`, each predicting its rows."""

    def evaluate(model):
        with group.predicting_everywhere():
            return eval_fn(model)

    return evaluate
