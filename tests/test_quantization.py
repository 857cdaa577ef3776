"""`quantize("int8")` (Keras's post-training weight quantization) on our models, and what saving makes of it.

Keras quantizes the Dense kernels and the token embedding itself; what these tests pin down is ours: the configs
record the quantized layers, so a quantized model saved as a `.keras` file, a preset, a SavedModel or a Keras
config loads quantized and gives the same outputs (real all-MiniLM-L6-v2 weights, real STS-B and SQuAD text): the
backbone, classifier, export and LoRA tests on every backend, the other task models on TensorFlow. Before, `save` of a quantized task stopped in Keras with "Layer 'logits' expected 2 variables, but
received 3".
"""

import gzip
import json
import warnings

import keras
import numpy as np
import pytest

import keras_bert_impl as kb
from keras_bert_impl.models import quantization

@pytest.fixture(scope="module")
def sentences(data_slices):
    """Real STS-B dev sentences (tests/data/slices), with a label each: the pair's score >= 2.5."""
    rows = (data_slices / "glue" / "STS-B" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:9]
    fields = [row.split("\t") for row in rows]
    return [f[7] for f in fields], [int(float(f[9]) >= 2.5) for f in fields]


def _quantize_recording_warnings(model, mode):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.quantize(mode)
    return [str(w.message) for w in caught if "quantize" in str(w.message)]


def _small_backbone():
    return kb.BertBackbone(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                           max_sequence_length=16)


def _features(batch=2, length=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"token_ids": rng.integers(1, 60, (batch, length)).astype("int32"),
            "segment_ids": np.zeros((batch, length), "int32"), "padding_mask": np.ones((batch, length), "int32")}


@pytest.mark.multibackend
@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_backbone_config_rebuilds_the_quantized_layers(mode):
    backbone = _small_backbone()
    float_output = keras.ops.convert_to_numpy(backbone(_features())["sequence_output"])
    assert _quantize_recording_warnings(backbone, mode) == []  # no line per LayerNorm / Dropout
    config = backbone.get_config()
    expected_name = "int8" if mode == "int8" else "int4/"
    assert config["quantized_layers"]["transformer_layer_1/qkv"].startswith(expected_name)
    assert len(config["quantized_layers"]) == 2 * 4 + 2  # four Dense per block, the pooler, the token embedding

    rebuilt = kb.BertBackbone.from_config(config)
    rebuilt.set_weights(backbone.get_weights())
    assert rebuilt.get_layer("pooled_dense").quantization_mode == mode
    quantized_output = keras.ops.convert_to_numpy(backbone(_features())["sequence_output"])
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(rebuilt(_features())["sequence_output"]), quantized_output)
    # Quantized, not float: close to the float outputs (LayerNorm'd features of scale 1), not equal.
    assert 0 < np.abs(quantized_output - float_output).max() < 0.5
    # A float backbone's config is as it always was.
    assert "quantized_layers" not in _small_backbone().get_config()


