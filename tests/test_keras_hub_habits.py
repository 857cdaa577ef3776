"""keras-hub's habits: code written for `keras_hub.models` runs with the import changed to `keras_bert_impl`.

keras-hub's own documented examples (the ```python blocks of its installed classes' docstrings: BertTextClassifier,
BertMaskedLM, their preprocessors, BertTokenizer, BertBackbone) run here with `keras_hub.models.` replaced by
`keras_bert_impl.` and its preset by the local checkpoint, each block in a fresh interpreter as a user would paste
it. Two blocks do what our masked-LM preprocessor does not (sentence pairs; a 1:1 `tf.data` map of a layer that
cuts long texts into several rows): those must stop in our one line, not run wrongly.
"""

import inspect
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_bert_impl

KERAS_HUB_CLASSES = ("BertTextClassifier", "BertMaskedLM", "BertTextClassifierPreprocessor",
                     "BertMaskedLMPreprocessor", "BertTokenizer", "BertBackbone")
PRESET = "all_minilm_l6_v2_en"
# Blocks that must stop in one line of ours (a substring of it), by (class, block index).
REFUSED = {
    ("BertMaskedLMPreprocessor", 0): "takes a string or a list of strings, each cut into rows",
    ("BertMaskedLMPreprocessor", 1): "is not a tf.data map function",
}


def _keras_hub_blocks():
    try:
        import keras_hub
    except ImportError:  # (an optional extra; CI installs it)
        return []
    blocks = []
    for name in KERAS_HUB_CLASSES:
        doc = inspect.getdoc(getattr(keras_hub.models, name)) or ""
        for index, code in enumerate(re.findall(r"```python\n(.*?)```", doc, re.S)):
            code = re.sub(r"keras_hub\.models\.TextClassifierPreprocessor\b", "keras_bert_impl.BertTextClassifierPreprocessor", code)
            code = code.replace("keras_hub.models.", "keras_bert_impl.")
            code = re.sub(r'"bert_[a-z_]+"', f'"{PRESET}"', code)
            blocks.append(pytest.param(name, index, code, id=f"{name}[{index}]"))
    return blocks


BLOCKS = _keras_hub_blocks()


@pytest.mark.slow
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the examples run once, in subprocesses")
@pytest.mark.skipif(not BLOCKS, reason="keras-hub is not installed")
@pytest.mark.parametrize("name,index,code", BLOCKS)
def test_a_keras_hub_example_runs_with_the_import_changed(name, index, code, tmp_path):
    assert "keras_hub" not in code, code
    script = "import keras\nimport numpy as np\nimport tensorflow as tf\nimport keras_bert_impl\n" + code
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    refusal = REFUSED.get((name, index))
    if refusal is None:
        assert result.returncode == 0, f"keras-hub's {name} example {index}:\n{code}\n{result.stderr[-3000:]}"
    else:
        last = result.stderr.strip().splitlines()[-1]
        assert result.returncode != 0 and last.startswith("ValueError: BertPretrainerPreprocessor ") and refusal in last, \
            result.stderr[-3000:]


def test_the_keras_hub_examples_were_found():
    pytest.importorskip("keras_hub")
    assert {name for name, _, _ in (p.values for p in BLOCKS)} == set(KERAS_HUB_CLASSES)
    assert len(BLOCKS) >= 8


def test_keras_hub_names_are_our_classes():
    """One class under two names: a model built as `BertTextClassifier` is saved and loaded as `BertClassifier`."""
    assert keras_bert_impl.BertTextClassifier is keras_bert_impl.BertClassifier
    assert keras_bert_impl.BertTextClassifierPreprocessor is keras_bert_impl.BertClassifierPreprocessor
    assert keras_bert_impl.BertMaskedLMPreprocessor is keras_bert_impl.BertPretrainerPreprocessor
    assert {"BertTextClassifier", "BertMaskedLM", "BertTextClassifierPreprocessor",
            "BertMaskedLMPreprocessor"} <= set(keras_bert_impl.__all__)


def test_bert_masked_lm_is_a_pretrainer_without_next_sentence_prediction(tmp_path):
    backbone = keras_bert_impl.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=16)
    model = keras_bert_impl.BertMaskedLM(backbone)
    assert type(model) is keras_bert_impl.BertPretrainer and model.nsp is False
    assert keras_bert_impl.BertMaskedLM(backbone, nsp=True).nsp is True
    x = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
         "padding_mask": np.ones((2, 8), "int32"), "mask_positions": np.array([[1, 2], [3, 0]], "int32")}
    model.save(tmp_path / "mlm.keras")
    loaded = keras.saving.load_model(tmp_path / "mlm.keras")
    assert type(loaded) is keras_bert_impl.BertPretrainer and loaded.nsp is False
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)["mlm"]),
                               keras.ops.convert_to_numpy(model(x)["mlm"]), atol=1e-6)


