"""BertBackbone construction, errors, serialisation and precision policies, on every backend."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_bert_impl import BertBackbone

pytestmark = pytest.mark.multibackend

SMALL = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=12)


def _inputs(batch=2, length=6):
    rng = np.random.default_rng(0)
    mask = np.ones((batch, length), "int32")
    mask[0, length - 2 :] = 0
    return {
        "token_ids": rng.integers(0, 40, size=(batch, length)).astype("int32"),
        "segment_ids": (np.arange(length) >= length // 2).astype("int32")[None].repeat(batch, 0),
        "padding_mask": mask,
    }


def test_outputs_and_keras_hub_names():
    backbone = BertBackbone(**SMALL)
    out = backbone(_inputs())
    assert set(out) == {"sequence_output", "pooled_output"}
    assert tuple(out["sequence_output"].shape) == (2, 6, 16)
    assert tuple(out["pooled_output"].shape) == (2, 16)
    assert sorted(backbone.input) == ["padding_mask", "segment_ids", "token_ids"]


def test_pooled_output_is_tanh_dense_of_cls():
    backbone = BertBackbone(**SMALL)
    out = backbone(_inputs())
    cls = ops.convert_to_numpy(out["sequence_output"])[:, 0]
    kernel, bias = (ops.convert_to_numpy(w) for w in backbone.pooled_dense.weights)
    np.testing.assert_allclose(ops.convert_to_numpy(out["pooled_output"]), np.tanh(cls @ kernel + bias), atol=1e-5)


def test_hidden_not_divisible_by_heads():
    with pytest.raises(ValueError, match="hidden_dim=30 is not divisible by num_heads=4"):
        BertBackbone(**{**SMALL, "hidden_dim": 30, "num_heads": 4})


def test_bad_constructor_values_are_named():
    with pytest.raises(ValueError, match="`num_layers` must be a positive int, got 0"):
        BertBackbone(**{**SMALL, "num_layers": 0})
    with pytest.raises(ValueError, match="Unknown activation 'gelu_fast'"):
        BertBackbone(**SMALL, activation="gelu_fast")


def test_sequence_longer_than_max_sequence_length():
    backbone = BertBackbone(**SMALL)
    with pytest.raises(ValueError, match="length 20 is longer than max_sequence_length=12"):
        backbone(_inputs(length=20))


def test_config_round_trip_and_keras_file(tmp_path):
    backbone = BertBackbone(**SMALL, activation="gelu_approximate", dropout=0.0)
    restored = BertBackbone.from_config(backbone.get_config())
    assert restored.get_config() == backbone.get_config()
    path = tmp_path / "backbone.keras"
    backbone.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertBackbone)
    a, b = backbone(_inputs()), loaded(_inputs())
    np.testing.assert_allclose(
        ops.convert_to_numpy(a["sequence_output"]), ops.convert_to_numpy(b["sequence_output"]), atol=1e-6
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_policy(policy):
    backbone = BertBackbone(**SMALL, dtype=policy, dropout=0.0)
    reference = BertBackbone(**SMALL, dropout=0.0)
    reference.set_weights(backbone.get_weights())
    out = backbone(_inputs())
    half = "bfloat16" if "bfloat16" in policy else "float16"
    assert half in str(out["sequence_output"].dtype)
    assert all("float32" in str(w.dtype) for w in backbone.weights)  # variables stay float32
    full = ops.convert_to_numpy(reference(_inputs())["sequence_output"])
    mixed = ops.convert_to_numpy(ops.cast(out["sequence_output"], "float32"))
    assert np.abs(full - mixed).max() < 0.1  # LayerNorm in float32 keeps it close


def test_presets_table_is_a_class_property():
    presets = BertBackbone.presets
    assert "bert_base_en_uncased" in presets and "all_minilm_l6_v2_en" in presets
    assert presets["bert_tiny_en_uncased"]["metadata"]["params"] == 4_385_920
    assert presets["bert_base_en_uncased"]["metadata"]["params"] == 109_482_240
    assert presets["bert_large_en_uncased"]["metadata"]["params"] == 335_141_888


def test_tiny_preset_params_equal_count_params():
    config = BertBackbone.presets["bert_tiny_en_uncased"]["config"]
    assert BertBackbone(**config).count_params() == 4_385_920


def test_on_pytorch_the_weights_are_the_modules_parameters_from_the_start(tmp_path):
    # Before: a backbone or task that had not been fit yet had no torch parameters (Keras registered its
    # ParameterDict as a plain attribute while the model was being built): torch.optim.AdamW(model.parameters())
    # stopped on "an empty parameter list", and torch.onnx export (format="onnx") took the weights for constants
    # ("Cannot insert a Tensor that requires grad as a constant").
    if keras.backend.backend() != "torch":
        pytest.skip("torch.nn.Module parameters are PyTorch's")
    import torch

    from keras_bert_impl import BertClassifier

    backbone = BertBackbone(**SMALL)
    classifier = BertClassifier(backbone, num_classes=2)
    loaded_path = tmp_path / "classifier.keras"
    classifier.save(loaded_path)
    loaded = keras.saving.load_model(loaded_path)
    for model in (backbone, classifier, loaded):
        parameters = {id(parameter) for parameter in model.parameters()}
        assert {id(weight.value) for weight in model.weights} <= parameters, type(model).__name__
    # A step of a torch optimizer over model.parameters() trains the Keras weights.
    optimizer = torch.optim.SGD(classifier.parameters(), lr=1.0)
    before = ops.convert_to_numpy(classifier.output_dense.kernel).copy()
    classifier(_inputs())[:, 1].sum().backward()
    optimizer.step()
    assert not np.allclose(ops.convert_to_numpy(classifier.output_dense.kernel), before)
    import importlib.util

    if importlib.util.find_spec("onnx") is not None:  # (torch.onnx needs it; not a dependency)
        classifier.export(tmp_path / "classifier.onnx", format="onnx", verbose=False)
        assert (tmp_path / "classifier.onnx").stat().st_size > 0
