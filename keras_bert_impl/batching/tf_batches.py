"""tf.data batching: length buckets for training, in-order padding for evaluation, filled batches.

- `bucket_by_length(dataset, boundaries, batch_size)`: dynamic padding for
  training: groups variable-length examples into length buckets and pads each
  batch only to its bucket's boundary, so short-sentence tasks do not pay for
  `sequence_length` tokens (and the model sees at most `len(boundaries)`
  distinct shapes, which keeps XLA/JAX recompilation bounded).
- `pad_to_boundaries(dataset, boundaries, batch_size)`: the same padding for
  evaluation and prediction, keeping the input order.
- `fill_batches(dataset, batch_size)`: every batch exactly `batch_size` rows.
- `batches_by_length(dataset, lengths, batch_size, boundaries, grouped)`: what
  every `make_dataset` ends with: one of the two batchings, filled batches,
  the exact cardinality (counted from the lengths) and prefetching.
- `count_batches(dataset)`: the number of batches of a `tf.data.Dataset`.

Boundaries come from `keras_bert_impl.batching.boundaries.default_boundaries`.
The NumPy twin for TensorFlow-free hosts is
`keras_bert_impl.batching.array_batches.LengthBucketedBatches`, which gives the
same batches (tests/test_array_batches.py checks it).

Datasets for `bucket_by_length` / `pad_to_boundaries` yield `features` or
`(features, label)` (or `(features, label, sample_weight)`) where `features`
is a dict of 1-D int tensors of the same, variable length (e.g.
`token_ids`, `segment_ids`, `padding_mask`) and labels are scalars or 1-D
per-token tensors of the same length (padded with `label_padding_value`).
"""

import tensorflow as tf

from keras_bert_impl.batching.boundaries import check_boundaries, count_batches_from_lengths
from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)


def count_batches(dataset):
    """Number of batches in `dataset`: its cardinality, or counted by iterating once.

    Example:
    >>> import tensorflow as tf
    >>> count_batches(tf.data.Dataset.range(10).batch(4))
    3
    """
    cardinality = int(dataset.cardinality())
    if cardinality == tf.data.INFINITE_CARDINALITY:
        raise ValueError("`train_ds` is infinite (repeat()): pass `steps_per_epoch`.")
    if cardinality >= 0:
        return cardinality
    return int(dataset.reduce(0, lambda count, _: count + 1))


def _element_length(element, length_key):
    features = element[0] if isinstance(element, tuple) else element
    return tf.shape(features[length_key])[0]


def _pad_element_to(element, target_length, label_padding_value, feature_padding_value):
    """Pads every 1-D+ component whose first (time) axis is variable to `target_length` (batched input)."""
    def pad(tensor, value):
        if tensor.shape.rank is None or tensor.shape.rank < 2 or tensor.shape[1] is not None:
            return tensor  # a scalar per example, or rows of a fixed width (a multi-label classifier's classes)
        amount = target_length - tf.shape(tensor)[1]
        paddings = [[0, 0], [0, amount]] + [[0, 0]] * (tensor.shape.rank - 2)
        return tf.pad(tensor, paddings, constant_values=tf.cast(value, tensor.dtype))

    if isinstance(element, tuple):
        features = {k: pad(v, feature_padding_value) for k, v in element[0].items()}
        rest = tuple(tf.nest.map_structure(lambda t: pad(t, label_padding_value), e) for e in element[1:])
        return (features, *rest)
    return {k: pad(v, feature_padding_value) for k, v in element.items()}


def _bucket_target(length, boundaries):
    bounds = tf.constant(boundaries, dtype=tf.int32)
    index = tf.reduce_sum(tf.cast(bounds < tf.cast(length, tf.int32), tf.int32))
    index = tf.minimum(index, len(boundaries) - 1)
    return tf.maximum(bounds[index], tf.cast(length, tf.int32))


def _check_lengths(dataset, boundaries, length_key):
    limit = boundaries[-1]

    def check(*element):
        element = element[0] if len(element) == 1 else element
        length = _element_length(element, length_key)
        tf.debugging.assert_less_equal(
            length,
            limit,
            message=f"an example is longer than the last bucket boundary {limit}: truncate it (sequence_length) first",
        )
        return element

    return dataset.map(check)


