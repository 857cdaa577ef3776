"""Step 3, batches: SQuAD windows -> length-bucketed `tf.data` batches, or the NumPy twin (no TensorFlow).

`SPAN_QA_BUCKETS`: powers of two up to the sequence length (32, 64, 128, 256, 384).

`PredictionBatches(features, batch_size)`: the batches `predict_logits`
feeds the model, NumPy on every backend: windows grouped by length bucket
(the training buckets), every batch `batch_size` rows, so the model sees at
most `len(boundaries)` shapes, each padded no wider than its longest window's
bucket.

`PackedPredictionBatches(features, batch_size)`: the same windows packed
several to a row of `sequence_length` (`keras_bert_impl.batching.packing`),
every batch `batch_size` such rows: one shape in all and almost no padding
(SQuAD v1.1 dev: 2.7% of the packed tokens against 27.5% in length buckets).
"""

import numpy as np

from keras_bert_impl.batching.boundaries import (
    SPAN_QA_BUCKETS,
    bucket_indices,
    check_boundaries,
    default_boundaries,
)
from keras_bert_impl.batching.packing import pack_rows, packed_arrays, rows_per_batch
from keras_bert_impl.tasks.old_keywords import check_training, renamed


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

    from keras_bert_impl.batching.tf_batches import batches_by_length

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
    # (prediction batches have no labels: only their features are filled)
    return batches_by_length(dataset, features.lengths, batch_size, boundaries, grouped=training,
                             fill=fixed_batch_size, label_fill_value=-1)


def packed_training_rows(features, seed=None):
    """The training windows packed several to a row: `(inputs, labels, examples_per_row)`.

    `pack_rows` (with `seed`) puts the windows into rows of the features'
    `sequence_length`; `inputs` are the rows' `{"token_ids", "segment_ids",
    "padding_mask"}` (windows numbered 1, 2, ... in `padding_mask`) and
    `labels` `{"start_logits", "end_logits"}`, int32 `(rows,
    examples_per_row)`: window `k + 1`'s answer start and end as positions in
    the row (its own [CLS] when the answer is not in it), -1 where a row has
    fewer windows. This is what `BertSpanExtractor.packed_training_model(examples_per_row)`
    trains on.
    """
    sequence_length = features.token_ids.shape[1]
    lengths = np.asarray(features.lengths)
    rows = pack_rows(lengths, sequence_length, seed=seed)
    inputs = packed_arrays(_window_tokens(features), rows, sequence_length)
    examples_per_row = max(len(row) for row in rows)
    labels = {name: np.full((len(rows), examples_per_row), -1, np.int32) for name in ("start_logits", "end_logits")}
    for r, row in enumerate(rows):
        offset = 0
        for k, i in enumerate(row):
            labels["start_logits"][r, k] = offset + features.start_positions[i]
            labels["end_logits"][r, k] = offset + features.end_positions[i]
            offset += int(lengths[i])
    return inputs, labels, examples_per_row


def make_packed_dataset(features, batch_size, training=True, seed=None, *, fixed_batch_size=True):
    """Batches of packed rows for `packed_training_model`: `(dataset, examples_per_row)`.

    `features` are training windows (`encode_examples(..., is_training=True)`: they carry their answers). The
    windows are packed once (`packed_training_rows`, with `seed`). With `training` (the default: packing is for
    training) the rows are shuffled every epoch; `training=False` keeps one order (the loss of a labelled split).
    `examples_per_row` (the most windows a row holds) sizes the packed model's per-window outputs. A batch holds
    `rows_per_batch` rows, `batch_size` windows on average, so an epoch has as many optimizer steps as unpacked
    (each much cheaper: almost no padding); the loss is the mean over the batch's windows, as unpacked. Every
    batch has one static shape: the last one is filled with rows labelled -1, which `SpanLoss` ignores.
    """
    from keras_bert_impl.batching.tf_batches import packed_row_batches

    training = check_training("make_packed_dataset", training)
    if len(features) == 0:
        raise ValueError("no training windows to pack")
    inputs, labels, examples_per_row = packed_training_rows(features, seed=seed)
    num_rows = len(inputs["token_ids"])
    dataset = packed_row_batches((inputs, labels), num_rows, rows_per_batch(batch_size, len(features), num_rows),
                                 training=training, seed=seed, fixed_batch_size=fixed_batch_size, label_fill_value=-1)
    return dataset, examples_per_row


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


