"""Step 6, prediction: start/end logits of windows -> answer texts, and answers to raw questions.

- `postprocess_predictions(features, start_logits, end_logits)`: for every
  example, the `n_best_size` best start and end positions of each of its
  windows are paired (end >= start, at most `max_answer_length` tokens, start
  where the window gives the token maximal context), scored by
  `start_logit + end_logit`, and the best span's text is cut from the
  *original* context by character offsets (original casing, accents and
  spacing). For SQuAD v2.0 the null score is the lowest `start_logit[CLS] +
  end_logit[CLS]` over the windows, and `null_odds[id] = null_score -
  best_span_score` (the official `na_probs`): the one null rule,
  `keras_bert_impl.models.span_decoding`, which `BertSpanExtractor.answer`
  applies too.
- `apply_null_threshold(best_answers, null_odds, threshold)`: "" where
  `null_odds > threshold` (`evaluation.tune_null_threshold` picks the
  threshold that maximises F1 on a dev file, as the BERT paper does).
- `predict_logits(model, features)`: the model over every window, in length-bucketed batches of one fixed
  size (`batches.PredictionBatches`: at most one compiled shape per bucket), or with `packing=True`
  several windows to a row (`batches.PackedPredictionBatches`: one shape, almost no padding).
- `answer_questions(model, tokenizer, questions, contexts)`: answers raw
  question/context strings with a `BertSpanExtractor` (text, score, span).

Example:
>>> from keras_bert_impl.tasks.span_qa.prediction import answer_question  # doctest: +SKIP
>>> answer_question(model, tokenizer, "Who sat?", "The cat sat on the mat.")  # doctest: +SKIP
{'text': 'The cat', 'score': 11.2, 'probability': 0.93, 'start': 0, 'end': 7}
"""

import collections
import dataclasses

import numpy as np

from keras_bert_impl.layers.span_head import MASKED_LOGIT
from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.models.task import check_packable
from keras_bert_impl.models.span_decoding import is_no_answer, null_odds, null_score
from keras_bert_impl.tasks.span_qa.features import convert_examples_to_features
from keras_bert_impl.tasks.span_qa.reading import SquadExample


@dataclasses.dataclass
class SquadPredictions:
    """What `postprocess_predictions` returns.

    Attributes:
        predictions: dict id -> answer text (v2.0: "" when `null_odds >
            null_score_diff_threshold`).
        best_answers: dict id -> best non-null answer text.
        nbest: dict id -> list of dicts `text, score, probability,
            start_logit, end_logit, start, end` (character span), best first;
            for v2.0 the null answer (text "") is among them.
        null_odds: dict id -> null score minus best span score (v2.0; empty
            for v1.1).
    """

    predictions: dict
    best_answers: dict
    nbest: dict
    null_odds: dict


def _top_indices(logits, valid, k):
    candidates = np.flatnonzero(valid)
    if candidates.size > k:
        order = np.argpartition(-logits[candidates], k - 1)[:k]
        candidates = candidates[order]
    return candidates[np.argsort(-logits[candidates], kind="stable")]