def bucket_by_length(
    dataset,
    boundaries,
    batch_size,
    length_key="token_ids",
    drop_remainder=False,
    label_padding_value=0,
    feature_padding_value=0,
):
    """Batches variable-length examples by length bucket, padding each batch to its bucket's boundary.

    An example of length L goes to the first bucket whose boundary is >= L;
    each batch holds `batch_size` examples of one bucket and is padded to that
    boundary. Use for training (it changes the order of examples); shuffle
    before calling it.

    Args:
        dataset: unbatched `tf.data.Dataset` of `features` or
            `(features, labels[, weights])`; `features` a dict of 1-D tensors;
            labels and weights tensors or (nested) dicts of them, e.g. SQuAD's
            `{"start_logits": start, "end_logits": end}`.
        boundaries: strictly increasing ints; the last is the maximum length
            (e.g. `default_boundaries(sequence_length)`). Longer examples raise.
        batch_size: int, examples per batch.
        length_key: feature whose length decides the bucket.
        drop_remainder: drop each bucket's final partial batch (static batch size).
        label_padding_value: padding for per-token labels (e.g. -1 or -100 to ignore).
        feature_padding_value: padding of features (0: [PAD], segment 0, mask 0).

    Returns:
        A batched dataset; `features[k]` has shape `(batch, boundary)`.

    Example:
    >>> import tensorflow as tf
    >>> ds = tf.data.Dataset.from_generator(
    ...     lambda: (({"token_ids": [1] * n}, 0) for n in (3, 40, 5, 50)),
    ...     output_signature=({"token_ids": tf.TensorSpec([None], tf.int32)}, tf.TensorSpec([], tf.int32)))
    >>> [tuple(f["token_ids"].shape) for f, _ in bucket_by_length(ds, [32, 64], 2)]
    [(2, 32), (2, 64)]
    """
    boundaries = check_boundaries(boundaries)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
    dataset = _check_lengths(dataset, boundaries, length_key)
    bounds = tf.constant(boundaries, dtype=tf.int64)

    def key_fn(*element):
        element = element[0] if len(element) == 1 else element
        length = tf.cast(_element_length(element, length_key), tf.int64)
        return tf.reduce_sum(tf.cast(bounds < length, tf.int64))

    def reduce_fn(bucket_id, window):
        target = tf.cast(tf.gather(bounds, bucket_id), tf.int32)
        batched = window.padded_batch(
            batch_size,
            padding_values=_padding_values(window.element_spec, label_padding_value, feature_padding_value),
            drop_remainder=drop_remainder,
        )
        return batched.map(
            lambda *e: _pad_element_to(e[0] if len(e) == 1 else e, target, label_padding_value, feature_padding_value)
        )

    return dataset.group_by_window(key_func=key_fn, reduce_func=reduce_fn, window_size=batch_size)


