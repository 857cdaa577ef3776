"""Behaviour of the modelling layers, on every backend."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_bert_impl.layers import (
    Float32LayerNormalization,
    MaskedLMHead,
    NextSentenceHead,
    PositionEmbedding,
    TransformerEncoder,
)

pytestmark = pytest.mark.multibackend


def _np(x):
    return ops.convert_to_numpy(x)


def test_position_embedding_any_length_up_to_max():
    layer = PositionEmbedding(max_sequence_length=16)
    short = _np(layer(np.zeros((2, 5, 8), "float32")))
    full = _np(layer(np.zeros((1, 16, 8), "float32")))
    assert short.shape == (2, 5, 8)
    np.testing.assert_array_equal(short[0], full[0, :5])
    np.testing.assert_array_equal(short[0], short[1])


def test_position_embedding_too_long_names_both_numbers():
    layer = PositionEmbedding(max_sequence_length=16)
    with pytest.raises(ValueError, match=r"length 20 is longer than max_sequence_length=16"):
        layer(np.zeros((1, 20, 8), "float32"))


def test_transformer_encoder_ignores_padding_content():
    block = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    y = x.copy()
    y[0, 4:] = rng.normal(size=(2, 16))  # change only the padded positions
    out_x = _np(block(x, padding_mask=mask))
    out_y = _np(block(y, padding_mask=mask))
    np.testing.assert_allclose(out_x[0, :4], out_y[0, :4], atol=1e-6)
    np.testing.assert_allclose(out_x[1], out_y[1], atol=1e-6)


def test_transformer_encoder_half_precision_masks_like_float32():
    # Under bf16 the JAX path broadcasts the mask to (batch, 1, query, key) (what
    # cuDNN's fused attention takes); padded keys must stay ignored and the
    # result must match the float32 block with the same weights.
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    full = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0)
    half = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0, dtype="mixed_bfloat16")
    full(x, padding_mask=mask)
    half(x, padding_mask=mask)
    half.set_weights(full.get_weights())
    y = x.copy()
    y[0, 3:] = rng.normal(size=(3, 16))  # change only the padded positions
    out_x = _np(ops.cast(half(x, padding_mask=mask), "float32"))
    out_y = _np(ops.cast(half(y, padding_mask=mask), "float32"))
    np.testing.assert_array_equal(out_x[0, :3], out_y[0, :3])
    np.testing.assert_allclose(out_x, _np(full(x, padding_mask=mask)), atol=0.1)


def test_transformer_encoder_explicit_attention_path_matches_fused():
    # attention_dropout > 0 in training takes the explicit softmax path; with a
    # vanishing rate it must give the fused-kernel result.
    block = TransformerEncoder(num_heads=4, intermediate_dim=32, dropout=0.0, attention_dropout=1e-12)
    x = np.random.default_rng(1).normal(size=(2, 7, 16)).astype("float32")
    mask = np.array([[1] * 5 + [0] * 2, [1] * 7], "int32")
    fused = _np(block(x, padding_mask=mask, training=False))
    explicit = _np(block(x, padding_mask=mask, training=True))
    np.testing.assert_allclose(fused, explicit, atol=1e-5)


def test_gelu_variants_are_exact_erf_and_tanh_approximation():
    from keras_bert_impl.layers.transformer_encoder import get_activation

    x = np.array([-2.0, -0.5, 1.0, 3.0], "float32")
    exact = _np(get_activation("gelu")(x))
    approx = _np(get_activation("gelu_approximate")(x))
    from math import erf, pi, sqrt, tanh

    np.testing.assert_allclose(exact, [v * 0.5 * (1 + erf(v / sqrt(2))) for v in x], atol=1e-6)
    np.testing.assert_allclose(
        approx, [0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v**3))) for v in x], atol=1e-6
    )
    assert np.abs(exact - approx).max() > 1e-4
    block = TransformerEncoder(num_heads=2, intermediate_dim=16, activation="gelu_approximate")
    assert TransformerEncoder.from_config(block.get_config()).activation == "gelu_approximate"
    with pytest.raises(ValueError, match="Unknown activation 'swish'"):
        TransformerEncoder(num_heads=2, intermediate_dim=16, activation="swish")


def test_transformer_encoder_heads_must_divide_hidden():
    block = TransformerEncoder(num_heads=3, intermediate_dim=16)
    with pytest.raises(ValueError, match="hidden_dim=16 is not divisible by num_heads=3"):
        block(np.zeros((1, 4, 16), "float32"))


def test_masked_lm_head_scores_only_gathered_positions_with_tied_embedding():
    embedding = keras.layers.Embedding(50, 16)
    embedding.build((None,))
    head = MaskedLMHead(token_embedding=embedding, activation="gelu")
    rng = np.random.default_rng(3)
    sequence = rng.normal(size=(2, 8, 16)).astype("float32")
    positions = np.array([[1, 3, 0], [7, 7, 2]], "int32")
    logits = _np(head(sequence, mask_positions=positions))
    assert logits.shape == (2, 3, 50)
    # Reference: gather, dense, exact GELU, LayerNorm, tied projection + bias.
    gathered = np.take_along_axis(sequence, positions[:, :, None], axis=1)
    kernel, bias = (_np(w) for w in head.transform_dense.weights)
    h = gathered @ kernel + bias
    h = _np(keras.activations.gelu(h, approximate=False))
    mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    gamma, beta = _np(head.layer_norm.gamma), _np(head.layer_norm.beta)
    h = (h - mean) / np.sqrt(var + 1e-12) * gamma + beta
    expected = h @ _np(embedding.embeddings).T + _np(head.output_bias)
    np.testing.assert_allclose(logits, expected, atol=1e-4)


def test_masked_lm_head_vocabulary_mismatch_and_missing_size():
    embedding = keras.layers.Embedding(50, 16)
    with pytest.raises(ValueError, match="vocabulary_size=40 does not match the tied token embedding's input_dim=50"):
        MaskedLMHead(vocabulary_size=40, token_embedding=embedding)
    with pytest.raises(ValueError, match="needs `vocabulary_size` or `token_embedding`"):
        MaskedLMHead()


@pytest.mark.parametrize("tied", [True, False])
def test_masked_lm_head_vocabulary_padding_changes_no_output_and_no_gradient(tied):
    """Padding 50 -> 64 (multiple 32) computes the projection on a wider kernel and slices the padding logits
    off: the logits, their shape, the weights and the gradients equal the unpadded head's."""
    rng = np.random.default_rng(5)
    sequence = rng.normal(size=(2, 8, 16)).astype("float32")
    positions = np.array([[1, 3, 0], [7, 7, 2]], "int32")
    heads = []
    for multiple in (None, 32):
        keras.utils.set_random_seed(0)
        embedding = keras.layers.Embedding(50, 16)
        embedding.build((None,))
        arguments = dict(token_embedding=embedding) if tied else dict(vocabulary_size=50)
        heads.append(MaskedLMHead(vocabulary_padding_multiple=multiple, **arguments))
    plain, padded = heads
    assert padded._vocabulary_padding() == 14 and plain._vocabulary_padding() == 0
    outputs = [_np(head(sequence, mask_positions=positions)) for head in heads]
    assert outputs[1].shape == (2, 3, 50)
    for a, b in zip(plain.weights, padded.weights):
        np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_allclose(outputs[1], outputs[0], atol=1e-5)
    # A vocabulary that is already a multiple gets no padding.
    assert MaskedLMHead(vocabulary_size=64, vocabulary_padding_multiple=32)._vocabulary_padding() == 0
    if keras.backend.backend() == "jax":  # gradients through pad + slice, on the backend the GPU runs use
        import jax

        labels = rng.integers(0, 50, size=(2, 3))

        def loss_of(head):
            def loss(values):
                logits = head.stateless_call(values, [], sequence, mask_positions=positions)[0]
                return keras.ops.mean(keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
            return jax.grad(loss)([v.value for v in head.trainable_variables])

        for a, b in zip(loss_of(plain), loss_of(padded)):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-6)


