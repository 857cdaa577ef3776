"""SQuAD post-processing as array operations (issue 18, host side): the same answers, n-best lists and null odds
as a straightforward reference, on real dev windows and real model logits.

The reference below is google-research/bert's `run_squad.py` written as plain Python loops: per window, the
`n_best_size` best allowed starts and ends (equal logits: the lower position first), every pair with
`start <= end < start + max_answer_length`, one stable sort per example, distinct texts. The logits come from a
small random-weight `BertBackbone` over real SQuAD v1.1 dev windows of 128 tokens (stride 32, so most contexts
have several windows and the max-context rule matters), then are bent into the hard cases: equal logits (rounded
to 0.5), the best positions in the question and on [SEP] (spans that would cross the context's boundary), short
`max_answer_length`, and [CLS] raised in some windows (v2.0 null answers winning and losing).
"""

import numpy as np
import pytest

from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.models.span_decoding import top_positions, window_spans
from keras_bert_impl.tasks import span_qa as squad
from keras_bert_impl.tasks.span_qa.prediction import SquadPredictions, postprocess_predictions, predict_logits
from repo_scripts import load_script


def reference_postprocess(features, start_logits, end_logits, n_best_size=20, max_answer_length=30,
                          version_2_with_negative=False, null_score_diff_threshold=0.0):
    """The post-processing as plain loops (see the module docstring)."""
    start_logits = np.asarray(start_logits, np.float32)
    end_logits = np.asarray(end_logits, np.float32)
    length = min(start_logits.shape[1], features.token_char_start.shape[1])
    predictions, best_answers, nbest_all, null_odds = {}, {}, {}, {}
    for example_index, example in enumerate(features.examples):
        candidates, null = [], None
        for w in range(len(features)):
            if features.example_index[w] != example_index:
                continue
            window_null = float(start_logits[w, 0] + end_logits[w, 0])
            null = window_null if null is None else min(null, window_null)
            in_context = [features.token_char_start[w, p] >= 0 for p in range(length)]
            starts = [p for p in range(length) if in_context[p] and features.token_is_max_context[w, p]]
            ends = [p for p in range(length) if in_context[p]]
            starts = sorted(starts, key=lambda p: (-start_logits[w, p], p))[:n_best_size]
            ends = sorted(ends, key=lambda p: (-end_logits[w, p], p))[:n_best_size]
            for s in starts:
                for e in ends:
                    if s <= e < s + max_answer_length:
                        candidates.append((float(start_logits[w, s] + end_logits[w, e]), float(start_logits[w, s]),
                                           float(end_logits[w, e]), int(features.token_char_start[w, s]),
                                           int(features.token_char_end[w, e])))
        candidates.sort(key=lambda c: -c[0])
        nbest, seen = [], set()
        for score, s_logit, e_logit, c_start, c_end in candidates:
            text = example.context[c_start:c_end]
            if text not in seen and len(nbest) < n_best_size:
                seen.add(text)
                nbest.append({"text": text, "score": score, "start_logit": s_logit, "end_logit": e_logit,
                              "start": c_start, "end": c_end})
        best_text = nbest[0]["text"] if nbest else ""
        predictions[example.qas_id] = best_text
        if version_2_with_negative and null is not None:
            odds = null - nbest[0]["score"] if nbest else abs(null) + 1e4
            null_odds[example.qas_id] = odds
            if odds > null_score_diff_threshold:
                predictions[example.qas_id] = ""
            nbest.append({"text": "", "score": null, "start_logit": None, "end_logit": None, "start": -1, "end": -1})
            nbest = sorted(nbest, key=lambda entry: -entry["score"])[: n_best_size + 1]
        for entry, probability in zip(nbest, softmax([entry["score"] for entry in nbest])):
            entry["probability"] = float(probability)
        best_answers[example.qas_id] = best_text
        nbest_all[example.qas_id] = nbest
    return SquadPredictions(predictions=predictions, best_answers=best_answers, nbest=nbest_all,
                            null_odds=null_odds)


@pytest.fixture(scope="module")
def tokenizer():
    from keras_bert_impl.text.tokenizer import BertTokenizer

    return BertTokenizer.from_preset("all_minilm_l6_v2_en")


@pytest.fixture(scope="module")
def features(shared_data, tokenizer):
    """Windows of 128 tokens (stride 32) of 60 seeded questions of the evaluation articles: most have several."""
    dataset = squad.load_squad_json(shared_data / "squad" / "dev-v1.1.json.gz")
    _, evaluation = squad.split_articles(dataset, 38)
    examples, _ = squad.read_squad_examples(evaluation, source="eval")
    examples = [examples[i] for i in sorted(np.random.default_rng(0).choice(len(examples), 60, replace=False))]
    features = squad.encode_examples(examples, tokenizer, sequence_length=128, doc_stride=32)
    assert len(features) > 2 * len(examples)  # most questions have several windows
    return features


