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
