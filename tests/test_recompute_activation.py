"""The feed-forward bias + GELU recomputed in the backward pass (`recompute_activation`, the default).

Compiled for an H100 (`benchmarks/hlo_traffic.py --target h100`, BERT-base, batch 256, bf16), autodiff of the
stored form writes GELU's tanh next to its output in the forward pass and reads it back in the backward pass:
403 MB a block. Recomputing the bias + GELU from the intermediate matmul's output, which the backward keeps
anyway, moves 4.8 GB less a step. It must be the same model: outputs, loss and one SGD step equal the stored
form's within 1e-5 in float32, with the real all-MiniLM-L6-v2 weights on real text, on every backend.
"""

import keras
import numpy as np
import pytest

from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.models.backbone import BertBackbone
from tests.equivalent_backbones import loss_and_sgd_step, sequence_output_difference

TOLERANCE = 1e-5


@pytest.mark.multibackend
def test_recomputed_activation_gives_the_stored_outputs(minilm_examples):
    worst, recomputed = sequence_output_difference(minilm_examples, {"recompute_activation": False}, {})
    assert [layer.recompute_activation for layer in recomputed.transformer_layers] == [True] * 6
    assert len(recomputed.weights) == 6 * 12 + 7  # no variables of its own
    assert worst <= TOLERANCE


@pytest.mark.slow
@pytest.mark.multibackend
def test_recomputed_activation_gives_the_stored_loss_and_sgd_step(minilm_examples):
    loss_difference, moved, differ = loss_and_sgd_step(minilm_examples, {"recompute_activation": False},
                                                       {"recompute_activation": True})
    print(f"loss difference {loss_difference:.3g}; one SGD step: largest weight change {moved:.3g}, "
          f"recomputed vs stored {differ:.3g}")
    assert loss_difference <= TOLERANCE and moved > 1e-3 and differ <= TOLERANCE


def _gradient_jaxpr(layer, x):
    import jax

    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def loss(weights):
        out, _ = layer.stateless_call(weights, non_trainable, x)
        return jax.numpy.sum(out)

    return str(jax.make_jaxpr(jax.grad(loss))(trainable))


@pytest.mark.multibackend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="jax.checkpoint is JAX's")
def test_the_jax_backward_pass_recomputes_the_activation_and_lora_keeps_the_dense_call():
    x = np.random.default_rng(0).standard_normal((2, 6, 16)).astype("float32")
    layers = {}
    for recompute in (True, False):
        layers[recompute] = TransformerEncoder(num_heads=2, intermediate_dim=32, recompute_activation=recompute)
        layers[recompute].build(x.shape)
    layers[True].set_weights(layers[False].get_weights())
    assert "checkpoint" in _gradient_jaxpr(layers[True], x) or "remat" in _gradient_jaxpr(layers[True], x)
    assert "checkpoint" not in _gradient_jaxpr(layers[False], x) and "remat" not in _gradient_jaxpr(layers[False], x)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layers[True](x)),
                               keras.ops.convert_to_numpy(layers[False](x)), atol=TOLERANCE)
    # A LoRA kernel lives in the Dense layer's own call: that path runs, and LoRA's weights count.
    layers[True].intermediate_dense.enable_lora(2)
    assert "checkpoint" not in _gradient_jaxpr(layers[True], x) and "remat" not in _gradient_jaxpr(layers[True], x)


@pytest.mark.multibackend
def test_recomputed_activation_under_mixed_precision_with_lora_and_dropout():
    x = np.random.default_rng(1).standard_normal((2, 6, 16)).astype("float32")
    half = TransformerEncoder(num_heads=2, intermediate_dim=32, dtype="mixed_bfloat16")
    assert "bfloat16" in str(half(x).dtype)
    layer = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0)
    layer.build(x.shape)
    before = keras.ops.convert_to_numpy(layer(x))
    layer.intermediate_dense.enable_lora(2)  # LoRA's B starts at zero: the same outputs through the Dense call
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x)), before, atol=TOLERANCE)
    dropping = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.5)
    assert keras.ops.convert_to_numpy(dropping(x, training=True)).shape == (2, 6, 16)


def test_recompute_activation_is_a_setting_not_architecture(tmp_path):
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, recompute_activation=False)
    config = backbone.get_config()
    assert config["recompute_activation"] is False
    assert BertBackbone.from_config(config).transformer_layers[0].recompute_activation is False
    assert "recompute_activation" not in backbone.architecture_config()  # saved presets do not record it
    backbone.save_to_preset(str(tmp_path / "preset"))
    assert BertBackbone.from_preset(str(tmp_path / "preset")).recompute_activation is True
    assert BertBackbone.from_preset(str(tmp_path / "preset"),
                                    recompute_activation=False).recompute_activation is False
    layer = TransformerEncoder(num_heads=2, intermediate_dim=16, recompute_activation=False)
    assert TransformerEncoder.from_config(layer.get_config()).recompute_activation is False
    with pytest.raises(ValueError) as error:
        BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                     recompute_activation="yes")
    assert str(error.value) == "recompute_activation='yes': expected True or False."
