"""Query, key and value from three matmuls on the `qkv` kernel's column blocks (`qkv_projection="split"`).

Session 21's H100 profile found the fused projection's output sliced into query, key and value by a copy of
151 MB a layer at batch 256 (`loop_slice_fusion`, 1.2 ms a step). `"split"` runs three matmuls on the same
weights instead. It must be the same model: the outputs, the loss and one SGD step equal the fused form's
within 1e-5 in float32, with the real all-MiniLM-L6-v2 weights on real text, on every backend.
"""

import keras
import numpy as np
import pytest

from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.models.backbone import BertBackbone
from tests.equivalent_backbones import loss_and_sgd_step, sequence_output_difference

TOLERANCE = 1e-5


@pytest.mark.multibackend
def test_split_projection_gives_the_fused_outputs(minilm_examples):
    worst, split = sequence_output_difference(minilm_examples, {}, {"qkv_projection": "split"})
    assert [layer.qkv_projection for layer in split.transformer_layers] == ["split"] * 6
    assert len(split.weights) == 6 * 12 + 7  # the fused layout's variables (one qkv kernel and bias a block), no others
    assert worst <= TOLERANCE


@pytest.mark.slow
@pytest.mark.multibackend
def test_split_projection_gives_the_fused_loss_and_sgd_step(minilm_examples):
    loss_difference, moved, differ = loss_and_sgd_step(minilm_examples, {"qkv_projection": "fused"},
                                                       {"qkv_projection": "split"})
    print(f"loss difference {loss_difference:.3g}; one SGD step: largest weight change {moved:.3g}, "
          f"split vs fused {differ:.3g}")
    assert loss_difference <= TOLERANCE and moved > 1e-3 and differ <= TOLERANCE


@pytest.mark.multibackend
def test_split_projection_under_mixed_precision_and_with_every_attention_path():
    x = np.random.default_rng(0).standard_normal((2, 6, 16)).astype("float32")
    padding = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    for settings in ({}, {"attention_padding": "lengths"}):
        a = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0, **settings)
        b = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0, qkv_projection="split", **settings)
        a.build(x.shape)
        b.build(x.shape)
        b.set_weights(a.get_weights())
        np.testing.assert_allclose(keras.ops.convert_to_numpy(b(x, padding_mask=padding)),
                                   keras.ops.convert_to_numpy(a(x, padding_mask=padding)), atol=TOLERANCE)
    # Attention dropout's explicit softmax path runs on the split projection too.
    dropping = TransformerEncoder(num_heads=2, intermediate_dim=32, attention_dropout=0.5, qkv_projection="split")
    assert keras.ops.convert_to_numpy(dropping(x, padding_mask=padding, training=True)).shape == (2, 6, 16)
    half = TransformerEncoder(num_heads=2, intermediate_dim=32, qkv_projection="split", dtype="mixed_bfloat16")
    out = half(x, padding_mask=padding)
    assert "bfloat16" in str(out.dtype)


def test_qkv_projection_is_a_setting_not_architecture(tmp_path):
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, qkv_projection="split")
    config = backbone.get_config()
    assert config["qkv_projection"] == "split"
    assert BertBackbone.from_config(config).transformer_layers[0].qkv_projection == "split"
    assert "qkv_projection" not in backbone.architecture_config()  # saved presets do not record it
    backbone.save_to_preset(str(tmp_path / "preset"))
    assert BertBackbone.from_preset(str(tmp_path / "preset")).qkv_projection == "fused"
    assert BertBackbone.from_preset(str(tmp_path / "preset"), qkv_projection="split").qkv_projection == "split"
    layer = TransformerEncoder(num_heads=2, intermediate_dim=16, qkv_projection="split")
    assert TransformerEncoder.from_config(layer.get_config()).qkv_projection == "split"
    with pytest.raises(ValueError) as error:
        BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                     qkv_projection="three")
    assert str(error.value) == ("qkv_projection='three': expected 'fused' (one matmul, its output sliced) or "
                                "'split' (three matmuls on the kernel's column blocks).")
