"""Step 3, batches: a GLUE split -> length-bucketed batches, for tf.data or (the NumPy twin) any backend.

- `make_dataset(split, preprocessor, batch_size, ...)`: a `tf.data.Dataset`
  of `(features, label[, weight])` for `BertClassifier`, tokenized on the fly.
- `make_packed_dataset(split, preprocessor, batch_size, training, seed)`:
  batches of packed rows (several examples per row, `batching.packing`) for
  `BertClassifier.packed_training_model()`.
- `make_array_batches(inputs, labels, batch_size, ...)`: the same batches from
  already tokenized examples as a `LengthBucketedBatches` (no TensorFlow:
  for JAX or PyTorch hosts).

Both use `CLASSIFICATION_BUCKETS` (16, 32, 48, 64, 96, 128 for 128 tokens):

>>> from keras_bert_impl.batching.boundaries import default_boundaries
>>> default_boundaries(128, **CLASSIFICATION_BUCKETS)
[16, 32, 48, 64, 96, 128]
"""

import numpy as np

from keras_bert_impl.batching.boundaries import CLASSIFICATION_BUCKETS, default_boundaries
from keras_bert_impl.batching.packing import first_token_targets, pack_rows, packed_arrays, rows_per_batch
from keras_bert_impl.tasks.classification.features import encode_examples, encode_texts, example_lengths, split_texts
from keras_bert_impl.tasks.old_keywords import check_training, renamed


def make_dataset(
    split,
    preprocessor,
    batch_size,
    training=False,
    seed=None,
    *,
    boundaries=None,
    drop_remainder=False,
    fixed_batch_size=True,
    shuffle_buffer=None,
    cache=True,
    shuffle_seed=None,
):
    """A `tf.data.Dataset` of `(features, label[, weight])` batches (features only for test splits).

    Training batches are shuffled and length-bucketed (`bucket_by_length`:
    each batch padded to its bucket's boundary); evaluation batches keep the
    file's order and are padded to the smallest boundary holding their
    longest example (`pad_to_boundaries`).

    Args:
        split: a `GlueSplit`.
        preprocessor: a `keras_bert_impl.BertClassifierPreprocessor`
            (strings -> unpadded token_ids/segment_ids/padding_mask).
        batch_size: int.
        training: shuffle + bucket (order changes) if True.
        seed: seed of the shuffle (old name: `shuffle_seed`, still taken).
        boundaries: bucket boundaries; default `default_boundaries(preprocessor.sequence_length, **CLASSIFICATION_BUCKETS)`
            (16, 32, 48, 64, 96, 128 for 128 tokens).
        drop_remainder: for training, drop partial batches.
        fixed_batch_size: every batch has exactly `batch_size` rows, so an
            XLA-compiled step sees one shape per boundary instead of
            recompiling for each bucket's last, partial batch. Batches then
            are `(features, label, weight)`: the missing rows are copies of
            the batch's first example with label 0 and weight 0 (the
            classifier's loss divides by the sum of the weights, so the mean
            is over the real rows; Keras metrics skip weight-0 rows). Test
            batches (no labels) are filled the same way; their filler rows
            come last: keep the first `len(split)` predictions.
        shuffle_buffer: default: the whole split.
        cache: keep the tokenized examples in memory after the first pass
            (training epochs and repeated dev evaluations reuse them) (token ids only: about 12 bytes per token, e.g. 20 MB
            for SST-2, 200 MB for MNLI).

    The dataset carries its exact cardinality (`len(dataset)`, `count_batches_from_lengths`),
    so Keras progress bars show the real number of steps. For training it
    needs every example's length, so the split is tokenized once more, up front.
    """
    import tensorflow as tf

    from keras_bert_impl.batching.tf_batches import batches_by_length

    seed = renamed("make_dataset", "shuffle_seed", shuffle_seed, "seed", seed, None)
    if boundaries is None:
        boundaries = default_boundaries(preprocessor.sequence_length, **CLASSIFICATION_BUCKETS)
    texts = split_texts(split)
    inputs = tuple(tf.constant(t, dtype=tf.string) for t in texts)
    if split.labels is not None:
        dataset = tf.data.Dataset.from_tensor_slices((inputs, split.labels))
    else:
        dataset = tf.data.Dataset.from_tensor_slices((inputs,))

    # Tokenize in batches (much faster than one string at a time), then unbatch
    # to variable-length examples for padding by bucket.
    def tokenize(texts, *label):
        return (encode_texts(preprocessor, texts), *label)

    dataset = dataset.batch(256).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    if cache:
        # Tokenize once: later epochs (and each epoch's dev evaluation) reuse the
        # cached token ids instead of re-running WordPiece on every string.
        dataset = dataset.cache()
    if training:
        dataset = dataset.shuffle(shuffle_buffer or max(1, len(split)), seed=seed, reshuffle_each_iteration=True)
    if split.labels is None:
        dataset = dataset.map(lambda features: features)
    elif fixed_batch_size:  # every example weighs 1, the filler rows of a filled batch (label 0) 0
        dataset = dataset.map(lambda features, label: (features, label, tf.constant(1.0, tf.float32)))
    lengths = example_lengths(split, preprocessor) if training else np.zeros(len(split_texts(split)[0]))
    return batches_by_length(dataset, lengths, batch_size, boundaries, grouped=training, fill=fixed_batch_size,
                             label_fill_value=0, drop_remainder=drop_remainder and training)