def postprocess_predictions(
    features,
    start_logits,
    end_logits,
    n_best_size=20,
    max_answer_length=30,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
):
    """Turns window logits into answer texts (see the module docstring).

    Args:
        features: `keras_bert_impl.tasks.span_qa.features.SquadFeatures`.
        start_logits, end_logits: arrays `(num_windows, length)` in the order
            of `features` (`length` may be shorter than `sequence_length` if
            the batches were padded less).
        n_best_size: start and end candidates per window, and answers kept.
        max_answer_length: longest answer in tokens.
        version_2_with_negative: SQuAD v2.0: consider "no answer".
        null_score_diff_threshold: v2.0: predict "" if `null_odds` exceeds it.

    Returns:
        `SquadPredictions`.
    """
    start_logits = np.asarray(start_logits, np.float32)
    end_logits = np.asarray(end_logits, np.float32)
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(
            f"Got logits for {len(start_logits)}/{len(end_logits)} windows, but there are "
            f"{len(features)} windows: predict over `features` in order without dropping any."
        )
    windows_of_example = collections.defaultdict(list)
    for window, example_index in enumerate(features.example_index):
        windows_of_example[int(example_index)].append(window)

    predictions, best_answers, nbest_all, all_null_odds = {}, {}, {}, {}
    for example_index, example in enumerate(features.examples):
        windows = windows_of_example.get(example_index, [])
        candidates = []
        example_null_score = null_score(start_logits, end_logits, windows)
        for w in windows:
            length = min(start_logits.shape[1], features.token_char_start.shape[1])
            starts = start_logits[w, :length]
            ends = end_logits[w, :length]
            char_start = features.token_char_start[w, :length]
            char_end = features.token_char_end[w, :length]
            in_context = char_start >= 0
            start_indexes = _top_indices(starts, in_context & features.token_is_max_context[w, :length], n_best_size)
            end_indexes = _top_indices(ends, in_context, n_best_size)
            if start_indexes.size == 0 or end_indexes.size == 0:
                continue
            span_lengths = end_indexes[None, :] - start_indexes[:, None] + 1
            valid = (span_lengths >= 1) & (span_lengths <= max_answer_length)
            rows, cols = np.nonzero(valid)
            s_idx, e_idx = start_indexes[rows], end_indexes[cols]
            scores = starts[s_idx] + ends[e_idx]
            candidates.extend(
                zip(
                    scores.tolist(),
                    starts[s_idx].tolist(),
                    ends[e_idx].tolist(),
                    char_start[s_idx].tolist(),
                    char_end[e_idx].tolist(),
                )
            )
        candidates.sort(key=lambda c: -c[0])
        nbest, seen = [], set()
        for score, s_logit, e_logit, c_start, c_end in candidates:
            text = example.context[c_start:c_end]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "score": score, "start_logit": s_logit, "end_logit": e_logit, "start": c_start, "end": c_end})
            if len(nbest) >= n_best_size:
                break
        best_text = nbest[0]["text"] if nbest else ""
        best_score = nbest[0]["score"] if nbest else None
        if version_2_with_negative and example_null_score is not None:
            null_entry = {"text": "", "score": example_null_score, "start_logit": None, "end_logit": None,
                          "start": -1, "end": -1}
            nbest = sorted(nbest + [null_entry], key=lambda entry: -entry["score"])[: max(n_best_size, 1) + 1]
            odds = null_odds(example_null_score, best_score)  # with no valid span the null answer wins
            all_null_odds[example.qas_id] = odds
            predictions[example.qas_id] = "" if is_no_answer(odds, null_score_diff_threshold) else best_text
        else:
            predictions[example.qas_id] = best_text
        for entry, probability in zip(nbest, softmax([entry["score"] for entry in nbest])):
            entry["probability"] = float(probability)
        best_answers[example.qas_id] = best_text
        nbest_all[example.qas_id] = nbest
    return SquadPredictions(predictions=predictions, best_answers=best_answers, nbest=nbest_all,
                            null_odds=all_null_odds)


def apply_null_threshold(best_answers, null_odds, threshold):
    """Answer "" where `null_odds[id] > threshold` (`span_decoding.is_no_answer`), else the best span.

    Example:
    >>> apply_null_threshold({"a": "x", "b": "y"}, {"a": -1.0, "b": 2.0}, 0.5)
    {'a': 'x', 'b': ''}
    """
    return {qid: ("" if is_no_answer(null_odds[qid], threshold) else text) for qid, text in best_answers.items()}


