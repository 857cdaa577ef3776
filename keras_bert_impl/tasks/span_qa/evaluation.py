"""Step 4, evaluation: SQuAD's official EM/F1 (v2.0: HasAns/NoAns, tuned null threshold); scorers in `keras_bert_impl.metrics.squad`.

- `predict_squad(model, features, gold=...)`: logits over all windows,
  post-processing, and (when `gold` holds answers) the official evaluation;
  for SQuAD v2.0 the null-score threshold is tuned on `gold` unless given.
- `tune_null_threshold(dataset, best_answers, null_odds)`: the threshold that maximises F1.

Example:
>>> result = predict_squad(model, features, gold=dev_json, version="1.1")  # doctest: +SKIP
>>> result.metrics  # doctest: +SKIP
{'exact_match': 80.8, 'f1': 88.5}
"""

import dataclasses

from keras_bert_impl.metrics.squad import evaluate_v1, evaluate_v2
from keras_bert_impl.tasks.old_keywords import squad_version_argument
from keras_bert_impl.tasks.span_qa.prediction import apply_null_threshold, postprocess_predictions, predict_logits


def tune_null_threshold(dataset, best_answers, null_odds):
    """The null-score threshold that maximises F1 on `dataset` (official `find_best_thresh`).

    Args:
        dataset: the parsed SQuAD v2.0 dict (or its `"data"` list) with gold answers.
        best_answers: dict id -> best non-null answer text.
        null_odds: dict id -> null score minus best span score.

    Returns:
        `(threshold, evaluation)` where `evaluation` is `evaluate_v2` of the
        predictions with that threshold applied.
    """
    search = evaluate_v2(dataset, best_answers, na_probs=null_odds)
    threshold = float(search["best_f1_thresh"])
    predictions = apply_null_threshold(best_answers, null_odds, threshold)
    evaluation = evaluate_v2(dataset, predictions, na_probs=null_odds, na_prob_threshold=threshold)
    return threshold, evaluation


@dataclasses.dataclass
class SquadResult:
    """Predictions and scores of one run over a file.

    Attributes:
        predictions: dict id -> answer text (official `predictions.json`).
        null_odds: dict id -> null score minus best span score (v2.0).
        metrics: the official evaluation (empty when no gold answers).
        null_score_diff_threshold: threshold used (v2.0).
        num_windows: windows predicted.
        predict_seconds: wall time of the model's forward passes (batching included; on a model's first
            pass also the compilation of each new input shape under XLA or `tf.function`).
        predict_shapes: the distinct `(batch, width)` input shapes the model saw (at most one per length
            bucket; the first pass compiles each once).
        postprocess_seconds: wall time of `postprocess_predictions` (host, NumPy).
        predict_token_slots: token positions the model computed (padding and filler rows included).
        predict_real_tokens: the windows' real tokens.
    """

    predictions: dict
    null_odds: dict
    metrics: dict
    null_score_diff_threshold: float | None
    num_windows: int
    predict_seconds: float
    predict_shapes: list = dataclasses.field(default_factory=list)
    postprocess_seconds: float = 0.0
    predict_token_slots: int = 0
    predict_real_tokens: int = 0


def _has_gold_answers(gold):
    data = gold["data"] if isinstance(gold, dict) else gold
    return any(
        qa.get("answers") or qa.get("is_impossible")
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    )


def predict_squad(
    model,
    features,
    gold=None,
    version="1.1",
    batch_size=32,
    n_best_size=20,
    max_answer_length=30,
    null_score_diff_threshold=None,
    *,
    boundaries=None,
    sort_by_length=True,
    packing=False,
):
    """Predicts every question of `features` and evaluates against `gold`.

    Args:
        model: a `BertSpanExtractor`.
        features: `SquadFeatures` of the questions (not `is_training`).
        gold: the parsed SQuAD dict the features come from (for evaluation and
            v2.0 threshold tuning), or None.
        version: `"1.1"` or `"2.0"`.
        batch_size: windows per forward pass.
        n_best_size, max_answer_length: post-processing settings.
        null_score_diff_threshold: v2.0: fixed threshold; None tunes it on
            `gold` (F1-optimal, as in the BERT paper) or uses 0.0 without gold.
        boundaries, sort_by_length, packing: the prediction batches (`predict_logits`).

    Returns:
        `SquadResult`.
    """
    import time

    squad_version_argument("predict_squad", version)
    start = time.perf_counter()
    stats = {}
    start_logits, end_logits = predict_logits(model, features, batch_size=batch_size, boundaries=boundaries,
                                              sort_by_length=sort_by_length, packing=packing, stats=stats)
    seconds = time.perf_counter() - start
    version_2 = version == "2.0"
    start = time.perf_counter()
    processed = postprocess_predictions(
        features,
        start_logits,
        end_logits,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        version=version,
        null_score_diff_threshold=0.0 if null_score_diff_threshold is None else null_score_diff_threshold,
        nbest=False,  # the result keeps no n-best lists: the answers and null odds alone are array operations
    )
    postprocess_seconds = time.perf_counter() - start
    has_gold = gold is not None and _has_gold_answers(gold)
    metrics, threshold = {}, None
    predictions = processed.predictions
    if version_2:
        threshold = 0.0 if null_score_diff_threshold is None else float(null_score_diff_threshold)
        if has_gold and null_score_diff_threshold is None:
            threshold, metrics = tune_null_threshold(gold, processed.best_answers, processed.null_odds)
        elif has_gold:
            metrics = evaluate_v2(gold, predictions, na_probs=processed.null_odds, na_prob_threshold=threshold)
        predictions = apply_null_threshold(processed.best_answers, processed.null_odds, threshold)
        metrics = dict(metrics, null_score_diff_threshold=threshold) if metrics else metrics
    elif has_gold:
        metrics = evaluate_v1(gold, predictions)
    return SquadResult(
        predictions=predictions,
        null_odds=processed.null_odds,
        metrics=metrics,
        null_score_diff_threshold=threshold,
        num_windows=len(features),
        predict_seconds=seconds,
        predict_shapes=stats["shapes"],
        postprocess_seconds=postprocess_seconds,
        predict_token_slots=stats["token_slots"],
        predict_real_tokens=stats["real_tokens"],
    )


# Step 4's name in every task (`classification.evaluate`, `tagging.evaluate`, `span_qa.evaluate`; docs/architecture.md).
evaluate = predict_squad