def fill_batches(dataset, batch_size, label_fill_value=-1):
    """Makes every batch exactly `batch_size` rows, so compiled (XLA) steps see fixed batch shapes.

    Length buckets give each bucket a final, partial batch; under
    `jit_compile` each new shape costs a compilation (about 20 s for a
    6-layer model on a laptop CPU). The missing rows are filled with copies of
    the batch's first row, and their labels with `label_fill_value`, which
    the loss must ignore (`SparseCategoricalCrossentropy(ignore_class=-1)`,
    `SpanLoss`); the loss stays the mean over the real rows. For prediction
    datasets (features only) the filler rows come last: keep the first
    `min(batch_size, remaining)` outputs of each batch.

    Args:
        dataset: batched dataset of `features` or `(features, labels)`;
            features and labels are dicts or tensors with the batch first.
        batch_size: int, the target number of rows.
        label_fill_value: label of the filler rows.

    Example:
    >>> import tensorflow as tf
    >>> ds = tf.data.Dataset.from_tensor_slices(({"token_ids": [[1, 2], [3, 4], [5, 6]]}, [0, 1, 1])).batch(2)
    >>> [(f["token_ids"].numpy().tolist(), y.numpy().tolist()) for f, y in fill_batches(ds, 2)]
    [([[1, 2], [3, 4]], [0, 1]), ([[5, 6], [5, 6]], [1, -1])]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")

    def fill(tensor, fill_value):
        missing = batch_size - tf.shape(tensor)[0]
        if fill_value is None:
            extra = tf.repeat(tensor[:1], missing, axis=0)
        else:
            extra = tf.fill(tf.concat([[missing], tf.shape(tensor)[1:]], 0), tf.cast(fill_value, tensor.dtype))
        out = tf.concat([tensor, extra], 0)
        out.set_shape([batch_size] + tensor.shape.as_list()[1:])
        return out

    def fill_structure(structure, fill_value):
        return tf.nest.map_structure(lambda t: fill(t, fill_value), structure)

    def fill_element(*element):
        if len(element) == 1:
            return fill_structure(element[0], None)
        return (fill_structure(element[0], None), *(fill_structure(e, label_fill_value) for e in element[1:]))

    return dataset.map(fill_element)


def pad_to_boundaries(
    dataset,
    boundaries,
    batch_size,
    length_key="token_ids",
    label_padding_value=0,
    feature_padding_value=0,
):
    """Batches in input order, padding each batch to the smallest boundary >= its longest example.

    For evaluation and prediction: the order of examples is kept, while
    the model sees at most `len(boundaries)` shapes.

    Args: as `bucket_by_length` (without `drop_remainder`).

    Example:
    >>> import tensorflow as tf
    >>> ds = tf.data.Dataset.from_generator(
    ...     lambda: ({"token_ids": [1] * n} for n in (3, 40, 5)),
    ...     output_signature={"token_ids": tf.TensorSpec([None], tf.int32)})
    >>> [tuple(f["token_ids"].shape) for f in pad_to_boundaries(ds, [32, 64], 2)]
    [(2, 64), (1, 32)]
    """
    boundaries = check_boundaries(boundaries)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
    dataset = _check_lengths(dataset, boundaries, length_key)
    batched = dataset.padded_batch(
        batch_size, padding_values=_padding_values(dataset.element_spec, label_padding_value, feature_padding_value)
    )

    def pad(*element):
        element = element[0] if len(element) == 1 else element
        features = element[0] if isinstance(element, tuple) else element
        target = _bucket_target(tf.shape(features[length_key])[1], boundaries)
        return _pad_element_to(element, target, label_padding_value, feature_padding_value)

    return batched.map(pad)


def _padding_values(element_spec, label_padding_value, feature_padding_value):
    def value(spec, v):
        return tf.constant(v, dtype=spec.dtype) if spec.dtype != tf.string else tf.constant("", tf.string)

    if isinstance(element_spec, tuple):
        features = {k: value(s, feature_padding_value) for k, s in element_spec[0].items()}
        labels = (tf.nest.map_structure(lambda s: value(s, label_padding_value), e) for e in element_spec[1:])
        return (features, *labels)
    return {k: value(s, feature_padding_value) for k, s in element_spec.items()}


def batches_by_length(dataset, lengths, batch_size, boundaries, grouped, fill=True, label_fill_value=-1,
                      label_padding_value=0, feature_padding_value=0, drop_remainder=False, transform_batches=None):
    """Batches examples whose lengths are known, ready for `fit`: what every task's `make_dataset` ends with.

    Args:
        dataset: unbatched examples, as `bucket_by_length` takes them (shuffle first when `grouped`).
        lengths: each example's length (token count), in input order: the batches are counted from them.
        batch_size: examples per batch.
        boundaries: the length buckets (`default_boundaries`); None: plain `batch` (one shape per length).
        grouped: `bucket_by_length` (training: batches of one bucket each); else `pad_to_boundaries`
            (evaluation, prediction: the input order).
        fill: every batch `batch_size` rows (`fill_batches`, labels `label_fill_value`), so a compiled step sees
            one shape per bucket; not with `boundaries=None`.
        label_padding_value, feature_padding_value: as `bucket_by_length`.
        drop_remainder: drop partial batches (grouped, or with `boundaries=None`).
        transform_batches: None, or `f(batches) -> batches` run on the padded batches before they are filled and
            counted (the pretrainer preprocessor masks each batch there).

    Returns:
        The batched, prefetched dataset, whose cardinality is its exact number of batches
        (`count_batches_from_lengths`), so Keras shows the steps of an epoch without a pass over it.

    Example:
    >>> import tensorflow as tf
    >>> lengths = [3, 40, 5, 50, 7]
    >>> ds = tf.data.Dataset.from_generator(
    ...     lambda: (({"token_ids": [1] * n}, 1) for n in lengths),
    ...     output_signature=({"token_ids": tf.TensorSpec([None], tf.int32)}, tf.TensorSpec([], tf.int32)))
    >>> batches = batches_by_length(ds, lengths, 2, [32, 64], grouped=True)
    >>> len(batches), [(tuple(f["token_ids"].shape), y.numpy().tolist()) for f, y in batches]
    (3, [((2, 32), [1, 1]), ((2, 64), [1, 1]), ((2, 32), [1, -1])])
    """
    if boundaries is None:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    elif grouped:
        dataset = bucket_by_length(dataset, boundaries, batch_size, drop_remainder=drop_remainder,
                                   label_padding_value=label_padding_value, feature_padding_value=feature_padding_value)
    else:
        dataset = pad_to_boundaries(dataset, boundaries, batch_size, label_padding_value=label_padding_value,
                                    feature_padding_value=feature_padding_value)
    if transform_batches is not None:
        dataset = transform_batches(dataset)
    if fill and boundaries is not None:
        dataset = fill_batches(dataset, batch_size, label_fill_value=label_fill_value)
    grouped = bool(grouped and boundaries is not None)
    num_batches = count_batches_from_lengths(lengths, batch_size, boundaries, grouped=grouped,
                                             drop_remainder=drop_remainder and (grouped or boundaries is None))
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
    return dataset.prefetch(tf.data.AUTOTUNE)


def packed_row_batches(elements, num_rows, rows_in_batch, training=False, seed=None, fixed_batch_size=True,
                       label_fill_value=-1):
    """Batches of packed rows (`batching.packing`): shuffled each epoch in training, `rows_in_batch` rows each.

    `elements` is what `tf.data.Dataset.from_tensor_slices` takes (e.g.
    `(inputs, labels)`); with `fixed_batch_size` the last batch is filled to
    `rows_in_batch` rows (`fill_batches`, labels `label_fill_value`), so every
    batch has one static shape. The dataset carries its cardinality.
    """
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if training:
        dataset = dataset.shuffle(num_rows, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(rows_in_batch)
    if fixed_batch_size:
        dataset = fill_batches(dataset, rows_in_batch, label_fill_value=label_fill_value)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(-(-num_rows // rows_in_batch)))
    return dataset.prefetch(tf.data.AUTOTUNE)
