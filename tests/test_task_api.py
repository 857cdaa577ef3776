"""The task API on every backend: from_preset -> fit on raw strings -> predict, pipelines, saving.

Real data: SST-2 and CoNLL-2003 from ../shared/data (skip without it), SQuAD
dev articles from tests/data, the real all-MiniLM-L6-v2 checkpoint.
"""

import csv
import gzip
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings
import zipfile

import keras
import numpy as np
import pytest

import keras_bert_impl
from keras_bert_impl import (
    BertBackbone,
    BertClassifier,
    BertPretrainer,
    BertSpanExtractor,
    BertTextEmbedder,
    BertTokenClassifier,
)

pytestmark = pytest.mark.multibackend
PRESET = "all_minilm_l6_v2_en"


def _sst2(shared_data, split, count):
    with open(shared_data / "glue" / "SST-2" / f"{split}.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : 1 + count]
    return [row[0] for row in rows], np.array([int(row[1]) for row in rows])


def _tiny_backbone(vocabulary_size=30522):
    return BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16,
                        intermediate_dim=32, max_sequence_length=512)


def _preprocessor(sequence_length=32):
    return keras_bert_impl.BertClassifierPreprocessor.from_preset(PRESET, sequence_length=sequence_length)


# === Classification: the three-line habit ===


@pytest.mark.slow
def test_classifier_from_preset_fits_raw_sst2_strings(shared_data):
    texts, labels = _sst2(shared_data, "train", 96)
    classifier = BertClassifier.from_preset(PRESET, num_classes=2, label_names=["negative", "positive"],
                                            sequence_length=64)
    classifier.compile(optimizer=keras.optimizers.AdamW(1e-4))
    history = classifier.fit(texts, labels, batch_size=16, epochs=3, seed=0, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0], losses
    dev_texts, dev_labels = _sst2(shared_data, "dev", 40)
    logits = classifier.predict(dev_texts, verbose=0)
    assert logits.shape == (40, 2)
    names = classifier.predict_labels(dev_texts[:3])
    assert set(names) <= {"negative", "positive"} and len(names) == 3
    scored = classifier.predict_labels(dev_texts[:3], return_scores=True)
    assert [row["label"] for row in scored] == names
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits[:3].astype("float64"), axis=-1)).max(axis=-1)
    np.testing.assert_allclose([row["score"] for row in scored], probabilities, atol=1e-6)
    scores = classifier.evaluate(dev_texts, dev_labels, verbose=0, return_dict=True)
    assert 0.0 <= scores["accuracy"] <= 1.0


def test_from_preset_loads_the_backbone_weights():
    classifier = BertClassifier.from_preset(PRESET, num_classes=3)
    backbone = BertBackbone.from_preset(PRESET)
    for ours, reference in zip(classifier.backbone.weights, backbone.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(reference))
    assert classifier.preprocessor.sequence_length == 128 and classifier.num_classes == 3


def test_raw_pairs_and_string_datasets():
    import tensorflow as tf

    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    pairs = (["A man eats.", "Rain falls."], ["Someone is eating.", "It is sunny."])
    as_tuple = classifier.predict(pairs, verbose=0)
    as_list = classifier.predict(list(zip(*pairs)), verbose=0)
    np.testing.assert_allclose(as_tuple, as_list, atol=1e-6)
    # A tuple of two strings is one pair, as keras-hub's preprocessors read it (was two single texts, silently).
    one_pair = classifier.predict((pairs[0][0], pairs[1][0]), verbose=0)
    np.testing.assert_allclose(one_pair, as_tuple[:1], atol=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices(((pairs[0], pairs[1]), [1, 0])).batch(2)
    history = classifier.fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_a_datasets_labels_are_names_or_checked_ids_on_every_backend(shared_data):
    """Before: a tf.data.Dataset's labels reached the loss unchecked. A label outside the classes trained at loss 0.0 on
    JAX (an all-zero one-hot row) and stopped in PyTorch's cross_entropy ('Target 5 is out of bounds'); label names
    stopped deep in each backend ('Invalid dtype: object'). Now names map to ids, and a bad label is one line."""
    import tensorflow as tf

    texts, labels = _sst2(shared_data, "train", 16)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, label_names=["negative", "positive"],
                                preprocessor=_preprocessor())
    names = np.array(["negative", "positive"])[labels]
    by_name = tf.data.Dataset.from_tensor_slices((texts, names)).batch(8)
    by_id = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
    assert classifier.evaluate(by_name, verbose=0, return_dict=True) == classifier.evaluate(
        by_id, verbose=0, return_dict=True)
    assert np.isfinite(classifier.fit(by_name, epochs=1, verbose=0).history["loss"][0])
    assert np.isfinite(classifier.fit(by_id.unbatch(), epochs=1, batch_size=8, verbose=0).history["loss"][0])

    outside = np.array(labels)
    outside[11] = 5
    with pytest.raises(ValueError) as error:
        classifier.fit(tf.data.Dataset.from_tensor_slices((texts, outside)).batch(8), epochs=1, verbose=0)
    assert str(error.value) == ("Batch 1 of the dataset, row 3: label 5 is not a class of this 2-class classifier "
                                "(ids 0..1).")
    unknown = names.copy()
    unknown[2] = "neutral"
    with pytest.raises(ValueError) as error:
        classifier.evaluate(tf.data.Dataset.from_tensor_slices((texts, unknown)).batch(8), verbose=0)
    assert str(error.value) == ("Batch 0 of the dataset, row 2: label 'neutral' is not one of the label_names "
                                "['negative', 'positive'].")
    with pytest.raises(ValueError) as error:
        classifier.fit(tf.data.Dataset.from_tensor_slices((texts, outside)), epochs=1, verbose=0)
    assert str(error.value) == ("Element 11 of the dataset: label 5 is not a class of this 2-class classifier "
                                "(ids 0..1).")
    unnamed = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match=r"^The dataset's labels are strings \(label names\), but this classifier has "
                                         r"no label_names: give class ids 0..1, or build it with label_names=\[...\].$"):
        unnamed.fit(by_name, epochs=1, verbose=0)
    assert np.isfinite(classifier.evaluate(by_id, verbose=0, return_dict=True)["loss"])  # it runs on


def test_raw_batches_have_a_known_length_and_bucket_widths():
    preprocessor = _preprocessor(sequence_length=128)
    texts = ["short"] * 5 + ["a much longer sentence " * 6] * 3
    dataset = preprocessor.make_dataset(texts, np.zeros(8, "int32"), batch_size=4, shuffle=True, seed=1,
                                        boundaries=preprocessor.default_boundaries())
    batches = list(dataset)
    assert len(dataset) == len(batches) == 3  # ceil(5/4) + ceil(3/4): one bucket each
    widths = sorted(int(f["token_ids"].shape[1]) for f, _, _ in batches)
    assert widths == [16, 16, 32]
    assert all(int(f["token_ids"].shape[0]) == 4 for f, _, _ in batches)
    assert sum(float(np.sum(w)) for _, _, w in batches) == 8.0  # filler rows weigh 0
    # By default, buckets of fewer than 8 batches join the next one up: 8 texts are one step shape, not two.
    merged = preprocessor.make_dataset(texts, np.zeros(8, "int32"), batch_size=4, shuffle=True, seed=1)
    assert [int(f["token_ids"].shape[1]) for f, _, _ in merged] == [32, 32]
    many = texts[:5] * 8 + texts[5:] * 11  # 40 short and 33 long texts: 8 batches or more each, two shapes
    merged = preprocessor.make_dataset(many, np.zeros(73, "int32"), batch_size=4, shuffle=True, seed=1)
    assert sorted({int(f["token_ids"].shape[1]) for f, _, _ in merged}) == [16, 32]
    # 8 middle-length texts (2 batches) join the 40 longest ones' bucket: two shapes, not three.
    middle, longest = "a much longer sentence " * 6, "a much longer sentence, longer still " * 6
    three = texts[:5] * 8 + [middle] * 8 + [longest] * 40
    merged = preprocessor.make_dataset(three, np.zeros(88, "int32"), batch_size=4, shuffle=True, seed=1)
    assert sorted({int(f["token_ids"].shape[1]) for f, _, _ in merged}) == [16, 48]
    every = preprocessor.make_dataset(three, np.zeros(88, "int32"), batch_size=4, shuffle=True, seed=1,
                                      boundaries=preprocessor.default_boundaries())
    assert sorted({int(f["token_ids"].shape[1]) for f, _, _ in every}) == [16, 32, 48]


def test_raw_strings_errors_name_the_problem():
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    with pytest.raises(ValueError, match="item 1 is int"):
        classifier.fit(["fine", 3], [1, 0], verbose=0)
    with pytest.raises(ValueError, match="differ in length: 2 vs 1"):
        classifier.predict((["a", "b"], ["c"]))
    with pytest.raises(ValueError, match=r"`y` must hold one value \(or one row of values\) per example \(2\), got shape \(1,\)"):
        classifier.fit(["a", "b"], [1], verbose=0)
    tagging = keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=32)
    with pytest.raises(ValueError) as error:  # (was "invalid literal for int() with base 10: 'B-ORG'")
        tagging.make_dataset([["EU", "rejects"]], [["B-ORG", "O"]], batch_size=2)
    assert str(error.value) == ("Example 0: label 'B-ORG' is a tag name; the preprocessor takes tag ids "
                                "(label_names.index(tag)), and BertTokenClassifier.fit(words, tags) takes the names.")


@pytest.mark.parametrize(
    "model, x, message",
    [
        ("classifier", [None, "a fine film"], "Raw text: item 0 is NoneType None, expected a string."),
        ("classifier", [], "No examples: the raw text list is empty."),
        # Hugging Face rows and a one-column table's values: the refusal says what to pass instead.
        ("classifier", [{"text": "a fine film", "label": 1}],
         "Raw text: item 0 is dict {'text': 'a fine film', 'label': 1}, expected a string (rows as dicts: pass "
         "their texts, [row['text'] for row in rows], or a table's column, df['text'])."),
        ("classifier", np.array([["a fine film"], ["dull"], ["long"]], dtype=object),
         "Raw text: item 0 is list ['a fine film'], expected a string (a column of shape (n, 1), such as "
         "df[['text']].values: pass its texts, x[:, 0] or df['text'])."),
        ("tagger", [], "No examples: the list of sentences is empty."),
        ("tagger", [["John"], None], "Example 1: expected a sentence (str) or a list of words (str), got None."),
        ("span_extractor", ([], []), "No examples: the lists of questions and contexts are empty."),
        # (was "`texts` must be a string or a list of strings (Can't convert Python sequence with mixed types to
        # Tensor.)", naming no item, in fit too)
        ("pretrainer", ["It was a dark night.", "The rain fell.", None],
         "Raw text: item 2 is NoneType None, expected a string."),
        ("pretrainer", ["It was a dark night.", 5], "Raw text: item 1 is int 5, expected a string."),
    ],
)
def test_empty_or_non_text_lists_are_one_line_in_predict(model, x, message):
    # Before: Keras's "Unrecognized data type" or a KeyError / UnboundLocalError from inside `predict`.
    tiny = _tiny_backbone()
    models = {
        "classifier": lambda: BertClassifier(tiny, num_classes=2, preprocessor=_preprocessor()),
        "tagger": lambda: BertTokenClassifier(tiny, label_names=["O", "B-PER"],
                                              preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(
                                                  PRESET, sequence_length=16)),
        "span_extractor": lambda: BertSpanExtractor(
            tiny, preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=32)),
        "pretrainer": lambda: BertPretrainer(
            tiny, nsp=False, preprocessor=keras_bert_impl.BertPretrainerPreprocessor.from_preset(
                PRESET, sequence_length=16)),
    }
    with pytest.raises(ValueError) as error:
        models[model]().predict(x, verbose=0)
    assert str(error.value) == message
    if model == "pretrainer":
        with pytest.raises(ValueError) as error:
            models[model]().fit(x, verbose=0)
        assert str(error.value) == message


def test_a_dataset_of_strings_that_the_preprocessor_does_not_read_is_one_line():
    # A tagger's tf.data of word lists and tags (the classifier's habit) stopped inside Keras, in a message of each
    # backend's: "expects 3 named input(s)" (TensorFlow), a jax.jit error (JAX), "Invalid dtype: object" (PyTorch).
    import tensorflow as tf

    tagger = BertTokenClassifier(_tiny_backbone(), label_names=["O", "B-PER"],
                                 preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(
                                     PRESET, sequence_length=16))
    words = tf.ragged.constant([["John", "lives", "here"], ["Mary", "too"]])
    tags = tf.ragged.constant([["B-PER", "O", "O"], ["B-PER", "O"]])
    for method, dataset in (("fit", tf.data.Dataset.from_tensor_slices((words, tags)).batch(2)),
                            ("predict", tf.data.Dataset.from_tensor_slices(words).batch(2))):
        with pytest.raises(ValueError) as error:
            getattr(tagger, method)(dataset, verbose=0)
        arguments = "sentences, tags" if method == "fit" else "sentences"
        assert str(error.value) == (
            f"BertTokenClassifier.{method} got a tf.data.Dataset of strings, which its preprocessor does not read (a "
            f"classifier's does): give the examples themselves ({method}({arguments}), as lists or tables), or a "
            "dataset of model.preprocessor.make_dataset(...) batches.")


def test_a_dataset_of_column_dicts_is_one_line_with_the_map_that_reads_it(shared_data):
    # Hugging Face's `to_tf_dataset` and `from_tensor_slices(dict(df))` give dicts of columns. Before: a traceback
    # of AutoGraph's generated code ending on the tokenizer's "input is dict {'text': <tf.Tensor ...".
    import tensorflow as tf

    texts, labels = _sst2(shared_data, "dev", 4)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(16))
    inputs_and_labels = tf.data.Dataset.from_tensor_slices(({"sentence": texts}, labels)).batch(2)
    rows = tf.data.Dataset.from_tensor_slices({"sentence1": texts, "sentence2": texts, "label": labels}).batch(2)
    hint = {
        inputs_and_labels: "['sentence'], which the preprocessor does not read: map them to the text columns first, "
                           "as in ds.map(lambda d, y: (d['sentence'], y)).",
        rows: "['label', 'sentence1', 'sentence2'], which the preprocessor does not read: map them to the text "
              "columns first, as in ds.map(lambda d: ((d['sentence1'], d['sentence2']), d['label'])).",
    }
    for dataset, columns in hint.items():
        for where, call in (("BertClassifier.fit", lambda: classifier.fit(dataset, verbose=0)),
                            ("BertClassifier.predict", lambda: classifier.predict(dataset, verbose=0)),
                            ("`validation_data`", lambda: classifier.fit(texts, labels, validation_data=dataset,
                                                                          verbose=0))):
            with pytest.raises(ValueError) as error:
                call()
            assert str(error.value) == f"{where} got a tf.data.Dataset whose examples are dicts of the columns {columns}"
    # The map it names is read.
    mapped = rows.map(lambda d: ((d["sentence1"], d["sentence2"]), d["label"]))
    assert np.isfinite(classifier.fit(mapped, epochs=1, verbose=0).history["loss"][0])
    assert classifier.predict(mapped, verbose=0).shape == (4, 2)


