"""Step 3, batches: CoNLL windows -> `tf.data` batches for `BertTokenClassifier`, or the NumPy twin.

- `make_dataset(features, batch_size, ...)`: `tf.data` of
  `({"token_ids", "segment_ids", "padding_mask"}, labels)` batches, with
  optional length buckets (`TAGGING_BUCKETS`: 32, 48, 64, 96, then the sequence length).
- `make_array_batches(features, batch_size, ...)`: the same batches as a
  `LengthBucketedBatches` (no TensorFlow: JAX or PyTorch hosts).
- `make_packed_dataset(features, batch_size, ...)`: `tf.data` batches of rows of
  `sequence_length` tokens that each hold several windows (`packed_features`,
  `batching.packing`), so that almost no token is padding; the model keeps
  the windows apart, so the loss is the same as on unpacked batches
  (`make_array_batches(..., packing=True)`: the same rows without TensorFlow).

>>> from keras_bert_impl.batching.boundaries import default_boundaries
>>> default_boundaries(128, **TAGGING_BUCKETS)
[32, 48, 64, 96, 128]
"""

import numpy as np

from keras_bert_impl.batching.boundaries import TAGGING_BUCKETS, default_boundaries
from keras_bert_impl.batching.packing import pack_rows, packed_arrays, rows_per_batch
from keras_bert_impl.tasks.old_keywords import check_training, renamed
from keras_bert_impl.tasks.tagging.reading import IGNORE_LABEL


def make_dataset(
    features,
    batch_size,
    training=False,
    seed=None,
    *,
    boundaries=None,
    drop_remainder=False,
    fixed_batch_size=True,
    with_labels=True,
    group_by_length=False,
    shuffle=None,
    packing=False,
):
    """A `tf.data.Dataset` of `(inputs, labels)` batches for `BertTokenClassifier`.

    `inputs` is `{"token_ids", "segment_ids", "padding_mask"}`; labels are -1
    where ignored (the model's loss uses `ignore_class=-1`).

    Args:
        features: `ConllFeatures`.
        batch_size: int.
        training: shuffle windows (each epoch anew) (old name: `shuffle`,
            still taken); labels come with `with_labels`.
        seed: shuffle seed.
        boundaries: None (every batch has `sequence_length` tokens: static
            shapes, e.g. for TPU) or increasing length buckets such as
            `default_boundaries(128)`: each batch is padded only to the
            smallest boundary that holds its longest window.
        group_by_length: with `training` and `boundaries`, batch windows of
            one length bucket together (`tf_batches.bucket_by_length`:
            least padding). Off by default: the token-level loss is the mean
            over a batch's labelled words, so grouping would give each word of
            a short sentence (tables, headlines) several times the weight of a
            word in a long news sentence; random batches keep the weighting of
            the reference implementations. Measured, one epoch, one seed:
            grouped dev/test F1 0.824/0.787 at 21.0 seq/s, random 0.828/0.791
            at 16.5 seq/s (Hugging Face: 0.835/0.798 at 21.6 seq/s).
        drop_remainder: static batch size (fixed-shape mode only).
        fixed_batch_size: with `boundaries`, fill each bucket's last, partial
            batch up to `batch_size` rows (`tf_batches.fill_batches`: copies
            of a real window, labels -1 in training; in prediction the filler
            rows come last and `predict_token_label_ids` drops them), so an
            XLA-compiled step sees one shape per bucket.
        with_labels: yield `(inputs, labels)` or `inputs` only.
        packing: `make_packed_dataset`'s batches instead (the earlier way to ask for them, still taken);
            `boundaries` and `group_by_length` do not apply.

    Returns:
        A batched `tf.data.Dataset` with its exact cardinality (`len(dataset)`,
        so Keras progress bars show the real number of steps; `count_batches_from_lengths`).
    """
    import tensorflow as tf

    from keras_bert_impl.batching import tf_batches

    training = renamed("make_dataset", "shuffle", shuffle, "training", training, False)
    if packing:
        return make_packed_dataset(features, batch_size, training, seed, fixed_batch_size=fixed_batch_size,
                                   with_labels=with_labels)
    tensors = {
        "token_ids": features.token_ids,
        "segment_ids": features.segment_ids,
        "padding_mask": features.padding_mask,
    }
    elements = (tensors, features.labels) if with_labels else tensors
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if boundaries is not None:
        lengths = tf.data.Dataset.from_tensor_slices(features.lengths)

        def trim(element, length):
            if with_labels:
                inputs, labels = element
                return {k: v[:length] for k, v in inputs.items()}, labels[:length]
            return {k: v[:length] for k, v in element.items()}

        dataset = tf.data.Dataset.zip((dataset, lengths)).map(trim)
    if training:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
    return tf_batches.batches_by_length(
        dataset, features.lengths, batch_size, boundaries, grouped=training and group_by_length,
        fill=fixed_batch_size, label_fill_value=IGNORE_LABEL, label_padding_value=IGNORE_LABEL,
        drop_remainder=drop_remainder and boundaries is None,  # (fixed-shape mode only)
    )