def make_packed_dataset(split, preprocessor, batch_size, training=True, seed=None, *, fixed_batch_size=True):
    """Batches of packed rows: `(inputs, targets, weights)` for `packed_training_model()`.

    The split is tokenized up front (`encode_examples`) and packed once (`pack_rows`, with `seed`) into rows of
    `preprocessor.sequence_length` tokens, several examples per row, numbered in `padding_mask`. With
    `training` (the default: packing is for training) the rows are shuffled every epoch; `training=False` keeps
    one order (the loss of a labelled split). Each example's label sits on its first token ([CLS]) with weight 1
    (`first_token_targets`; regression targets get a last axis of 1); the classifier's loss averages over the
    weights, so it is the mean over the examples, as unpacked. A batch holds `rows_per_batch` rows,
    `batch_size` examples on average, so an epoch has as many steps as unpacked; every batch has one static
    shape (the last one is filled with weight-0 rows).
    """
    from keras_bert_impl.batching.tf_batches import packed_row_batches

    training = check_training("make_packed_dataset", training)
    if split.labels is None:
        raise ValueError(f"{split.path}: no labels (a test split): packed batches are for training")
    sequence_length = preprocessor.sequence_length
    examples = encode_examples(split, preprocessor)
    lengths = [len(ids) for ids in examples["token_ids"]]
    rows = pack_rows(lengths, sequence_length, seed=seed)
    inputs = packed_arrays(examples, rows, sequence_length)
    targets, weights = first_token_targets(rows, lengths, np.asarray(split.labels), sequence_length)
    if np.issubdtype(targets.dtype, np.floating):
        targets = targets[..., None]  # regression: one score per position, like the model's output
    return packed_row_batches((inputs, targets, weights), len(rows), rows_per_batch(batch_size, len(lengths), len(rows)),
                              training=training, seed=seed, fixed_batch_size=fixed_batch_size, label_fill_value=0)


def make_array_batches(inputs, labels, batch_size, training=False, seed=0, *, boundaries=None, fixed_batch_size=True,
                       sequence_length=128):
    """`make_dataset` without TensorFlow: a `LengthBucketedBatches` over tokenized examples.

    Args:
        inputs: dict of `token_ids`, `segment_ids`, `padding_mask`, each a
            list of 1-D int arrays (one per example, unpadded).
        labels: 1-D array of class ids or scores, or None (prediction).
        batch_size: int.
        training: shuffle (a new seeded order each epoch) and group by bucket.
        seed: shuffle seed.
        boundaries: default `default_boundaries(sequence_length, **CLASSIFICATION_BUCKETS)`.
        fixed_batch_size: fill each last, partial batch with weight-0 rows.
        sequence_length: the packed length (the last boundary).
    """
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches

    training = check_training("make_array_batches", training)
    if boundaries is None:
        boundaries = default_boundaries(sequence_length, **CLASSIFICATION_BUCKETS)
    return LengthBucketedBatches(inputs, labels, batch_size=batch_size, boundaries=boundaries, shuffle=training,
                                 seed=seed, fixed_batch_size=fixed_batch_size)