@pytest.mark.slow
def test_validation_split_on_raw_strings_holds_out_the_last_examples_as_keras_does(shared_data):
    texts, labels = _sst2(shared_data, "train", 16)
    keras.utils.set_random_seed(0)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    history = classifier.fit(texts, labels, batch_size=4, epochs=2, seed=0, validation_split=0.25, verbose=0)
    # Keras cuts at ceil(16 * 0.75) = 12: the validation score is that of the last 4 examples.
    held_out = classifier.evaluate(texts[12:], labels[12:], batch_size=4, verbose=0, return_dict=True)
    assert history.history["val_loss"][-1] == pytest.approx(held_out["loss"], abs=1e-5)
    assert history.history["val_accuracy"][-1] == pytest.approx(held_out["accuracy"])

    weighted = classifier.fit(texts, labels, sample_weight=np.ones(16), batch_size=4, validation_split=0.25, verbose=0)
    assert "val_loss" in weighted.history
    pretrainer = BertPretrainer.from_preset(PRESET, nsp=False, sequence_length=32)
    assert "val_mlm_loss" in pretrainer.fit(texts, batch_size=4, validation_split=0.25, verbose=0).history

    pairs = (["a", "b", "c", "d"], ["e", "f", "g", "h"])
    assert classifier.preprocessor.split_examples(pairs, 0.5) == ((["a", "b"], ["e", "f"]), (["c", "d"], ["g", "h"]), 2)
    assert classifier.preprocessor.split_examples(list(zip(*pairs)), 0.25)[1] == [("d", "h")]
    with pytest.raises(ValueError, match=r"^validation_split=0.1 of 4 example\(s\) leaves no validation example"):
        classifier.fit(pairs, [0, 1, 0, 1], validation_split=0.1, verbose=0)


@pytest.mark.slow
def test_class_weight_on_raw_strings_trains_like_the_same_sample_weights(shared_data):
    texts, labels = _sst2(shared_data, "train", 12)
    names = ["negative", "positive"]
    losses = []
    for weighting in ({"class_weight": {0: 1.0, "positive": 3.0}}, {"sample_weight": np.where(labels == 1, 3.0, 1.0)}):
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(_tiny_backbone(), num_classes=2, label_names=names, preprocessor=_preprocessor())
        losses.append(classifier.fit(texts, labels, batch_size=4, epochs=2, seed=0, verbose=0, **weighting)
                      .history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)
    with pytest.raises(ValueError, match=r"^class_weight key 'good': label 'good' is not one of the label_names"):
        classifier.fit(texts, labels, class_weight={"good": 2.0}, verbose=0)
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=["O", "B-PER"],
                                 preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(
                                     PRESET, sequence_length=16))
    with pytest.raises(ValueError, match="`class_weight` weighs one class per example, which BertTokenClassifier"):
        tagger.fit([["John"]], [["B-PER"]], class_weight={0: 1.0}, verbose=0)


def test_a_sequence_length_beyond_the_position_table_is_one_line_before_any_text_is_read():
    # Before: tokenizing went ahead and predict failed inside PositionEmbedding, in Keras's multi-line call report.
    message = ("The preprocessor packs up to sequence_length=600 tokens, but the backbone has 512 positions "
               "(max_sequence_length): use sequence_length <= 512.")
    with pytest.raises(ValueError) as error:
        BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=600))
    assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        BertTokenClassifier.from_preset(PRESET, label_names=["O", "B-PER"], sequence_length=600)
    assert str(error.value) == message
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=512))
    classifier.preprocessor.sequence_length = 600  # set later: refused at the next call on raw text
    with pytest.raises(ValueError) as error:
        classifier.predict(["word " * 700], verbose=0)
    assert str(error.value) == message


def test_from_preset_packs_no_longer_than_a_small_checkpoints_positions(tmp_path):
    # Before: the default 128 (384 for span QA) was refused on a 64-position export of recipes/pretrain.py.
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                            max_sequence_length=64)
    backbone.save_to_preset(tmp_path / "small", vocabulary=_preprocessor().tokenizer.get_vocabulary(), lowercase=True)
    small = str(tmp_path / "small")
    assert BertPretrainer.from_preset(small).preprocessor.sequence_length == 64
    assert BertSpanExtractor.from_preset(small).preprocessor.sequence_length == 64
    assert BertClassifier.from_preset(small, num_classes=2, sequence_length=16).preprocessor.sequence_length == 16
    with pytest.raises(ValueError, match=r"^The preprocessor packs up to sequence_length=65 tokens, but the backbone "
                                         r"has 64 positions \(max_sequence_length\): use sequence_length <= 64\.$"):
        BertClassifier.from_preset(small, num_classes=2, sequence_length=65)


def test_an_argument_no_one_takes_is_one_line_and_from_preset_routes_the_preprocessors():
    # Before: Keras's functional Model dropped unknown keywords without a word (`max_length=64` packed to 128, and
    # `BertSpanExtractor.from_preset(p, doc_stride=24)` kept the stride at 128).
    takes = ("it takes backbone, num_classes, dropout, preprocessor, label_names, compile_defaults, pooling, "
             "activation, multi_label; `from_preset` also takes its preprocessor's arguments (e.g. `sequence_length`).")
    for call, message in [
        (lambda: BertClassifier.from_preset(PRESET, num_classes=2, max_length=64),
         f"BertClassifier got an unknown argument `max_length` (did you mean `sequence_length`?): {takes}"),
        (lambda: BertClassifier(_tiny_backbone(), num_classes=2, dropuot=0.3),
         f"BertClassifier got an unknown argument `dropuot` (did you mean `dropout`?): {takes}"),
        (lambda: BertClassifier(_tiny_backbone(), num_classes=2, num_labels=2),
         f"BertClassifier got an unknown argument `num_labels` (did you mean `num_classes`?): {takes}"),
        # From the Hugging Face habits audit: these listed the arguments alone.
        (lambda: BertClassifier(_tiny_backbone(), label2id={"negative": 0, "positive": 1}),
         f"BertClassifier got an unknown argument `label2id` (did you mean `label_names`?): {takes}"),
        (lambda: BertClassifier(_tiny_backbone(), num_classes=1, problem_type="regression"),
         "BertClassifier got an unknown argument `problem_type` (transformers' problem_type: pass multi_label=True "
         f"for multi_label_classification, num_classes=1 for regression): {takes}"),
        (lambda: BertClassifier(_tiny_backbone(), num_classes=2).fit(["a"], [0], learning_rate=2e-5),
         "BertClassifier.fit got an unknown argument `learning_rate`: a setting of the optimizer: give it to "
         "compile(optimizer=keras.optimizers.AdamW(learning_rate=2e-5, weight_decay=0.01)) before fit, or "
         "keras_bert_impl.training.finetuning.finetune(model, dataset, epochs=..., learning_rate=..., "
         "warmup_proportion=..., weight_decay=...)."),
        (lambda: BertClassifier(_tiny_backbone(), num_classes=2).compile(optimizer="adamw", weight_decay=0.01),
         "BertClassifier.compile got an unknown argument `weight_decay`: a setting of the optimizer: give it to "
         "compile(optimizer=keras.optimizers.AdamW(learning_rate=2e-5, weight_decay=0.01)) before fit, or "
         "keras_bert_impl.training.finetuning.finetune(model, dataset, epochs=..., learning_rate=..., "
         "warmup_proportion=..., weight_decay=...)."),
    ]:
        with pytest.raises(TypeError) as error:
            call()
        assert str(error.value) == message
    with pytest.raises(TypeError) as error:  # Hugging Face's name for hidden_dim: before, a model 16 wide
        BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                     hidden_size=32)
    assert str(error.value).startswith("BertBackbone got an unknown argument `hidden_size` (did you mean `hidden_dim`?):"
                                       " it takes vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,")
    # from_preset's list of preprocessor arguments is every argument of the task preprocessors, no more, no less.
    from keras_bert_impl.models.task_saving import PREPROCESSOR_ARGUMENTS

    taken = {name for task in (BertClassifier, BertTokenClassifier, BertSpanExtractor, BertPretrainer)
             for name in inspect.signature(task.preprocessor_class().__init__).parameters} - {"self", "tokenizer",
                                                                                               "kwargs"}
    assert set(PREPROCESSOR_ARGUMENTS) == taken
    extractor = BertSpanExtractor.from_preset(PRESET, sequence_length=64, doc_stride=24, max_question_length=16)
    assert (extractor.preprocessor.doc_stride, extractor.preprocessor.max_question_length) == (24, 16)
    pretrainer = BertPretrainer.from_preset(PRESET, nsp=False, sequence_length=32, masking_rate=0.3)
    assert (pretrainer.preprocessor.masking_rate, pretrainer.preprocessor.max_predictions_per_seq) == (0.3, 12)


@pytest.mark.slow
def test_an_interrupted_fit_on_raw_strings_resumes_both_ways(shared_data, tmp_path):
    """docs/quickstart.md's two ways back after a stop (here after epoch 2 of 3), on every backend.

    Keras's `BackupAndRestore` restarts at the next epoch with the weights, the optimizer's moments and its step
    (the weights are the uninterrupted run's where no dropout or shuffle draws differ); `finetune(model_dir=...)`
    on the preprocessor's shuffled dataset ends with the uninterrupted run's weights, dropout on.
    """
    from interruptions import StopAfterEpoch

    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    texts, labels = _sst2(shared_data, "train", 16)

    def keras_fit(callbacks):
        keras.utils.set_random_seed(0)
        backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                                dropout=0.0)
        classifier = BertClassifier(backbone, num_classes=2, dropout=0.0, preprocessor=_preprocessor())
        history = classifier.fit(texts, labels, batch_size=8, epochs=3, shuffle=False, verbose=0, callbacks=[
            keras.callbacks.BackupAndRestore(str(tmp_path / "backup")), *callbacks])
        return history.epoch, [keras.ops.convert_to_numpy(w) for w in classifier.weights]

    def finetune_fit(model_dir, callbacks):
        setup_finetuning(seed=0)
        classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
        train = classifier.preprocessor.make_dataset(texts, labels, batch_size=8, shuffle=True, seed=0)
        finetune(classifier, train, epochs=3, learning_rate=1e-3, model_dir=str(model_dir), seed=0, verbose=0,
                 callbacks=list(callbacks), restore_best_weights=False, tensorboard=False)
        return [keras.ops.convert_to_numpy(w) for w in classifier.weights]

    for resume in (lambda stop: keras_fit(stop)[1], lambda stop: finetune_fit(tmp_path / "run", stop)):
        with pytest.raises(KeyboardInterrupt):
            resume([StopAfterEpoch(2)])
    epochs, resumed = keras_fit([])
    assert epochs == [2]  # the third epoch only
    shutil.rmtree(tmp_path / "backup", ignore_errors=True)
    for straight, again in ((keras_fit([])[1], resumed),
                            (finetune_fit(tmp_path / "straight", []), finetune_fit(tmp_path / "run", []))):
        for a, b in zip(straight, again):
            np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_setting_the_preprocessors_sequence_length_repacks_everything_after():
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=64))
    texts = ["a much longer sentence that goes on " * 3, "short"]
    classifier.preprocessor.sequence_length = 8
    for key, value in _preprocessor(sequence_length=8)(texts).items():
        np.testing.assert_array_equal(classifier.preprocessor(texts)[key].numpy(), value.numpy())
    features = next(iter(classifier.preprocessor.make_dataset(texts, batch_size=2)))
    assert features["token_ids"].shape.as_list() == [2, 8]
    assert classifier.predict(texts, verbose=0).shape == (2, 2)
    classifier.fit(texts, [0, 1], batch_size=2, verbose=0)  # before: the 64-token rows failed the 8-token buckets
    with pytest.raises(ValueError, match=r"`sequence_length` must be an int >= 3 \(\[CLS\] text \[SEP\]\), got 2"):
        classifier.preprocessor.sequence_length = 2


@pytest.mark.slow
def test_labels_by_name_train_exactly_like_class_ids(shared_data):
    texts, labels = _sst2(shared_data, "train", 12)
    names = ["negative", "positive"]
    weights = []
    for y in (labels, [names[i] for i in labels], labels.reshape(-1, 1)):  # the column as Keras's losses take it
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(_tiny_backbone(), num_classes=2, label_names=names, preprocessor=_preprocessor())
        classifier.fit(texts, y, batch_size=4, epochs=2, seed=0, verbose=0,
                       validation_data=(texts[:4], y[:4]))
        weights.append([keras.ops.convert_to_numpy(w) for w in classifier.trainable_weights])
        assert classifier.evaluate(texts, y, batch_size=4, verbose=0, return_dict=True)["accuracy"] >= 0.0
    for by_id, *others in zip(*weights):
        for other in others:
            np.testing.assert_array_equal(by_id, other)


@pytest.mark.parametrize(
    "num_classes, label_names, labels, message",
    [
        (2, ["negative", "positive"], ["positive", "good"],
         "Example 1: label 'good' is not one of the label_names ['negative', 'positive']."),
        (3, None, ["x", "y"], "Example 0: label 'x' is a name, but this classifier has no label_names: give class "
                              "ids 0..2, or build it with label_names=[...]."),
        # Before: JAX trained on these silently, loss 0.0.
        (2, None, [1, 5], "Example 1: label 5 is not a class of this 2-class classifier (ids 0..1); 1 label(s) in "
                          "all are outside."),
        (2, None, [0, -1], "Example 1: label -1 is not a class of this 2-class classifier (ids 0..1); 1 label(s) "
                           "in all are outside."),
        (2, None, [0, 0.5], "Example 1: label 0.5 is not a class id (int) or a label name (str)."),
        # Class ids as a file gives them ("0", "1") are ids; one outside the classes is named as the others.
        (2, None, ["0", "7"], "Example 1: label 7 is not a class of this 2-class classifier (ids 0..1); 1 label(s) in "
                              "all are outside."),
        (1, None, [0.5, "high"], "Example 1: label 'high' is not a number (num_classes=1 is regression)."),
        # Before: a NaN score trained to a loss of nan without a word; the first string was named, not the bad one.
        (1, None, [0.5, float("nan")], "Example 1: label nan is not a finite number (num_classes=1 is regression)."),
        (1, None, ["5.0", "x3"], "Example 1: label 'x3' is not a number (num_classes=1 is regression)."),
        (1, None, [0.5, None], "Example 1: label None is not a number (num_classes=1 is regression)."),
        # One-hot rows (keras-hub's users' habit, with CategoricalCrossentropy) say so, with the fix.
        (2, None, [[0, 1], [1, 0]], "`y` must hold one label per example (shape (N,) or (N, 1)), got shape (2, 2). "
                                    "These are one-hot rows: give their class ids, y.argmax(-1)."),
        (2, None, [[0, 2], [1, 0]], "`y` must hold one label per example (shape (N,) or (N, 1)), got shape (2, 2)."),
    ],
)
def test_a_label_that_is_not_a_class_is_one_line_naming_it(num_classes, label_names, labels, message):
    classifier = BertClassifier(_tiny_backbone(), num_classes=num_classes, label_names=label_names,
                                preprocessor=_preprocessor())
    with pytest.raises(ValueError) as error:
        classifier.fit(["a fine film", "dull"], labels, verbose=0)
    assert str(error.value) == message


