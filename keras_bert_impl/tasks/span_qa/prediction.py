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
  applies too. Every window is searched at once with array operations
  (`span_decoding.window_spans`); `nbest=False` (what `predict_squad` uses)
  also finds each example's best answer without Python per candidate.
- `apply_null_threshold(best_answers, null_odds, threshold)`: "" where
  `null_odds > threshold` (`evaluation.tune_null_threshold` picks the
  threshold that maximises F1 on a dev file, as the BERT paper does).
- `predict_logits(model, features)`: the model over every window, in length-bucketed batches of one fixed
  size (`batches.PredictionBatches`: at most one compiled shape per bucket), or with `packing=True`
  several windows to a row (`batches.PackedPredictionBatches`: one shape, almost no padding).
- `predict(model, features)`: `predict_logits` then `postprocess_predictions`, the answer of every question
  (step 6's name in every task).
- `answer_questions(model, tokenizer, questions, contexts)`: answers raw
  question/context strings with a `BertSpanExtractor` (text, score, span).

Example:
>>> from keras_bert_impl.tasks.span_qa.prediction import answer_question  # doctest: +SKIP
>>> answer_question(model, tokenizer, "Who sat?", "The cat sat on the mat.")  # doctest: +SKIP
{'text': 'The cat', 'score': 11.2, 'probability': 0.93, 'start': 0, 'end': 7}
"""

import dataclasses
import itertools

import numpy as np

from keras_bert_impl.layers.span_head import MASKED_LOGIT
from keras_bert_impl.models.head_building import check_packable
from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.models.span_decoding import (
    example_null_scores,
    is_no_answer,
    null_odds,
    window_null_scores,
    window_spans,
)
from keras_bert_impl.tasks.old_keywords import NOT_GIVEN, old_question_length, squad_version_argument
from keras_bert_impl.tasks.span_qa.features import encode_examples
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


def _first_per_group(groups, num_groups):
    """For each group id in `range(num_groups)`, the first index `i` with `groups[i] == id`, -1 where none."""
    first = np.full(num_groups, -1, np.int64)
    ids, index = np.unique(groups, return_index=True)
    first[ids] = index
    return first


def postprocess_predictions(
    features,
    start_logits,
    end_logits,
    n_best_size=20,
    max_answer_length=30,
    version="1.1",
    null_score_diff_threshold=0.0,
    nbest=True,
    *,
    version_2_with_negative=NOT_GIVEN,
):
    """Turns window logits into answer texts (see the module docstring).

    The search runs on every window at once (`span_decoding.window_spans`: the top starts and ends of each
    window by one partial sort, their pairs, scores and masks as `(windows, n_best_size, n_best_size)` arrays).
    An example's candidates rank by score; equal scores in window order, then the start's rank, then the end's
    rank (equal logits rank the lower position first). The best answer of every example is found by array
    operations; the n-best lists sort only the candidates that can be among an example's `2 * n_best_size`
    best and walk them in Python until `n_best_size` distinct texts are found (reading on, in order, where
    texts repeat more).

    Args:
        features: `keras_bert_impl.tasks.span_qa.features.SquadFeatures`.
        start_logits, end_logits: arrays `(num_windows, length)` in the order
            of `features` (`length` may be shorter than `sequence_length` if
            the batches were padded less).
        n_best_size: start and end candidates per window, and answers kept.
        max_answer_length: longest answer in tokens.
        version: `"1.1"`, or `"2.0"` (SQuAD v2.0): consider "no answer" (old name: `version_2_with_negative=True`,
            still taken).
        null_score_diff_threshold: v2.0: predict "" if `null_odds` exceeds it.
        nbest: False leaves `SquadPredictions.nbest` empty (`predict_squad`: the
            predictions, best answers and null odds are the same, sooner).

    Returns:
        `SquadPredictions`.
    """
    version_2 = squad_version_argument("postprocess_predictions", version, version_2_with_negative) == "2.0"
    start_logits = np.asarray(start_logits, np.float32)
    end_logits = np.asarray(end_logits, np.float32)
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(
            f"Got logits for {len(start_logits)}/{len(end_logits)} windows, but there are "
            f"{len(features)} windows: predict over `features` in order without dropping any."
        )
    examples = features.examples
    num_examples, num_windows = len(examples), len(features)
    example_of_window = np.asarray(features.example_index, np.int64)
    length = min(start_logits.shape[1], features.token_char_start.shape[1])
    char_start = features.token_char_start[:, :length]
    char_end = features.token_char_end[:, :length]
    in_context = char_start >= 0
    found = window_spans(start_logits[:, :length], end_logits[:, :length],
                         in_context & features.token_is_max_context[:, :length], in_context,
                         n_best_size, max_answer_length)
    k = found["start"].shape[1]
    score = found["score"].reshape(num_windows, k * k)
    valid = found["valid"].reshape(num_windows, k * k)
    spans_of_window = valid.sum(axis=1)
    masked = np.where(valid, score, -np.inf)

    def fields_of(window, flat):
        """score, start logit, end logit, start char, end char of the pairs `flat` (i * k + j) of `window`."""
        i, j = flat // k, flat % k
        return (score[window, flat], found["start_logit"][window, i], found["end_logit"][window, j],
                char_start[window, found["start"][window, i]], char_end[window, found["end"][window, j]])

    example_null, has_window = example_null_scores(window_null_scores(start_logits, end_logits), example_of_window,
                                                   num_examples)
    example_null, has_window = example_null.tolist(), has_window.tolist()
    if nbest and k:
        # A window's (2 * n_best_size)-th best score bounds its example's: only spans scoring at least the highest
        # such bound of an example's windows can be among the example's 2 * n_best_size best, so only they are
        # sorted (all of one score at least, and in full order: a prefix of the example's whole ranking).
        head_size = max(2 * n_best_size, 1)
        if k * k > head_size:
            window_bound = np.partition(masked, k * k - head_size, axis=1)[:, k * k - head_size]
        else:
            window_bound = np.full(num_windows, -np.inf, masked.dtype)
        bound = np.full(num_examples, -np.inf, masked.dtype)
        np.maximum.at(bound, example_of_window, window_bound)
        keep = valid & (score >= bound[example_of_window][:, None])
        window, flat = np.nonzero(keep)  # row-major: window, start rank, end rank
        example_of_candidate = example_of_window[window]
        order = np.lexsort((-score[window, flat], example_of_candidate))
        rows = list(zip(*(field[order].tolist() for field in fields_of(window, flat))))
        kept = np.bincount(example_of_candidate, minlength=num_examples)[:num_examples]
        row_offsets = np.concatenate([[0], np.cumsum(kept)]).tolist()
        more = (np.bincount(example_of_window, weights=spans_of_window, minlength=num_examples)[:num_examples]
                > kept).tolist()

        def rest_of(example_index):
            """The example's spans after the kept ones, best first (made when first read)."""
            windows = np.flatnonzero(example_of_window == example_index)
            window, flat = np.nonzero(valid[windows] & ~keep[windows])
            window = windows[window]
            order = np.argsort(-score[window, flat], kind="stable")
            yield from zip(*(field[order].tolist() for field in fields_of(window, flat)))
    elif k:
        # The best span of each window (the first of equal scores), then of each example (the first window's).
        best_flat = masked.argmax(axis=1)
        rows_with = np.arange(num_windows)
        only_minus_inf = (spans_of_window > 0) & ~valid[rows_with, best_flat]  # every valid span scores -inf
        best_flat[only_minus_inf] = valid[only_minus_inf].argmax(axis=1)
        window_best = masked[rows_with, best_flat]
        has_span = spans_of_window > 0
        example_best = np.full(num_examples, -np.inf, masked.dtype)
        np.maximum.at(example_best, example_of_window[has_span], window_best[has_span])
        is_best = has_span & (window_best == example_best[example_of_window])
        best_window = _first_per_group(example_of_window[is_best], num_examples)
        best_window = np.flatnonzero(is_best)[best_window] if is_best.any() else best_window
        with_span = np.flatnonzero(_first_per_group(example_of_window[has_span], num_examples) >= 0)
        best = [None] * num_examples
        windows = best_window[with_span]
        for example_index, row in zip(with_span.tolist(), zip(*(f.tolist() for f in fields_of(windows,
                                                                                             best_flat[windows])))):
            best[example_index] = row
    else:
        best = [None] * num_examples
        rows, row_offsets, more = [], [0] * (num_examples + 1), [False] * num_examples

    predictions, best_answers, nbest_all, all_null_odds = {}, {}, {}, {}
    for example_index, example in enumerate(examples):
        context = example.context
        if nbest:
            entries, seen = [], set()
            candidates = rows[row_offsets[example_index] : row_offsets[example_index + 1]]
            if more[example_index]:  # read on only where the kept texts repeat too often
                candidates = itertools.chain(candidates, rest_of(example_index))
            for score_, s_logit, e_logit, c_start, c_end in candidates:
                text = context[c_start:c_end]
                if text in seen:
                    continue
                seen.add(text)
                entries.append({"text": text, "score": score_, "start_logit": s_logit, "end_logit": e_logit,
                                "start": c_start, "end": c_end})
                if len(entries) >= n_best_size:
                    break
            best_text = entries[0]["text"] if entries else ""
            best_score = entries[0]["score"] if entries else None
        else:
            row = best[example_index]
            best_text = context[row[3] : row[4]] if row is not None else ""
            best_score = row[0] if row is not None else None
        qas_id = example.qas_id
        if version_2 and has_window[example_index]:
            example_null_score = example_null[example_index]
            odds = null_odds(example_null_score, best_score)  # with no valid span the null answer wins
            all_null_odds[qas_id] = odds
            predictions[qas_id] = "" if is_no_answer(odds, null_score_diff_threshold) else best_text
            if nbest:
                null_entry = {"text": "", "score": example_null_score, "start_logit": None, "end_logit": None,
                              "start": -1, "end": -1}
                entries = sorted(entries + [null_entry], key=lambda entry: -entry["score"])[: max(n_best_size, 1) + 1]
        else:
            predictions[qas_id] = best_text
        if nbest:
            for entry, probability in zip(entries, softmax([entry["score"] for entry in entries]).tolist()):
                entry["probability"] = probability
            nbest_all[qas_id] = entries
        best_answers[qas_id] = best_text
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


def predict(model, features, batch_size=32, n_best_size=20, max_answer_length=30, version="1.1",
            null_score_diff_threshold=0.0, nbest=True, *, boundaries=None, sort_by_length=True, packing=False):
    """Step 6 of every task for span QA: the answer of every question of `features`, with its n-best list.

    `predict_logits` (the model over every window) then `postprocess_predictions` (logits -> answer texts);
    `evaluate` (`predict_squad`) does the same and scores the answers against the gold file.

    Args:
        model: a `BertSpanExtractor` (or any model with the same inputs/outputs).
        features: `SquadFeatures` (step 2, `encode_examples`, not `is_training`).
        batch_size, boundaries, sort_by_length, packing: the prediction batches (`predict_logits`).
        n_best_size, max_answer_length, version, null_score_diff_threshold, nbest: as `postprocess_predictions`.

    Returns:
        `SquadPredictions`: `predictions` (question id -> answer text), `best_answers`, `nbest`, `null_odds`.

    Example: an untrained 1-layer extractor on two questions (its answers are spans of their contexts):

    >>> from keras_bert_impl import BertBackbone, BertSpanExtractor, BertTokenizer
    >>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
    >>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> examples = [SquadExample("q1", "", "Who sat?", "The cat sat on the mat.", ()),
    ...             SquadExample("q2", "", "Where?", "In Paris, in May.", ())]
    >>> answers = predict(BertSpanExtractor(backbone), encode_examples(examples, tokenizer, sequence_length=32))
    >>> sorted(answers.predictions), answers.predictions["q1"] in "The cat sat on the mat."
    (['q1', 'q2'], True)
    """
    start_logits, end_logits = predict_logits(model, features, batch_size=batch_size, boundaries=boundaries,
                                              sort_by_length=sort_by_length, packing=packing)
    return postprocess_predictions(features, start_logits, end_logits, n_best_size=n_best_size,
                                   max_answer_length=max_answer_length, version=version,
                                   null_score_diff_threshold=null_score_diff_threshold, nbest=nbest)


def answer_questions(
    model,
    tokenizer,
    questions,
    contexts,
    sequence_length=384,
    doc_stride=128,
    max_question_length=64,
    max_answer_length=30,
    n_best_size=20,
    version="1.1",
    null_score_diff_threshold=0.0,
    batch_size=32,
    *,
    max_query_length=NOT_GIVEN,
    version_2_with_negative=NOT_GIVEN,
):
    """Answers raw questions about raw contexts with a fine-tuned `BertSpanExtractor`.

    Args:
        model: a `BertSpanExtractor` (or any model with the same inputs/outputs).
        tokenizer: the model's `BertTokenizer`.
        questions, contexts: lists of str of the same length (or one str each).
        sequence_length, doc_stride, max_question_length: window settings (`max_query_length`, the old name
            of `max_question_length`, is still taken).
        max_answer_length, n_best_size: post-processing settings.
        version, null_score_diff_threshold: `version="2.0"` allows "no answer" ("") where `null_odds` exceeds
            the threshold (`version_2_with_negative=True`, the old name, is still taken).

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
    max_question_length = old_question_length("answer_questions", max_query_length, max_question_length)
    features = encode_examples(
        examples, tokenizer, sequence_length=sequence_length, doc_stride=doc_stride,
        max_question_length=max_question_length,
    )
    result = predict(
        model, features, batch_size=batch_size, n_best_size=n_best_size, max_answer_length=max_answer_length,
        version=squad_version_argument("answer_questions", version, version_2_with_negative),
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
