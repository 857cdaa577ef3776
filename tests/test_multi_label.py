"""Multi-label classification: any number of classes per example, as transformers'
`problem_type="multi_label_classification"`.

Texts are held-out lines of the public-domain corpus bundled in the package; their labels say which of three words
each line holds ("she", "her", "not": none, one or several), so they are true of the text. The learning check uses
CoNLL-2003 sentences labelled with the entity types they mention (../shared/data; skipped without it).
"""

import json
import pathlib
import re

import numpy as np
import pytest

from keras_bert_impl import BertBackbone, BertClassifier

VALID = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"
WORDS = ["she", "her", "not"]


@pytest.fixture(scope="module")
def examples():
    lines = [line.strip() for line in VALID.read_text(encoding="utf-8").splitlines() if 6 <= len(line.split()) <= 24]
    lines = lines[:8]
    labels = [[w for w in WORDS if w in re.findall(r"[a-z']+", line.lower())] for line in lines]
    assert any(len(row) >= 2 for row in labels) and any(not row for row in labels)
    return lines, labels


def tiny_classifier(**kwargs):
    backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    return BertClassifier(backbone, num_classes=3, multi_label=True, **kwargs)


def bce_with_logits(logits, targets):
    logits = np.asarray(logits, "float64")
    return float(np.mean(np.maximum(logits, 0) - logits * targets + np.log1p(np.exp(-np.abs(logits)))))


@pytest.mark.multibackend
def test_labels_as_names_ids_or_multi_hot_rows():
    model = tiny_classifier(label_names=WORDS)
    expected = [[1, 0, 1], [0, 0, 0], [0, 1, 0], [1, 1, 1]]
    assert model.label_ids([["she", "not"], [], ("her",), {0, 1, 2}]).tolist() == expected
    assert model.label_ids(np.array(expected, "int32")).tolist() == expected
    assert model.label_ids([[1, 0, 1], [0.0, 0.5, 1.0]]).tolist() == [[1, 0, 1], [0, 0.5, 1]]
    assert model.label_ids([[0, 2], [2]]).tolist() == [[1, 0, 1], [0, 0, 1]]  # not num_classes long: ids


@pytest.mark.slow
@pytest.mark.multibackend
def test_fit_predict_and_the_loss_is_transformers_binary_cross_entropy(minilm_dir, examples):
    lines, labels = examples
    model = BertClassifier.from_preset(str(minilm_dir), num_classes=3, multi_label=True, label_names=WORDS)
    history = model.fit(lines, labels, batch_size=4, epochs=1, verbose=0)
    assert set(history.history) == {"loss", "accuracy", "micro_f1"}
    # The loss is the mean over the classes and the examples of BCE with logits (torch's BCEWithLogitsLoss).
    logits = model.predict(lines, verbose=0)
    targets = model.label_ids(labels)
    np.testing.assert_allclose(model.evaluate(lines, labels, batch_size=4, verbose=0)[0],
                               bce_with_logits(logits, targets), rtol=1e-4)
    # 8 = 3 + 3 + 2: the weight-0 filler row of the last batch does not count in the metrics. (Keras weighs each
    # batch's loss by its rows, filler rows included, so the loss is compared on full batches above.)
    _, accuracy, micro_f1 = model.evaluate(lines, labels, batch_size=3, verbose=0)
    assert accuracy == pytest.approx(float(np.mean((logits > 0) == (targets > 0.5))), abs=1e-6)
    true_positives = np.sum((logits > 0) & (targets > 0.5))
    expected_f1 = 2 * true_positives / (np.sum(logits > 0) + np.sum(targets > 0.5))
    assert micro_f1 == pytest.approx(float(expected_f1), abs=1e-5)
    predicted = model.predict_labels(lines)
    probabilities = 1 / (1 + np.exp(-np.asarray(logits, "float64")))
    for row, names in zip(probabilities, predicted):
        assert set(names) == {w for w, p in zip(WORDS, row) if p > 0.5}
        assert [row[WORDS.index(n)] for n in names] == sorted([row[WORDS.index(n)] for n in names], reverse=True)
    strict = model.predict_labels(lines, threshold=1.0)
    assert strict == [[] for _ in lines]
    scores = model.predict_labels(lines[:1], return_scores=True)[0]
    assert sorted(s["label"] for s in scores) == sorted(WORDS)
    np.testing.assert_allclose(sorted((s["score"] for s in scores), reverse=True), [s["score"] for s in scores])
    assert model.predict_labels(lines[:1], top_k=2)[0] == scores[:2]  # the two likeliest, as the pipeline's top_k=2