@pytest.mark.slow
def test_raw_text_without_its_labels_is_one_line_and_the_model_still_trains_after_it():
    from keras_bert_impl.tasks.tagging.reading import ConllSentence

    # Before: Keras stopped inside the traced step in three lines ("y_true and y_pred have different structures"),
    # and on TensorFlow every later fit of that model failed ("Creating variables on a non-first call").
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=32, doc_stride=8))
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=["O", "B-PER"],
                                 preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(
                                     PRESET, sequence_length=16))
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16))
    for call, message in [
        (lambda: qa.fit((["Who ran?"], ["John ran."]), verbose=0),
         "`y` is missing: BertSpanExtractor.fit on raw text needs the answers, as in fit((questions, contexts), "
         "answers)."),
        (lambda: qa.evaluate((["Who ran?"], ["John ran."]), verbose=0),
         "`y` is missing: BertSpanExtractor.evaluate on raw text needs the answers, as in evaluate((questions, "
         "contexts), answers)."),
        (lambda: tagger.fit([["John", "ran"]], verbose=0),
         "`y` is missing: BertTokenClassifier.fit on raw text needs the tags, as in fit(sentences, tags)."),
        (lambda: classifier.fit(["a fine film"], verbose=0),
         "`y` is missing: BertClassifier.fit on raw text needs the labels, as in fit(texts, labels)."),
        # read_conll's sentences as they come: before, the same `y` is missing line, though they hold their tags.
        (lambda: tagger.fit([ConllSentence(["John", "ran"], ["B-PER", "O"])], verbose=0),
         "`x` holds sentences with their tags (ConllSentence, as read_conll gives): give fit([s.words for s in "
         "sentences], [s.tags for s in sentences])."),
    ]:
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == message
    assert qa.fit((["Who ran?"], ["John ran."]), ["John"], verbose=0).history["loss"]
    # A failure inside the first traced step (labels of the wrong shape for the feature dict) leaves no broken step.
    features = {k: keras.ops.convert_to_numpy(v) for k, v in classifier.preprocessor(["a fine film", "dull"]).items()}
    with pytest.raises(Exception):
        classifier.fit(features, np.zeros((2, 3, 4)), verbose=0)
    assert classifier.fit(["a fine film", "dull"], [1, 0], verbose=0).history["loss"]


def test_a_tag_id_outside_the_tags_is_one_line_naming_it():
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=["O", "B-LOC", "I-LOC"],
                                 preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(
                                     PRESET, sequence_length=16))
    with pytest.raises(ValueError) as error:
        tagger.fit([["I", "love", "Paris"]], [[0, 0, 3]], verbose=0)
    assert str(error.value) == "Example 0: tag 3 is not a tag of this 3-tag model (ids 0..2)."
    with pytest.raises(ValueError) as error:  # before: TypeError "expected string or bytes-like object, got 'list'"
        tagger.predict_entities([["I", "love", "Paris"]])
    assert str(error.value) == ("predict_entities reads raw text (a string or a list of strings), and text 0 is a "
                                "list of words: give the sentence as one string, e.g. ' '.join(words), or call "
                                "predict_tags(word_lists) for a tag per word.")


# === Saving ===

_LOAD_AND_PREDICT = """
import json, sys, numpy as np, keras
import keras_bert_impl
model = keras.saving.load_model(sys.argv[1])
print(json.dumps(np.asarray(model.predict(json.loads(sys.argv[2]), verbose=0), "float64").tolist()))
"""


@pytest.mark.slow
def test_keras_file_round_trip_in_a_fresh_process(tmp_path):
    classifier = BertClassifier(_tiny_backbone(), num_classes=3, label_names=["a", "b", "c"],
                                preprocessor=_preprocessor())
    classifier.fit(["one text", "another text", "a third"], [0, 1, 2], epochs=1, verbose=0)
    path = str(tmp_path / "classifier.keras")
    texts = ["Zoë's café, 東京 🙂", "plain text"]
    classifier.save(path)
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
        weights_size = archive.getinfo("model.weights.h5").file_size
    assert not config.get("compile_config")  # saved for inference: no optimizer, no compile state
    assert "optimizer" not in json.dumps(config)
    assert weights_size < 4 * sum(int(np.prod(w.shape)) for w in classifier.weights) + 200_000
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", _LOAD_AND_PREDICT, path, json.dumps(texts)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Skipping variable loading" not in result.stderr and "compile() was not called" not in result.stderr
    loaded = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
    np.testing.assert_array_equal(loaded, np.asarray(classifier.predict(texts, verbose=0), "float64"))


_LOAD_WITH_OPTIMIZER = """
import json, sys, numpy as np, keras
import keras_bert_impl
model = keras.saving.load_model(sys.argv[1])
slots = [np.asarray(v, "float64") for v in model.optimizer.variables]
print(json.dumps({"optimizer": type(model.optimizer).__name__,
                  "schedule": type(model.optimizer._learning_rate).__name__,
                  "iterations": int(model.optimizer.iterations),
                  "slot_sums": [float(np.abs(s).sum()) for s in slots]}))
"""


@pytest.mark.slow
def test_save_with_the_optimizer_reloads_its_state_in_a_fresh_process(tmp_path):
    from keras_bert_impl.training.optimizer import create_optimizer

    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    classifier.compile(optimizer=create_optimizer(1e-3, num_train_steps=10, warmup_steps=2))
    classifier.fit(["one text", "another text", "a third", "and a fourth"], [0, 1, 1, 0], batch_size=2, epochs=1,
                   verbose=0)
    path = str(tmp_path / "with_optimizer.keras")
    classifier.save(path, include_optimizer=True)
    result = subprocess.run([sys.executable, "-c", _LOAD_WITH_OPTIMIZER, path], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Skipping variable loading" not in result.stderr and "compile() was not called" not in result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["optimizer"] == type(classifier.optimizer).__name__ == "GlobalClipAdamW"
    assert loaded["schedule"] == "WarmupLinearDecay"
    assert loaded["iterations"] == int(classifier.optimizer.iterations) == 2
    expected = [float(np.abs(np.asarray(v, "float64")).sum()) for v in classifier.optimizer.variables]
    np.testing.assert_allclose(loaded["slot_sums"], expected, rtol=1e-6)
    assert sum(expected[1:]) > 0  # trained moments, not fresh zeros


def test_save_to_preset_round_trip_keeps_the_head(tmp_path):
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, label_names=["no", "yes"],
                                preprocessor=_preprocessor(sequence_length=24))
    classifier.save_to_preset(tmp_path / "preset")
    restored = BertClassifier.from_preset(str(tmp_path / "preset"))
    assert restored.label_names == ["no", "yes"] and restored.preprocessor.sequence_length == 24
    texts = ["a fine film", "dull"]
    np.testing.assert_allclose(restored.predict(texts, verbose=0), classifier.predict(texts, verbose=0), atol=1e-6)
    # A different head (3 classes) on the same preset: backbone loaded, head new.
    other = BertClassifier.from_preset(str(tmp_path / "preset"), num_classes=3, label_names=None)
    assert other.num_classes == 3
    # Saving again over it (before: FileExistsError, "it already holds ['task.json', 'task.weights.h5']") replaces
    # the whole preset: the 3-class head now.
    other.save_to_preset(tmp_path / "preset")
    assert BertClassifier.from_preset(str(tmp_path / "preset")).num_classes == 3
    assert sorted(os.listdir(tmp_path)) == ["preset"]  # no temporary directory left beside it
    # Another task's preset: its backbone under a new head, and a missing head argument names what the folder holds.
    tagger = BertTokenClassifier.from_preset(str(tmp_path / "preset"), label_names=["O", "B-PER"])
    assert tagger.label_names == ["O", "B-PER"]
    tagger.save_to_preset(tmp_path / "tagger")
    with pytest.raises(ValueError) as error:
        BertClassifier.from_preset(str(tmp_path / "tagger"))
    assert str(error.value) == (
        "`num_classes` must be a positive int (1 for regression; or give `label_names`), got None. "
        f"({tmp_path / 'tagger'} holds a BertTokenClassifier, saved by save_to_preset: load it with "
        "BertTokenClassifier.from_preset; BertClassifier.from_preset builds a new head on its backbone, from this "
        "task's own arguments.)")


# === Tagging ===

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


def _conll_sentences(shared_data, count):
    sentences, words = [], []
    with open(shared_data / "conll2003" / "eng.testa", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts:
                if words:
                    sentences.append(words)
                    words = []
                if len(sentences) == count:
                    break
                continue
            if parts[0] != "-DOCSTART-":
                words.append((parts[0], parts[-1]))
    return sentences


def _tag_marked_words(marked):
    """A stand-in for `model.predict` that tags B-PER at the marked (row, position) pairs and O elsewhere."""

    def predict(features, batch_size=None, verbose=0):
        ids = np.asarray(features["token_ids"])
        logits = np.zeros(ids.shape + (len(CONLL_TAGS),), "float32")
        logits[..., 0] = 1.0
        for row, position in marked:
            logits[row, position, 1] = 5.0
        return logits

    return predict


def test_predict_entities_offsets_on_real_conll_and_unicode(shared_data):
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS,
                                 preprocessor=keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=24))
    sentences = [" ".join(w for w, _ in s) for s in _conll_sentences(shared_data, 20)]
    texts = sentences + ["Zoë Ångström met José in 東京 🙂 yesterday.", "Ünïcödé Wörds and emoji 👩‍👩‍👧 Here"]
    split = [tagger.preprocessor.split_words(t) for t in texts]
    _, placements = tagger.preprocessor.word_windows([[w for w, _, _ in words] for words in split])
    # Each capitalised word (that has word pieces) is tagged B-PER: one entity per such word.
    marked, expected = set(), []
    for words, placement in zip(split, placements):
        entities = []
        for (word, start, end), where in zip(words, placement):
            if word[:1].isupper() and where is not None:
                marked.add(where)
                entities.append((start, end))
        expected.append(entities)
    tagger.predict = _tag_marked_words(marked)
    found = tagger.predict_entities(texts)
    assert len(found) == len(texts)
    for text, entities, spans in zip(texts, found, expected):
        assert [(e["start"], e["end"]) for e in entities] == spans, text
        for entity in entities:
            assert entity["text"] == text[entity["start"] : entity["end"]] and entity["type"] == "PER"
            assert 0.0 < entity["score"] <= 1.0
    unicode_entities = found[len(sentences)]
    assert [e["text"] for e in unicode_entities] == ["Zoë", "Ångström", "José"]
    assert [e["text"] for e in found[-1]] == ["Ünïcödé", "Wörds", "Here"]
    assert [e["start"] for e in found[-1]] == [0, 8, 30]


@pytest.mark.slow
def test_token_classifier_fits_words_and_tag_names_without_gradient_warnings(shared_data):
    sentences = _conll_sentences(shared_data, 16)
    words = [[w for w, _ in s] for s in sentences]
    tags = [[t for _, t in s] for s in sentences]
    tagger = BertTokenClassifier.from_preset(PRESET, label_names=CONLL_TAGS, sequence_length=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = tagger.fit(words, tags, batch_size=8, epochs=2, verbose=0)
    assert not [w for w in caught if "Gradients do not exist" in str(w.message)]
    assert history.history["loss"][-1] < history.history["loss"][0]
    with pytest.raises(ValueError, match="tag 'B-XYZ' is not one of"):
        tagger.fit([["a"]], [["B-XYZ"]], verbose=0)
    assert isinstance(tagger.predict_entities("John lives in Paris."), list)


_LONG_SENTENCE = ("The U.S. didn't pay Germany's 1,000 euros to Acme Inc. yet, said Mr. Smith (the mayor) on Monday "
                  "in Paris; he won't, and they can't.")


@pytest.mark.parametrize("x, y, message", [
    # Before: `Example 0: 5 words but 4 labels.`, where the user counts 4 words.
    (["I don't know Paris"], [["O", "O", "O", "B-LOC"]],
     "Example 0: 5 words but 4 labels; the text splits into ['I', 'do', \"n't\", 'know', 'Paris'] (CoNLL-2003's "
     "words: give a list of words to split it yourself)."),
    (["Paris", _LONG_SENTENCE], [["B-LOC"], ["O"] * 30],
     "Example 1: 35 words but 30 labels; the text splits into 35 words, 10 more than at its spaces: \"didn't\" -> "
     "['did', \"n't\"], \"Germany's\" -> ['Germany', \"'s\"], 'yet,' -> ['yet', ','], '(the' -> ['(', 'the'], "
     "'mayor)' -> ['mayor', ')'], and 3 more chunks (CoNLL-2003's words: give a list of words to split it "
     "yourself)."),
    ([" ".join(["Paris"] * 25)], [["B-LOC"] * 24],
     "Example 0: 25 words but 24 labels; the text splits at its spaces only, into 25 words (CoNLL-2003's words: "
     "give a list of words to split it yourself)."),
    ([["I", "don't", "know", "Paris"]], [["O", "O", "B-LOC"]], "Example 0: 4 words but 3 labels."),  # words: as given
    (["Paris", "Rome"], [["B-LOC"]], "2 sentences but 1 lists of tags: give one list of tags (one per word) per "
                                     "sentence."),  # before: IndexError: list index out of range
])
def test_a_tag_count_that_is_not_the_word_count_shows_how_the_text_splits(x, y, message):
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=32)))
    for call in (lambda: tagger.fit(x, y, verbose=0), lambda: tagger.evaluate(x, y, verbose=0)):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == message


def test_an_empty_sentence_is_refused_in_fit_and_evaluate_and_predicted_as_hugging_face_does():
    # Before: fit([[]], [[]]) trained on a row with no labelled token, silently (loss 0.0).
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    empty = "Example {}: an empty sentence (no words), so it has nothing to tag: leave it out of x and y."
    for x, y, message in (
        ([[]], [[]], empty.format(0)),
        ([["Paris"], []], [["B-LOC"], []], empty.format(1)),
        ([[], ["Paris"]], [["O"], ["B-LOC"]], empty.format(0)),  # the empty sentence, not its tag count
        (["Paris", "  "], [["B-LOC"], []],
         "Example 1: the text '  ' has no words, so it has nothing to tag: leave it out of x and y."),
    ):
        for call in (tagger.fit, tagger.evaluate):
            with pytest.raises(ValueError) as error:
                call(x, y, verbose=0)
            assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        tagger.fit([["Paris"]], [["B-LOC"]], validation_data=([[]], [[]]), verbose=0)
    assert str(error.value) == f"`validation_data`: {empty.format(0)}"
    # Without labels, as Hugging Face's token-classification pipeline: no entities, and the [CLS] [SEP] row's logits.
    assert tagger.predict_entities("") == [] and tagger.predict_entities(["", "  "]) == [[], []]
    assert tagger.predict([[], ["Paris"]], verbose=0).shape == (2, 16, len(CONLL_TAGS))
    assert tagger.predict_tags("") == [] and tagger.predict_tags([[], ["Paris"]])[0] == []
    for call in (tagger.predict_entities, tagger.predict_tags, tagger.predict):  # (predict_entities: was a Keras crash)
        with pytest.raises(ValueError) as error:
            call([])
        assert str(error.value) == "No examples: the list of sentences is empty."


def test_predict_tags_gives_a_tag_per_word_of_the_words_given_as_predict_entities_tags_them():
    """Pre-tokenised sentences (CoNLL's words) get one tag per word, long ones over several rows; a word with no
    WordPieces (a zero-width space) is "O". Raw text is split as `predict_entities` splits it."""
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=8)))
    words = [["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."], ["Peter", "\u200b", "Blackburn"]]
    tags = tagger.predict_tags(words)
    assert [len(t) for t in tags] == [9, 3] and all(tag in CONLL_TAGS for t in tags for tag in t)
    assert tags[1][1] == "O"
    # The same words as a string (split as CoNLL-2003 is) get the same tags, and the tags give predict_entities's.
    assert tagger.predict_tags(" ".join(words[0])) == tags[0]
    from keras_bert_impl.metrics.conll import extract_entities

    entities = tagger.predict_entities(" ".join(words[0]))
    assert [(e["type"], e["text"]) for e in entities] == [
        (kind, " ".join(words[0][first:last])) for kind, first, last in extract_entities(tags[0])]
    with pytest.raises(ValueError) as error:
        tagger.predict_entities([words[0]])
    assert str(error.value) == ("predict_entities reads raw text (a string or a list of strings), and text 0 is a list "
                                "of words: give the sentence as one string, e.g. ' '.join(words), or call "
                                "predict_tags(word_lists) for a tag per word.")