@pytest.fixture(scope="module")
def logits(features, tokenizer):
    """Real logits: a 2-layer, hidden-128 random-weight backbone with the real vocabulary."""
    import keras

    from keras_bert_impl import BertBackbone, BertSpanExtractor

    keras.utils.set_random_seed(0)
    backbone = BertBackbone(vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=256,
                            max_sequence_length=128)
    return predict_logits(BertSpanExtractor(backbone), features, batch_size=32)


def _cases(features, logits):
    start, end = logits
    yield "model logits", start, end
    yield "ties (rounded to 0.5)", np.round(start * 2) / 2, np.round(end * 2) / 2
    yield "all equal", np.zeros_like(start), np.zeros_like(end)
    # The highest logits of every window in the question and on the last [SEP]: spans that would cross the context.
    crossing_start, crossing_end = start.copy(), end.copy()
    rows = np.arange(len(features))
    crossing_start[:, 1:4] += 50.0
    crossing_end[rows, features.lengths - 1] += 50.0
    yield "best outside the context", crossing_start, crossing_end
    # [CLS] raised in every third window: v2.0's null answer wins for some questions and loses for others.
    null_start, null_end = start.copy(), end.copy()
    null_start[::3, 0] += 8.0
    null_end[::3, 0] += 8.0
    yield "[CLS] raised", null_start, null_end


SETTINGS = [dict(), dict(max_answer_length=3), dict(max_answer_length=1, n_best_size=5),
            dict(n_best_size=3, version_2_with_negative=True), dict(version_2_with_negative=True),
            dict(version_2_with_negative=True, null_score_diff_threshold=-2.0)]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_postprocessing_equals_the_reference(features, logits, settings):
    for case, start, end in _cases(features, logits):
        expected = reference_postprocess(features, start, end, **settings)
        got = postprocess_predictions(features, start, end, **settings)
        assert got.predictions == expected.predictions, case
        assert got.best_answers == expected.best_answers, case
        assert got.null_odds == expected.null_odds, case
        assert got.nbest == expected.nbest, case
        alone = postprocess_predictions(features, start, end, nbest=False, **settings)
        assert (alone.predictions, alone.best_answers, alone.null_odds, alone.nbest) == (
            expected.predictions, expected.best_answers, expected.null_odds, {}), case


def test_the_cases_are_the_hard_ones(features, logits):
    start, end = logits
    v2 = reference_postprocess(features, *[x for x in list(_cases(features, logits))[-1][1:]],
                               version_2_with_negative=True)
    answered = sum(text != "" for text in v2.predictions.values())
    assert 0 < answered < len(v2.predictions)  # the null answer wins for some questions, not all
    # Several windows of one question score the same best span (the earlier window's counts) in the tie case.
    ties = list(_cases(features, logits))[1]
    assert len(np.unique(ties[1])) < ties[1].size / 10


def test_postprocessing_equals_the_previous_implementation_on_model_logits(features, logits):
    """On real (untied) logits the previous implementation, kept in `benchmarks/squad_host.py`, agrees exactly."""
    previous = load_script("benchmarks/squad_host.py").previous_postprocess_predictions
    start, end = logits
    for settings in SETTINGS:
        old = previous(features, start, end, **settings)
        new = postprocess_predictions(features, start, end, **settings)
        assert (old.predictions, old.best_answers, old.null_odds, old.nbest) == (
            new.predictions, new.best_answers, new.null_odds, new.nbest)


def test_examples_without_windows_or_spans(features, logits):
    """An example with no window gives "" and no null odds; a window whose context allows no span gives none."""
    import dataclasses

    start, end = logits
    extra = dataclasses.replace(features.examples[0], qas_id="no-window")
    with_extra = dataclasses.replace(features, examples=features.examples + [extra])
    no_context = dataclasses.replace(with_extra, token_char_start=np.full_like(features.token_char_start, -1))
    for data in (with_extra, no_context):
        for v2 in (False, True):
            expected = reference_postprocess(data, start, end, version_2_with_negative=v2)
            got = postprocess_predictions(data, start, end, version="2.0" if v2 else "1.1")
            assert (got.predictions, got.null_odds, got.nbest) == (expected.predictions, expected.null_odds,
                                                                     expected.nbest)
            alone = postprocess_predictions(data, start, end, version_2_with_negative=v2, nbest=False)  # old name
            assert (alone.predictions, alone.null_odds) == (expected.predictions, expected.null_odds)
    assert got.predictions["no-window"] == "" and "no-window" not in got.null_odds