class _PlannedBatches:
    """What both prediction batchings derive from their plan's `batch_shapes()`."""

    def batch_shapes(self):
        raise NotImplementedError

    @property
    def shapes(self):
        """The distinct `(rows, width)` input shapes, in order of first use: one compilation each under XLA."""
        return list(dict.fromkeys(self.batch_shapes()))

    @property
    def token_slots(self):
        """Token positions the model computes over all batches, padding and filler rows included."""
        return sum(rows * width for rows, width in self.batch_shapes())


def _window_tokens(features):
    """Each window's real `token_ids` and `segment_ids`, unpadded (what `packed_arrays` packs)."""
    lengths = np.asarray(features.lengths)
    return {name: [values[i, : lengths[i]] for i in range(len(lengths))]
            for name, values in (("token_ids", features.token_ids), ("segment_ids", features.segment_ids))}


class PredictionBatches(_PlannedBatches):
    """The prediction batches of `features`: iterate for `(rows, inputs)`, one pair per forward pass.

    `rows` are the indices (into `features`) of the batch's real windows and
    `inputs` the model inputs `{"token_ids", "segment_ids", "padding_mask"}`,
    NumPy int32 `(batch_size, width)`: rows `len(rows):` are filler copies of
    the batch's first window (with `fixed_batch_size`, the default) whose
    outputs the caller drops; `width` is the smallest of `boundaries`
    holding the batch's longest window.

    With `sort_by_length` (default) the windows are taken bucket by bucket
    (a stable sort of their bucket index, so input order within a bucket),
    then cut into batches: at most `len(boundaries)` distinct shapes, and
    one partial (filled) batch in all, the first, which holds the shortest
    windows, so that its filler rows cost the fewest tokens. Windows padded in one batch with
    longer ones keep their own logits: rows do not interact and padded
    positions are masked, so only float rounding of the narrower or wider
    matrix products differs (below 1e-5 for MiniLM). `sort_by_length=False`
    keeps the input order (the batches of `make_array_batches` /
    `make_dataset` for prediction): on SQuAD almost every batch of 64 then
    holds one 384-token window and is padded to 384.

    Example:
    >>> import types
    >>> lengths = np.array([40, 300, 50, 120, 60])
    >>> features = types.SimpleNamespace(lengths=lengths, token_ids=np.zeros((5, 384), np.int32),
    ...     inputs=lambda: {"token_ids": np.zeros((5, 384), np.int32)})
    >>> batches = PredictionBatches(features, batch_size=2)
    >>> [(rows.tolist(), inputs["token_ids"].shape) for rows, inputs in batches]
    [([0], (2, 64)), ([2, 4], (2, 64)), ([3, 1], (2, 384))]
    >>> batches.shapes
    [(2, 64), (2, 384)]
    """

    def __init__(self, features, batch_size, *, boundaries=None, sort_by_length=True, fixed_batch_size=True):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        self.features = features
        self.batch_size = batch_size
        self.fixed_batch_size = fixed_batch_size
        sequence_length = features.token_ids.shape[1]
        self.boundaries = check_boundaries(boundaries or default_boundaries(sequence_length, **SPAN_QA_BUCKETS))
        lengths = np.asarray(features.lengths)
        buckets = bucket_indices(lengths, self.boundaries)
        if sort_by_length:
            order = np.argsort(buckets, kind="stable")
            cuts = list(range(len(order) % batch_size or batch_size, len(order), batch_size))  # partial batch first
        else:
            order = np.arange(len(lengths))
            cuts = list(range(batch_size, len(order), batch_size))
        self.plan = [(rows, self.boundaries[int(buckets[rows].max())]) for rows in np.split(order, cuts) if len(rows)]

    def __len__(self):
        return len(self.plan)

    def batch_shapes(self):
        """Each batch's `(rows, width)`, in order."""
        return [(self.batch_size if self.fixed_batch_size else len(r), width) for r, width in self.plan]

    def __iter__(self):
        inputs = self.features.inputs()
        for rows, width in self.plan:
            taken = rows
            if self.fixed_batch_size and len(rows) < self.batch_size:
                taken = np.concatenate([rows, np.full(self.batch_size - len(rows), rows[0])])
            yield rows, {name: np.ascontiguousarray(values[taken, :width]) for name, values in inputs.items()}