# === Span QA ===


def _squad_paragraphs(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)["data"]
    return [p for article in data for p in article["paragraphs"]]


def _peaked_predict(windows, first_token, last_token):
    def predict(features, batch_size=None, verbose=0):
        count, length = np.asarray(features["token_ids"]).shape
        start, end = np.zeros((count, length)), np.zeros((count, length))
        for row in range(count):
            for j, token in enumerate(windows.token_index[row]):
                position = windows.context_start[row] + j
                start[row, position] = 8.0 if token == first_token else 0.0
                end[row, position] = 8.0 if token == last_token else 0.0
        return {"start_logits": start, "end_logits": end}

    return predict


@pytest.mark.parametrize("sequence_length", [384, 96])
def test_answer_on_a_long_real_squad_context(real_data, data_slices, sequence_length):
    # The whole dev file where ../shared/data has it, else the vendored slice (its first two articles);
    # os.fspath, because `real_data / "squad"` skips the test where tests/data/whole lacks the folder.
    source = os.path.join(os.fspath(real_data), "squad", "dev-v1.1.json.gz")
    paragraphs = _squad_paragraphs(source if os.path.exists(source) else data_slices / "squad" / "dev-v1.1.json.gz")
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=sequence_length, doc_stride=sequence_length // 3))
    paragraph = max(paragraphs, key=lambda p: len(p["context"]))
    context = paragraph["context"]
    windows = qa.preprocessor.windows([paragraph["qas"][0]["question"]], [context])
    assert len(windows.example) > 1, "the context must span several windows"
    # Every answer of the paragraph, wherever it lies, maps back to its exact characters.
    for question in paragraph["qas"][:5]:
        gold = question["answers"][0]
        start_char, end_char = gold["answer_start"], gold["answer_start"] + len(gold["text"])
        windows = qa.preprocessor.windows([question["question"]], [context])  # the layout depends on the question
        first = int(np.nonzero(windows.char_starts[0] >= start_char)[0][0])
        last = int(np.nonzero(windows.char_ends[0] <= end_char)[0][-1])
        qa.predict = _peaked_predict(windows, first, last)
        answer = qa.answer(question["question"], context)
        assert answer["text"] == context[answer["start"] : answer["end"]]
        assert answer["text"].lower() == gold["text"].lower(), (answer, gold)
        assert answer["score"] > 0.5
    del qa.predict
    answers = qa.answer([q["question"] for q in paragraph["qas"][:2]], [context] * 2)
    assert len(answers) == 2 and all(a["text"] == context[a["start"] : a["end"]] for a in answers)


def test_answer_top_k_gives_the_best_spans_of_all_windows_best_first(real_data, data_slices):
    # Hugging Face's question-answering pipeline's top_k: here the spans are enumerated by brute force over every
    # window of a long real SQuAD context and ranked by start + end logit.
    source = os.path.join(os.fspath(real_data), "squad", "dev-v1.1.json.gz")
    paragraphs = _squad_paragraphs(source if os.path.exists(source) else data_slices / "squad" / "dev-v1.1.json.gz")
    paragraph = max(paragraphs, key=lambda p: len(p["context"]))
    context, question = paragraph["context"], paragraph["qas"][0]["question"]
    keras.utils.set_random_seed(3)
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=96, doc_stride=32))
    top = qa.answer(question, context, top_k=5)
    assert top[0] == qa.answer(question, context) and len(top) == 5
    windows = qa.preprocessor.windows([question], [context])
    assert len(windows.example) > 1
    outputs = qa.predict(windows.features, verbose=0)
    every = {}  # (start, end) characters -> start + end logit, over every allowed span of every window
    for w in range(len(windows.example)):
        first, tokens = int(windows.context_start[w]), windows.token_index[w]
        for s in range(len(tokens)):
            if not windows.max_context[w][s]:
                continue
            for e in range(s, min(len(tokens), s + qa.max_answer_length)):
                span = (int(windows.char_starts[0][tokens[s]]), int(windows.char_ends[0][tokens[e]]))
                every[span] = float(outputs["start_logits"][w, first + s] + outputs["end_logits"][w, first + e])
    assert [every[(a["start"], a["end"])] for a in top] == pytest.approx(sorted(every.values(), reverse=True)[:5])
    assert all(a["text"] == context[a["start"] : a["end"]] and 0 < a["score"] < 1 for a in top)
    several = qa.answer([question, paragraph["qas"][1]["question"]], [context, context], top_k=2)
    assert [len(spans) for spans in several] == [2, 2]
    assert [(a["start"], a["end"]) for a in several[0]] == [(a["start"], a["end"]) for a in top[:2]]
    with pytest.raises(ValueError) as error:
        qa.answer(question, context, top_k=0)
    assert str(error.value) == "`top_k` must be a positive int, got 0."
    with pytest.raises(ValueError) as error:  # the arguments the other way round (before: an answer from the question)
        qa.answer(context, question)
    assert str(error.value).startswith("answer(question, context): question 0 ") and str(error.value).endswith(
        "which ends in '?': are they the other way round? The question comes first.")


# === Embeddings ===


@pytest.mark.slow
def test_text_embedder_matches_sentence_transformers_mean_pooling(minilm_dir):
    import torch
    import transformers

    # The last: the first sentences of the bundled novels, 150-256 tokens, which the default of 128 cut (cosine
    # 0.85 to sentence-transformers' vector on such a text): from_preset now reads the checkpoint's max_seq_length.
    corpus = (pathlib.Path(keras_bert_impl.__file__).parent / "assets" / "corpus" / "valid.txt").read_text("utf-8")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    sentences = [line for line in corpus.split("\n")[:40] if line]
    long_text = next(text for text in (" ".join(sentences[:n]) for n in range(1, len(sentences)))
                     if 150 < len(tokenizer(text)["input_ids"]) < 256)
    texts = ["A man is eating food.", "Zoë's café in Tōkyō 🙂", "The quick brown fox jumps over the lazy dog.",
             long_text]
    embedder = BertTextEmbedder.from_preset(PRESET)
    assert embedder.preprocessor.sequence_length == 256
    ours = embedder.encode(texts)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    model = transformers.AutoModel.from_pretrained(str(minilm_dir))
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    reference = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    similarity = embedder.similarity(texts[:1], texts)
    assert similarity.shape == (1, 4) and abs(similarity[0, 0] - 1.0) < 1e-5
    assert embedder.get_sentence_embedding_dimension() == reference.shape[1] == 384  # (sentence-transformers' name)


def test_text_embedder_takes_a_sentence_transformers_checkpoints_own_settings(minilm_dir, tmp_path):
    from keras_bert_impl.checkpoints.sentence_transformers import embedding_settings

    assert embedding_settings(minilm_dir) == {"sequence_length": 256, "pooling": "mean", "normalize": True}
    assert embedding_settings(tmp_path) == {}  # not a sentence-transformers directory
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_cls_token": False, "pooling_mode_max_tokens": True}))
    with pytest.raises(ValueError) as error:
        embedding_settings(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / '1_Pooling' / 'config.json'}: the checkpoint pools by max_tokens, which BertTextEmbedder does "
        "not (it pools by mean or by the [CLS] token): pass pooling='mean' or pooling='cls' to embed with one of them "
        "anyway.")
    assert embedding_settings(tmp_path, choose_pooling=False) == {}
    # The user's arguments win over the checkpoint's; a preprocessor of the user's keeps its own length.
    embedder = BertTextEmbedder.from_preset(PRESET, sequence_length=64, pooling="cls", normalize=False)
    assert (embedder.preprocessor.sequence_length, embedder.pooling, embedder.normalize) == (64, "cls", False)
    assert BertTextEmbedder.from_preset(PRESET, preprocessor=_preprocessor(48)).preprocessor.sequence_length == 48


def test_an_embedder_saved_for_hugging_face_embeds_as_it_did_when_read_back(minilm_dir, tmp_path):
    # From the Hugging Face habits audit: save_huggingface wrote the transformers files alone, so the folder read
    # back cut texts at 128 tokens, not 256: a 410-token text at cosine 0.753 to the embedder's own vector.
    from keras_bert_impl.checkpoints.sentence_transformers import embedding_settings

    corpus = (pathlib.Path(keras_bert_impl.__file__).parent / "assets" / "corpus" / "valid.txt").read_text("utf-8")
    long_text = " ".join(line for line in corpus.split("\n")[:60] if line)  # (over 256 tokens: cut at 256 by both)
    texts = ["A man is eating food.", long_text]
    embedder = BertTextEmbedder.from_preset(PRESET)
    embedder.save_huggingface(tmp_path / "exported")
    assert embedding_settings(tmp_path / "exported") == embedding_settings(minilm_dir) == {
        "sequence_length": 256, "pooling": "mean", "normalize": True}
    assert json.loads((tmp_path / "exported" / "modules.json").read_text()) == json.loads(
        (minilm_dir / "modules.json").read_text())
    again = BertTextEmbedder.from_preset(str(tmp_path / "exported"))
    np.testing.assert_allclose(again.encode(texts), embedder.encode(texts), atol=1e-6)
    # Another embedder's own settings travel too: [CLS] pooling, no normalisation, 64 tokens.
    other = BertTextEmbedder.from_preset(PRESET, sequence_length=64, pooling="cls", normalize=False)
    other.save_huggingface(tmp_path / "exported")  # (over the earlier export: its files are replaced)
    assert embedding_settings(tmp_path / "exported") == {"sequence_length": 64, "pooling": "cls", "normalize": False}
    again = BertTextEmbedder.from_preset(str(tmp_path / "exported"))
    np.testing.assert_allclose(again.encode(texts), other.encode(texts), atol=1e-6)


def test_text_embedder_loss_counts_the_real_texts_only(shared_data):
    # Targets: the model's own vectors, so the loss is -1 at any batch size. The filler rows of the last batch
    # counted too: -0.75 for 24 texts in a batch of 32, -0.96 at batch size 5.
    embedder = BertTextEmbedder(_tiny_backbone(), preprocessor=_preprocessor())
    texts, _ = _sst2(shared_data, "dev", 24)
    targets = embedder.encode(texts)
    for batch_size in (32, 5, 24):
        loss = embedder.evaluate(texts, targets, batch_size=batch_size, verbose=0, return_dict=True)["loss"]
        assert abs(loss + 1.0) < 1e-4, (batch_size, loss)


@pytest.mark.slow
def test_encode_gives_one_vector_for_one_string_and_takes_sentence_transformers_conversions():
    # Before: encode("one string") gave (1, 384), and convert_to_numpy / convert_to_tensor were a plain TypeError.
    embedder = BertTextEmbedder.from_preset(PRESET)
    texts = ["A man is eating food.", "Zoë's café in Tōkyō 🙂", "The sky is blue."]
    batch = embedder.encode(texts)
    one = embedder.encode(texts[0])
    assert one.shape == (384,) and one.dtype == np.float32  # sentence-transformers: a string gives one vector
    np.testing.assert_allclose(one, batch[0], atol=1e-5)
    assert embedder.encode(texts[:1]).shape == (1, 384) and embedder.encode_queries(texts[0]).shape == (384,)
    np.testing.assert_array_equal(embedder.encode(texts, convert_to_numpy=True), batch)
    tensor = embedder.encode(texts, convert_to_tensor=True)  # the Keras backend's tensor (torch.Tensor on PyTorch)
    assert keras.ops.is_tensor(tensor) and tuple(tensor.shape) == (3, 384) and not isinstance(tensor, np.ndarray)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(tensor), batch, atol=1e-6)
    assert tuple(embedder.encode(texts[0], convert_to_numpy=False, convert_to_tensor=True).shape) == (384,)
    # similarity reads one vector as one row (sentence-transformers' util.cos_sim), and tensors as arrays.
    expected = embedder.similarity(texts[:1], texts)
    for a, b in ((texts[0], texts), (one, batch), (one, tensor), (texts[0], tensor)):
        np.testing.assert_allclose(embedder.similarity(a, b), expected, atol=1e-5)
    with pytest.raises(ValueError) as error:
        embedder.encode(texts, convert_to_numpy=False)
    assert str(error.value) == (
        "encode(convert_to_numpy=False) asks for sentence-transformers' list of one tensor per text, which "
        "BertTextEmbedder does not give: leave convert_to_numpy=True (a NumPy array) or pass convert_to_tensor=True "
        "(one tensor of the Keras backend).")


def test_every_task_from_preset():
    assert BertPretrainer.from_preset(PRESET).backbone.num_layers == 6
    assert BertSpanExtractor.from_preset(PRESET).preprocessor.sequence_length == 384
    tagger = BertTokenClassifier.from_preset(PRESET, label_names=["O", "B-X"])
    assert tagger.num_classes == 2 and not tagger.backbone.pooled_dense.trainable


@pytest.mark.slow
def test_softmax_activation_gives_probabilities_and_trains_like_logits(shared_data):
    """keras-hub's `activation="softmax"`: `predict` gives probabilities, and the default loss takes them (the same
    training as from logits)."""
    texts, labels = _sst2(shared_data, "train", 12)
    runs = []
    for activation in (None, "softmax"):
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(),
                                    activation=activation, label_names=["negative", "positive"])
        history = classifier.fit(texts, labels, batch_size=4, epochs=2, seed=0, verbose=0).history
        runs.append((classifier, history["loss"]))
    (logits_model, logits_losses), (softmax_model, softmax_losses) = runs
    np.testing.assert_allclose(softmax_losses, logits_losses, rtol=1e-4)
    probabilities = softmax_model.predict(texts, verbose=0)
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        probabilities, keras.ops.convert_to_numpy(keras.ops.softmax(logits_model.predict(texts, verbose=0))), atol=1e-4)
    scored = softmax_model.predict_labels(texts[:2], return_scores=True)
    np.testing.assert_allclose([row["score"] for row in scored], probabilities[:2].max(axis=-1), atol=1e-6)
    # top_k, as Hugging Face's text-classification pipeline: every class here, likeliest first, from either model.
    for model in (logits_model, softmax_model):
        ranked = model.predict_labels(texts[:2], top_k=2)
        assert [[row["label"] for row in text] for text in ranked] == [
            [["negative", "positive"][i] for i in np.argsort(-p)] for p in model.predict(texts[:2], verbose=0)]
        assert [text[0] for text in ranked] == model.predict_labels(texts[:2], return_scores=True)
        np.testing.assert_allclose([sum(row["score"] for row in text) for text in ranked], 1.0, atol=1e-5)
        # The pipeline's top_k=None (and its older return_all_scores=True): every class; before, the top class alone.
        assert model.predict_labels(texts[:2], top_k=None) == ranked
        assert model.predict_labels(texts[:2], return_all_scores=True) == ranked
    assert BertClassifier.from_config(softmax_model.get_config()).activation == "softmax"
    with pytest.raises(ValueError) as error:
        BertClassifier(_tiny_backbone(), num_classes=2, activation="relu")
    assert str(error.value) == ("`activation` must be one of (None, 'linear', 'softmax', 'sigmoid') (keras-hub's: None "
                                "gives logits, 'softmax' probabilities; 'sigmoid' those of a multi_label classifier), "
                                "got 'relu'.")
    with pytest.raises(ValueError, match="activation='softmax' needs classes; num_classes=1 is a regression"):
        BertClassifier(_tiny_backbone(), num_classes=1, activation="softmax")


