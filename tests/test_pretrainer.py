"""BertPretrainer on real text: shapes, tied embedding, losses/metrics, fit, .keras round trip (all backends)."""

import numpy as np
import keras
import pytest

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.pretrainer import BertPretrainer
from pretraining_batches import make_batches


@pytest.fixture(scope="module")
def batch(data_slices, minilm_dir):
    return make_batches(data_slices, minilm_dir / "tokenizer.json", num_examples=16)


def tiny_backbone():
    return BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=32, dropout=0.0,
    )


@pytest.mark.multibackend
def test_outputs_and_tied_embedding(batch):
    keras.utils.set_random_seed(0)
    model = BertPretrainer(tiny_backbone())
    x, _, _ = BertPretrainer.split_features_labels(batch)
    out = model(x)
    assert tuple(out["mlm"].shape) == (16, 5, 30522) and tuple(out["nsp"].shape) == (16, 2)
    assert model.masked_lm_head.token_embedding is model.backbone.token_embedding
    # The tie means the output projection is the embedding matrix: no (hidden, vocab) kernel.
    assert not any(w.shape == (16, 30522) for w in model.weights)


@pytest.mark.multibackend
def test_mlm_loss_is_mean_over_real_masked_positions(batch):
    keras.utils.set_random_seed(0)
    model = BertPretrainer(tiny_backbone())
    model.compile()
    x, y, w = BertPretrainer.split_features_labels(batch)
    logs = model.evaluate(x, y, sample_weight=w, batch_size=16, verbose=0, return_dict=True)
    logits = keras.ops.convert_to_numpy(model(x)["mlm"]).astype("float64")
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    ce = -np.take_along_axis(log_probs, batch["mask_ids"][..., None], -1)[..., 0]
    weights = batch["mask_weights"].astype("float64")
    expected = (ce * weights).sum() / weights.sum()
    np.testing.assert_allclose(logs["mlm_loss"], expected, rtol=1e-4)
    assert set(logs) >= {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"}
    np.testing.assert_allclose(logs["loss"], logs["mlm_loss"] + logs["nsp_loss"], rtol=1e-4)


@pytest.mark.slow
@pytest.mark.multibackend
def test_fit_lowers_the_loss_and_round_trips_through_keras_file(batch, tmp_path):
    keras.utils.set_random_seed(0)
    model = BertPretrainer(tiny_backbone())
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    x, y, w = BertPretrainer.split_features_labels(batch)
    history = model.fit(x, y, sample_weight=w, batch_size=16, epochs=8, verbose=0).history
    assert history["loss"][-1] < history["loss"][0] - 0.5
    path = tmp_path / "pretrainer.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    assert restored.masked_lm_head.token_embedding is restored.backbone.token_embedding
    for key in ("mlm", "nsp"):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(restored(x)[key]),
            keras.ops.convert_to_numpy(model(x)[key]), atol=1e-5,
        )
    # Training the restored model moves the embedding and the MLM projection together.
    restored.fit(x, y, sample_weight=w, batch_size=16, epochs=1, verbose=0)
    assert restored.masked_lm_head.token_embedding.embeddings is restored.backbone.token_embedding.embeddings


@pytest.mark.multibackend
def test_mlm_only_model(batch):
    model = BertPretrainer(tiny_backbone(), nsp=False)
    model.compile()
    x, y, w = BertPretrainer.split_features_labels(batch, nsp=False)
    assert set(model(x)) == {"mlm"}
    logs = model.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)
    assert "nsp_loss" not in logs and np.isfinite(logs["mlm_loss"])
    assert BertPretrainer.from_config(model.get_config()).nsp is False


@pytest.mark.multibackend
def test_vocabulary_padding_keeps_the_pretrainers_outputs_and_round_trips(batch):
    """30,522 -> 30,592 columns for the MLM projection (a multiple of 128): same logits, same weights."""
    keras.utils.set_random_seed(0)
    backbone = tiny_backbone()
    plain, padded = BertPretrainer(backbone), BertPretrainer(backbone, vocabulary_padding_multiple=128)
    assert padded.masked_lm_head._vocabulary_padding() == 70
    x, _, _ = BertPretrainer.split_features_labels(batch)
    padded.masked_lm_head.set_weights(plain.masked_lm_head.get_weights())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(padded(x)["mlm"]),
                               keras.ops.convert_to_numpy(plain(x)["mlm"]), atol=1e-5)
    restored = BertPretrainer.from_config(padded.get_config())
    assert restored.vocabulary_padding_multiple == 128
    assert restored.masked_lm_head.vocabulary_padding_multiple == 128


@pytest.mark.multibackend
def test_bad_backbone_is_rejected():
    with pytest.raises(TypeError, match="`backbone` must be a BertBackbone"):
        BertPretrainer(keras.layers.Dense(2))


def test_split_features_labels_on_tf_data(batch):
    import tensorflow as tf
    from keras_bert_impl.training.pretraining_inputs import split_features_labels

    dataset = tf.data.Dataset.from_tensor_slices(batch).batch(8).map(split_features_labels)
    x, y, w = next(iter(dataset))
    assert set(x) == {"token_ids", "segment_ids", "padding_mask", "mask_positions"}
    np.testing.assert_allclose(tf.reduce_sum(w["mlm"]).numpy(), 8 * 5, rtol=1e-6)
    np.testing.assert_array_equal(y["nsp"].numpy(), batch["next_sentence_labels"][:8])
    with pytest.raises(KeyError, match=r"lacks \['mask_ids'\]"):
        split_features_labels({k: v for k, v in batch.items() if k != "mask_ids"})


# Measured on TensorFlow; JAX and torch agree to ~1e-8 (the test holds them to 1e-5).
EXPECTED_PROBE_GRADIENT_NORM = 0.18739512


def _deterministic_weights(model):
    """The same values on every backend: seeded by each variable's path (the variable order differs)."""
    import zlib

    for v in model.weights:
        rng = np.random.default_rng(zlib.crc32(v.path.encode()))
        v.assign(rng.normal(0.0, 0.05, tuple(v.shape)).astype("float32"))


@pytest.mark.multibackend
def test_probe_gradient_norm_is_finite_and_equal_on_every_backend(batch):
    from keras_bert_impl.training.pretraining_callbacks import probe_gradient_norm

    model = BertPretrainer(tiny_backbone())
    _deterministic_weights(model)
    norm = probe_gradient_norm(model, {k: np.asarray(v) for k, v in batch.items()})
    print(f"{keras.backend.backend()} probe gradient norm: {norm!r}")
    assert np.isfinite(norm) and norm > 0
    assert norm == pytest.approx(EXPECTED_PROBE_GRADIENT_NORM, rel=1e-5)
