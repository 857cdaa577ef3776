"""SQuAD v2.0 "no answer": the one null rule of `BertSpanExtractor.answer` and `tasks/span_qa/prediction.py`.

The null answer is the [CLS] span: a window's null score is
`start_logit[0] + end_logit[0]` ([CLS] is position 0 of every window), an
example's null score is the lowest over its windows (google-research/bert's
`run_squad.py`), and `null_odds = null_score - best_span_score` (the official
`na_probs`). The answer is "" where `null_odds > null_score_diff_threshold`
(`tasks.span_qa.evaluation.tune_null_threshold` picks the threshold that
maximises F1 on a dev file, as the BERT paper does). Pure NumPy: it sits in
`models/` so that the model's `answer` and the SQuAD pipeline in `tasks/`
(a later room) share it.

The n-best span search over many windows at once, as array operations:
`top_positions` (each row's k best allowed positions; equal logits, the lower
position first), `window_spans` (the top starts x top ends of every window with
the order, length and context masks), `window_null_scores` and
`example_null_scores` (the null scores above, for every window and example).

Example:
>>> import numpy as np
>>> start = np.array([[2.0, 0.0, 5.0], [1.0, 4.0, 0.0]])
>>> end = np.array([[1.0, 0.0, 5.0], [0.5, 3.0, 0.0]])
>>> null_score(start, end, [0, 1])         # min(2 + 1, 1 + 0.5)
1.5
>>> null_odds(1.5, 10.0), is_no_answer(null_odds(1.5, 10.0), 0.0)
(-8.5, False)
>>> null_odds(1.5, None)                   # no valid span: the null answer wins
10001.5
"""

import numpy as np

# [CLS], the null span's start and end, is the first position of every window.
NULL_POSITION = 0


def window_null_score(start_logits, end_logits):
    """The null score of one window: `start_logits[CLS] + end_logits[CLS]`."""
    return float(start_logits[NULL_POSITION] + end_logits[NULL_POSITION])


def null_score(start_logits, end_logits, windows):
    """An example's null score: the lowest `window_null_score` over its `windows` (rows); None without windows."""
    scores = [window_null_score(start_logits[w], end_logits[w]) for w in windows]
    return min(scores) if scores else None


def null_odds(null_score, best_span_score):
    """`null_score - best_span_score`; with no valid span (`best_span_score` None) the null answer wins by 1e4."""
    if best_span_score is None:
        return float(abs(null_score) + 1e4)
    return null_score - best_span_score


def is_no_answer(odds, threshold):
    """True where the answer is "": `odds > threshold`."""
    return bool(odds > threshold)


# === The n-best span search, every window at once (NumPy arrays, no Python loop over windows) ===


def window_null_scores(start_logits, end_logits):
    """`window_null_score` of every row of `(windows, length)` logits: a float array `(windows,)`, same values."""
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    return start_logits[:, NULL_POSITION] + end_logits[:, NULL_POSITION]


def example_null_scores(window_scores, example_of_window, num_examples):
    """`null_score` of every example from its windows' `window_null_scores`: `(scores, has_window)`.

    `scores[i]` is the lowest score over the windows `w` with `example_of_window[w] == i` (+inf where
    `has_window[i]` is False: the example has no window, and `null_score` is None).
    """
    window_scores = np.asarray(window_scores)
    example_of_window = np.asarray(example_of_window, np.int64)
    scores = np.full(num_examples, np.inf, window_scores.dtype)
    np.minimum.at(scores, example_of_window, window_scores)
    return scores, np.bincount(example_of_window, minlength=num_examples)[:num_examples] > 0


def _top_positions_by_keys(logits, allowed, k):
    """`top_positions` of float32 `logits` by one exact int64 key per position: the float's order, then the position."""
    rows, length = logits.shape
    bits = logits.view(np.int32).astype(np.int64)
    ordered = np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)  # the float order as integers; -0.0 and 0.0 equal
    keys = np.where(allowed, -ordered * length + np.arange(length), np.iinfo(np.int64).max)
    if 0 < k < length:
        best = np.argpartition(keys, k - 1, axis=1)[:, :k]
    else:
        best = np.broadcast_to(np.arange(length), (rows, length))[:, :k]
    return np.take_along_axis(best, np.argsort(np.take_along_axis(keys, best, 1), axis=1), 1)


def top_positions(logits, allowed, k):
    """Each row's `k` highest logits among its `allowed` positions, highest first; equal logits: lower position first.

    Args:
        logits: `(rows, length)`.
        allowed: bool `(rows, length)`.
        k: positions kept per row.

    Returns:
        `(positions, present)`, both `(rows, min(k, length))`: `positions[r, i]` is row `r`'s `i`-th best allowed
        position where `present[r, i]`, and padding after a row's last allowed position where not.

    Example:
    >>> positions, present = top_positions(np.array([[1.0, 3.0, 3.0, 2.0]]), np.array([[1, 1, 1, 0]], bool), 3)
    >>> positions.tolist(), present.tolist()
    ([[1, 2, 0]], [[True, True, True]])
    """
    logits = np.asarray(logits)
    allowed = np.asarray(allowed, bool)
    rows, length = logits.shape
    k = max(0, min(int(k), length))
    if logits.dtype == np.float32 and 0 < k < length:
        # The k largest by a partial sort, then ordered by (logit descending, position): exact wherever the k-th
        # value has no equal outside the k (and no allowed logit is -inf or NaN); other rows take the exact keys.
        masked = np.where(allowed, logits, -np.inf)
        part = np.argpartition(masked, length - k, axis=1)[:, length - k :]
        values = np.take_along_axis(masked, part, 1)
        kth = values.min(axis=1, keepdims=True)
        order = np.take_along_axis(part, np.lexsort((part, -values), axis=-1), 1)
        ambiguous = (((masked >= kth).sum(axis=1) > k) & (kth[:, 0] > -np.inf)) | (
            allowed & ~(logits > -np.inf)).any(axis=1)
        if ambiguous.any():
            order[ambiguous] = _top_positions_by_keys(logits[ambiguous], allowed[ambiguous], k)
    elif logits.dtype == np.float32:
        order = _top_positions_by_keys(logits, allowed, k)
    else:
        order = np.argsort(-logits, axis=1, kind="stable")  # best first, ties by position
        # Then the allowed positions first, keeping that order (a stable sort on "not allowed").
        order = np.take_along_axis(order, np.argsort(~np.take_along_axis(allowed, order, 1), axis=1, kind="stable"),
                                   1)[:, :k]
    return order, np.take_along_axis(allowed, order, 1)


