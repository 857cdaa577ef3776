"""SQuAD prediction batches (issue 18, item 7): length-bucketed, fixed-size batches give the answers that the
input-order batches gave, on real dev windows and the real MiniLM backbone."""

import numpy as np
import pytest

from keras_bert_impl.tasks import span_qa as squad
from keras_bert_impl.tasks.span_qa.batches import PackedPredictionBatches, PredictionBatches
from keras_bert_impl.tasks.span_qa.prediction import postprocess_predictions, predict_logits

pytestmark = pytest.mark.multibackend

BATCH_SIZE = 16


@pytest.fixture(scope="module")
def tokenizer():
    from keras_bert_impl.text.tokenizer import BertTokenizer

    return BertTokenizer.from_preset("all_minilm_l6_v2_en")


@pytest.fixture(scope="module")
def features(shared_data, tokenizer):
    """Windows of the first question of every paragraph of the evaluation articles, up to 40 windows.

    The contexts differ in length, so the windows fall in several buckets (128, 256, 384), and 40 windows in
    batches of 16 leave a partial last batch.
    """
    dataset = squad.load_squad_json(shared_data / "squad" / "dev-v1.1.json.gz")
    _, evaluation = squad.split_articles(dataset, 38)
    examples, _ = squad.read_squad_examples(evaluation, source="eval")
    first_of_paragraph = list({e.context: e for e in reversed(examples)}.values())[::-1]
    chosen, windows = [], 0
    for example in first_of_paragraph:
        count = len(squad.encode_examples([example], tokenizer))
        if windows + count > 40:
            break
        chosen.append(example)
        windows += count
    features = squad.encode_examples(chosen, tokenizer, sequence_length=384, doc_stride=128)
    assert len(features) % BATCH_SIZE  # a partial last batch
    return features


@pytest.fixture(scope="module")
def model():
    import keras

    from keras_bert_impl import BertBackbone, BertSpanExtractor

    keras.utils.set_random_seed(0)  # the span head is random; the answers only need to be fixed
    return BertSpanExtractor(BertBackbone.from_preset("all_minilm_l6_v2_en"))


def input_order_logits(model, features):
    """The logits as `predict_logits` computed them before issue 18 item 7: `to_array_batches` in input order."""
    n, width = features.token_ids.shape
    start, end = np.full((n, width), -10000.0, np.float32), np.full((n, width), -10000.0, np.float32)
    batches = features.to_array_batches(BATCH_SIZE)
    row, widths = 0, []
    for i in range(len(batches)):
        (inputs,) = batches[i]
        out = model.predict_on_batch(inputs)
        real = min(BATCH_SIZE, n - row)
        s, e = np.asarray(out["start_logits"])[:real], np.asarray(out["end_logits"])[:real]
        start[row : row + real, : s.shape[1]], end[row : row + real, : e.shape[1]] = s, e
        row += real
        widths.append(inputs["token_ids"].shape[1])
    return start, end, widths


def test_bucketed_batches_have_few_fixed_shapes_and_less_padding(features):
    batches = PredictionBatches(features, BATCH_SIZE)
    assert all(rows == BATCH_SIZE for rows, _ in batches.shapes)
    assert len(batches.shapes) <= len(batches.boundaries)
    seen = np.concatenate([rows for rows, _ in batches])
    assert sorted(seen.tolist()) == list(range(len(features)))  # every window once
    for rows, inputs in batches:
        assert (features.lengths[rows] <= inputs["token_ids"].shape[1]).all()
        np.testing.assert_array_equal(inputs["token_ids"][: len(rows)], features.token_ids[rows, : inputs["token_ids"].shape[1]])
        assert (inputs["token_ids"][len(rows) :] == inputs["token_ids"][0]).all()  # filler: copies of the first row
    assert [len(rows) for rows, _ in batches.plan] == [len(features) % BATCH_SIZE] + [BATCH_SIZE] * (len(batches) - 1)
    bucketed = sum(BATCH_SIZE * width for _, width in batches.plan)
    input_order = sum(BATCH_SIZE * width for _, width in PredictionBatches(features, BATCH_SIZE, sort_by_length=False).plan)
    assert bucketed < input_order


@pytest.mark.slow
def test_filled_partial_batch_gives_the_unfilled_logits(model, features):
    batches = PredictionBatches(features, BATCH_SIZE)
    (rows, inputs), *full = batches  # the one partial batch comes first, in the narrowest bucket
    assert len(rows) < BATCH_SIZE and all(len(r) == BATCH_SIZE for r, _ in full)
    assert inputs["token_ids"].shape[1] == min(width for _, width in batches.plan)
    padded = model.predict_on_batch(inputs)
    alone = model.predict_on_batch({name: values[: len(rows)] for name, values in inputs.items()})
    for name in ("start_logits", "end_logits"):
        real = inputs["padding_mask"][: len(rows)] == 1
        np.testing.assert_allclose(np.asarray(padded[name])[: len(rows)][real], np.asarray(alone[name])[real],
                                   rtol=0, atol=1e-5)


