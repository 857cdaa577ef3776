"""SQuAD exact match and F1, as the official evaluation scripts compute them.

Pure Python. `normalize_answer`, `exact_match_score` and `f1_score` follow the
official `evaluate-v1.1.py` (lower case, drop punctuation, drop the articles
a/an/the, collapse white space; F1 over bag-of-tokens). `evaluate_v1` gives the
official v1.1 numbers (max over the gold answers, percentages).
`evaluate_v2` follows `evaluate-v2.0.py`: unanswerable questions have the gold
answer "" (the empty string is predicted for "no answer"), the F1 of an empty
prediction or gold is 1 only if both are empty, the result is broken down into
HasAns/NoAns, and, given `na_probs` (e.g. `null_odds.json`), the thresholds
that maximise EM and F1 on this file are found (the paper's tuning on dev).

Example:
>>> dataset = [{"paragraphs": [{"context": "The cat sat.", "qas": [
...     {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0}]}]}]}]
>>> evaluate_v1(dataset, {"q1": "cat"})
{'exact_match': 100.0, 'f1': 100.0}
"""

import collections
import logging
import re
import string

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """Lower case, remove punctuation, articles (a/an/the) and extra white space (official).

    Example:
    >>> normalize_answer("The  Denver Broncos!")
    'denver broncos'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction, ground_truth):
    """1.0 if the normalised strings are equal, else 0.0.

    Example:
    >>> exact_match_score("the Broncos", "Broncos.")
    1.0
    """
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction, ground_truth, version="1.1"):
    """Token-level F1 of the normalised strings.

    Args:
        prediction: predicted answer text.
        ground_truth: one gold answer text.
        version: `"1.1"` (0 when no token is shared, including empty strings)
            or `"2.0"` (if either side normalises to no tokens, 1.0 when both
            do, else 0.0).

    Example:
    >>> round(f1_score("Denver Broncos team", "Denver Broncos"), 4)
    0.8
    >>> f1_score("", "", version="2.0")
    1.0
    """
    prediction_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    if version == "2.0" and (not prediction_tokens or not truth_tokens):
        return float(prediction_tokens == truth_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_ground_truths(metric_fn, prediction, ground_truths):
    """The best score of `prediction` against any of `ground_truths`.

    Example:
    >>> max_over_ground_truths(exact_match_score, "cat", ["dog", "a cat"])
    1.0
    """
    return max(metric_fn(prediction, truth) for truth in ground_truths)


def _iterate_questions(dataset):
    if isinstance(dataset, dict) and "data" in dataset:
        dataset = dataset["data"]
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset, predictions):
    """Official SQuAD v1.1 EM and F1 (percent) of `predictions` on `dataset`.

    Args:
        dataset: the file's `"data"` list (or the whole JSON dict).
        predictions: dict question id -> predicted text. Missing questions
            score 0 (a warning is logged, as the official script prints one).

    Returns:
        `{"exact_match": float, "f1": float}`.

    Example: see the module docstring.
    """
    exact_match = f1 = 0.0
    total = 0
    missing = 0
    for qa in _iterate_questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            missing += 1
            continue
        truths = [answer["text"] for answer in qa["answers"]]
        prediction = predictions[qa["id"]]
        exact_match += max_over_ground_truths(exact_match_score, prediction, truths)
        f1 += max_over_ground_truths(f1_score, prediction, truths)
    if missing:
        logger.warning("%d unanswered question(s) receive score 0.", missing)
    if total == 0:
        raise ValueError("The dataset holds no questions: nothing to evaluate.")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


def answer_scores(predictions, references):
    """Exact match and F1 (percent) of predicted answer texts against each question's reference texts, by the
    official rules: v1.1's where every question has an answer, v2.0's where some have none (`[]`: the right answer
    is "", and the F1 of an empty answer is 1 only against an empty one). `BertSpanExtractor.evaluate_answers`.

    Example:
    >>> scores = answer_scores(["Denver Broncos", "in 1889"], [["Denver Broncos", "the Broncos"], ["1889"]])
    >>> {name: round(value, 2) for name, value in scores.items()}  # "in 1889" against "1889": F1 2/3
    {'exact_match': 50.0, 'f1': 83.33}
    >>> answer_scores(["", "Paris"], [[], ["Paris"]])  # SQuAD v2.0: no answer, rightly
    {'exact_match': 100.0, 'f1': 100.0}
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} lists of reference answers.")
    if not predictions:
        raise ValueError("No questions: nothing to evaluate.")
    version = "2.0" if any(not truths for truths in references) else "1.1"
    exact_match = f1 = 0.0
    for prediction, truths in zip(predictions, references):
        if version == "2.0":
            truths = [truth for truth in truths if normalize_answer(truth)] or [""]
        exact_match += max_over_ground_truths(exact_match_score, prediction, truths)
        f1 += max(f1_score(prediction, truth, version=version) for truth in truths)
    return {"exact_match": 100.0 * exact_match / len(predictions), "f1": 100.0 * f1 / len(predictions)}