def window_spans(start_logits, end_logits, start_allowed, end_allowed, n_best_size, max_answer_length):
    """The n-best span search of google-research/bert's `run_squad.py` over every window at once.

    In each window, the `n_best_size` best allowed starts and the `n_best_size` best allowed ends
    (`top_positions`: highest logit first, equal logits the lower position first) are paired where
    `start <= end < start + max_answer_length`; a pair's score is `start_logit + end_logit` (in the logits' dtype).
    Array operations on `(windows, k, k)` arrays, `k = min(n_best_size, length)`.

    Args:
        start_logits, end_logits: `(windows, length)`.
        start_allowed, end_allowed: bool `(windows, length)`: positions a span may start / end at.
        n_best_size: starts and ends per window.
        max_answer_length: longest span in tokens.

    Returns:
        A dict: `start`, `end` (`(windows, k)`: the ranked positions), `start_logit`, `end_logit` (`(windows, k)`:
        their logits), `score` (`(windows, k, k)`: `[w, i, j]` pairs start `i` with end `j`) and `valid`
        (bool, like `score`: the pairs that are spans). Row-major order over `(window, i, j)` is the order of one
        Python loop over windows, top starts and top ends.

    Example:
    >>> start = np.array([[0.0, 2.0, 1.0, 0.5]])
    >>> end = np.array([[0.0, 0.1, 3.0, 0.2]])
    >>> allowed = np.array([[False, True, True, True]])
    >>> found = window_spans(start, end, allowed, allowed, n_best_size=2, max_answer_length=2)
    >>> found["start"].tolist(), found["end"].tolist(), found["valid"].tolist()
    ([[1, 2]], [[2, 3]], [[[True, False], [True, True]]])
    >>> found["score"][found["valid"]].tolist()
    [5.0, 4.0, 1.2]
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    starts, start_present = top_positions(start_logits, start_allowed, n_best_size)
    ends, end_present = top_positions(end_logits, end_allowed, n_best_size)
    span_lengths = ends[:, None, :] - starts[:, :, None] + 1
    valid = start_present[:, :, None] & end_present[:, None, :] & (span_lengths >= 1) & (
        span_lengths <= max_answer_length)
    start_logit = np.take_along_axis(start_logits, starts, 1)
    end_logit = np.take_along_axis(end_logits, ends, 1)
    return {"start": starts, "end": ends, "start_logit": start_logit, "end_logit": end_logit,
            "score": start_logit[:, :, None] + end_logit[:, None, :], "valid": valid}


def best_spans_in_window(start_logits, end_logits, start_allowed, max_answer_length, top_k=1):
    """The `top_k` best spans of one window's context over every allowed start, not only the n best.

    `BertSpanExtractor.answer`'s search: `start_logits`, `end_logits` (`(count,)`: the context's positions) and
    `start_allowed` (bool `(count,)`: the positions this window is the max-context window of); a span is
    `start <= end < start + max_answer_length` with an allowed start, scored `start_logit + end_logit`. Only the
    band `end - start < max_answer_length` of the `count x count` score matrix is computed (`count x
    max_answer_length` values), in the matrix's row-major order, so a stable sort gives its ranking: best score
    first, equal scores by start, then end.

    Returns:
        `(scores, starts, ends)`: arrays of at most `top_k` spans, best first (empty without an allowed start).

    Example:
    >>> best_spans_in_window(np.array([1.0, 3.0, 0.0]), np.array([0.0, 1.0, 2.0]), np.array([True, True, False]),
    ...                      max_answer_length=2, top_k=2)
    (array([5., 4.]), array([1, 1]), array([2, 1]))
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    start_allowed = np.asarray(start_allowed, bool)
    count = len(start_logits)
    width = max(0, min(int(max_answer_length), count))
    ends = np.arange(count)[:, None] + np.arange(width)[None, :]
    allowed = start_allowed[:, None] & (ends < count)
    ends = np.minimum(ends, count - 1)
    scores = start_logits[:, None] + end_logits[ends]
    kept = min(int(top_k), int(allowed.sum()))
    if kept == 0:
        empty = np.zeros(0, np.int64)
        return scores.ravel()[:0], empty, empty
    flat = np.where(allowed, scores, -np.inf).ravel()
    best = np.array([np.argmax(flat)]) if kept == 1 else np.argsort(-flat, kind="stable")[:kept]
    starts, offsets = np.divmod(best, width)
    return flat[best], starts, starts + offsets