class PackedPredictionBatches(_PlannedBatches):
    """Prediction batches of packed rows: iterate for `(placements, inputs)`, one pair per forward pass.

    The windows are packed several to a row of the features' `sequence_length`
    (`pack_rows`: best-fit decreasing, deterministic), and the rows cut into
    as few batches as `batch_size` rows a batch allow, all of one size
    (`rows_per_batch`, at most `batch_size`: 74 rows at `batch_size=32` make
    3 batches of 25); the last batch is filled with copies of its first row
    (with `fixed_batch_size`, the default; fewer filler rows in all than batches), so
    a compiled predict step sees one shape. `inputs` holds `{"token_ids", "segment_ids",
    "padding_mask"}`, int32 `(rows_per_batch, sequence_length)`, with the windows
    of a row numbered in `padding_mask` (1, 2, ...; 0 for padding): the
    backbone keeps them apart (block-diagonal attention, positions restarting
    at each window) and `SpanHead` masks each window's own question and
    [SEP]s, so each window's logits equal its logits alone in a row (within
    float rounding; `tests/test_squad_prediction.py`). It needs the backbone's
    `attention_padding="mask"`.

    `placements` is an int `(windows, 4)` array, one line a window of the
    batch: its index into `features`, its row in the batch, its first
    position in that row, and its length.

    Example:
    >>> import types
    >>> lengths = np.array([3, 5, 2, 4])
    >>> ids = np.zeros((4, 8), np.int32)
    >>> for i, n in enumerate(lengths):
    ...     ids[i, :n] = i + 1
    >>> features = types.SimpleNamespace(lengths=lengths, token_ids=ids, segment_ids=np.zeros_like(ids))
    >>> batches = PackedPredictionBatches(features, batch_size=2)
    >>> [(placements.tolist(), inputs["token_ids"].tolist()) for placements, inputs in batches]
    [([[1, 0, 0, 5], [0, 0, 5, 3], [3, 1, 0, 4], [2, 1, 4, 2]], [[2, 2, 2, 2, 2, 1, 1, 1], [4, 4, 4, 4, 3, 3, 0, 0]])]
    >>> batches.shapes, batches.token_slots, int(lengths.sum())
    ([(2, 8)], 16, 14)
    """

    def __init__(self, features, batch_size, *, fixed_batch_size=True):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        self.features = features
        self.batch_size = batch_size
        self.fixed_batch_size = fixed_batch_size
        self.sequence_length = features.token_ids.shape[1]
        self.lengths = np.asarray(features.lengths)
        rows = pack_rows(self.lengths, self.sequence_length)
        # As few batches as `batch_size` allows, all of one size: one shape, fewer filler rows than batches.
        self.rows_per_batch = -(-len(rows) // -(-len(rows) // batch_size)) if rows else batch_size
        self.plan = [rows[i : i + self.rows_per_batch] for i in range(0, len(rows), self.rows_per_batch)]

    def __len__(self):
        return len(self.plan)

    def batch_shapes(self):
        """Each batch's `(rows, width)`, in order: one shape with `fixed_batch_size`."""
        return [(self.rows_per_batch if self.fixed_batch_size else len(r), self.sequence_length) for r in self.plan]

    def __iter__(self):
        lengths = self.lengths
        windows = _window_tokens(self.features)
        for rows in self.plan:
            taken = rows
            if self.fixed_batch_size and len(rows) < self.rows_per_batch:
                taken = rows + [rows[0]] * (self.rows_per_batch - len(rows))
            placements = []
            for r, row in enumerate(rows):
                offset = 0
                for i in row:
                    placements.append((i, r, offset, int(lengths[i])))
                    offset += int(lengths[i])
            yield np.asarray(placements, dtype=np.int64).reshape(-1, 4), packed_arrays(
                windows, taken, self.sequence_length
            )