@pytest.mark.parametrize("call, message", [
    (lambda c, r: c.fit(["a", "b"], [0, 1], validation_split=1.5, verbose=0),
     "`validation_split` must be a float between 0 and 1, got 1.5."),
    (lambda c, r: c.fit(["a", "b"], [0, 1], class_weight=[1.0, 2.0], verbose=0),
     "`class_weight` must be a dict {class id or label name: weight}, got [1.0, 2.0]."),
    (lambda c, r: r.fit(["a", "b"], [0.5, 1.0], class_weight={0: 2.0}, verbose=0),
     "`class_weight` needs classes, but this classifier is a regression (num_classes=1)."),
    (lambda c, r: r.predict_labels(["a"], return_scores=True),
     "return_scores gives class probabilities; this classifier is a regression (num_classes=1)."),
    (lambda c, r: c.predict_labels(["a"], top_k=3), "`top_k` must be an int from 1 to num_classes=2, got 3."),
    (lambda c, r: c.predict_labels(["a"], top_k=1, return_scores=True),
     "`top_k` gives each text's likeliest classes with their scores: pass it without `return_scores` or `threshold`."),
    (lambda c, r: r.predict_labels(["a"], top_k=1), "`top_k` ranks classes; this classifier is a regression (num_classes=1)."),
    (lambda c, r: c.predict_labels(["a"], top_k=2, return_all_scores=True),
     "`return_all_scores=True` is Hugging Face's older `top_k=None`: pass one of the two."),
    # Before: batch_size=0 silently trained in batches of 32; texts without labels got Keras's "Unrecognized data type".
    (lambda c, r: c.fit(["a", "b"], [0, 1], batch_size=0, verbose=0), "`batch_size` must be a positive int, got 0."),
    (lambda c, r: c.fit(["a", "b"], [0, 1], validation_data=["c"], verbose=0),
     "`validation_data` of raw strings is a tuple (texts, labels) or (texts, labels, sample_weight); got the texts "
     "alone: add their labels."),
    # Before: the training data's message, which did not say it was about the validation data.
    (lambda c, r: c.fit(["a", "b"], [0, 1], validation_data=(["c"], [0, 1]), verbose=0),
     "`validation_data`: `y` must hold one value (or one row of values) per example (1), got shape (2,)."),
    # Before: Keras's "Output with path `` is not connected to `inputs`", and a four-line structure mismatch.
    (lambda c, r: c.predict({"input_ids": np.zeros((1, 8), "int32"), "attention_mask": np.ones((1, 8), "int32")},
                            verbose=0),
     "BertClassifier.predict takes raw text or a dict of the features {token_ids, segment_ids, padding_mask}; the "
     "dict given has ['attention_mask', 'input_ids'], without ['token_ids', 'segment_ids', 'padding_mask'] "
     "(Hugging Face's input_ids is token_ids, attention_mask is padding_mask)."),
    # A batch of a Hugging Face dataset (`ds[:2]`): its text column named, not the token features' names.
    (lambda c, r: c.fit({"sentence": ["a fine film", "dull"], "label": [1, 0], "idx": [0, 1]}, [1, 0], verbose=0),
     "BertClassifier.fit got a dict of the columns ['idx', 'label', 'sentence'], which hold text: give its text "
     "columns, as in x=d['sentence']."),
    (lambda c, r: c.predict({"sentence1": ["a", "b"], "sentence2": ["c", "d"]}, verbose=0),
     "BertClassifier.predict got a dict of the columns ['sentence1', 'sentence2'], which hold text: give its text "
     "columns, as in x=d['sentence1'] or x=(d['sentence1'], d['sentence2'])."),
    (lambda c, r: c.fit(np.zeros((2, 8), "int32"), [0, 1], verbose=0),
     "BertClassifier.fit takes raw text or a dict of the features {token_ids, segment_ids, padding_mask}; got an "
     "array of shape (2, 8): put it in the dict as token_ids, with its segment_ids, padding_mask."),
])
def test_fit_argument_errors_on_raw_strings_are_one_line(call, message):
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    regression = BertClassifier(_tiny_backbone(), num_classes=1, preprocessor=_preprocessor())
    with pytest.raises(ValueError) as error:
        call(classifier, regression)
    assert str(error.value) == message


# === Failures that leave the model whole, and the trainable weights as they are now ===


class _Interrupt(keras.callbacks.Callback):
    """Ctrl-C at the start of batch `at` of `fit` ("train"), `evaluate` ("test") or `predict` ("predict")."""

    def __init__(self, kind, at):
        super().__init__()
        setattr(self, f"on_{kind}_batch_begin", self._stop)
        self.at = at

    def _stop(self, batch, logs=None):
        if batch == self.at:
            raise KeyboardInterrupt


def _dropout_free_classifier():
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                            max_sequence_length=64, dropout=0.0)
    return BertClassifier(backbone, num_classes=2, dropout=0.0, preprocessor=_preprocessor(sequence_length=16))


def _weights(model):
    return [np.array(w) for w in model.get_weights()]


@pytest.mark.slow
def test_an_interrupt_in_fit_evaluate_or_predict_keeps_the_weights_it_reached(shared_data):
    # Before, on JAX: Keras detaches the weights from the model while a call runs, and an evaluate or predict that
    # stopped left the model without them (the next call failed on "'NoneType' object is not callable"). Keras's fit
    # puts them back in a `finally`, except after an error inside its first step (probe: an optimizer built for other
    # variables), which lost them.
    texts, labels = _sst2(shared_data, "train", 6)
    model = _dropout_free_classifier()
    initial = _weights(model)
    with pytest.raises(KeyboardInterrupt):
        model.fit(texts, labels, batch_size=2, shuffle=False, verbose=0, callbacks=[_Interrupt("train", 0)])
    for a, b in zip(initial, _weights(model)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(KeyboardInterrupt):
        model.fit(texts, labels, batch_size=2, shuffle=False, verbose=0, callbacks=[_Interrupt("train", 2)])
    two_steps = _dropout_free_classifier()
    two_steps.fit(texts[:4], labels[:4], batch_size=2, shuffle=False, verbose=0)
    reached = _weights(model)
    for a, b in zip(_weights(two_steps), reached):  # the two steps that ran are kept
        np.testing.assert_allclose(a, b, atol=1e-6)
    with pytest.raises(KeyboardInterrupt):
        model.evaluate(texts, labels, batch_size=2, verbose=0, callbacks=[_Interrupt("test", 1)])
    with pytest.raises(KeyboardInterrupt):
        model.predict(texts, batch_size=2, verbose=0, callbacks=[_Interrupt("predict", 1)])
    for a, b in zip(reached, _weights(model)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(model.predict(texts, verbose=0), two_steps.predict(texts, verbose=0), atol=1e-5)
    assert np.isfinite(model.fit(texts, labels, batch_size=2, verbose=0).history["loss"][0])


@pytest.mark.slow
def test_freezing_or_unfreezing_after_fit_trains_what_is_trainable_now(shared_data):
    # Before: TensorFlow's traced step went on training a backbone frozen after fit (and did not train one unfrozen);
    # on JAX the step stopped on Keras's "Argument `optimizer_variables` must be a list of tensors ...".
    texts, labels = _sst2(shared_data, "train", 8)

    def changed(before, model):
        return [not np.array_equal(a, b) for a, b in zip(before, _weights(model))]

    for optimizer in ("auto", "adam"):
        model = _dropout_free_classifier()
        if optimizer == "adam":
            model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(texts, labels, batch_size=4, verbose=0)
        model.backbone.trainable = False
        frozen = [id(v) in {id(w) for w in model.backbone.weights} for v in model.weights]
        before = _weights(model)
        if optimizer == "adam" and keras.backend.backend() == "jax":
            with pytest.raises(ValueError) as error:  # JAX's step takes exactly the variables the optimizer has
                model.fit(texts, labels, batch_size=4, verbose=0)
            assert str(error.value) == (
                "This BertClassifier's trainable weights changed since its optimizer was built (layers frozen): call "
                "compile(optimizer=...) with a new optimizer before fit.")
            model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(texts, labels, batch_size=4, verbose=0)
        assert changed(before, model) == [not f for f in frozen], optimizer  # the head alone trained
        model.backbone.trainable = True
        before = _weights(model)
        if optimizer == "adam" and keras.backend.backend() == "jax":
            model.compile(optimizer=keras.optimizers.Adam(1e-3))
        model.fit(texts, labels, batch_size=4, verbose=0)
        assert all(changed(before, model)), optimizer


def test_a_loss_or_metric_of_ones_own_sees_no_filler_rows(shared_data):
    # Before: the last batch of raw text was filled to batch_size with weight-0 rows, which a loss of the user's
    # (sum_over_batch_size) counted in its mean, and a plain metric counted as examples: fit reported 0.26 for a
    # loss of 0.69 on 12 examples in a batch of 32.
    texts, labels = _sst2(shared_data, "train", 12)
    model = _dropout_free_classifier()
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(texts, labels, batch_size=32, verbose=0).history
    logits = model.predict(texts, verbose=0)
    expected_loss = float(keras.ops.convert_to_numpy(
        keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)))
    assert history["loss"][0] == pytest.approx(expected_loss, rel=1e-4)
    assert history["accuracy"][0] == pytest.approx(float(np.mean(np.argmax(logits, -1) == labels)))
    batches = list(model.preprocessor.make_dataset(texts, labels, batch_size=5, fixed_batch_size=False))
    assert [len(y) for _, y, _ in batches] == [5, 5, 2]


# === Tables: pandas DataFrames and Series, Hugging Face dataset columns ===


@pytest.mark.slow
def test_pandas_tables_and_hugging_face_columns_read_as_the_lists_they_hold(shared_data):
    # Before: a DataFrame as `x` stopped inside Keras on "Invalid dtype: str", and a Series of word lists was
    # refused as "an array of shape (2,)".
    import datasets
    import pandas as pd

    table = pd.read_csv(shared_data / "glue" / "MRPC" / "train.tsv", sep="\t", quoting=csv.QUOTE_NONE,
                        encoding="utf-8-sig").head(6)
    pairs = (table["#1 String"].tolist(), table["#2 String"].tolist())
    labels = table["Quality"].tolist()
    classifier = _dropout_free_classifier()
    columns = table[["#1 String", "#2 String"]]
    np.testing.assert_array_equal(classifier.predict(columns, verbose=0), classifier.predict(pairs, verbose=0))
    assert (classifier.evaluate(columns, table[["Quality"]], verbose=0)
            == classifier.evaluate(pairs, labels, verbose=0))
    history = classifier.fit(columns, table["Quality"], batch_size=4, validation_data=(columns, table[["Quality"]]),
                             verbose=0).history
    assert history["val_loss"][0] == pytest.approx(classifier.evaluate(pairs, labels, verbose=0)[0], rel=1e-5)
    np.testing.assert_array_equal(classifier.predict(table[["#1 String"]], verbose=0),
                                  classifier.predict(pairs[0], verbose=0))
    with pytest.raises(ValueError) as error:
        classifier.fit(table, labels, verbose=0)
    assert str(error.value) == (
        "`x` is a DataFrame of 5 columns ['Quality', '#1 ID', '#2 ID', '#1 String', '#2 String']; BertClassifier reads "
        "x=df['text'] or x=df[['text_a', 'text_b']]: select those columns.")
    # A two-column DataFrame of (sentence, label) given whole: read as a sentence pair, the labels leaked into the
    # input (string labels trained silently; int ones stopped on "item 0 is int 0, expected a string").
    sst2 = pd.read_csv(shared_data / "glue" / "SST-2" / "train.tsv", sep="\t", quoting=csv.QUOTE_NONE).head(4)
    named = sst2.assign(label=sst2["label"].map({0: "negative", 1: "positive"}))
    for x, y in ((sst2, sst2["label"]), (named, named["label"]), (named.rename(columns={"label": "sentiment"}),
                                                                   named["label"].rename("sentiment"))):
        with pytest.raises(ValueError) as error:
            classifier.fit(x, y, verbose=0)
        assert str(error.value) == (
            f"`x` is a DataFrame of columns ['sentence', {y.name!r}], and {y.name!r} holds the labels, not text: give "
            "x the text alone, as in x=df['sentence'], and the labels as y.")
    # Booleans as labels (`df.label == 1`) are class ids 1 and 0 (before: "label True is not a class id").
    assert (classifier.evaluate(sst2["sentence"], sst2["label"] == 1, verbose=0)
            == classifier.evaluate(sst2["sentence"], sst2["label"], verbose=0))
    assert (classifier.evaluate(sst2["sentence"], (sst2["label"] == 1).tolist(), verbose=0)
            == classifier.evaluate(sst2["sentence"], sst2["label"].tolist(), verbose=0))
    with pytest.raises(ValueError) as error:  # predict has no y: a column named as labels are, or of numbers
        classifier.predict(sst2.rename(columns={"label": "polarity"}), verbose=0)
    assert str(error.value) == ("`x` column 'polarity' holds int values (e.g. 0), not text; BertClassifier reads text "
                                "columns: select them.")

    # The preprocessor reads tables as `fit` does (before: `preprocessor(df[["sentence"]])` packed the column's name,
    # "[CLS] sentence [SEP]", and `make_dataset(df, labels)` counted the DataFrame's two columns as its examples).
    preprocessor = classifier.preprocessor
    np.testing.assert_array_equal(preprocessor(sst2[["sentence"]])["token_ids"],
                                  preprocessor(sst2["sentence"].tolist())["token_ids"])
    assert (list(preprocessor.make_dataset(sst2[["sentence"]], sst2[["label"]], batch_size=4))[0][0]["token_ids"]
            .shape[0] == 4)
    with pytest.raises(ValueError) as error:
        preprocessor.make_dataset(sst2, sst2["label"], batch_size=4)
    assert str(error.value).startswith("`x` is a DataFrame of columns ['sentence', 'label'], and 'label' holds the "
                                       "labels, not text")

    # A Hugging Face dataset's columns (`datasets.Column` since datasets 4: Keras stopped on "Unrecognized data type").
    rows = datasets.Dataset.from_pandas(table)
    np.testing.assert_array_equal(classifier.predict(rows["#1 String"], verbose=0), classifier.predict(pairs[0], verbose=0))
    np.testing.assert_array_equal(classifier.predict((rows["#1 String"], rows["#2 String"]), verbose=0),
                                  classifier.predict(pairs, verbose=0))
    assert (classifier.evaluate((rows["#1 String"], rows["#2 String"]), rows["Quality"], verbose=0)
            == classifier.evaluate(pairs, labels, verbose=0))
    with pytest.raises(ValueError) as error:
        classifier.fit(rows, verbose=0)
    assert str(error.value) == (
        "`x` is a Hugging Face dataset of columns ['Quality', '#1 ID', '#2 ID', '#1 String', '#2 String']; "
        "BertClassifier reads its text columns: give them, as in x=ds['text'] or x=(ds['text_a'], ds['text_b']).")

    sentences = _conll_sentences(shared_data, 3)
    tagged = pd.DataFrame({"tokens": [[w for w, _ in s] for s in sentences], "tags": [[t for _, t in s] for s in sentences]})
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=64)))
    np.testing.assert_array_equal(tagger.predict(tagged["tokens"], verbose=0),
                                  tagger.predict(tagged["tokens"].tolist(), verbose=0))
    assert np.isfinite(tagger.fit(tagged[["tokens"]], tagged["tags"], verbose=0).history["loss"][0])
    # The pipelines read tables too (before, list(DataFrame) gave its column names: "text" was tagged).
    sentences_table = pd.DataFrame({"text": [" ".join(words) for words in tagged["tokens"]]})
    assert (tagger.predict_entities(sentences_table[["text"]]) == tagger.predict_entities(sentences_table["text"])
            == tagger.predict_entities(sentences_table["text"].tolist()))

    questions = pd.DataFrame({"question": ["Who wrote the play?", "Where is the tower?"],
                              "context": ["The play was written by Anna Smith.", "The tower stands in Paris."]})
    extractor = BertSpanExtractor(_tiny_backbone(), preprocessor=(
        keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=32)))
    by_table = extractor.predict(questions, verbose=0)
    by_lists = extractor.predict((questions["question"].tolist(), questions["context"].tolist()), verbose=0)
    for key in by_lists:
        np.testing.assert_allclose(by_table[key], by_lists[key], atol=1e-6)
    answers = extractor.answer(questions["question"].tolist(), questions["context"].tolist())
    assert ([a["text"] for a in extractor.answer(questions[["question"]], questions[["context"]])]
            == [a["text"] for a in extractor.answer(questions["question"], questions["context"])]
            == [a["text"] for a in answers])


