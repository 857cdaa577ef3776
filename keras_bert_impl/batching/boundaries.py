"""Bucket boundaries for dynamic padding: the one `default_boundaries`, and each task's choice.

A boundary is an inclusive upper bound on the packed length of the examples
of a batch; every batch is padded to one boundary, so a compiled (XLA/JAX)
step sees at most `len(boundaries)` shapes.

`default_boundaries(sequence_length, smallest=32, half_steps_up_to=0)`:
powers of two from `smallest` below `sequence_length`, then
`sequence_length` itself, plus the half steps `3 * b // 2` between the powers
`b >= 32` that are at most `half_steps_up_to` and below `sequence_length`.

Each task's choice is a dict of these keyword arguments:

>>> default_boundaries(128)                             # SPAN_QA_BUCKETS, the generic choice
[32, 64, 128]
>>> default_boundaries(128, **CLASSIFICATION_BUCKETS)  # GLUE: short sentences
[16, 32, 48, 64, 96, 128]
>>> default_boundaries(256, **TAGGING_BUCKETS)         # CoNLL: news sentences, 40-70 pieces
[32, 48, 64, 96, 128, 256]

`merge_sparse_buckets(boundaries, lengths, batch_size)` keeps the boundaries of the buckets that hold at least
`MIN_BATCHES_PER_BUCKET` batches of the data at hand (what the preprocessors' `make_dataset` does with its default
boundaries): each bucket is one more compiled step shape, which costs more than padding a few batches.

`bucket_indices(lengths, boundaries)` is the one bucket choice (the first
boundary >= a length) and `count_batches_from_lengths` the one batch count
(the cardinality of `tf_batches.bucket_by_length` / `pad_to_boundaries` and
the length of `LengthBucketedBatches`) that the tasks and preprocessors use;
`tf_batches` makes the same choice inside the tf.data graph.
"""

import math

import numpy as np

# GLUE sentences are short (CoLA averages 12 word pieces, SST-2 13, STS-B
# pairs 19), so a 16-token bucket and half-steps between the powers of two
# cut padding well below Hugging Face's pad-to-longest batches (on the full
# training sets, 19-46% fewer tokens per epoch).
CLASSIFICATION_BUCKETS = {"smallest": 16, "half_steps_up_to": math.inf}

# A random batch of 32 news sentences is usually 40-70 word pieces long, so
# 32-wide steps would pad most batches by a third: 48 and 96 in between.
TAGGING_BUCKETS = {"smallest": 32, "half_steps_up_to": 96}

# SQuAD windows are long (question + context, up to 384): powers of two.
SPAN_QA_BUCKETS = {"smallest": 32, "half_steps_up_to": 0}


# A bucket of fewer examples than this many batches joins the next one up (`merge_sparse_buckets`). One more
# step shape costs a compilation (JAX and XLA: 10-40 s for a BERT step on a CPU, seconds on a GPU), where padding
# a few batches to the next boundary costs a fraction of a step each. On 32 SST-2 sentences in batches of 8 (MiniLM,
# JAX, 2 shared CPU cores): the first `fit` took 44.3 s with one shape (48) against 97.4 s with three (16, 32, 48);
# each later `fit`, 5.5-6.2 s against 3.3 s (`benchmarks/first_fit_shapes.py`, docs/benchmarks.md).
MIN_BATCHES_PER_BUCKET = 8


