"""Step 3, batches: SQuAD windows -> length-bucketed `tf.data` batches, or the NumPy twin (no TensorFlow).

`SPAN_QA_BUCKETS`: powers of two up to the sequence length (32, 64, 128, 256, 384).
"""

from keras_bert_impl.batching.boundaries import SPAN_QA_BUCKETS, count_batches_from_lengths, default_boundaries
from keras_bert_impl.tasks.old_keywords import renamed


def make_dataset(features, batch_size, training=False, seed=None, *, boundaries=None, fixed_batch_size=True,
                 shuffle_seed=None):
    """A batched `tf.data.Dataset` of `(inputs, labels)` (training) or `inputs` (prediction).

    Windows are padded only to the smallest of `boundaries` (default
    `default_boundaries(sequence_length, **SPAN_QA_BUCKETS)`) holding the longest window of
    the batch. For training they are shuffled and grouped into length
    buckets (`bucket_by_length`), so short contexts do not pay for 384
    tokens; for prediction the order of the windows is kept.

    With `fixed_batch_size` (default) every batch has exactly `batch_size`
    rows, so a compiled (XLA) step sees at most `len(boundaries)` shapes
    instead of recompiling for each bucket's last, partial batch. The
    partial batches are filled up with copies of their first window: in
    training their labels are -1, which `SpanLoss` ignores (the loss stays
    the mean over the real windows); in prediction the extra rows come
    last, and `predict_logits` drops them.

    `seed` seeds the training shuffle (old name: `shuffle_seed`, still taken).
    """
    import tensorflow as tf

    from keras_bert_impl.batching.tf_batches import bucket_by_length, fill_batches, pad_to_boundaries

    seed = renamed("make_dataset", "shuffle_seed", shuffle_seed, "seed", seed, None)
    sequence_length = features.token_ids.shape[1]
    boundaries = list(boundaries or default_boundaries(sequence_length, **SPAN_QA_BUCKETS))
    tensors = dict(features.inputs(), length=features.lengths)
    if training:
        tensors.update(start_positions=features.start_positions, end_positions=features.end_positions)
    dataset = tf.data.Dataset.from_tensor_slices(tensors)
    if training:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)

    def trim(element):
        length = element["length"]
        features = {k: element[k][:length] for k in ("token_ids", "segment_ids", "padding_mask")}
        if training:
            return features, {"start_logits": element["start_positions"], "end_logits": element["end_positions"]}
        return features

    dataset = dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE)
    if training:
        dataset = bucket_by_length(dataset, boundaries, batch_size)
    else:
        dataset = pad_to_boundaries(dataset, boundaries, batch_size)
    if fixed_batch_size:  # prediction batches have no labels: only features are filled
        dataset = fill_batches(dataset, batch_size, label_fill_value=-1)
    num_batches = count_batches_from_lengths(features.lengths, batch_size, boundaries, grouped=training)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset.prefetch(tf.data.AUTOTUNE)


def make_array_batches(features, batch_size, training=False, seed=0, *, boundaries=None, fixed_batch_size=True,
                       shuffle_seed=None):
    """`make_dataset` without TensorFlow: a `LengthBucketedBatches` (`keras.utils.PyDataset`) for JAX/PyTorch.

    The same batches as `make_dataset`: in training shuffled (a new seeded
    order each epoch) and grouped by length bucket, labels
    `{"start_logits", "end_logits"}` with -1 on filler rows; in
    prediction the windows in order, `(inputs,)` per batch. Not for the
    TensorFlow backend (see `LengthBucketedBatches`). `seed`: old name `shuffle_seed`, still taken.
    """
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches

    seed = renamed("make_array_batches", "shuffle_seed", shuffle_seed, "seed", seed, 0)
    sequence_length = features.token_ids.shape[1]
    boundaries = list(boundaries or default_boundaries(sequence_length, **SPAN_QA_BUCKETS))
    inputs = {k: [v[i, : features.lengths[i]] for i in range(len(features))] for k, v in features.inputs().items()}
    return LengthBucketedBatches(
        inputs,
        features.labels() if training else None,
        batch_size=batch_size,
        boundaries=boundaries,
        shuffle=training,
        seed=seed,
        fixed_batch_size=fixed_batch_size,
        label_fill_value=-1 if training else None,
    )