# === compile: a loss of one's own must read the outputs; "accuracy" means the task's accuracy ===


_LOGITS_CLASSIFIER = ("This BertClassifier gives logits (activation=None), and the loss {0} reads probabilities "
                      "(from_logits=False): use keras.losses.{0}(from_logits=True), or build the classifier with "
                      "activation='{1}'.")
_TAGGER_LOSS = ("BertTokenClassifier gives logits, and its labels are -1 at the positions it does not tag ([CLS], "
                "[SEP], later WordPieces, padding): use keras.losses.SparseCategoricalCrossentropy(from_logits=True, "
                "ignore_class=-1), or loss='auto'.")


_SPARSE = keras.losses.SparseCategoricalCrossentropy


@pytest.mark.parametrize("build, loss, message, fitting", [
    (dict(num_classes=2), "sparse_categorical_crossentropy",
     _LOGITS_CLASSIFIER.format("SparseCategoricalCrossentropy", "softmax"), _SPARSE(from_logits=True)),
    (dict(num_classes=2), _SPARSE(), _LOGITS_CLASSIFIER.format("SparseCategoricalCrossentropy", "softmax"),
     _SPARSE(from_logits=True)),
    (dict(num_classes=3, multi_label=True), "binary_crossentropy",
     _LOGITS_CLASSIFIER.format("BinaryCrossentropy", "sigmoid"), keras.losses.BinaryCrossentropy(from_logits=True)),
    (dict(num_classes=2, activation="softmax"), _SPARSE(from_logits=True),
     "This BertClassifier gives probabilities (activation='softmax'), and the loss SparseCategoricalCrossentropy "
     "reads logits (from_logits=True): use keras.losses.SparseCategoricalCrossentropy(from_logits=False), or build "
     "the classifier with activation=None.", "sparse_categorical_crossentropy"),
    ("tagger", "sparse_categorical_crossentropy", _TAGGER_LOSS, _SPARSE(from_logits=True, ignore_class=-1)),
    ("tagger", _SPARSE(from_logits=True), _TAGGER_LOSS, _SPARSE(from_logits=True, ignore_class=-1)),
])
def test_a_loss_that_cannot_read_the_outputs_or_labels_is_one_line_at_compile(build, loss, message, fitting):
    # Before: such a loss trained on nonsense without a word (Keras clips logits as if they were probabilities;
    # JAX and PyTorch read the tagger's label -1 as a class) or, on TensorFlow, stopped inside the step in a
    # graph-execution trace.
    if build == "tagger":
        model = BertTokenClassifier(_tiny_backbone(), num_classes=3)
    else:
        model = BertClassifier(_tiny_backbone(), **build)
    with pytest.raises(ValueError) as error:
        model.compile(loss=loss)
    assert str(error.value) == message
    assert model.compiled_with_default_loss  # the refused compile changed nothing
    model.compile(loss=fitting)  # the loss the message names compiles


def test_accuracy_by_name_is_the_tasks_accuracy(shared_data):
    # Before: a tagger's metrics=["accuracy"] counted [CLS], [SEP], later WordPieces and padding (label -1) as
    # wrong (0.004 beside a token accuracy of 0.29), and a multi-label classifier's read the classes as one choice
    # (0.0 beside a per-class accuracy of 0.58).
    sentences = _conll_sentences(shared_data, 4)
    words, tags = [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=64)))
    default = tagger.evaluate(words, tags, verbose=0, return_dict=True)
    assert sorted(default) == ["accuracy", "loss"]  # named as a classifier's is (it was "token_accuracy")
    tagger.compile(metrics=["acc"])
    named = tagger.evaluate(words, tags, verbose=0, return_dict=True)
    assert named["acc"] == pytest.approx(default["accuracy"]) and 0 < named["acc"] < 1

    texts, _ = _sst2(shared_data, "train", 6)
    labels = [["a"], ["b", "c"], [], ["a", "c"], ["c"], ["a", "b", "c"]]
    classifier = BertClassifier(_tiny_backbone(), num_classes=3, multi_label=True, label_names=["a", "b", "c"],
                                preprocessor=_preprocessor())
    default = classifier.evaluate(texts, labels, verbose=0, return_dict=True)
    classifier.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True), metrics=["accuracy"])
    named = classifier.evaluate(texts, labels, verbose=0, return_dict=True)
    logits = classifier.predict(texts, verbose=0)
    hot = np.array([[name in row for name in "abc"] for row in labels])
    assert named["accuracy"] == pytest.approx(default["accuracy"]) == pytest.approx(np.mean((logits > 0) == hot))


@pytest.mark.slow
def test_metrics_of_ones_own_are_the_only_metrics_and_f1_means_each_tasks_f1(shared_data):
    # Before: metrics=["accuracy", "f1"] also logged the default weighted_accuracy (the same number twice); a
    # multi-label classifier's "f1" and a tagger's compiled, then stopped in fit on Keras's "Could not interpret
    # metric identifier: f1".
    texts, labels = _sst2(shared_data, "train", 6)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    classifier.compile(metrics=["accuracy", "f1"])
    assert sorted(classifier.evaluate(texts, labels, verbose=0, return_dict=True)) == ["accuracy", "f1", "loss"]

    tags = [["a"], ["b", "c"], [], ["a", "c"], ["c"], ["a", "b", "c"]]
    multi_label = BertClassifier(_tiny_backbone(), num_classes=3, multi_label=True, label_names=["a", "b", "c"],
                                 preprocessor=_preprocessor())
    default = multi_label.evaluate(texts, tags, verbose=0, return_dict=True)
    multi_label.compile(metrics=["f1"])
    named = multi_label.evaluate(texts, tags, verbose=0, return_dict=True)
    assert sorted(named) == ["f1", "loss"] and named["f1"] == pytest.approx(default["micro_f1"])

    # A tagger's "f1" is conlleval's entity F1 (EntityF1; tests/test_entity_f1.py shows it exact), in fit's step too.
    from keras_bert_impl.metrics.conll import conll_entity_scores

    sentences = _conll_sentences(shared_data, 8)
    words, tags = [[w for w, _ in s] for s in sentences], [[t for _, t in s] for s in sentences]
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=64)))
    tagger.compile(metrics=["accuracy", "f1"])
    assert "f1" in tagger.fit(words, tags, batch_size=4, epochs=1, verbose=0).history
    scores = tagger.evaluate(words, tags, batch_size=4, verbose=0, return_dict=True)
    assert sorted(scores) == ["accuracy", "f1", "loss"]
    gold, predicted = [], []  # each row's words: the labelled tokens, read in Python by conlleval's rules
    for batch in tagger.preprocessor.make_dataset(words, [[CONLL_TAGS.index(t) for t in s] for s in tags],
                                                  batch_size=4):
        logits = keras.ops.convert_to_numpy(tagger.predict_on_batch({k: v.numpy() for k, v in batch[0].items()}))
        for row, label in zip(logits, batch[1].numpy()):
            gold.append([CONLL_TAGS[i] for i in label[label >= 0]])
            predicted.append([CONLL_TAGS[i] for i in row[label >= 0].argmax(-1)])
    assert scores["f1"] == pytest.approx(conll_entity_scores(gold, predicted)["f1"], abs=1e-6)
    # Its own metrics skip the filler rows' labels (-1): its batches keep them, one step shape per bucket (a short
    # last batch made JAX compile the step again: a second fit took 37 s instead of 3.3 s), and score the same.
    assert tagger._takes_filler_rows()
    in_threes = tagger.evaluate(words, tags, batch_size=3, verbose=0, return_dict=True)
    assert (in_threes["accuracy"], in_threes["f1"]) == pytest.approx((scores["accuracy"], scores["f1"]), abs=1e-6)
    tagger.compile(metrics=["accuracy", keras.metrics.SparseCategoricalAccuracy(name="keras_accuracy")])
    assert not tagger._takes_filler_rows()  # Keras's own accuracy would count the filler rows
    with pytest.raises(ValueError) as error:
        BertTokenClassifier(_tiny_backbone(), num_classes=3).compile(metrics=["f1"])
    assert str(error.value) == ("metrics=['f1'] is the F1 over entities, which the tags' names define (B-PER, I-PER, "
                                "...): build the tagger with label_names=[...].")


def test_answer_takes_the_examples_as_predict_does_and_one_question_of_several_contexts():
    # Before: answer((questions, contexts)), answer(list_of_pairs) and answer(df[["question", "context"]]) stopped
    # on a missing positional argument, and one question over two contexts on "1 questions but 2 contexts".
    pd = pytest.importorskip("pandas")
    questions = ["Who wrote it?", "When was it written?"]
    contexts = ["It was written by Ada Lovelace in 1843.", "The notes were published in 1843 by Ada Lovelace."]
    keras.utils.set_random_seed(0)
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=48, doc_stride=16))
    expected = qa.answer(questions, contexts)
    assert qa.answer((questions, contexts)) == expected
    assert qa.answer(list(zip(questions, contexts))) == expected
    assert qa.answer(pd.DataFrame({"question": questions, "context": contexts})[["question", "context"]]) == expected
    alone = [qa.answer(questions[0], context) for context in contexts]  # (each in a batch of its own)
    assert qa.answer((questions[0], contexts[0])) == alone[0]
    asked_of_both = qa.answer(questions[0], contexts)
    assert [(a["text"], a["start"], a["end"]) for a in asked_of_both] == [(a["text"], a["start"], a["end"]) for a in alone]
    assert [a["score"] for a in asked_of_both] == pytest.approx([a["score"] for a in alone], abs=1e-5)
    # Questions without their contexts: one line (was the second question read as the first one's context), and
    # contexts that are short are named as such (was "3 questions but 2 answers").
    with pytest.raises(ValueError, match=r"^Span extraction reads \(questions, contexts\), got a list of a string and "
                                         r"a str: one question and its context are a tuple \(question, context\);"):
        qa.answer(questions)
    with pytest.raises(ValueError, match=r"^Span extraction reads \(questions, contexts\), got a list"):
        qa.fit(questions, [{"text": "Ada Lovelace", "answer_start": 18}] * 2, verbose=0)
    with pytest.raises(ValueError, match=r"^3 questions but 2 contexts: give one context per question\.$"):
        qa.fit((questions + questions[:1], contexts), [{"text": "Ada Lovelace", "answer_start": 18}] * 2, verbose=0)


def test_answer_takes_the_longest_answer_per_call_by_either_name():
    # The Hugging Face habits audit: answer(..., max_answer_len=3), the pipeline's name, was a TypeError, and the
    # model's max_answer_length (30) could not be changed for one call.
    keras.utils.set_random_seed(0)
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=48, doc_stride=16))
    question, context = "Who wrote it?", "It was written by Ada Lovelace and Charles Babbage in London in 1843."
    qa.max_answer_length = 1  # the model's own setting: what one call's argument stands for
    expected = qa.answer(question, context, top_k=5)
    qa.max_answer_length = 30
    for name in ("max_answer_length", "max_answer_len"):
        spans = qa.answer(question, context, top_k=5, **{name: 1})
        assert spans == expected and len(spans) == 5
        assert all(span["text"] and " " not in span["text"] for span in spans)  # one piece: never across a space
    assert qa.answer(question, context, max_answer_len=30) == qa.answer(question, context)
    with pytest.raises(ValueError, match=r"^`max_answer_len` is Hugging Face's name of `max_answer_length`"):
        qa.answer(question, context, max_answer_length=2, max_answer_len=3)
    with pytest.raises(ValueError, match=r"^`max_answer_length` must be a positive int \(tokens\), got 0\.$"):
        qa.answer(question, context, max_answer_len=0)


def test_calling_a_task_on_raw_strings_points_to_predict():
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    with pytest.raises(ValueError) as error:  # before: "expects 3 input(s) ... but it received 2 input tensors"
        classifier(["a great film", "dull"])
    assert str(error.value) == ("BertClassifier is called on packed features {token_ids, segment_ids, padding_mask}, "
                                "not raw text: use BertClassifier.predict(texts), or call it on "
                                "model.preprocessor(texts).")
    outputs = classifier(classifier.preprocessor(["a great film", "dull"]))
    assert tuple(outputs.shape) == (2, 2)
    # A Hugging Face tokenizer's dict (the Hugging Face habits audit): Keras's "Missing data for input
    # "padding_mask". You passed a data dictionary with keys ...", on every backend.
    features = {"input_ids": np.array([[101, 7592, 102]]), "token_type_ids": np.zeros((1, 3), "int32"),
                "attention_mask": np.ones((1, 3), "int32")}
    with pytest.raises(ValueError) as error:
        classifier(features)
    assert str(error.value) == (
        "BertClassifier is called on the features {token_ids, segment_ids, padding_mask}; the dict given has "
        "['attention_mask', 'input_ids', 'token_type_ids'] (Hugging Face's input_ids is token_ids, token_type_ids is "
        "segment_ids, attention_mask is padding_mask).")
    with pytest.raises(ValueError) as error:  # a pipeline's pair as a dict: both texts, not the first alone
        classifier.predict([{"text": "a man", "text_pair": "a woman"}], verbose=0)
    assert str(error.value).endswith("(pairs as dicts: pass the two lists, ([row['text'] for row in rows], "
                                     "[row['text_pair'] for row in rows])).")