def default_boundaries(sequence_length, smallest=32, half_steps_up_to=0):
    """Bucket upper bounds (inclusive): `smallest`, 2*`smallest`, ... capped at `sequence_length`.

    Args:
        sequence_length: positive int, the packed length (the last boundary).
        smallest: the first boundary (if below `sequence_length`).
        half_steps_up_to: also add `3 * b // 2` for every power `b >= 32`
            in the list, where that is <= this and < `sequence_length`
            (0: none; `math.inf`: all).

    Example:
    >>> default_boundaries(128)
    [32, 64, 128]
    >>> default_boundaries(384)
    [32, 64, 128, 256, 384]
    >>> default_boundaries(100, smallest=16, half_steps_up_to=math.inf)
    [16, 32, 48, 64, 96, 100]
    """
    if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 1:
        raise ValueError(f"`sequence_length` must be a positive int, got {sequence_length!r}.")
    powers, value = [], smallest
    while value < sequence_length:
        powers.append(value)
        value *= 2
    halves = {3 * b // 2 for b in powers if b >= 32}
    halves = {h for h in halves if h <= half_steps_up_to and h < sequence_length}
    return sorted(set(powers) | halves | {sequence_length})


def check_boundaries(boundaries):
    """`boundaries` as a list of ints; raises ValueError unless strictly increasing and positive.

    Example:
    >>> check_boundaries((16, 32))
    [16, 32]
    """
    boundaries = [int(b) for b in boundaries]
    if not boundaries or any(b <= 0 for b in boundaries) or sorted(set(boundaries)) != boundaries:
        raise ValueError(f"`boundaries` must be strictly increasing positive ints, got {boundaries!r}.")
    return boundaries


def bucket_indices(lengths, boundaries):
    """For each length, the index of the first boundary >= it (the last bucket for longer ones).

    Example:
    >>> bucket_indices([3, 32, 33, 500], [32, 64, 128]).tolist()
    [0, 0, 1, 2]
    """
    boundaries = np.asarray(boundaries)
    indices = np.searchsorted(boundaries, np.asarray(lengths, dtype=np.int64), side="left")
    return np.minimum(indices, len(boundaries) - 1)


def count_batches_from_lengths(lengths, batch_size, boundaries=None, grouped=False, drop_remainder=False):
    """The number of batches of `batch_size` that `lengths` (one per example) give: the datasets' cardinality.

    In input order (`grouped=False`: `pad_to_boundaries`, plain `batch`):
    `ceil(n / batch_size)`. Grouped by length bucket (`grouped=True`:
    `bucket_by_length`, `LengthBucketedBatches(shuffle=True)`):
    `ceil(count / batch_size)` per non-empty bucket of `boundaries`.
    `drop_remainder` counts whole batches only (`n // batch_size`).

    Example:
    >>> count_batches_from_lengths([3, 40, 5, 50, 7], 2)
    3
    >>> count_batches_from_lengths([3, 40, 5, 50, 7], 2, [32, 64], grouped=True)
    3
    >>> count_batches_from_lengths([3, 40, 5, 50, 7], 2, [32, 64], grouped=True, drop_remainder=True)
    2
    """
    def rounding(n):
        return n // batch_size if drop_remainder else math.ceil(n / batch_size)

    lengths = np.asarray(lengths)
    if not grouped:
        return int(rounding(len(lengths)))
    if boundaries is None:
        raise ValueError("`grouped=True` needs the `boundaries` of the length buckets.")
    return int(sum(rounding(int(n)) for n in np.bincount(bucket_indices(lengths, boundaries)) if n))


def merge_sparse_buckets(boundaries, lengths, batch_size, min_batches=MIN_BATCHES_PER_BUCKET):
    """`boundaries` without those whose bucket (with the sparse buckets below it merged in) holds fewer than
    `min_batches * batch_size` of `lengths`: their examples join the next boundary kept. The boundary of the longest
    example is always kept, and so are those above it (their buckets are empty: no batch, no step shape). A short
    last group keeps its own shape rather than join the group below: that group holds 8 batches or more, which its
    longer padding would cost every epoch (2,000 SST-2 sentences in batches of 32: [16, 32, 64], not [16, 64]).

    Args:
        boundaries: strictly increasing bucket upper bounds.
        lengths: each example's length.
        batch_size: examples per batch.
        min_batches: batches a bucket needs to keep its own step shape.

    Example:
    >>> merge_sparse_buckets([16, 32, 48, 64, 128], [10] * 40 + [20] * 5 + [40] * 30, batch_size=4)
    [16, 48, 64, 128]
    >>> merge_sparse_buckets([16, 32, 48, 128], [10] * 20 + [20] * 5 + [40] * 7, batch_size=8)  # too few for two
    [48, 128]
    >>> merge_sparse_buckets([16, 32, 48, 128], [10] * 64 + [40] * 7, batch_size=8)  # a short last group
    [16, 48, 128]
    """
    lengths = np.asarray(lengths)
    if lengths.size == 0:
        return list(boundaries)
    counts = np.bincount(bucket_indices(lengths, boundaries), minlength=len(boundaries))
    needed = min_batches * batch_size
    highest = int(np.flatnonzero(counts)[-1])
    kept, carried = [], 0
    for index in range(highest + 1):
        carried += int(counts[index])
        if carried >= needed or index == highest:
            kept.append(boundaries[index])
            carried = 0
    return kept + [boundary for boundary in boundaries if boundary > kept[-1]]