def raw_scores_v2(dataset, predictions):
    """Per-question EM and F1 (0/1 and [0, 1]) with the v2.0 rules.

    Returns:
        `(exact, f1, has_answer)`: three dicts keyed by question id; questions
        without a prediction are left out (official behaviour).
    """
    exact, f1, has_answer = {}, {}, {}
    for qa in _iterate_questions(dataset):
        qid = qa["id"]
        truths = [a["text"] for a in qa.get("answers", []) if normalize_answer(a["text"])]
        has_answer[qid] = bool(truths)
        if not truths:
            truths = [""]
        if qid not in predictions:
            logger.warning("Missing prediction for %s", qid)
            continue
        prediction = predictions[qid]
        exact[qid] = max(exact_match_score(prediction, t) for t in truths)
        f1[qid] = max(f1_score(prediction, t, version="2.0") for t in truths)
    return exact, f1, has_answer


def _apply_threshold(scores, na_probs, has_answer, threshold):
    new_scores = {}
    for qid, score in scores.items():
        if na_probs[qid] > threshold:
            new_scores[qid] = float(not has_answer[qid])
        else:
            new_scores[qid] = score
    return new_scores


def _summary(exact, f1, qids=None):
    qids = list(exact) if qids is None else qids
    total = len(qids)
    if total == 0:
        return {"exact": 0.0, "f1": 0.0, "total": 0}
    return {
        "exact": 100.0 * sum(exact[k] for k in qids) / total,
        "f1": 100.0 * sum(f1[k] for k in qids) / total,
        "total": total,
    }


def find_best_threshold(predictions, scores, na_probs, has_answer):
    """The no-answer threshold maximising the mean score (official `find_best_thresh`).

    Args:
        predictions: dict id -> predicted text (its "" means the model
            already answered "no answer").
        scores: dict id -> per-question score (EM or F1 from `raw_scores_v2`).
        na_probs: dict id -> no-answer score; higher means "more likely no
            answer" (e.g. the null-score difference of `null_odds.json`).
        has_answer: dict id -> whether the question has a gold answer.

    Returns:
        `(best_score_percent, best_threshold)`: predicting "" whenever
        `na_probs[id] > best_threshold` gives `best_score_percent`.

    Example:
    >>> find_best_threshold({"a": "x", "b": "y"}, {"a": 1.0, "b": 0.0},
    ...                     {"a": -2.0, "b": 3.0}, {"a": True, "b": False})
    (100.0, -2.0)
    """
    num_no_answer = sum(1 for qid in has_answer if not has_answer[qid])
    current = best = float(num_no_answer)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            diff = scores[qid]
        else:
            diff = -1.0 if predictions[qid] else 0.0
        current += diff
        if current > best:
            best = current
            best_threshold = na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_threshold=1.0):
    """Official SQuAD v2.0 evaluation, with HasAns/NoAns breakdown and best thresholds.

    Args:
        dataset: the file's `"data"` list (or the whole JSON dict).
        predictions: dict question id -> predicted text ("" for no answer).
        na_probs: optional dict id -> no-answer score (higher = no answer).
            Without it every question has no-answer score 0.
        na_prob_threshold: predict "" when `na_probs[id] > na_prob_threshold`
            (the official default 1.0).

    Returns:
        A dict with `exact`, `f1`, `total`, `HasAns_exact`, `HasAns_f1`,
        `HasAns_total`, `NoAns_exact`, `NoAns_f1`, `NoAns_total` (when present)
        and, with `na_probs`, `best_exact`, `best_exact_thresh`, `best_f1`,
        `best_f1_thresh`.

    Example:
    >>> data = [{"paragraphs": [{"context": "x", "qas": [
    ...     {"id": "a", "question": "?", "answers": [{"text": "x", "answer_start": 0}]},
    ...     {"id": "b", "question": "?", "answers": []}]}]}]
    >>> r = evaluate_v2(data, {"a": "x", "b": ""})
    >>> r["exact"], r["HasAns_exact"], r["NoAns_exact"]
    (100.0, 100.0, 100.0)
    """
    exact_raw, f1_raw, has_answer = raw_scores_v2(dataset, predictions)
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in has_answer}
    missing = [qid for qid in exact_raw if qid not in probs]
    if missing:
        raise ValueError(f"`na_probs` has no value for {len(missing)} question(s), e.g. {missing[0]!r}.")
    exact = _apply_threshold(exact_raw, probs, has_answer, na_prob_threshold)
    f1 = _apply_threshold(f1_raw, probs, has_answer, na_prob_threshold)
    result = _summary(exact, f1)
    has_ids = [q for q in exact if has_answer[q]]
    no_ids = [q for q in exact if not has_answer[q]]
    for prefix, ids in (("HasAns", has_ids), ("NoAns", no_ids)):
        if ids:
            part = _summary(exact, f1, ids)
            result.update({f"{prefix}_{k}": v for k, v in part.items()})
    if na_probs is not None:
        best_exact, exact_thresh = find_best_threshold(predictions, exact_raw, probs, has_answer)
        best_f1, f1_thresh = find_best_threshold(predictions, f1_raw, probs, has_answer)
        result.update(
            best_exact=best_exact,
            best_exact_thresh=exact_thresh,
            best_f1=best_f1,
            best_f1_thresh=f1_thresh,
        )
    return result