def test_misshapen_tags_and_pairs_are_one_line_naming_the_shape():
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=32)))
    assert tagger.predict_entities("Peter Blackburn", aggregation_strategy="first") == tagger.predict_entities(
        "Peter Blackburn")  # Hugging Face's name for what predict_entities does
    with pytest.raises(ValueError) as error:
        tagger.predict_entities("Peter Blackburn", aggregation_strategy="simple")
    assert str(error.value) == (
        "predict_entities takes aggregation_strategy 'first', 'average' or 'max' (Hugging Face's names for how a word "
        "of several WordPieces is tagged), got 'simple'; the pipeline's 'simple' tags every WordPiece on its own, "
        "which a tagger trained on each word's first piece (as this one, and transformers' run_ner.py) does not "
        "learn: 'first' is the closest.")
    with pytest.raises(ValueError) as error:
        tagger.predict_tags([["Peter", "Blackburn"]], aggregation_strategy="mean")
    assert str(error.value) == (
        "predict_tags takes aggregation_strategy 'first', 'average' or 'max' (Hugging Face's names for how a word "
        "of several WordPieces is tagged), got 'mean'.")
    with pytest.raises(ValueError) as error:  # one sentence, not nested: each tag string was read as its letters
        tagger.evaluate(["Peter", "Blackburn"], ["B-PER", "I-PER"], verbose=0)
    assert str(error.value) == (
        "Example 0: its tags must be a list (one per word), got 'B-PER': `y` is one list of tags per sentence, as "
        "`x` is one list of words per sentence (one sentence: x=[words], y=[tags]).")
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    with pytest.raises(ValueError) as error:
        classifier.predict([["a", "b", "c"], ["d", "e", "f"]])
    assert str(error.value) == ("Raw text is a list of two lists (3 and 3 texts): sentence pairs are a tuple "
                                "(texts_a, texts_b) of two lists, or a list of [text_a, text_b] pairs.")
    # Two lists of two: two pairs or two columns? Both task models refuse to guess (the classifier read two pairs,
    # the span extractor two columns, silently).
    with pytest.raises(ValueError) as error:
        classifier.predict([["a man runs", "a cat sleeps"], ["a person runs", "the sky is blue"]])
    assert str(error.value) == (
        "Raw text is a list of two lists of two texts, which reads two ways: give two pairs as a list of tuples "
        "[(text_a, text_b), (text_a, text_b)], or two columns as a tuple (texts_a, texts_b).")
    assert classifier.predict([("a man runs", "a cat sleeps"), ("a person runs", "the sky is blue")],
                              verbose=0).shape == (2, 2)
    from keras_bert_impl.text.span_extractor_preprocessor import as_columns

    with pytest.raises(ValueError) as error:
        as_columns([["Who won?", "Where?"], ["Denver won.", "In Santa Clara."]])
    assert str(error.value) == (
        "Span extraction got a list of two lists of two strings, which reads two ways: give two questions and their "
        "contexts as a tuple (questions, contexts), or two pairs as a list of (question, context) tuples.")
    assert as_columns((["Who won?", "Where?"], ["Denver won.", "In Santa Clara."]))[0] == ["Who won?", "Where?"]


@pytest.mark.slow
def test_labelled_examples_cut_to_sequence_length_are_counted_in_one_warning(shared_data, minilm_dir):
    # Before: examples longer than sequence_length were cut without a word (keras-hub's habit), so a user training
    # on long reviews with the default 128 never learnt that the model read only their beginnings. The count is
    # checked against the checkpoint's own Hugging Face tokenizer.
    from tokenizers import Tokenizer

    from keras_bert_impl.text.classifier_preprocessor import TruncationWarning

    texts, labels = _sst2(shared_data, "train", 200)
    pairs = (texts[:100], texts[100:])
    hugging_face = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    hugging_face.no_truncation()
    hugging_face.no_padding()
    single = np.array([len(e.ids) for e in hugging_face.encode_batch(texts)])
    paired = np.array([len(e.ids) for e in hugging_face.encode_batch(list(zip(*pairs)))])
    preprocessor = _preprocessor(sequence_length=16)
    for x, y, lengths in ((texts, labels, single), (pairs, labels[:100], paired)):
        cut = int(np.sum(lengths > 16))
        assert 0 < cut < len(lengths)
        with pytest.warns(TruncationWarning) as caught:
            preprocessor.make_dataset(x, y, batch_size=8)
        assert [str(w.message) for w in caught if w.category is TruncationWarning] == [
            f"{cut} of {len(lengths)} examples ({cut / len(lengths):.1%}) are longer than sequence_length=16 tokens "
            f"(the longest: {lengths.max()}) and are cut to it: raise preprocessor.sequence_length (up to the "
            "backbone's max_sequence_length) to keep more."]
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=preprocessor)
    with pytest.warns(TruncationWarning) as caught:
        fit_line = inspect.currentframe().f_lineno + 1
        classifier.fit(texts[:100], labels[:100], validation_data=(texts[100:], labels[100:]), verbose=0)
    cut = [int(np.sum(single[:100] > 16)), int(np.sum(single[100:] > 16))]
    assert sorted(str(w.message).split(" are longer")[0] for w in caught if w.category is TruncationWarning) == sorted([  # (validation read first)
        f"`validation_data`: {cut[1]} of 100 examples ({cut[1] / 100:.1%})", f"{cut[0]} of 100 examples ({cut[0] / 100:.1%})"])
    # The warning names the user's line (their fit call), not the package's (before: classifier_preprocessor.py).
    assert {(w.filename, w.lineno) for w in caught if w.category is TruncationWarning} == {(__file__, fit_line)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        preprocessor.make_dataset(texts)  # texts to predict on: no warning
        _preprocessor(sequence_length=128).make_dataset(texts, labels)  # none cut


# === NumPy arrays, generators and compile's metric objects, alike on every backend ===


@pytest.mark.slow
def test_numpy_arrays_of_text_read_as_their_lists_and_a_0d_array_as_its_one_string():
    # Before: a 0-d array was read as its characters (predict(np.array("I loved it")) gave 10 rows, encode 10
    # vectors), or stopped on "iteration over a 0-d array" (predict_entities, answer, fill_mask); the tagger refused
    # an array of sentences with "put it in the dict as token_ids", which the classifier takes.
    keras.utils.set_random_seed(0)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    expected = classifier.predict(["I loved it"], verbose=0)
    np.testing.assert_allclose(classifier.predict(np.array("I loved it"), verbose=0), expected, atol=1e-6)
    assert classifier.predict_labels(np.array("I loved it")) == classifier.predict_labels("I loved it")
    # One text (or one pair) gives its result alone, as predict_entities, answer and encode give theirs.
    for one, top_k in (("I loved it", 2), (("I loved it", "I did not"), None)):
        assert classifier.predict_labels(one) == classifier.predict_labels([one])[0]
        assert classifier.predict_labels(one, top_k=top_k) == classifier.predict_labels([one], top_k=top_k)[0]
        assert classifier.predict_labels(one, return_scores=True) == classifier.predict_labels(
            [one], return_scores=True)[0]
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    sentences = ["John lives in Paris .", "EU rejects German call"]
    np.testing.assert_allclose(tagger.predict(np.array(sentences), verbose=0), tagger.predict(sentences, verbose=0),
                               atol=1e-6)
    assert tagger.predict_entities(np.array(sentences[0])) == tagger.predict_entities(sentences[0])
    words = [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    tags = [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]
    tagger.fit(np.array(words, dtype=object), np.array(tags, dtype=object), verbose=0)
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=48, doc_stride=16))
    question, context = "Who wrote it?", "It was written by Ada Lovelace in 1843."
    assert qa.answer(np.array(question), np.array(context)) == qa.answer(question, context)
    embedder = BertTextEmbedder(_tiny_backbone(), preprocessor=_preprocessor())
    assert embedder.encode(np.array(question)).shape == (16,)
    pretrainer = BertPretrainer(_tiny_backbone(), nsp=False, preprocessor=(
        keras_bert_impl.BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=16)))
    assert len(pretrainer.fill_mask(np.array("Paris is the [MASK] of France."), top_k=2)) == 2


def test_tensorflow_string_tensors_read_as_their_texts():
    # keras-hub's habit, `classifier.predict(tf.constant([...]))`, was refused: "got a string tensor of shape (2,):
    # pass the texts as a list of strings". Its strings are UTF-8 bytes, read as the texts themselves.
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor())
    texts = ["I loved it", "a café in Zürich, 東京"]
    expected = classifier.predict(texts, verbose=0)
    np.testing.assert_allclose(classifier.predict(tf.constant(texts), verbose=0), expected, atol=1e-6)
    np.testing.assert_allclose(classifier.predict(tf.constant(texts[1]), verbose=0), expected[1:], atol=1e-6)
    pairs = (tf.constant(texts), tf.constant(texts[::-1]))
    np.testing.assert_allclose(classifier.predict(pairs, verbose=0),
                               classifier.predict((texts, texts[::-1]), verbose=0), atol=1e-6)
    history = classifier.fit(tf.constant(texts), tf.constant([1, 0]), verbose=0)
    assert np.isfinite(history.history["loss"][0])
    embedder = BertTextEmbedder(_tiny_backbone(), preprocessor=_preprocessor())
    np.testing.assert_allclose(embedder.encode(tf.constant(texts)), embedder.encode(texts), atol=1e-6)
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    np.testing.assert_allclose(tagger.predict(tf.constant(texts), verbose=0), tagger.predict(texts, verbose=0),
                               atol=1e-6)
    assert tagger.predict_entities(tf.constant(texts[1])) == tagger.predict_entities(texts[1])
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=48, doc_stride=16))
    questions, contexts = ["Who wrote it?"], ["It was written by Ada Lovelace in Zürich."]
    ours, expected = (qa.predict(x, verbose=0) for x in ((tf.constant(questions), tf.constant(contexts)),
                                                          (questions, contexts)))
    np.testing.assert_allclose(ours["start_logits"], expected["start_logits"], atol=1e-6)


@pytest.mark.multibackend
def test_the_on_batch_methods_take_raw_text_as_keras_hub_tasks_do():
    # keras-hub's tasks preprocess in train_on_batch, test_on_batch and predict_on_batch. Ours said "called on packed
    # features ..., not raw text" (TensorFlow, PyTorch) or stopped in jax.jit ("Error interpreting argument").
    keras.utils.set_random_seed(0)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16),
                                label_names=["negative", "positive"])
    texts = ["a good film", "bad", "a long and dull film with nothing in it"]
    np.testing.assert_allclose(classifier.predict_on_batch(texts), classifier.predict(texts, verbose=0), atol=1e-5)
    features = classifier.preprocessor(texts)
    before = classifier.test_on_batch(features, np.array([1, 0, 0]), return_dict=True)
    assert classifier.test_on_batch(texts, ["positive", "negative", "negative"], return_dict=True)["loss"] == \
        pytest.approx(before["loss"], abs=1e-5)
    logs = classifier.train_on_batch(texts, ["positive", "negative", "negative"], return_dict=True)
    assert np.isfinite(logs["loss"]) and classifier.test_on_batch(features, np.array([1, 0, 0])) != before["loss"]
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    assert np.isfinite(tagger.train_on_batch([["EU", "rejects"], ["Peter"]], [["B-ORG", "O"], ["B-PER"]],
                                             return_dict=True)["loss"])
    assert np.asarray(tagger.predict_on_batch(["John lives in Paris ."])).shape == (1, 16, len(CONLL_TAGS))
    with pytest.raises(ValueError, match=r"`y` is missing: BertClassifier.train_on_batch on raw text needs"):
        classifier.train_on_batch(texts)


def test_a_callback_watching_keras_hubs_accuracy_name_is_one_line():
    # keras-hub's classifier logs sparse_categorical_accuracy, ours accuracy: ModelCheckpoint(save_best_only=True) on
    # keras-hub's name warned and kept every epoch, EarlyStopping never stopped (or failed after an epoch).
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16))
    for callback in (keras.callbacks.EarlyStopping(monitor="val_sparse_categorical_accuracy", mode="max"),
                     keras.callbacks.ModelCheckpoint("/tmp/unused.keras", monitor="sparse_categorical_accuracy")):
        with pytest.raises(ValueError) as error:
            classifier.fit(["a", "b"], [0, 1], verbose=0, callbacks=[callback])
        prefix = "val_" if callback.monitor.startswith("val_") else ""
        assert str(error.value) == (
            f"{type(callback).__name__}(monitor={callback.monitor!r}) watches keras-hub's name of the accuracy, which "
            f"this BertClassifier logs as {prefix}accuracy: pass monitor='{prefix}accuracy'.")
    # Compiled with keras-hub's metric by name, it logs that name: nothing to refuse.
    classifier.compile(metrics=["sparse_categorical_accuracy"])
    history = classifier.fit(["a", "b"], [0, 1], verbose=0, callbacks=[
        keras.callbacks.EarlyStopping(monitor="sparse_categorical_accuracy", mode="max")])
    assert "sparse_categorical_accuracy" in history.history


def test_a_generator_or_pydataset_of_raw_text_is_one_line_on_every_backend():
    # Before: Keras handed the strings to the model: "Invalid dtype: str..." (PyTorch), "Error interpreting argument
    # ... as an abstract array" (JAX), "the arrays must be at least rank 1" (TensorFlow).
    texts, labels = ["a great film", "dull", "fine", "bad"], [1, 0, 1, 0]
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16))

    class Batches(keras.utils.PyDataset):
        def __len__(self):
            return 2

        def __getitem__(self, index):
            return np.array(texts[2 * index : 2 * index + 2]), np.array(labels[2 * index : 2 * index + 2])

    calls = [
        ("fit", "generator", lambda: classifier.fit(((texts[i : i + 2], labels[i : i + 2]) for i in (0, 2)), verbose=0)),
        ("fit", "PyDataset", lambda: classifier.fit(Batches(), verbose=0)),
        ("evaluate", "generator", lambda: classifier.evaluate(((texts, labels) for _ in range(1)), verbose=0)),
        ("predict", "generator", lambda: classifier.predict((texts[i : i + 2] for i in (0, 2)), verbose=0)),
    ]
    for method, kind, call in calls:
        with pytest.raises(ValueError) as error:
            call()
        arguments = "texts" if method == "predict" else "texts, labels"
        assert str(error.value) == (
            f"BertClassifier.{method} got a {kind} whose batches hold raw text, which Keras passes to the model "
            f"untokenized: give the texts themselves ({method}({arguments}), as lists, arrays or tables), a "
            "tf.data.Dataset of strings, or batches of model.preprocessor(texts).")
    # A generator of packed features still trains, its first batch included.
    features = classifier.preprocessor(texts)
    seen = classifier.fit(((features, np.array(labels)) for _ in range(3)), verbose=0).history
    assert len(seen["loss"]) == 1


@pytest.mark.slow
def test_metric_objects_given_to_compile_are_counted_once():
    # Before: they were one of the model's metrics twice, so evaluate's list gave their values twice and
    # metrics_names listed them again (the pretrainer's defaults too: 5 values for 3 names).
    texts, labels = ["a great film", "dull", "fine", "bad"], [1, 0, 1, 0]
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16))
    classifier.compile(metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    values = classifier.evaluate(texts, labels, verbose=0)
    logs = classifier.evaluate(texts, labels, verbose=0, return_dict=True)
    assert sorted(logs) == ["acc", "loss"] and values == [logs["loss"], logs["acc"]]
    assert classifier.metrics_names == ["loss", "compile_metrics"]
    pretrainer = BertPretrainer(_tiny_backbone(), nsp=False, preprocessor=(
        keras_bert_impl.BertPretrainerPreprocessor.from_preset(PRESET, sequence_length=16)))
    logs = pretrainer.evaluate(texts, verbose=0, return_dict=True)
    assert pretrainer.evaluate(texts, verbose=0) == [logs["loss"], logs["mlm_accuracy"], logs["mlm_loss"]]


def test_encode_takes_sentence_transformers_normalize_and_progress_bar_and_fit_names_its_targets():
    # Before: normalize_embeddings= and show_progress_bar= were a TypeError; fit(texts, other_texts) stopped in
    # tf.data on "Cast int32 to string is not supported", and fit(pairs, scores) in each backend's broadcasting.
    embedder = BertTextEmbedder(_tiny_backbone(), normalize=False, preprocessor=_preprocessor(sequence_length=16))
    texts = ["A man is eating food.", "A man eats a meal.", "The sky is blue.", "It rains."]
    raw = embedder.encode(texts)
    unit = embedder.encode(texts, normalize_embeddings=True, show_progress_bar=False)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=-1, keepdims=True), atol=1e-6)
    assert embedder.encode(texts[0], normalize_embeddings=True).shape == (16,)
    embedder.fit(texts, np.ones((4, 16), "float32"), verbose=0)  # target vectors: the loss's cosine similarity
    for x, y, got in ((texts[:2], texts[2:], "text ('The sky is blue.')"),
                      ((texts[:2], texts[2:]), [0.5, 0.1], "shape (2,)")):
        with pytest.raises(ValueError) as error:
            embedder.fit(x, y, verbose=0)
        assert str(error.value) == (
            "BertTextEmbedder's `y` is one target vector per text, an array of shape (n, 16) (the loss is the cosine "
            f"similarity to it); got {got}. It does not train on sentence pairs with scores (sentence-transformers' "
            "CosineSimilarityLoss): for a score per pair, fit a BertClassifier(num_classes=1) on (texts_a, texts_b).")