def test_top_positions_orders_by_logit_then_position():
    rng = np.random.default_rng(0)
    values = np.array([-np.inf, -1e4, -2.5, -0.0, 0.0, 1.5, 3.0, np.inf], np.float32)
    for trial in range(600):
        rows, length = rng.integers(1, 6), rng.integers(1, 50)
        if trial % 3 == 0:
            logits = rng.choice(values, (rows, length))
        else:
            logits = rng.normal(size=(rows, length)).astype(np.float32).round(1 if trial % 3 == 1 else 6)
        allowed = rng.random((rows, length)) < rng.random()
        k = int(rng.integers(1, 25))
        positions, present = top_positions(logits, allowed, k)
        for r in range(rows):
            expected = sorted(np.flatnonzero(allowed[r]).tolist(), key=lambda p: (-logits[r, p], p))[:k]
            assert present[r].tolist() == [True] * len(expected) + [False] * (min(k, length) - len(expected))
            assert positions[r, : len(expected)].tolist() == expected


def test_window_spans_masks_order_length_and_context():
    start = np.array([[9.0, 2.0, 1.0, 0.5, 7.0]], np.float32)
    end = np.array([[9.0, 0.1, 3.0, 0.2, 8.0]], np.float32)
    allowed = np.array([[False, True, True, True, False]])  # [CLS] and the last [SEP] are outside the context
    found = window_spans(start, end, allowed, allowed, n_best_size=3, max_answer_length=2)
    assert found["start"].tolist() == [[1, 2, 3]] and found["end"].tolist() == [[2, 3, 1]]
    spans = [(int(found["start"][0, i]), int(found["end"][0, j]), float(found["score"][0, i, j]))
             for i, j in zip(*np.nonzero(found["valid"][0]))]
    assert spans == [(1, 2, 5.0), (1, 1, 2.0999999046325684), (2, 2, 4.0), (2, 3, 1.2000000476837158),
                     (3, 3, 0.699999988079071)]


def test_best_spans_in_window_equals_the_full_score_matrix(logits):
    from keras_bert_impl.models.span_decoding import best_spans_in_window

    full_matrix_spans = load_script("benchmarks/squad_host.py").previous_answer_window_search  # the code before
    rng = np.random.default_rng(0)
    start, end = logits
    for trial in range(400):
        count = int(rng.integers(1, 120))
        row = trial % len(start)
        starts = start[row, :count].astype("float64")
        ends = end[row, :count].astype("float64")
        if trial % 2:  # equal scores
            starts, ends = np.round(starts), np.round(ends)
        allowed = rng.random(count) < rng.random()
        max_answer_length, top_k = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        scores, s, e = best_spans_in_window(starts, ends, allowed, max_answer_length, top_k)
        assert list(zip(scores.tolist(), s.tolist(), e.tolist())) == full_matrix_spans(
            starts, ends, allowed, max_answer_length, top_k)


def _previous_byte_to_char_offsets(text, byte_starts, byte_ends):
    """`span_windows.byte_to_char_offsets` before: each character's UTF-8 length from a Python loop."""
    byte_starts, byte_ends = np.asarray(byte_starts, np.int64), np.asarray(byte_ends, np.int64)
    encoded_lengths = np.fromiter((len(ch.encode("utf-8")) for ch in text), dtype=np.int64, count=len(text))
    if int(encoded_lengths.sum()) == len(text):
        return byte_starts, byte_ends
    char_of_byte = np.append(np.repeat(np.arange(len(text), dtype=np.int64), encoded_lengths), len(text))
    starts = char_of_byte[byte_starts]
    ends = char_of_byte[np.maximum(byte_ends - 1, 0)] + 1
    return starts, np.maximum(ends, starts)


def test_byte_to_char_offsets_equal_the_loop_on_every_dev_text(shared_data):
    from keras_bert_impl.text.span_windows import byte_to_char_offsets

    dataset = squad.load_squad_json(shared_data / "squad" / "dev-v1.1.json.gz")
    texts = [p["context"] for a in dataset["data"] for p in a["paragraphs"]]
    texts += [qa["question"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    texts += ["", "é", "a\U0001F600b\u4e2d", "\u00e9\u0800\uffff\U00010000"]
    assert sum(not text.isascii() for text in texts) > 100  # accents, dashes, CJK in the real file
    rng = np.random.default_rng(0)
    for text in texts:
        size = len(text.encode("utf-8"))
        starts = np.sort(rng.integers(0, max(size, 1), 8))
        ends = np.minimum(starts + rng.integers(1, 6, 8), size)
        got = byte_to_char_offsets(text, starts, ends)
        expected = _previous_byte_to_char_offsets(text, starts, ends)
        assert got[0].tolist() == expected[0].tolist() and got[1].tolist() == expected[1].tolist(), text