@pytest.mark.slow
@pytest.mark.multibackend
def test_classifier_quantized_saves_and_loads_quantized(minilm_dir, sentences, tmp_path):
    texts, labels = sentences
    classifier = kb.BertTextClassifier.from_preset(minilm_dir, num_classes=2, sequence_length=32)
    classifier.fit(texts, labels, epochs=1, batch_size=4, verbose=0)
    float_logits = classifier.predict(texts, verbose=0)
    assert _quantize_recording_warnings(classifier, "int8") == []
    logits = classifier.predict(texts, verbose=0)
    assert 0 < np.abs(logits - float_logits).max() < 0.05
    # Training goes on after it (the float biases and LayerNorms).
    classifier.fit(texts, labels, epochs=1, batch_size=4, verbose=0)
    logits = classifier.predict(texts, verbose=0)

    classifier.save(tmp_path / "model.keras")  # (was: "Layer 'logits' expected 2 variables, but received 3")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.get_layer("logits").quantization_mode == "int8"
    np.testing.assert_array_equal(loaded.predict(texts, verbose=0), logits)

    classifier.save_to_preset(tmp_path / "preset")
    from_preset = kb.BertTextClassifier.from_preset(tmp_path / "preset")
    np.testing.assert_array_equal(from_preset.predict(texts, verbose=0), logits)
    assert kb.BertBackbone.from_preset(tmp_path / "preset").get_layer("token_embedding").quantization_mode == "int8"
    # A new head on the quantized preset is a float head.
    new_head = kb.BertTextClassifier.from_preset(tmp_path / "preset", num_classes=3)
    assert new_head.get_layer("logits").quantization_mode is None

    with pytest.raises(ValueError, match=r"A transformers checkpoint holds float weights, and this BertClassifier "
                                         r"has 27 quantized layers .*write it before `quantize`"):
        classifier.save_huggingface(tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


@pytest.mark.slow
@pytest.mark.multibackend
def test_quantized_classifier_exports_a_quantized_saved_model(minilm_dir, sentences, tmp_path):
    if keras.backend.backend() == "torch":
        pytest.skip("SavedModels are written on TensorFlow and JAX")
    texts, _ = sentences
    classifier = kb.BertTextClassifier.from_preset(minilm_dir, num_classes=2, sequence_length=32)
    classifier.quantize("int8")
    logits = classifier.predict(texts, verbose=0)
    classifier.export(tmp_path / "savedmodel", verbose=False)
    import tensorflow as tf

    loaded = tf.saved_model.load(str(tmp_path / "savedmodel"))
    assert "int8" in {v.dtype.name for v in loaded.variables}  # the SavedModel holds int8 kernels
    served = loaded.serve(tf.constant(texts))["logits"].numpy()
    # The graph pads every row to `sequence_length`, `predict` to its length bucket: float sums in another order,
    # and each Dense quantizes its inputs to int8 again, so a rounding can flip (float models agree to 1e-5).
    np.testing.assert_allclose(served, logits, atol=5e-3, rtol=0)


@pytest.mark.slow
def test_token_classifier_and_span_extractor_load_quantized(minilm_dir, sentences, data_slices, tmp_path):
    texts, _ = sentences
    tagger = kb.BertTokenClassifier.from_preset(minilm_dir, label_names=["O", "B-X", "I-X"], sequence_length=32)
    tagger.quantize("int8")
    entities = tagger.predict_entities(texts[:3])
    tagger.save(tmp_path / "tagger.keras")
    assert keras.saving.load_model(tmp_path / "tagger.keras").predict_entities(texts[:3]) == entities

    with gzip.open(data_slices / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        paragraph = json.load(f)["data"][0]["paragraphs"][0]
    question = paragraph["qas"][0]["question"]
    reader = kb.BertSpanExtractor.from_preset(minilm_dir, sequence_length=64, doc_stride=32)
    reader.quantize("int8")
    answer = reader.answer(question, paragraph["context"])
    reader.save_to_preset(tmp_path / "reader")
    assert kb.BertSpanExtractor.from_preset(tmp_path / "reader").answer(question, paragraph["context"]) == answer


def test_masked_lm_keeps_the_tied_embedding_float(minilm_dir, tmp_path):
    masked_lm = kb.BertMaskedLM.from_preset(minilm_dir, sequence_length=32)
    texts = ["The capital of France is [MASK]."]
    assert _quantize_recording_warnings(masked_lm, "int8") == []
    # The masked-LM head multiplies by the token embedding's matrix: that layer stays float, the rest is int8.
    assert masked_lm.backbone.get_layer("token_embedding").quantization_mode is None
    assert masked_lm.masked_lm_head.transform_dense.quantization_mode == "int8"
    predictions = masked_lm.fill_mask(texts, top_k=3)
    masked_lm.save(tmp_path / "mlm.keras")
    assert keras.saving.load_model(tmp_path / "mlm.keras").fill_mask(texts, top_k=3) == predictions

    # A backbone quantized on its own (token embedding included) cannot serve as the tied output projection.
    backbone = _small_backbone()
    backbone.quantize("int8")
    with pytest.raises(ValueError, match="quantize the BertPretrainer .* rather than its backbone"):
        kb.BertPretrainer(backbone)


@pytest.mark.multibackend
def test_quantize_layers_names_an_unknown_layer():
    with pytest.raises(ValueError, match=r"BertBackbone has no layer 'transformer_layer_7/qkv', which its config "
                                         r"lists as quantized"):
        quantization.quantize_layers(_small_backbone(), {"transformer_layer_7/qkv": "int8"})
    with pytest.raises(ValueError, match=r"quantization 'gptq/4/128' cannot be rebuilt from a config"):
        quantization.quantize_layers(_small_backbone(), {"transformer_layer_0/qkv": "gptq/4/128"})


@pytest.mark.multibackend
def test_lora_on_a_quantized_backbone_saves_merged_into_the_quantized_kernels():
    """QLoRA's order (quantize, then LoRA): the saved kernels are the LoRA-merged ones, quantized again (Keras's
    `Dense.save_own_variables`), so the rebuilt model is quantized and within quantization noise of the live one."""
    from keras_bert_impl.models.task_saving import copy_variables

    backbone = _small_backbone()
    backbone.quantize("int8")
    backbone.enable_lora(2)
    qkv = backbone.get_layer("transformer_layer_0").qkv_dense
    base = keras.ops.convert_to_numpy(backbone(_features())["sequence_output"])  # (B is zero: no update yet)
    qkv.lora_kernel_b.assign(np.full(qkv.lora_kernel_b.shape, 0.05, "float32"))  # a trained-looking update
    live = keras.ops.convert_to_numpy(backbone(_features())["sequence_output"])

    rebuilt = kb.BertBackbone.from_config(backbone.get_config())
    copy_variables(backbone, rebuilt)
    assert rebuilt.get_layer("transformer_layer_0").qkv_dense.quantization_mode == "int8"
    assert not rebuilt.get_layer("transformer_layer_0").qkv_dense.lora_enabled
    merged = keras.ops.convert_to_numpy(rebuilt(_features())["sequence_output"])
    # The update is in the saved kernels: the rebuilt model is far nearer the live one than the model without it.
    assert np.abs(merged - live).max() < 0.2 * np.abs(base - live).max()


@pytest.mark.multibackend
def test_quantize_layers_refuses_a_layer_quantized_otherwise():
    backbone = _small_backbone()
    backbone.quantize("int8")
    with pytest.raises(ValueError, match=r"^layer 'pooled_dense' is already int8-quantized; its config says int4/-1\.$"):
        quantization.quantize_layers(backbone, {"pooled_dense": "int4/-1"})


def test_a_gptq_layer_or_a_shared_path_cannot_be_saved():
    """The two records `quantized_layers` refuses, on stand-ins (GPTQ needs a calibration set and a tokenizer)."""
    import types

    def layer(path, policy):
        return types.SimpleNamespace(path=path, quantization_mode=policy.split("/")[0].split("_")[0],
                                     dtype_policy=types.SimpleNamespace(name=policy))

    def model(*layers):
        return types.SimpleNamespace(_flatten_layers=lambda include_self=False: list(layers))

    with pytest.raises(ValueError, match=r"^SimpleNamespace: layer 'transformer_layer_0/qkv' is gptq-quantized, which "
                                         r"this package cannot save \(a config rebuilds only int8, int4, float8\); "
                                         r"save the float model and quantize it after loading\.$"):
        quantization.quantized_layers(model(layer("transformer_layer_0/qkv", "gptq/4/128_from_float32")))
    with pytest.raises(ValueError, match=r"^SimpleNamespace: two quantized layers share the path 'dense'; give them "
                                         r"distinct names to save the model\.$"):
        quantization.quantized_layers(model(layer("dense", "int8_from_float32"), layer("dense", "int8_from_float32")))