def test_answer_with_a_question_and_no_context_says_so():
    # Before: "Span extraction reads (questions, contexts): ..., got str".
    qa = BertSpanExtractor(_tiny_backbone(), preprocessor=keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=48, doc_stride=16))
    with pytest.raises(ValueError) as error:
        qa.answer("Who wrote it?", None)
    assert str(error.value) == ("answer(question, context) got a question and no context (None): give the context as "
                                "the second argument, or the examples as answer((questions, contexts)).")


def test_an_unknown_argument_of_fit_or_evaluate_is_the_same_line_on_every_backend():
    # Before: "JAXTrainer.fit() got an unexpected keyword argument 'batchsize'" (TorchTrainer, TensorFlowTrainer on
    # the others), and evaluate's "Arguments not recognized: {'batchsize': 8}".
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(sequence_length=16))
    for call, message in (
        (lambda: classifier.fit(["a", "b"], [0, 1], batchsize=2, verbose=0),
         "BertClassifier.fit got an unknown argument `batchsize` (did you mean `batch_size`?)."),
        (lambda: classifier.fit(["a", "b"], [0, 1], num_train_epochs=2, verbose=0),
         "BertClassifier.fit got an unknown argument `num_train_epochs` (did you mean `epochs`?)."),
        (lambda: classifier.evaluate(["a", "b"], [0, 1], batchsize=2, verbose=0),
         "BertClassifier.evaluate got an unknown argument `batchsize` (did you mean `batch_size`?)."),
    ):
        with pytest.raises(TypeError) as error:
            call()
        assert str(error.value) == message
    history = classifier.fit(["a", "b"], [0, 1], validation_data=(["c"], [1]), epochs=1, verbose=0).history
    assert "val_loss" in history  # (fit's own evaluate passes Keras's private keywords)


@pytest.mark.slow
def test_fit_evaluate_predict_print_one_line_each_where_the_output_is_not_a_terminal():
    """`python train.py > log`: Keras draws its progress bar with carriage returns and colour codes on every POSIX
    system, so the log held each redraw; the tasks' `verbose="auto"` is one line per epoch there (a terminal or a
    notebook keeps the bar)."""
    import subprocess
    import sys

    code = (
        "import keras_bert_impl\n"
        "backbone = keras_bert_impl.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8,\n"
        "                                        intermediate_dim=16, max_sequence_length=32)\n"
        "preprocessor = keras_bert_impl.BertClassifierPreprocessor.from_preset('all_minilm_l6_v2_en', sequence_length=16)\n"
        "model = keras_bert_impl.BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)\n"
        "texts = ['that loves its characters', 'contains no wit , only labored gags']\n"
        "model.fit(texts, [1, 0], batch_size=2, epochs=2)\n"
        "model.evaluate(texts, [1, 0])\n"
        "model.predict(texts)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "\r" not in result.stdout and "\x1b[" not in result.stdout, repr(result.stdout[:300])
    assert [line.split(" - ")[0] for line in lines] == ["Epoch 1/2", "1/1", "Epoch 2/2", "1/1", "1/1", "1/1"], lines


def test_the_pipelines_keys_read_from_our_entities_and_answers_name_ours():
    # transformers' pipelines say entity_group / word (NER) and answer (QA); ours say type and text in both.
    # Before: a bare KeyError('entity_group').
    import pickle

    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    tagger.predict = lambda features, **kwargs: np.where(  # every word a person: one entity per word
        np.arange(len(CONLL_TAGS)) == CONLL_TAGS.index("B-PER"), 5.0, 0.0) * np.ones(
            np.shape(features["token_ids"]) + (1,))
    entity = tagger.predict_entities("Peter Blackburn")[0]
    assert entity == {"text": "Peter", "type": "PER", "start": 0, "end": 5, "score": pytest.approx(entity["score"])}
    for key, ours in (("entity_group", "type"), ("word", "text")):
        with pytest.raises(KeyError) as error:
            entity[key]
        assert error.value.args[0] == (f"{key!r} is the key of Hugging Face's pipeline; this entity's is {ours!r} "
                                       "(its keys: 'text', 'type', 'start', 'end', 'score')")
    with pytest.raises(KeyError) as error:
        entity["no_such_key"]
    assert error.value.args[0] == "no_such_key"
    assert json.loads(json.dumps(entity)) == entity and pickle.loads(pickle.dumps(entity)) == entity
    extractor = keras_bert_impl.BertSpanExtractor(_tiny_backbone(), preprocessor=(
        keras_bert_impl.BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=32)))
    answer = extractor.answer("Who lives here?", "Peter Blackburn lives here.")
    with pytest.raises(KeyError) as error:
        answer["answer"]
    assert error.value.args[0] == ("'answer' is the key of Hugging Face's pipeline; this answer's is 'text' (its keys: "
                                   "'text', 'start', 'end', 'score')")


def test_transformers_attribute_names_are_one_line_naming_ours():
    # model.config.id2label, model.num_labels, model.bert, save_pretrained, from_pretrained: transformers' habits.
    # Before: Python's bare "object has no attribute 'config'" (and "type object ... has no attribute
    # 'from_pretrained'").
    from keras_bert_impl.models.functional_model import FunctionalModel

    classifier = BertClassifier(_tiny_backbone(), num_classes=2, label_names=["negative", "positive"])
    expected = {
        "config": "get_config() (the settings it was built with), or backbone.get_config() (the encoder's)",
        "num_labels": "num_classes",
        "id2label": "label_names (the names in id order; transformers' dict: dict(enumerate(model.label_names)))",
        "bert": "backbone (the encoder)",
        "save_pretrained": "save_huggingface(directory) (a transformers directory), or save_to_preset(directory)",
    }
    for name, ours in expected.items():
        assert not hasattr(classifier, name)
        with pytest.raises(AttributeError) as error:
            getattr(classifier, name)
        assert str(error.value) == f"'BertClassifier' object has no attribute '{name}' (transformers' name): use {ours}."
    assert classifier.num_classes == 2 and dict(enumerate(classifier.label_names)) == {0: "negative", 1: "positive"}
    with pytest.raises(AttributeError) as error:
        classifier.backbone.config
    assert str(error.value) == ("'BertBackbone' object has no attribute 'config' (transformers' name): use get_config() "
                                "(the settings it was built with).")
    with pytest.raises(AttributeError) as error:  # a span extractor has no labels: no label hint
        keras_bert_impl.BertSpanExtractor(_tiny_backbone()).num_labels
    assert str(error.value) == "'BertSpanExtractor' object has no attribute 'num_labels'"
    with pytest.raises(TypeError) as error:
        BertTokenClassifier.from_pretrained("dslim/bert-base-NER")
    assert str(error.value) == (
        "BertTokenClassifier.from_pretrained is transformers' name: use BertTokenClassifier.from_preset(...), which "
        "takes the same Hub id (\"owner/name\" or \"hf://owner/name\") or transformers directory.")

    class Broken(FunctionalModel):  # a property that fails inside with an AttributeError shows its own error
        def __init__(self):
            inputs = keras.Input((2,))
            super().__init__(inputs=inputs, outputs=keras.layers.Dense(1)(inputs))

        @property
        def size(self):
            return self.missing_part.size

    with pytest.raises(AttributeError, match="'Broken' object has no attribute 'missing_part'"):
        Broken().size


def test_predict_entities_refuses_an_item_that_is_not_text_in_the_preprocessors_words():
    # The tagger kept its own copy of the line, without the hints (a dict row: pass its texts); now raw_text.py's.
    tagger = BertTokenClassifier(_tiny_backbone(), label_names=CONLL_TAGS, preprocessor=(
        keras_bert_impl.BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=16)))
    with pytest.raises(ValueError) as error:
        tagger.predict_entities(["John lives here.", {"text": "Mary too."}])
    assert str(error.value) == (
        "Raw text: item 1 is dict {'text': 'Mary too.'}, expected a string (rows as dicts: pass their texts, "
        "[row['text'] for row in rows], or a table's column, df['text']).")


def test_pytorch_and_transformers_habits_work_or_are_one_line(shared_data, minilm_dir):
    # From the PyTorch user's audit. Before: a DataLoader of raw strings stopped in torch's pytree
    # ("'str' object has no attribute 'shape'") or in a message that changed with batch_size; labels of a
    # torch-format `datasets` column ("label tensor(0) is not a class id"); `model(**batch)` ("missing a required
    # argument: 'inputs'"); `labels=` beside the features dropped without a word; a BatchEncoding refused by Keras
    # with every tensor printed; `preprocessor(texts, return_tensors="pt")` and a torch optimizer in compile with
    # Python's and Keras's bare messages.
    import torch
    import transformers
    from torch.utils.data import DataLoader

    texts, labels = _sst2(shared_data, "dev", 4)
    classifier = BertClassifier(_tiny_backbone(), num_classes=2, preprocessor=_preprocessor(16))
    for batch_size in (2, 8):
        for method, loader, arguments in (
                ("fit", DataLoader(list(zip(texts, labels.tolist())), batch_size=batch_size), "texts, labels"),
                ("evaluate", DataLoader([{"text": t, "label": int(y)} for t, y in zip(texts, labels)],
                                        batch_size=batch_size), "texts, labels"),
                ("predict", DataLoader(texts, batch_size=batch_size), "texts")):
            with pytest.raises(ValueError) as error:
                getattr(classifier, method)(loader, verbose=0)
            assert str(error.value) == (
                f"BertClassifier.{method} got a torch DataLoader whose batches hold raw text, which Keras passes to "
                f"the model untokenized: give the texts themselves ({method}({arguments}), as lists, arrays or "
                "tables), a tf.data.Dataset of strings, or batches of model.preprocessor(texts).")
    # 0-d tensors as labels (a torch-format datasets column's items) are their class ids.
    np.testing.assert_array_equal(classifier.label_ids([torch.tensor(int(y)) for y in labels]), labels)
    assert np.isfinite(classifier.fit(texts, [torch.tensor(int(y)) for y in labels], verbose=0).history["loss"][0])
    # transformers' tokenizer output: the keywords, and the BatchEncoding (a Mapping, not a dict).
    encoding = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))(texts, padding=True, return_tensors="np")
    features = {"token_ids": encoding["input_ids"], "segment_ids": encoding["token_type_ids"],
                "padding_mask": encoding["attention_mask"]}
    for model, call in ((classifier, lambda: classifier(**encoding)),
                        (classifier, lambda: classifier(features, labels=labels)),
                        (classifier.backbone, lambda: classifier.backbone(**encoding))):
        with pytest.raises(TypeError) as error:
            call()
        assert str(error.value).startswith(
            f"{type(model).__name__} is called on one dict of the features {{token_ids, segment_ids, padding_mask}} "
            "(and training=True for dropout), not on transformers' keywords ")
        assert str(error.value).endswith(
            ": call it as model({'token_ids': input_ids, 'segment_ids': token_type_ids, 'padding_mask': "
            "attention_mask}); it gives the outputs, not a loss (fit computes that).")
    renamed = "(Hugging Face's input_ids is token_ids, token_type_ids is segment_ids, attention_mask is padding_mask)."
    for call in (lambda: classifier(encoding), lambda: classifier.predict(encoding, verbose=0)):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value).endswith(renamed)
    np.testing.assert_allclose(np.asarray(keras.ops.convert_to_numpy(classifier(features))),
                               classifier.predict(features, verbose=0), atol=1e-5)
    with pytest.raises(TypeError) as error:
        classifier.preprocessor(texts, return_tensors="pt")
    assert str(error.value) == (
        "BertClassifierPreprocessor(texts) takes no return_tensors= (transformers' tokenizer's): it gives the features "
        "padded to its sequence_length (set preprocessor.sequence_length for another), as TensorFlow tensors on "
        "every backend, which the model takes as they are (PyTorch's: torch.as_tensor(features['token_ids'].numpy())).")
    with pytest.raises(ValueError) as error:
        classifier.compile(optimizer=torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=2e-5))
    assert str(error.value) == (
        "compile(optimizer=...) takes a Keras optimizer, and got torch's AdamW: pass keras.optimizers.AdamW("
        "learning_rate=...) (or leave the task's default), or train in your own loop, calling the model with "
        "training=True for dropout.")


def test_features_with_ids_outside_the_vocabulary_or_the_classes_are_one_line():
    # From the JAX user's audit: on the features path JAX trained on labels outside the classes with a loss of 0,
    # and gave NaN logits for token ids outside the vocabulary, silently (PyTorch and TensorFlow stopped inside
    # the loss or the embedding lookup). Raw text's labels were checked; these now are too.
    classifier = BertClassifier(_tiny_backbone(vocabulary_size=100), num_classes=2)
    features = {"token_ids": np.array([[101 % 100, 5, 6, 0], [1, 2, 3, 4]], "int32"),
                "segment_ids": np.zeros((2, 4), "int32"), "padding_mask": np.ones((2, 4), "int32")}
    with pytest.raises(ValueError) as error:
        classifier.fit(features, np.array([1, 5]), verbose=0)
    assert str(error.value) == ("Example 1: label 5 is not a class of this 2-class classifier (ids 0..1); 1 label(s) "
                                "in all are outside.")
    with pytest.raises(ValueError) as error:
        classifier.evaluate(features, np.array([-1, 0]), verbose=0)
    assert str(error.value).startswith("Example 0: label -1 is not a class of this 2-class classifier")
    beyond = {**features, "token_ids": np.array([[1, 2, 3, 0], [1, 120, 3, 130]], "int32")}
    for method, call in (("predict", lambda: classifier.predict(beyond, verbose=0)),
                         ("fit", lambda: classifier.fit(beyond, np.array([0, 1]), verbose=0))):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == (
            f"BertClassifier.{method}: token_ids of row 1 hold 120, outside the backbone's vocabulary of 100 (ids "
            "0..99); 2 id(s) in all: tokenize with the model's own preprocessor (model.preprocessor(texts)).")
    tagger = BertTokenClassifier(_tiny_backbone(vocabulary_size=100), num_classes=3)
    with pytest.raises(ValueError) as error:
        tagger.fit(features, np.array([[-1, 0, 2, -1], [-1, 1, 3, -1]]), verbose=0)
    assert str(error.value) == ("Row 1: tag id 3 is not a tag of this 3-tag tagger (ids 0..2, or -1 where nothing is "
                                "labelled); 1 id(s) in all are outside.")
    assert np.isfinite(classifier.fit(features, np.array([1, 0]), verbose=0).history["loss"][0])
    assert np.isfinite(tagger.fit(features, np.array([[-1, 0, 2, -1], [-1, 1, 1, -1]]), verbose=0).history["loss"][0])
