"""Sequence packing: several short examples in one row of `sequence_length` tokens.

Padding costs as much compute as real tokens. Packing puts several examples
one after another in a row, so that a batch is nearly all real tokens, and
numbers them in the row's `padding_mask` (1, 2, ...; 0 for padding). The
model keeps them apart: a token attends only to its own example, and its
position ids restart at 0 (`keras_bert_impl.layers.packed_examples`), so every
example's outputs equal its outputs alone in a row (tests/test_packing.py).
Only token-level heads read packed rows correctly: token tagging and the MLM
head; the pooled output and the span head see one example per row.

- `pack_rows(lengths, sequence_length, seed)`: which examples share a row
  (best-fit decreasing: fills rows to 97-99% on real data sets).
- `packed_arrays(examples, rows, sequence_length)`: the rows as arrays.
- `first_token_targets(rows, lengths, values, sequence_length)`: one target
  per example (a class, a score) placed on its first token, weight 1 there and
  0 elsewhere: a sequence classifier trains on packed rows through
  `BertClassifier.packed_training_model()`.
- `rows_per_batch(batch_size, num_examples, num_rows)`: how many packed rows
  hold `batch_size` examples on average, so that a packed epoch has as many
  optimizer steps, of as many examples, as an unpacked one.

NumPy only (no TensorFlow, no Keras), so any host pipeline may use it.

Example:
>>> rows = pack_rows([5, 3, 2, 4], sequence_length=8)
>>> rows
[[0, 1], [3, 2]]
>>> arrays = packed_arrays({"token_ids": [[1] * 5, [2] * 3, [3] * 2, [4] * 4]}, rows, 8)
>>> arrays["token_ids"].tolist()
[[1, 1, 1, 1, 1, 2, 2, 2], [4, 4, 4, 4, 3, 3, 0, 0]]
>>> arrays["padding_mask"].tolist()
[[1, 1, 1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 2, 2, 0, 0]]
"""

import numpy as np


def pack_rows(lengths, sequence_length, seed=None):
    """Groups examples into rows of at most `sequence_length` tokens; returns lists of example indices.

    Best-fit decreasing: the longest example first, each into the fullest row
    that still has room for it. With `seed`, examples of equal length are
    taken in a seeded random order, so rows differ from seed to seed.

    Raises:
        ValueError: an example is empty or longer than `sequence_length`
            (its index and length are named).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise ValueError(f"`lengths` must be a list of ints, got shape {lengths.shape}.")
    if isinstance(sequence_length, bool) or not isinstance(sequence_length, (int, np.integer)) or sequence_length < 1:
        raise ValueError(f"`sequence_length` must be a positive int, got {sequence_length!r}.")
    bad = np.flatnonzero((lengths < 1) | (lengths > sequence_length))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"example {i} has {int(lengths[i])} tokens: every example to pack needs 1 to "
            f"sequence_length={sequence_length} tokens ({len(bad)} do not)."
        )
    order = np.arange(len(lengths))
    if seed is not None:
        order = np.random.default_rng(seed).permutation(len(lengths))
    order = order[np.argsort(-lengths[order], kind="stable")]
    rows = []
    rows_by_room = [[] for _ in range(sequence_length + 1)]  # room left -> rows with that much room
    for i in order.tolist():
        length = int(lengths[i])
        row = None
        for room in range(length, sequence_length):
            if rows_by_room[room]:
                row = rows_by_room[room].pop()
                break
        if row is None:
            rows.append([])
            row, room = len(rows) - 1, sequence_length
        rows[row].append(i)
        rows_by_room[room - length].append(row)
    return rows


def packed_arrays(examples, rows, sequence_length, padding_values=None):
    """The packed rows as `(len(rows), sequence_length)` arrays, plus the example-id `padding_mask`.

    Args:
        examples: dict name -> list of 1-D sequences (one per example, its real
            tokens only), e.g. `token_ids`, `segment_ids`, `labels`. A given
            `padding_mask` entry is ignored: the output's holds example ids.
        rows: `pack_rows`'s lists of example indices.
        sequence_length: int, the row length.
        padding_values: dict name -> value for the padding after the last
            example of a row (default 0; use -1 for ignored labels).

    Returns:
        dict name -> int32 array, with `padding_mask` 1, 2, ... for the row's
        first, second, ... example and 0 for padding.
    """
    padding_values = dict(padding_values or {})
    names = [name for name in examples if name != "padding_mask"]
    arrays = {
        name: np.full((len(rows), sequence_length), padding_values.get(name, 0), dtype=np.int32) for name in names
    }
    example_ids = np.zeros((len(rows), sequence_length), dtype=np.int32)
    for r, row in enumerate(rows):
        start = 0
        for number, i in enumerate(row, start=1):
            length = len(examples[names[0]][i]) if names else 0
            if start + length > sequence_length:
                raise ValueError(f"row {r} holds {start + length} tokens, more than sequence_length={sequence_length}.")
            for name in names:
                values = examples[name][i]
                if len(values) != length:
                    raise ValueError(f"example {i}: `{name}` has {len(values)} values, `{names[0]}` has {length}.")
                arrays[name][r, start : start + length] = values
            example_ids[r, start : start + length] = number
            start += length
    arrays["padding_mask"] = example_ids
    return arrays


def first_token_targets(rows, lengths, values, sequence_length):
    """Per-token targets and weights of packed rows: example `i`'s `values[i]` on its first token ([CLS]).

    Returns `(targets, weights)`, both `(len(rows), sequence_length)` (targets with `values`' trailing axes, e.g. a
    multi-label classifier's classes): targets have `values`' dtype (0 off the first tokens), weights are float32,
    1 on each example's first token and 0 elsewhere, so that a loss averaged
    over the weights (`reduction="mean_with_sample_weight"`) is the mean over
    the examples, as on unpacked rows.

    >>> targets, weights = first_token_targets([[0, 1], [2]], [3, 2, 4], [7, 8, 9], 6)
    >>> targets.tolist(), weights.tolist()
    ([[7, 0, 0, 8, 0, 0], [9, 0, 0, 0, 0, 0]], [[1.0, 0.0, 0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    """
    values = np.asarray(values)
    targets = np.zeros((len(rows), sequence_length, *values.shape[1:]), dtype=values.dtype)
    weights = np.zeros((len(rows), sequence_length), dtype=np.float32)
    for r, row in enumerate(rows):
        start = 0
        for i in row:
            targets[r, start] = values[i]
            weights[r, start] = 1.0
            start += int(lengths[i])
    return targets, weights


def rows_per_batch(batch_size, num_examples, num_rows):
    """Packed rows per batch that hold `batch_size` examples on average (at least 1).

    `batch_size` keeps its meaning, examples per optimizer step, whether the
    rows are packed or not; so do the steps per epoch and the learning-rate
    schedule. Each step is cheaper: fewer rows, nearly no padding.

    >>> rows_per_batch(32, num_examples=14987, num_rows=2503)
    5
    """
    if num_examples < 1 or num_rows < 1:
        raise ValueError(f"nothing to batch: {num_examples} examples in {num_rows} rows.")
    return max(1, round(batch_size * num_rows / num_examples))


def padding_fraction(lengths, rows, sequence_length):
    """The share of a packed epoch's tokens that are padding."""
    return 1.0 - float(np.sum(lengths)) / (len(rows) * sequence_length)
