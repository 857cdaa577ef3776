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

TOLERANCE = 1e-5
SEQUENCE_LENGTH = 48


def right_padded(examples):
    n = len(examples["token_ids"])
    batch = {name: np.zeros((n, SEQUENCE_LENGTH), "int32") for name in ("token_ids", "segment_ids", "padding_mask")}
    for i, (ids, segments) in enumerate(zip(examples["token_ids"], examples["segment_ids"])):
        batch["token_ids"][i, : len(ids)] = ids
        batch["segment_ids"][i, : len(ids)] = segments
        batch["padding_mask"][i, : len(ids)] = 1
    return batch


@pytest.mark.multibackend
def test_lengths_give_the_mask_paths_outputs_padding_positions_included(minilm_examples):
    batch = right_padded(minilm_examples)
    assert 0.2 < 1 - batch["padding_mask"].mean() < 0.8  # real padding in every batch row but the longest
    masked = BertBackbone.from_preset("all_minilm_l6_v2_en")
    lengths = BertBackbone.from_preset("all_minilm_l6_v2_en", attention_padding="lengths")
    assert [layer.attention_padding for layer in lengths.transformer_layers] == ["lengths"] * 6
    expected, got = (keras.ops.convert_to_numpy(model(batch)["sequence_output"]) for model in (masked, lengths))
    worst = float(np.abs(expected - got).max())
    print(f"max|lengths - mask| over {expected.size} values: {worst:.3g}")
    assert worst <= TOLERANCE


@pytest.mark.multibackend
def test_lengths_give_the_mask_paths_loss_and_sgd_step(minilm_examples):
    batch = right_padded(minilm_examples)
    labels = np.arange(len(minilm_examples["token_ids"])) % 3
    models = []
    for padding in ("mask", "lengths"):
        backbone = BertBackbone.from_preset("all_minilm_l6_v2_en", dropout=0.0, attention_padding=padding)
        keras.utils.set_random_seed(0)
        model = BertClassifier(backbone, num_classes=3, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        models.append(model)
    models[1].set_weights(models[0].get_weights())
    start = [np.array(w) for w in models[0].get_weights()]
    losses = [m.evaluate(batch, labels, batch_size=len(labels), verbose=0, return_dict=True)["loss"] for m in models]
    assert abs(losses[0] - losses[1]) <= TOLERANCE, losses
    for model in models:
        model.train_on_batch(batch, labels)
    after = [[np.array(w) for w in m.get_weights()] for m in models]
    moved = max(float(np.abs(a - s).max()) for a, s in zip(after[0], start))
    differ = max(float(np.abs(a - b).max()) for a, b in zip(*after))
    print(f"one SGD step: largest weight change {moved:.3g}, lengths vs mask {differ:.3g}")
    assert moved > 1e-3 and differ <= TOLERANCE


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
