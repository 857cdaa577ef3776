"""BertSpanExtractor and SpanHead: masking, loss, training step and `.keras` round trip (all backends)."""

import numpy as np
import pytest

import keras

from keras_bert_impl import BertBackbone
from keras_bert_impl.layers.span_head import MASKED_LOGIT, SpanHead, answer_candidate_mask
from keras_bert_impl.models.span_extractor import BertSpanExtractor, SpanLoss


def _backbone():
    return BertBackbone(
        vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )


def _inputs():
    # [CLS] q q [SEP] c c c [SEP] [PAD] [PAD]  and  [CLS] q [SEP] c [SEP] [PAD]...
    return {
        "token_ids": np.array([[2, 5, 6, 3, 7, 8, 9, 3, 0, 0], [2, 5, 3, 7, 3, 0, 0, 0, 0, 0]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0, 0, 0]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]], "int32"),
    }


@pytest.mark.multibackend
def test_answer_candidate_mask_allows_cls_and_context_only():
    x = _inputs()
    mask = np.asarray(keras.ops.convert_to_numpy(answer_candidate_mask(x["segment_ids"], x["padding_mask"])))
    assert mask.astype(int).tolist() == [
        [1, 0, 0, 0, 1, 1, 1, 0, 0, 0],
        [1, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    ]


@pytest.mark.multibackend
def test_span_extractor_masks_impossible_positions():
    model = BertSpanExtractor(_backbone())
    out = model.predict(_inputs(), verbose=0)
    assert sorted(out) == ["end_logits", "start_logits"]
    for key in out:
        logits = np.asarray(out[key])
        assert logits.shape == (2, 10) and logits.dtype == np.float32
        allowed = logits > MASKED_LOGIT / 2
        assert allowed.astype(int).tolist() == [[1, 0, 0, 0, 1, 1, 1, 0, 0, 0], [1, 0, 0, 1, 0, 0, 0, 0, 0, 0]]


@pytest.mark.multibackend
def test_span_loss_is_mean_of_start_and_end_cross_entropy():
    logits = np.log(np.array([[0.5, 0.25, 0.25]], "float32"))
    loss = SpanLoss()
    assert float(keras.ops.convert_to_numpy(loss(np.array([0]), logits))) == pytest.approx(0.5 * np.log(2), rel=1e-5)


@pytest.mark.multibackend
def test_span_loss_ignores_rows_labelled_minus_one():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 6)).astype("float32")
    labels = np.array([2, 5, -1, -1])
    loss = float(keras.ops.convert_to_numpy(SpanLoss()(labels, logits)))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = 0.5 * -np.mean([log_probs[0, 2], log_probs[1, 5]])
    assert loss == pytest.approx(expected, rel=1e-5)
    # Only the two real rows matter: the same as the loss of the unpadded batch.
    assert loss == pytest.approx(float(keras.ops.convert_to_numpy(SpanLoss()(labels[:2], logits[:2]))), rel=1e-6)


@pytest.mark.slow
@pytest.mark.multibackend
def test_span_extractor_trains_and_round_trips_keras_file(tmp_path):
    keras.utils.set_random_seed(0)
    model = BertSpanExtractor(_backbone())
    x = _inputs()
    y = {"start_logits": np.array([5, 0], "int32"), "end_logits": np.array([6, 0], "int32")}
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=model.loss)
    history = model.fit(x, y, epochs=8, batch_size=2, verbose=0).history["loss"]
    assert history[-1] < history[0]
    before = model.predict(x, verbose=0)
    path = tmp_path / "span.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, BertSpanExtractor)
    assert isinstance(restored.backbone, BertBackbone)
    after = restored.predict(x, verbose=0)
    for key in before:
        np.testing.assert_allclose(after[key], before[key], atol=1e-5)


@pytest.mark.multibackend
def test_span_head_config_round_trip():
    head = SpanHead(name="h")
    clone = SpanHead.from_config(head.get_config())
    assert clone.name == "h"
    assert clone.get_config()["kernel_initializer"] == head.get_config()["kernel_initializer"]


def test_span_extractor_rejects_non_backbone():
    with pytest.raises(TypeError, match="`backbone` must be a BertBackbone, got Dense"):
        BertSpanExtractor(keras.layers.Dense(2))


def test_answer_applies_the_null_rule_of_span_decoding():
    """SQuAD v2.0: `answer(null_score_diff_threshold=...)` says "" by the rule `answer_questions` uses (span_decoding)."""
    import keras_bert_impl
    from keras_bert_impl.models import span_decoding

    preprocessor = keras_bert_impl.BertSpanExtractorPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=32)
    model = BertSpanExtractor(BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8,
                                           intermediate_dim=16, max_sequence_length=32), preprocessor=preprocessor)
    question, context = "Who sat?", "The cat sat on the mat."
    windows = preprocessor.windows([question], [context])
    target = int(windows.context_start[0]) + 1  # the context's second token: "cat"

    def predict(features, **kwargs):
        start = np.full(features["token_ids"].shape, -5.0, "float32")
        start[:, 0] = 6.0  # [CLS]: null score 12
        start[:, target] = 5.0  # the span "cat": score 10
        return {"start_logits": start, "end_logits": start.copy()}

    model.predict = predict
    span = model.answer(question, context)
    assert span["text"] == "cat" and "null_odds" not in span  # v1.1: always a span
    no_answer = model.answer(question, context, null_score_diff_threshold=0.0)
    assert no_answer["text"] == "" and no_answer["null_odds"] == pytest.approx(2.0)
    assert no_answer["null_odds"] == span_decoding.null_odds(12.0, 10.0)
    assert 0.0 < no_answer["score"] < 1.0
    kept = model.answer(question, context, null_score_diff_threshold=2.0)  # odds 2 are not > 2
    assert kept["text"] == "cat" and kept["null_odds"] == pytest.approx(2.0)
    # Hugging Face's pipeline's name for it: handle_impossible_answer=True is the threshold 0.
    assert model.answer(question, context, handle_impossible_answer=True) == no_answer
    with pytest.raises(ValueError) as error:
        model.answer(question, context, handle_impossible_answer=True, null_score_diff_threshold=1.0)
    assert str(error.value) == ("Give `null_score_diff_threshold` or `handle_impossible_answer=True` (which is "
                                "null_score_diff_threshold=0.0), not both.")
