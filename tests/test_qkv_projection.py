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
from keras_bert_impl.models.classifier import BertClassifier

TOLERANCE = 1e-5
SEQUENCE_LENGTH = 48


def padded(examples):
    n = len(examples["token_ids"])
    batch = {name: np.zeros((n, SEQUENCE_LENGTH), "int32") for name in ("token_ids", "segment_ids", "padding_mask")}
    for i, (ids, segments) in enumerate(zip(examples["token_ids"], examples["segment_ids"])):
        batch["token_ids"][i, : len(ids)] = ids
        batch["segment_ids"][i, : len(ids)] = segments
        batch["padding_mask"][i, : len(ids)] = 1
    return batch


@pytest.mark.multibackend
def test_split_projection_gives_the_fused_outputs(minilm_examples):
    batch = padded(minilm_examples)
    fused = BertBackbone.from_preset("all_minilm_l6_v2_en")
    split = BertBackbone.from_preset("all_minilm_l6_v2_en", qkv_projection="split")
    assert [layer.qkv_projection for layer in split.transformer_layers] == ["split"] * 6
    assert [w.shape for w in split.weights] == [w.shape for w in fused.weights]  # the same variables
    expected, got = (keras.ops.convert_to_numpy(model(batch)["sequence_output"]) for model in (fused, split))
    worst = float(np.abs(expected - got).max())
    print(f"max|split - fused| over {expected.size} values: {worst:.3g}")
    assert worst <= TOLERANCE


@pytest.mark.multibackend
def test_split_projection_gives_the_fused_loss_and_sgd_step(minilm_examples):
    batch = padded(minilm_examples)
    labels = np.arange(len(minilm_examples["token_ids"])) % 3
    models = []
    for projection in ("fused", "split"):
        backbone = BertBackbone.from_preset("all_minilm_l6_v2_en", dropout=0.0, qkv_projection=projection)
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
    print(f"one SGD step: largest weight change {moved:.3g}, split vs fused {differ:.3g}")
    assert moved > 1e-3 and differ <= TOLERANCE


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