def make_packed_dataset(features, batch_size, training=True, seed=None, *, fixed_batch_size=True, with_labels=True):
    """A `tf.data.Dataset` of packed rows: `(inputs, labels)` batches (`inputs` only without `with_labels`).

    Several windows share each row of `sequence_length` tokens (`packed_features`; packed once, with `seed`).
    With `training`, the default, the rows are shuffled each epoch; `training=False` keeps one order. A batch
    holds `batching.packing.rows_per_batch` rows, which carry `batch_size` windows on average (so an epoch has
    as many steps as unpacked), has one static shape and almost no padding. `BertTokenClassifier` trains on
    them as they are: its labels are per token, -1 on padding. For training and evaluating the loss;
    predictions are read from unpacked batches (`make_dataset`).
    """
    from keras_bert_impl.batching.tf_batches import packed_row_batches

    training = check_training("make_packed_dataset", training)
    packed = packed_features(features, seed=seed, with_labels=with_labels)
    inputs = {k: packed[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    num_rows = len(packed["token_ids"])
    return packed_row_batches((inputs, packed["labels"]) if with_labels else inputs, num_rows,
                              rows_per_batch(batch_size, len(features), num_rows), training=training, seed=seed,
                              fixed_batch_size=fixed_batch_size, label_fill_value=IGNORE_LABEL)


def packed_features(features, seed=None, with_labels=True):
    """`ConllFeatures` windows packed into rows of `sequence_length` tokens: a dict of int32 arrays.

    Keys `token_ids, segment_ids, padding_mask` (example ids 1, 2, ... per
    row, 0 for padding) and, `with_labels`, `labels` (-1 on padding). Rows are
    `batching.packing.pack_rows`'s (best-fit decreasing, ties in `seed`'s order).

    >>> import numpy as np
    >>> from keras_bert_impl.tasks.tagging.features import ConllFeatures
    >>> ids = np.array([[2, 5, 3, 0, 0, 0, 0, 0], [2, 6, 3, 0, 0, 0, 0, 0]], "int32")
    >>> labels = np.where(ids == 5, 1, -1).astype("int32")
    >>> features = ConllFeatures(ids, np.zeros_like(ids), (ids > 0).astype("int32"), labels,
    ...                          sentence_index=np.array([0, 1]), word_index=np.full_like(ids, -1),
    ...                          lengths=np.array([3, 3]))
    >>> packed = packed_features(features)
    >>> packed["token_ids"].tolist(), packed["padding_mask"].tolist()
    ([[2, 5, 3, 2, 6, 3, 0, 0]], [[1, 1, 1, 2, 2, 2, 0, 0]])
    >>> packed["labels"].tolist()
    [[-1, 1, -1, -1, -1, -1, -1, -1]]
    """
    sequence_length = features.token_ids.shape[1]
    lengths = np.asarray(features.lengths)
    names = ["token_ids", "segment_ids"] + (["labels"] if with_labels else [])
    examples = {name: [getattr(features, name)[i, : lengths[i]] for i in range(len(features))] for name in names}
    rows = pack_rows(lengths, sequence_length, seed=seed)
    return packed_arrays(examples, rows, sequence_length, padding_values={"labels": IGNORE_LABEL})


def make_array_batches(features, batch_size, training=False, seed=0, *, boundaries=None, fixed_batch_size=True,
                       with_labels=True, shuffle=None, packing=False):
    """`make_dataset` without TensorFlow: a `LengthBucketedBatches` (`keras.utils.PyDataset`) for JAX/PyTorch.

    Windows are trimmed to their length; `boundaries` default to
    `default_boundaries(sequence_length, **TAGGING_BUCKETS)`; labels are -1 off
    the first pieces and on filler rows. `training` (old name: `shuffle`, still
    taken): a new seeded order each epoch, grouped by length bucket.
    `packing`: rows of `sequence_length` tokens that hold several windows
    each (`packed_features`), `batch_size` windows per batch on average, as in `make_dataset`.
    """
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches

    training = check_training("make_array_batches", renamed("make_array_batches", "shuffle", shuffle, "training",
                                                            training, False))
    sequence_length = features.token_ids.shape[1]
    if packing:
        packed = packed_features(features, seed=seed, with_labels=with_labels)
        inputs = {k: list(packed[k]) for k in ("token_ids", "segment_ids", "padding_mask")}
        labels = list(packed["labels"]) if with_labels else None
        rows = rows_per_batch(batch_size, len(features), len(packed["token_ids"]))
        return LengthBucketedBatches(inputs, labels, batch_size=rows, boundaries=[sequence_length],
                                     shuffle=training, seed=seed, fixed_batch_size=fixed_batch_size,
                                     label_fill_value=IGNORE_LABEL if with_labels else None)
    boundaries = list(boundaries or default_boundaries(sequence_length, **TAGGING_BUCKETS))
    lengths = features.lengths
    inputs = {
        k: [v[i, : lengths[i]] for i in range(len(features))]
        for k, v in (("token_ids", features.token_ids), ("segment_ids", features.segment_ids),
                     ("padding_mask", features.padding_mask))
    }
    labels = [features.labels[i, : lengths[i]] for i in range(len(features))] if with_labels else None
    return LengthBucketedBatches(inputs, labels, batch_size=batch_size, boundaries=boundaries, shuffle=training,
                                 seed=seed, fixed_batch_size=fixed_batch_size,
                                 label_fill_value=IGNORE_LABEL if with_labels else None)
