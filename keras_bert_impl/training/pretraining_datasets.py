"""What a pretraining run's `fit` reads: the training data (one checkpointable pipeline on one replica, or one
positioned after the consumed batches for several replicas, workers or processes) and the held-out batches, read
the same on every iteration.
"""

import keras
import numpy as np

from keras_bert_impl.training.strategy import process_group


def default_dataset_fn(config):
    """The run's `dataset_fn`: `pretraining_dataset` with `config`'s packing and masking.

    Training data (`shuffle=True`) is reshuffled and gets new pairs and masks on every iteration (every epoch);
    held-out data (`shuffle=False`) gets the same batches on every iteration (`redraw_each_iteration`).
    """
    from keras_bert_impl.data.pretraining import pretraining_dataset

    def build(files, tokenizer, batch_size, seed, repeat, shuffle, input_context):
        return pretraining_dataset(
            files, tokenizer, sequence_length=config.sequence_length,
            max_predictions_per_seq=config.max_predictions_per_seq, batch_size=batch_size,
            whole_word_masking=config.whole_word_masking, seed=seed, shuffle=shuffle,
            repeat=repeat, nsp=config.nsp, input_context=input_context, redraw_each_iteration=shuffle,
        )

    return build


def held_out_dataset(build_dataset, config, tokenizer):
    """The run's held-out batches: the same `--validation_steps` batches on every iteration.

    Built without shuffling, with seed `--seed + 1`, and (the default pipeline) with the same pairs and masks on
    every iteration (`pretraining_dataset(redraw_each_iteration=False)`); `take(validation_steps).repeat()`
    makes Keras's evaluation after each epoch, which goes on with one iterator, read those batches again too.
    So the accuracy after each checkpoint, the final `model.evaluate` and `unigram_floor` all read the same
    masked positions, in an uninterrupted run as in a resumed one.
    """
    return build_dataset(config.validation_files, tokenizer, config.global_batch_size, config.seed + 1, True,
                         False, None).take(config.validation_steps).repeat()


def owns_iterator(strategy):
    """True when fit() can read a plain, checkpointable tf.data iterator (one replica, no tf.distribute)."""
    if strategy.num_replicas_in_sync != 1:
        return False
    if keras.backend.backend() != "tensorflow":
        return True
    import tensorflow as tf

    return strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy()


def distributed_dataset(strategy, build_dataset, config, tokenizer, split, start_step):
    """The training data for several replicas, positioned after `start_step` consumed batches.

    One worker (MirroredStrategy, TPUStrategy, JAX DataParallel): one pipeline
    of *global* batches that the strategy splits across replicas, so every
    replica count sees the same examples in the same batches. Several workers
    (MultiWorkerMirroredStrategy): one pipeline per worker
    (`distribute_datasets_from_function` with its `InputContext`), each making
    that worker's share of the global batch; several JAX processes alike (the
    `InputContext` of `jax_processes.input_context()`, `global_batch_size /
    processes` rows each, joined by Keras into the global batch) and several
    PyTorch processes (each trains on its rows; the optimizer averages the gradients).
    """

    def global_batches():
        return (build_dataset(config.train_files, tokenizer, config.global_batch_size,
                              config.seed, True, True, None).skip(start_step).map(split))

    processes = process_group(strategy)
    if processes:  # several processes: each reads its shard, makes its rows
        return (build_dataset(config.train_files, tokenizer,
                              processes.per_process_batch_size(config.global_batch_size), config.seed,
                              True, True, processes.input_context()).skip(start_step).map(split))
    if keras.backend.backend() != "tensorflow":
        return global_batches()
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
        strategy.extended._num_workers == 1  # noqa: SLF001
    ):
        return strategy.experimental_distribute_dataset(global_batches())

    def dataset_for(input_context):
        batch_size = input_context.get_per_replica_batch_size(config.global_batch_size)
        local_replicas = input_context.num_replicas_in_sync // input_context.num_input_pipelines
        return (build_dataset(config.train_files, tokenizer, batch_size, config.seed, True, True,
                              input_context).skip(start_step * local_replicas).map(split))

    return strategy.distribute_datasets_from_function(dataset_for)


def placeholder_batch(config, replicas):
    """An all-zeros `(x, y, sample_weight)` of the per-replica shape, to build metrics before fit."""
    n, length, predictions = config.global_batch_size // replicas, config.sequence_length, config.max_predictions_per_seq
    x = {"token_ids": np.zeros((n, length), "int32"), "segment_ids": np.zeros((n, length), "int32"),
         "padding_mask": np.ones((n, length), "int32"), "mask_positions": np.zeros((n, predictions), "int32")}
    y = {"mlm": np.zeros((n, predictions), "int32")}
    w = {"mlm": np.ones((n, predictions), "float32")}
    if config.nsp:
        y["nsp"], w["nsp"] = np.zeros((n,), "int32"), np.ones((n,), "float32")
    return x, y, w
