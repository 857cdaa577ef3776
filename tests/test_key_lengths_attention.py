"""Padding given to the attention as one length per row (`attention_padding="lengths"`; issue 18, row 2).

On JAX the lengths go to `jax.nn.dot_product_attention(key_value_seq_lengths=...)`, the form cuDNN's fused
attention takes on a GPU; on every backend the outputs, the loss and one SGD step must equal the mask path's
within 1e-5 in float32, with the real all-MiniLM-L6-v2 weights on real text.
"""

import keras
import numpy as np
import pytest

from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import BertClassifier
from tests.equivalent_backbones import loss_and_sgd_step, right_padded, sequence_output_difference

TOLERANCE = 1e-5


@pytest.mark.multibackend
def test_lengths_give_the_mask_paths_outputs_padding_positions_included(minilm_examples):
    batch = right_padded(minilm_examples)
    assert 0.2 < 1 - batch["padding_mask"].mean() < 0.8  # real padding in every batch row but the longest
    worst, lengths = sequence_output_difference(minilm_examples, {}, {"attention_padding": "lengths"})
    assert [layer.attention_padding for layer in lengths.transformer_layers] == ["lengths"] * 6
    assert worst <= TOLERANCE


@pytest.mark.slow
@pytest.mark.multibackend
def test_lengths_give_the_mask_paths_loss_and_sgd_step(minilm_examples):
    loss_difference, moved, differ = loss_and_sgd_step(minilm_examples, {"attention_padding": "mask"},
                                                       {"attention_padding": "lengths"})
    print(f"loss difference {loss_difference:.3g}; one SGD step: largest weight change {moved:.3g}, "
          f"lengths vs mask {differ:.3g}")
    assert loss_difference <= TOLERANCE and moved > 1e-3 and differ <= TOLERANCE


@pytest.mark.multibackend
def test_attention_dropout_and_attention_masks_keep_the_mask_path():
    x = np.random.default_rng(0).standard_normal((2, 6, 16)).astype("float32")
    padding = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    causal = np.tril(np.ones((6, 6), "int32"))[None].repeat(2, 0)
    a = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0)
    b = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0, attention_padding="lengths")
    a.build(x.shape)
    b.build(x.shape)
    b.set_weights(a.get_weights())
    for kwargs in ({"padding_mask": padding}, {"padding_mask": padding, "attention_mask": causal}):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(b(x, **kwargs)),
                                   keras.ops.convert_to_numpy(a(x, **kwargs)), atol=TOLERANCE)
    dropping = TransformerEncoder(num_heads=2, intermediate_dim=32, dropout=0.0, attention_dropout=0.5,
                                  attention_padding="lengths")
    assert keras.ops.convert_to_numpy(dropping(x, padding_mask=padding, training=True)).shape == (2, 6, 16)


@pytest.mark.multibackend
def test_jax_gets_the_lengths_not_a_mask(monkeypatch):
    if keras.backend.backend() != "jax":
        pytest.skip("the lengths reach jax.nn.dot_product_attention on JAX only")
    import jax

    calls = []
    original = jax.nn.dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(jax.nn, "dot_product_attention", spy)
    layer = TransformerEncoder(num_heads=2, intermediate_dim=32, attention_padding="lengths")
    layer(np.ones((2, 5, 16), "float32"), padding_mask=np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]))
    assert len(calls) == 1
    assert np.asarray(calls[0]["key_value_seq_lengths"]).tolist() == [3, 5]
    assert "mask" not in calls[0] and calls[0]["implementation"] == "xla"  # the CPU; cuDNN on a GPU in bf16


def test_attention_padding_is_a_setting_not_architecture(tmp_path):
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, attention_padding="lengths")
    config = backbone.get_config()
    assert config["attention_padding"] == "lengths"
    assert BertBackbone.from_config(config).transformer_layers[0].attention_padding == "lengths"
    assert "attention_padding" not in backbone.architecture_config()  # saved presets do not record it
    backbone.save_to_preset(str(tmp_path / "preset"))
    assert BertBackbone.from_preset(str(tmp_path / "preset")).attention_padding == "mask"
    assert BertBackbone.from_preset(str(tmp_path / "preset"), attention_padding="lengths").attention_padding == "lengths"
    with pytest.raises(ValueError) as error:
        BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                     attention_padding="lenghts")
    assert str(error.value) == ("attention_padding='lenghts': expected 'mask' (any rows, packed ones included) "
                                "or 'lengths' (rows of one example padded on the right).")


def test_packed_training_refuses_a_lengths_backbone():
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, attention_padding="lengths")
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, num_classes=2).packed_training_model()
    assert str(error.value) == (
        "packed_training_model() needs a backbone with attention_padding='mask': packed rows keep their examples "
        "apart with the block-diagonal mask, and this backbone has attention_padding='lengths' (one length per "
        "row, for unpacked rows).")