def predict_logits(model, features, batch_size=32, *, boundaries=None, sort_by_length=True, packing=False,
                   stats=None):
    """Runs `model` over every window of `features`; returns `(start_logits, end_logits)` `(N, L)`.

    The batches are `batches.PredictionBatches`: NumPy on every backend,
    windows grouped by length bucket (`boundaries`, default the training
    buckets) and every batch `batch_size` rows, so a compiled (XLA) predict
    step sees at most `len(boundaries)` shapes; the filler rows' outputs
    are dropped and each window's logits go back to its own row, padded to
    `sequence_length` with the masked value. `sort_by_length=False` keeps
    the input order (most SQuAD batches then pad to the full length).

    `packing=True` feeds `batches.PackedPredictionBatches` instead: several
    windows to a row of `sequence_length`, one shape, almost no padding; each
    window's logits are cut back out of its row, equal to the unpacked ones
    within float rounding. It needs the backbone's attention padding as a
    mask (the default), not `"lengths"`.

    `stats`, a dict, receives `shapes` (the distinct input shapes),
    `batches`, `token_slots` (positions computed, padding included) and
    `real_tokens`.
    """
    from keras_bert_impl.tasks.span_qa.batches import PackedPredictionBatches, PredictionBatches

    n, max_len = features.token_ids.shape
    start = np.full((n, max_len), MASKED_LOGIT, np.float32)
    end = np.full((n, max_len), MASKED_LOGIT, np.float32)
    if packing:
        if boundaries is not None or not sort_by_length:
            raise ValueError("`packing=True` packs windows into full rows: leave `boundaries` and `sort_by_length` "
                             "at their defaults.")
        if getattr(model, "backbone", None) is not None:
            check_packable(model.backbone, "predict_logits(packing=True)")
        batches = PackedPredictionBatches(features, batch_size)
        for placements, inputs in batches:
            out = model.predict_on_batch(inputs)
            s, e = np.asarray(out["start_logits"]), np.asarray(out["end_logits"])
            for window, row, offset, length in placements.tolist():
                start[window, :length] = s[row, offset : offset + length]
                end[window, :length] = e[row, offset : offset + length]
    else:
        batches = PredictionBatches(features, batch_size, boundaries=boundaries, sort_by_length=sort_by_length)
        for rows, inputs in batches:
            out = model.predict_on_batch(inputs)
            real = len(rows)  # the rows after them are filler copies
            s, e = np.asarray(out["start_logits"])[:real], np.asarray(out["end_logits"])[:real]
            start[rows, : s.shape[1]] = s
            end[rows, : e.shape[1]] = e
    if stats is not None:
        stats.update(shapes=batches.shapes, batches=len(batches), token_slots=batches.token_slots,
                     real_tokens=int(np.sum(features.lengths)))
    return start, end


def answer_questions(
    model,
    tokenizer,
    questions,
    contexts,
    sequence_length=384,
    doc_stride=128,
    max_query_length=64,
    max_answer_length=30,
    n_best_size=20,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
    batch_size=32,
):
    """Answers raw questions about raw contexts with a fine-tuned `BertSpanExtractor`.

    Args:
        model: a `BertSpanExtractor` (or any model with the same inputs/outputs).
        tokenizer: the model's `BertTokenizer`.
        questions, contexts: lists of str of the same length (or one str each).
        sequence_length, doc_stride, max_query_length: window settings.
        max_answer_length, n_best_size: post-processing settings.
        version_2_with_negative, null_score_diff_threshold: allow "no answer" ("").

    Returns:
        A list of dicts `{"text", "score", "probability", "start", "end"}`:
        the answer cut from the context (`context[start:end]`), its
        `start_logit + end_logit` and its softmax probability among the n-best.

    Example:
    >>> answers = answer_questions(model, tokenizer, ["Who sat?"], ["The cat sat."])  # doctest: +SKIP
    """
    if isinstance(questions, str):
        questions = [questions]
    if isinstance(contexts, str):
        contexts = [contexts]
    if len(questions) != len(contexts):
        raise ValueError(f"Got {len(questions)} questions but {len(contexts)} contexts: pass one context per question.")
    examples = []
    for i, (question, context) in enumerate(zip(questions, contexts)):
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"questions[{i}]: expected a non-empty string, got {question!r}.")
        if not isinstance(context, str) or not context.strip():
            raise ValueError(f"contexts[{i}]: expected a non-empty string, got {context!r}.")
        examples.append(SquadExample(qas_id=str(i), title="", question=question, context=context, answers=()))
    features = convert_examples_to_features(
        examples, tokenizer, sequence_length=sequence_length, doc_stride=doc_stride, max_query_length=max_query_length
    )
    start, end = predict_logits(model, features, batch_size=batch_size)
    result = postprocess_predictions(
        features,
        start,
        end,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        version_2_with_negative=version_2_with_negative,
        null_score_diff_threshold=null_score_diff_threshold,
    )
    answers = []
    for example in examples:
        text = result.predictions[example.qas_id]
        entry = next((e for e in result.nbest[example.qas_id] if e["text"] == text), None)
        if entry is None:
            answers.append({"text": text, "score": None, "probability": None, "start": -1, "end": -1})
            continue
        answers.append(
            {
                "text": text,
                "score": entry["score"],
                "probability": entry["probability"],
                "start": entry["start"],
                "end": entry["end"],
            }
        )
    return answers


def answer_question(model, tokenizer, question, context, **kwargs):
    """`answer_questions` for one question: a dict `{"text", "score", "probability", "start", "end"}`."""
    return answer_questions(model, tokenizer, [question], [context], **kwargs)[0]