@pytest.mark.slow
def test_bucketed_prediction_gives_the_input_order_answers(model, features):
    old_start, old_end, old_widths = input_order_logits(model, features)
    stats = {}
    start, end = predict_logits(model, features, batch_size=BATCH_SIZE, stats=stats)
    assert len(stats["shapes"]) <= len(set(old_widths)) + 1 and stats["batches"] == len(old_widths)
    real = features.padding_mask == 1
    np.testing.assert_allclose(start[real], old_start[real], rtol=0, atol=1e-5)
    np.testing.assert_allclose(end[real], old_end[real], rtol=0, atol=1e-5)
    old = postprocess_predictions(features, old_start, old_end)
    new = postprocess_predictions(features, start, end)
    assert new.predictions == old.predictions
    assert {k: [e["text"] for e in v] for k, v in new.nbest.items()} == {k: [e["text"] for e in v] for k, v in old.nbest.items()}
    assert len(set(new.predictions.values())) > 1  # real, different answers, not one degenerate span


def test_packed_batches_hold_every_window_once_in_one_shape(features):
    batches = PackedPredictionBatches(features, BATCH_SIZE)
    assert batches.shapes == [(batches.rows_per_batch, 384)] and batches.rows_per_batch <= BATCH_SIZE
    rows = sum(len(r) for r in batches.plan)
    assert len(batches) == -(-rows // BATCH_SIZE) and len(batches) * batches.rows_per_batch - rows < len(batches)
    seen = []
    for placements, inputs in batches:
        for window, row, offset, length in placements.tolist():
            seen.append(window)
            assert length == features.lengths[window]
            np.testing.assert_array_equal(inputs["token_ids"][row, offset : offset + length],
                                          features.token_ids[window, :length])
            np.testing.assert_array_equal(inputs["segment_ids"][row, offset : offset + length],
                                          features.segment_ids[window, :length])
            ids = inputs["padding_mask"][row, offset : offset + length]
            assert len(set(ids.tolist())) == 1 and ids[0] > 0  # one example id a window
    assert sorted(seen) == list(range(len(features)))
    assert batches.token_slots < PredictionBatches(features, BATCH_SIZE).token_slots


@pytest.mark.slow
def test_packed_prediction_gives_the_unpacked_logits_and_answers(model, features):
    start, end = predict_logits(model, features, batch_size=BATCH_SIZE)
    stats = {}
    packed_start, packed_end = predict_logits(model, features, batch_size=BATCH_SIZE, packing=True, stats=stats)
    assert len(stats["shapes"]) == 1 and stats["real_tokens"] == int(features.lengths.sum())
    assert stats["token_slots"] < PredictionBatches(features, BATCH_SIZE).token_slots
    real = features.padding_mask == 1
    # Every real position, [CLS] and the masked question and [SEP]s included: the head masks each window alone.
    np.testing.assert_allclose(packed_start[real], start[real], rtol=0, atol=1e-5)
    np.testing.assert_allclose(packed_end[real], end[real], rtol=0, atol=1e-5)
    unpacked = postprocess_predictions(features, start, end)
    packed = postprocess_predictions(features, packed_start, packed_end)
    assert packed.predictions == unpacked.predictions
    assert {k: [e["text"] for e in v] for k, v in packed.nbest.items()} == {
        k: [e["text"] for e in v] for k, v in unpacked.nbest.items()}


def test_packed_prediction_refuses_attention_on_lengths(features):
    from keras_bert_impl import BertBackbone, BertSpanExtractor

    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=384, attention_padding="lengths")
    with pytest.raises(ValueError) as error:
        predict_logits(BertSpanExtractor(backbone), features, batch_size=BATCH_SIZE, packing=True)
    assert str(error.value) == (
        "predict_logits(packing=True) needs a backbone with attention_padding='mask': packed rows keep their "
        "examples apart with the block-diagonal mask, and this backbone has attention_padding='lengths' (one "
        "length per row, for unpacked rows).")


def test_packed_prediction_refuses_bucket_settings(model, features):
    for settings in ({"boundaries": [128, 384]}, {"sort_by_length": False}):
        with pytest.raises(ValueError) as error:
            predict_logits(model, features, batch_size=BATCH_SIZE, packing=True, **settings)
        assert str(error.value) == ("`packing=True` packs windows into full rows: leave `boundaries` and "
                                    "`sort_by_length` at their defaults.")


def test_packed_batches_are_balanced_so_the_filler_is_small():
    import types

    lengths = np.full(74, 384)  # full windows: one a row, 74 rows
    features = types.SimpleNamespace(lengths=lengths, token_ids=np.ones((74, 384), np.int32),
                                     segment_ids=np.zeros((74, 384), np.int32))
    batches = PackedPredictionBatches(features, batch_size=32)
    assert batches.rows_per_batch == 25 and [len(r) for r in batches.plan] == [25, 25, 24]
    assert batches.shapes == [(25, 384)] and batches.token_slots == 75 * 384
    last_placements, last_inputs = list(batches)[-1]
    assert last_inputs["token_ids"].shape == (25, 384) and len(last_placements) == 24


@pytest.mark.slow
def test_step_six_predict_gives_the_answers_that_evaluate_scores(model, features):
    """`span_qa.predict` (step 6) and `span_qa.evaluate` (step 4, `predict_squad`) answer every question alike."""
    predicted = squad.predict(model, features, batch_size=BATCH_SIZE)
    evaluated = squad.evaluate(model, features, batch_size=BATCH_SIZE)  # no gold: answers, no metrics
    assert predicted.predictions == evaluated.predictions and evaluated.metrics == {}
    assert set(predicted.predictions) == {example for example in predicted.nbest}
    assert all(predicted.nbest[i][0]["text"] == text for i, text in predicted.predictions.items())