@pytest.mark.slow
def test_a_transformers_multi_label_checkpoint_both_ways(tmp_path, minilm_dir, examples):
    import torch
    import transformers

    lines, labels = examples
    model = BertClassifier.from_preset(str(minilm_dir), num_classes=3, multi_label=True, label_names=WORDS)
    model.fit(lines, labels, batch_size=4, epochs=1, verbose=0)
    model.save_huggingface(tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification" and config["id2label"]["2"] == "not"

    # transformers: the same probabilities (its pipeline applies the sigmoid for this problem type) and the same loss.
    expected = transformers.pipeline("text-classification", model=str(tmp_path / "hf"), top_k=None)(lines)
    ours = model.predict_labels(lines, return_scores=True)
    for mine, theirs in zip(ours, expected):
        assert [s["label"] for s in mine] == [s["label"] for s in theirs]
        np.testing.assert_allclose([s["score"] for s in mine], [s["score"] for s in theirs], rtol=1e-4, atol=1e-6)
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "hf")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    batch = tokenizer(lines, padding=True, return_tensors="pt")
    targets = torch.tensor(model.label_ids(labels))
    with torch.no_grad():
        hf_loss = float(reference(**batch, labels=targets).loss)
    loss = model.evaluate(lines, labels, batch_size=8, verbose=0)[0]
    np.testing.assert_allclose(loss, hf_loss, rtol=1e-4)

    # ... and back: the checkpoint loads as a multi-label classifier with its trained head.
    loaded = BertClassifier.from_preset(str(tmp_path / "hf"))
    assert loaded.multi_label and loaded.label_names == WORDS and loaded.heads_loaded == ["classifier"]
    np.testing.assert_allclose(loaded.predict(lines, verbose=0), model.predict(lines, verbose=0), atol=1e-4)


@pytest.mark.slow
def test_multi_label_survives_keras_files_and_presets(tmp_path, minilm_dir, examples):
    import keras

    lines, labels = examples
    model = BertClassifier.from_preset(str(minilm_dir), num_classes=3, multi_label=True, label_names=WORDS,
                                       activation="sigmoid")
    model.fit(lines, labels, batch_size=4, epochs=1, verbose=0)
    model.save(tmp_path / "model.keras")
    model.save_to_preset(tmp_path / "preset")
    for loaded in (keras.saving.load_model(tmp_path / "model.keras"), BertClassifier.from_preset(tmp_path / "preset")):
        assert loaded.multi_label and loaded.activation == "sigmoid"
        assert loaded.predict_labels(lines) == model.predict_labels(lines)
        probabilities = loaded.predict(lines[:2], verbose=0)
        assert np.all((probabilities > 0) & (probabilities < 1))