def test_bert_masked_lm_from_preset_builds_the_masked_lm_preprocessor():
    model = keras_bert_impl.BertMaskedLM.from_preset(PRESET, load_weights=False, sequence_length=32)
    assert type(model) is keras_bert_impl.BertPretrainer and model.nsp is False
    assert type(model.preprocessor).__name__ == "BertPretrainerPreprocessor"
    assert model.preprocessor.sequence_length == 32


def test_the_masked_lm_preprocessor_refuses_sentence_pairs_in_one_line():
    """keras-hub packs `(first, second)` as `[CLS] a [SEP] b [SEP]`; ours read the two lists as two texts, each the
    concatenation of one list's sentences, and masked that silently."""
    import tensorflow as tf

    preprocessor = keras_bert_impl.BertMaskedLMPreprocessor.from_preset(PRESET, sequence_length=16)
    first = tf.constant(["The quick brown fox jumped.", "Call me Ishmael."])
    second = tf.constant(["The fox tripped.", "Oh look, a whale."])
    for pairs in ((first, second), (["The quick brown fox jumped."], ["The fox tripped."]), tf.stack([first, second])):
        with pytest.raises(ValueError) as error:
            preprocessor(pairs)
        assert str(error.value).startswith(
            "BertPretrainerPreprocessor takes a string or a list of strings, each cut into rows; got 2 lists or "
            "tensors of texts (keras-hub's sentence pairs `(first, second)`)")
    # A string tensor of texts is still a list of texts.
    assert preprocessor.rows(first).shape[0] == 2
    assert preprocessor.rows(np.array(["The quick brown fox jumped.", "Call me Ishmael."])).shape[0] == 2


def test_the_masked_lm_preprocessor_in_a_tf_data_map_is_one_line():
    import tensorflow as tf

    preprocessor = keras_bert_impl.BertMaskedLMPreprocessor.from_preset(PRESET, sequence_length=16)
    texts = tf.data.Dataset.from_tensor_slices(["The quick brown fox jumped.", "Call me Ishmael."])
    with pytest.raises(ValueError) as error:
        texts.map(preprocessor)
    assert str(error.value) == (
        "BertPretrainerPreprocessor cuts each text into rows of sequence_length - 2 = 14 pieces (a long text gives "
        "several rows), so it is not a tf.data map function: pass the texts to preprocessor.make_dataset(texts, "
        "batch_size=...), which masks every batch anew, or to BertPretrainer.fit(texts).")


def test_the_tokenizer_has_keras_hubs_special_token_names():
    tokenizer = keras_bert_impl.BertTokenizer.from_preset(PRESET)
    assert (tokenizer.cls_token, tokenizer.sep_token, tokenizer.pad_token, tokenizer.mask_token) == (
        "[CLS]", "[SEP]", "[PAD]", "[MASK]")
    assert (tokenizer.start_token, tokenizer.end_token) == ("[CLS]", "[SEP]")
    assert (tokenizer.start_token_id, tokenizer.end_token_id) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
    assert tokenizer.token_to_id(tokenizer.mask_token) == tokenizer.mask_token_id == 103