def test_masked_lm_head_vocabulary_padding_must_be_a_positive_integer():
    for bad in (0, -128, 1.5, True, "128"):
        with pytest.raises(ValueError) as caught:
            MaskedLMHead(vocabulary_size=50, vocabulary_padding_multiple=bad)
        assert str(caught.value) == (
            f"vocabulary_padding_multiple must be None or an integer >= 1 (e.g. 128), got {bad!r}")


def test_next_sentence_head_shape_and_float32_logits_under_mixed_precision():
    head = NextSentenceHead(dtype="mixed_bfloat16")
    logits = head(np.random.rand(3, 16).astype("float32"))
    assert tuple(logits.shape) == (3, 2)
    assert "float32" in str(logits.dtype)


@pytest.mark.parametrize(
    "layer",
    [
        lambda: PositionEmbedding(max_sequence_length=12),
        lambda: TransformerEncoder(num_heads=2, intermediate_dim=8, activation="gelu_approximate"),
        lambda: MaskedLMHead(vocabulary_size=30),
        lambda: MaskedLMHead(vocabulary_size=30, vocabulary_padding_multiple=128),
        lambda: NextSentenceHead(),
        lambda: Float32LayerNormalization(epsilon=1e-12),
    ],
)
def test_layers_round_trip_through_config(layer):
    original = layer()
    restored = original.__class__.from_config(original.get_config())
    assert restored.get_config() == original.get_config()


def test_float32_layer_norm_under_mixed_precision():
    ln = Float32LayerNormalization(epsilon=1e-12, dtype="mixed_bfloat16")
    x = np.random.default_rng(4).normal(size=(2, 8)).astype("float32") * 100
    out = ln(x)
    assert "bfloat16" in str(out.dtype)
    assert "float32" in str(ln.gamma.dtype)
    ref = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)
    np.testing.assert_allclose(_np(ops.cast(out, "float32")), ref, atol=0.05)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="one run is enough: it starts its own JAX interpreter")
def test_modelling_code_imports_no_tensorflow():
    # Build a backbone and both heads under JAX in a fresh interpreter and
    # check that TensorFlow was never imported.
    code = (
        "import sys, numpy as np\n"
        "from keras_bert_impl import BertBackbone\n"
        "from keras_bert_impl.layers import MaskedLMHead, NextSentenceHead\n"
        "b = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8)\n"
        "out = b({'token_ids': np.ones((1, 4), 'int32'), 'segment_ids': np.zeros((1, 4), 'int32'), 'padding_mask': np.ones((1, 4), 'int32')})\n"
        "MaskedLMHead(token_embedding=b.token_embedding)(out['sequence_output'], mask_positions=np.zeros((1, 2), 'int32'))\n"
        "NextSentenceHead()(out['pooled_output'])\n"
        "assert 'tensorflow' not in sys.modules, sorted(m for m in sys.modules if m.startswith('tensorflow'))[:5]\n"
        "print('ok')\n"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]