@pytest.mark.multibackend
def test_packed_rows_train_the_same_multi_label_loss():
    from keras_bert_impl.batching.packing import first_token_targets

    model = tiny_classifier(dropout=0.0)
    first = {"token_ids": np.array([[2, 5, 6, 3]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
             "padding_mask": np.ones((1, 4), "int32")}
    second = {"token_ids": np.array([[2, 7, 3, 0]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
              "padding_mask": np.array([[1, 1, 1, 0]], "int32")}
    targets = model.label_ids([[0, 2], []])
    unpacked = np.concatenate([model.predict(first, verbose=0), model.predict(second, verbose=0)])
    packed_row = {"token_ids": np.array([[2, 5, 6, 3, 2, 7, 3, 0]], "int32"), "segment_ids": np.zeros((1, 8), "int32"),
                  "padding_mask": np.array([[1, 1, 1, 1, 2, 2, 2, 0]], "int32")}
    packed_targets, weights = first_token_targets([[0, 1]], [4, 3], targets, 8)
    assert packed_targets.shape == (1, 8, 3)
    packed = model.packed_training_model()
    loss = packed.evaluate(packed_row, packed_targets, sample_weight=weights, verbose=0)
    loss = loss[0] if isinstance(loss, list) else loss
    np.testing.assert_allclose(loss, bce_with_logits(unpacked, targets), rtol=1e-5)


def test_bad_multi_label_arguments_are_one_line(minilm_dir, examples):
    lines, labels = examples
    backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    cases = [
        (lambda: BertClassifier(backbone, num_classes=1, multi_label=True),
         "multi_label=True needs num_classes >= 2 (one yes/no per class), got 1; num_classes=1 is a regression (one "
         "score)."),
        (lambda: BertClassifier(backbone, num_classes=3, multi_label="yes"),
         "`multi_label` must be True or False, got 'yes'."),
        (lambda: BertClassifier(backbone, num_classes=3, multi_label=True, activation="softmax"),
         "activation='softmax' makes the classes compete, but a multi_label classifier scores each class on its own: "
         "use activation='sigmoid' (probabilities) or None (logits)."),
        (lambda: BertClassifier(backbone, num_classes=3, activation="sigmoid"),
         "activation='sigmoid' scores each class on its own: build the classifier with multi_label=True, or use "
         "activation='softmax' for one class per example."),
    ]
    model = tiny_classifier(label_names=WORDS)
    cases += [
        (lambda: model.label_ids(["she", ["her"]]),
         "Example 0: a multi_label classifier takes a list of labels per example (names or ids, [] for none) or a "
         "multi-hot row of 3 numbers, got 'she'."),
        (lambda: model.label_ids([["her"], ["they"]]),
         "Example 1: label 'they' is not one of the label_names ['she', 'her', 'not']."),
        (lambda: model.label_ids([[0, 3]]),
         "Example 0: label 3 is not a class of this 3-class classifier (ids 0..2, or names from label_names)."),
        (lambda: model.label_ids([[0.0, 2.0, 1.0]]), "Example 0: multi-hot row [0.0, 2.0, 1.0] has values outside [0, 1]."),
        (lambda: model.label_ids(np.zeros((2, 4))),
         "`y` has shape (2, 4): multi-hot rows of this multi_label classifier have num_classes=3 columns."),
        (lambda: model.label_ids("she"),
         "`y` of a multi_label classifier must hold one list of labels (or one multi-hot row) per example, got str."),
        (lambda: tiny_classifier().label_ids([["she"]]),
         "Example 0: label 'she' is a name, but this classifier has no label_names: give class ids 0..2, or build it "
         "with label_names=[...]."),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as error:
            make()
        assert str(error.value) == message
    classifier = BertClassifier.from_preset(str(minilm_dir), num_classes=3, multi_label=True, label_names=WORDS)
    with pytest.raises(ValueError) as error:
        classifier.fit(lines, labels, class_weight={"she": 2.0})
    assert str(error.value) == ("`class_weight` weighs the one class of each example, but a multi_label classifier's "
                                "examples have any number: give `sample_weight` (one weight per example) instead.")
    with pytest.raises(ValueError) as error:
        classifier.predict_labels(lines, threshold=1.5)
    assert str(error.value) == "`threshold` must be a probability in [0, 1], got 1.5."
    single = BertClassifier.from_preset(str(minilm_dir), num_classes=2)
    with pytest.raises(ValueError) as error:
        single.predict_labels(lines, threshold=0.3)
    assert str(error.value) == ("`threshold` picks the classes of a multi_label classifier; this one predicts one "
                                "class per example (the likeliest).")


def test_multi_label_scores_equal_scikit_learn(shared_data):
    """On real label sets: the entity types that CoNLL-2003 dev sentences mention, against a shifted copy."""
    from sklearn.metrics import accuracy_score, f1_score

    from keras_bert_impl.metrics.multi_label import multi_label_scores
    from keras_bert_impl.tasks.tagging.reading import read_conll

    names = ["LOC", "MISC", "ORG", "PER"]
    sentences = read_conll(shared_data / "conll2003" / "eng.testa")[:400]
    labels = np.array([[any(tag[2:] == name for tag in s.tags) for name in names] for s in sentences], "int32")
    predictions = np.roll(labels, 1, axis=0)
    predictions[:, 1] = 0  # a class never predicted scores F1 0, as in scikit-learn
    scores = multi_label_scores(labels, predictions)
    assert scores["micro_f1"] == pytest.approx(f1_score(labels, predictions, average="micro"), abs=1e-12)
    assert scores["macro_f1"] == pytest.approx(f1_score(labels, predictions, average="macro", zero_division=0), abs=1e-12)
    assert scores["subset_accuracy"] == pytest.approx(accuracy_score(labels, predictions), abs=1e-12)
    with pytest.raises(ValueError) as error:
        multi_label_scores(labels, predictions * 0.7)
    assert str(error.value) == "`predictions` must hold 0 or 1 only (threshold probabilities first)."


def one_row_error(path, types_json):
    """The message of reading a one-row multi-label JSON Lines file whose label cell is `types_json`."""
    from keras_bert_impl.tasks.classification.table_files import read_table

    path.write_text('{"text": "Peter Blackburn", "types": %s}\n' % types_json, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        read_table(path, "text", "types", label_separator=",")
    return str(error.value)


def test_tables_with_several_labels_a_row(tmp_path):
    from keras_bert_impl.tasks.classification.table_files import encode_labels, label_vocabulary, read_table

    rows = [{"text": "EU rejects German call to boycott British lamb .", "types": ["ORG", "MISC"]},
            {"text": "Peter Blackburn", "types": "PER"},
            {"text": "The guitarist died of a drugs overdose in 1970 aged 27 .", "types": []}]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    table = read_table(train, "text", "types", label_separator=",")
    assert table.multi_label and table.labels == [("ORG", "MISC"), ("PER",), ()]
    assert label_vocabulary(table) == ["MISC", "ORG", "PER"]
    assert encode_labels(table, ["LOC", "MISC", "ORG", "PER"]).tolist() == [[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]

    dev = tmp_path / "dev.tsv"
    dev.write_text("text\ttypes\nPeter Blackburn\tPER|LOC\nBRUSSELS 1996-08-22\tPER|PLACE\n", encoding="utf-8")
    assert read_table(dev, "text", "types", label_separator="|").labels == [("PER", "LOC"), ("PER", "PLACE")]
    with pytest.raises(ValueError) as error:
        read_table(dev, "text", "types", label_separator="|", known_labels=["LOC", "PER"])
    assert str(error.value) == (f"{dev}, line 3, column 'types': label 'PLACE' is not among the training labels "
                                "['LOC', 'PER']")
    null = tmp_path / "null.jsonl"
    assert one_row_error(null, "null") == (f"{null}, line 1, column 'types': the labels are missing (null); an empty "
                                           "cell or [] means none")
    with pytest.raises(ValueError) as error:
        read_table(train, "text", "types", label_separator=",", regression=True)
    assert str(error.value) == ("`label_separator` splits the labels of a multi-label row: a non-empty string, and not "
                                "with regression scores; got ',' with regression=True.")


def test_a_multi_label_table_without_labels_or_with_an_object_cell_is_one_line(tmp_path):
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig, read_inputs

    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "Peter Blackburn", "types": []}\n{"text": "BRUSSELS 1996-08-22", "types": ""}\n',
                     encoding="utf-8")
    config = TableClassificationConfig(str(train), str(train), "text", "types", str(tmp_path / "out"), multi_label=True)
    with pytest.raises(ValueError) as error:
        read_inputs(config)
    assert str(error.value) == (f"{train}: column 'types' has no labels; a classifier needs two or more (or use "
                                "--regression for scores)")
    odd = tmp_path / "odd.jsonl"
    assert one_row_error(odd, '{"PER": 1}') == (f"{odd}, line 1, column 'types': expected labels (a list, or names "
                                                "joined by ','), got {'PER': 1}")


@pytest.mark.slow
@pytest.mark.multibackend
def test_precision_recall_and_auc_by_name_read_a_multi_label_classifiers_logits(minilm_dir, examples):
    """`compile(metrics=["precision", "recall", "auc"])` on a multi-label classifier: over every (example, class)
    decision, a class predicted where its logit passes 0 (before, Keras's thresholded the logits at 0.5, and its AUC
    read them as probabilities)."""
    import keras
    from sklearn.metrics import precision_score, recall_score

    lines, labels = examples
    classifier = BertClassifier.from_preset(str(minilm_dir), label_names=WORDS, multi_label=True)
    classifier.compile(metrics=["precision", "recall", "auc"])
    scores = classifier.evaluate(lines, labels, batch_size=8, verbose=0, return_dict=True)
    logits = classifier.predict(lines, verbose=0)
    targets = classifier.label_ids(labels)
    predicted = (logits > 0).astype("int32")
    assert scores["precision"] == pytest.approx(precision_score(targets.ravel(), predicted.ravel(),
                                                                zero_division=0), abs=1e-6)
    assert scores["recall"] == pytest.approx(recall_score(targets.ravel(), predicted.ravel()), abs=1e-6)
    auc = keras.metrics.AUC(from_logits=True)
    auc.update_state(targets, logits)
    assert scores["auc"] == pytest.approx(float(keras.ops.convert_to_numpy(auc.result())), abs=1e-6)