def test_the_masked_lm_preprocessor_takes_keras_hubs_masking_arguments():
    # keras-hub's BertMaskedLMPreprocessor(tokenizer, mask_selection_rate=..., mask_selection_length=...,
    # mask_token_rate=..., random_token_rate=...) stopped on Keras's "Unrecognized keyword arguments".
    tokenizer = keras_bert_impl.BertTokenizer.from_preset(PRESET)
    preprocessor = keras_bert_impl.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=32, mask_selection_rate=0.3, mask_selection_length=8, mask_token_rate=1.0,
        random_token_rate=0.0)
    assert (preprocessor.masking_rate, preprocessor.max_predictions_per_seq) == (0.3, 8)
    x, _, weights = preprocessor(["The quick brown fox jumps over the lazy dog and runs into the dark forest."])
    chosen = np.asarray(x["mask_positions"])[np.asarray(weights["mlm"]) > 0]
    assert len(chosen) > 0 and (np.asarray(x["token_ids"])[0, chosen] == tokenizer.mask_token_id).all()  # all [MASK]
    again = keras_bert_impl.BertMaskedLMPreprocessor.from_config(preprocessor.get_config())
    assert (again.masking_rate, again.mask_token_rate, again.random_token_rate) == (0.3, 1.0, 0.0)
    assert keras_bert_impl.BertMaskedLM.from_preset(PRESET, mask_selection_rate=0.2).preprocessor.masking_rate == 0.2
    with pytest.raises(ValueError) as error:
        keras_bert_impl.BertMaskedLMPreprocessor(tokenizer, masking_rate=0.3, mask_selection_rate=0.2)
    assert str(error.value) == ("`mask_selection_rate` is keras-hub's name of `masking_rate`: give one of them, not "
                                "mask_selection_rate=0.2 and masking_rate=0.3.")
    with pytest.raises(ValueError, match=r"`mask_token_rate` \+ `random_token_rate` must be at most 1"):
        keras_bert_impl.BertMaskedLMPreprocessor(tokenizer, mask_token_rate=0.9, random_token_rate=0.2)
    # Another task's preprocessor argument: one line (was Keras's "Unrecognized keyword arguments passed to ...").
    with pytest.raises(TypeError) as error:
        keras_bert_impl.BertClassifier.from_preset(PRESET, num_classes=2, masking_rate=0.2)
    assert str(error.value) == ("BertClassifier.from_preset got masking_rate, which BertClassifierPreprocessor does "
                                "not take (another task's preprocessor does): it takes sequence_length, truncate.")


@pytest.mark.slow
@pytest.mark.multibackend
def test_features_with_labels_as_python_lists_train_as_arrays_do():
    """keras-hub's `fit(x=features, y=[0, 3])` with `preprocessor=None`: Keras stopped on the mix of a NumPy feature
    dict and a list ("Unrecognized data type", printing the whole dict); lists are now read as arrays, with the same
    result as arrays on every backend."""
    features = {"token_ids": np.ones((2, 12), "int32"), "segment_ids": np.array([[0] * 5 + [1] * 5 + [0] * 2] * 2),
                "padding_mask": np.array([[1] * 10 + [0] * 2] * 2)}
    losses = []
    for labels, weights in (([0, 3], [1.0, 0.5]), (np.array([0, 3]), np.array([1.0, 0.5]))):
        keras.utils.set_random_seed(0)
        backbone = keras_bert_impl.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                                                intermediate_dim=16, max_sequence_length=16)
        classifier = keras_bert_impl.BertTextClassifier(backbone, num_classes=4, dropout=0.0)
        history = classifier.fit(x=features, y=labels, sample_weight=weights, batch_size=2, epochs=2, verbose=0,
                                 shuffle=False, validation_data=(features, labels))
        evaluated = classifier.evaluate({k: v.tolist() for k, v in features.items()}, labels, verbose=0)
        predicted = classifier.predict({k: v.tolist() for k, v in features.items()}, verbose=0)
        losses.append((history.history["loss"], history.history["val_loss"], evaluated, predicted))
    np.testing.assert_allclose(losses[0][0], losses[1][0], rtol=1e-6)
    np.testing.assert_allclose(losses[0][1], losses[1][1], rtol=1e-6)
    np.testing.assert_allclose(losses[0][2], losses[1][2], rtol=1e-6)
    np.testing.assert_allclose(losses[0][3], losses[1][3], rtol=1e-6)


def test_every_class_with_from_preset_lists_the_presets():
    """keras-hub's `BertTextClassifier.presets` (and its tokenizer's, preprocessors'): the names `from_preset` takes,
    on every class that has it (only BertBackbone had them)."""
    names = {"BertBackbone", "BertClassifier", "BertTextClassifier", "BertTokenClassifier", "BertSpanExtractor",
             "BertTextEmbedder", "BertPretrainer", "BertMaskedLM", "BertTokenizer", "BertClassifierPreprocessor",
             "BertTextClassifierPreprocessor", "BertTokenClassifierPreprocessor", "BertSpanExtractorPreprocessor",
             "BertPretrainerPreprocessor", "BertMaskedLMPreprocessor"}
    expected = keras_bert_impl.BertBackbone.presets
    assert {"bert_base_en_uncased", PRESET} <= set(expected)
    for name in sorted(names):
        cls = getattr(keras_bert_impl, name)
        assert hasattr(cls, "from_preset") and cls.presets is expected, name
