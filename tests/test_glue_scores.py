"""GLUE's scores as Keras metrics (`models/glue_scores.py`) equal scikit-learn's and SciPy's on the whole set.

Labels and scores are the real GLUE dev sets (MRPC, CoLA, STS-B from ../shared/data); the streamed metric sees
them in batches of uneven sizes with weight-0 filler rows, as `fit` and `evaluate` feed them, and must give the
score of all the examples at once. Then `compile(metrics=[name])` on a classifier, through `evaluate` on raw text.
"""

import keras
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sklearn_metrics

from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor
from keras_bert_impl.models.glue_scores import (
    ClassAUC,
    ClassF1Score,
    ClassPrecision,
    ClassRecall,
    MatthewsCorrelation,
    PearsonCorrelation,
)
from keras_bert_impl.tasks.classification.reading import read_split

pytestmark = pytest.mark.multibackend


def _streamed(metric, labels, outputs, seed=0):
    """`metric` over `(labels, outputs)` in batches of 1 to 37 rows, each followed by weight-0 filler rows."""
    rng = np.random.default_rng(seed)
    start = 0
    while start < len(labels):
        size = int(rng.integers(1, 38))
        rows = slice(start, start + size)
        fill = int(rng.integers(0, 4))
        batch_labels = np.concatenate([labels[rows], labels[:fill]])
        batch_outputs = np.concatenate([outputs[rows], outputs[:fill]])
        weights = np.concatenate([np.ones(len(labels[rows])), np.zeros(fill)]).astype("float32")
        metric.update_state(batch_labels, batch_outputs, sample_weight=weights)
        start += size
    return float(keras.ops.convert_to_numpy(metric.result()))


@pytest.mark.parametrize("task, num_classes", [("MRPC", 2), ("CoLA", 2), ("MRPC", 3)])
def test_f1_and_matthews_equal_scikit_learn_on_a_real_dev_set(shared_data, task, num_classes):
    labels = np.array(read_split(task, shared_data / "glue", "dev").labels)
    logits = np.random.default_rng(1).normal(size=(len(labels), num_classes)).astype("float32")
    logits[:, 1] += 0.3  # predictions leaning to class 1, as a trained paraphrase model's do
    predicted = logits.argmax(-1)
    average = "binary" if num_classes == 2 else "macro"
    assert _streamed(ClassF1Score(num_classes), labels, logits) == pytest.approx(
        sklearn_metrics.f1_score(labels, predicted, average=average), abs=1e-6)
    assert _streamed(MatthewsCorrelation(num_classes), labels, logits) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(labels, predicted), abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("num_classes", [2, 3])
def test_precision_recall_and_auc_equal_scikit_learn_on_a_real_dev_set(shared_data, num_classes):
    labels = np.array(read_split("MRPC", shared_data / "glue", "dev").labels)
    labels[::7] = num_classes - 1  # (with three classes, some of class 2)
    logits = np.random.default_rng(3).normal(size=(len(labels), num_classes)).astype("float32")
    logits[np.arange(len(labels)), labels] += 0.8  # better than chance, as a trained model
    predicted = logits.argmax(-1)
    average = "binary" if num_classes == 2 else "macro"
    assert _streamed(ClassPrecision(num_classes), labels, logits) == pytest.approx(
        sklearn_metrics.precision_score(labels, predicted, average=average), abs=1e-6)
    assert _streamed(ClassRecall(num_classes), labels, logits) == pytest.approx(
        sklearn_metrics.recall_score(labels, predicted, average=average), abs=1e-6)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = (sklearn_metrics.roc_auc_score(labels, probabilities[:, 1]) if num_classes == 2 else
                sklearn_metrics.roc_auc_score(labels, probabilities, multi_class="ovr", average="macro"))
    assert _streamed(ClassAUC(num_classes), labels, logits) == pytest.approx(expected, abs=2e-3)  # 200 thresholds


def test_pearson_equals_scipy_on_real_sts_b_scores(shared_data):
    scores = np.array(read_split("STS-B", shared_data / "glue", "dev").labels, "float32")
    predictions = (scores + np.random.default_rng(2).normal(scale=1.5, size=len(scores)) + 40.0).astype("float32")
    expected = stats.pearsonr(predictions, scores).statistic  # (offset: raw float32 sums of squares would cancel)
    assert _streamed(PearsonCorrelation(), scores, predictions[:, None]) == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
def test_glue_scores_by_name_in_compile_score_what_predict_gives(shared_data):
    # Before: compile(metrics=["f1"]) stopped in Keras (its F1Score reads one-hot labels and probabilities) and no
    # Pearson existed: the GLUE score of MRPC, CoLA or STS-B was not in fit's history.
    mrpc = read_split("MRPC", shared_data / "glue", "dev")
    pairs, labels = (mrpc.text_a[:40], mrpc.text_b[:40]), np.array(mrpc.labels[:40])
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                            max_sequence_length=128)
    preprocessor = BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=64)
    classifier = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    classifier.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       metrics=["accuracy", "f1", "matthews_correlation", "precision", "recall", "auc"])
    scores = classifier.evaluate(pairs, labels, batch_size=16, verbose=0, return_dict=True)
    logits = classifier.predict(pairs, verbose=0)
    predicted = logits.argmax(-1)
    assert scores["f1"] == pytest.approx(sklearn_metrics.f1_score(labels, predicted), abs=1e-6)
    # Before, Keras's own "precision", "recall" and "auc" stopped deep in Keras (one-hot labels) or scored nonsense.
    assert scores["precision"] == pytest.approx(sklearn_metrics.precision_score(labels, predicted), abs=1e-6)
    assert scores["recall"] == pytest.approx(sklearn_metrics.recall_score(labels, predicted), abs=1e-6)
    auc = ClassAUC(2)  # (an untrained model's probabilities sit in one of Keras's 200 bins: compared bin for bin)
    auc.update_state(labels, logits)
    assert scores["auc"] == pytest.approx(float(keras.ops.convert_to_numpy(auc.result())), abs=1e-6)
    assert scores["matthews_correlation"] == pytest.approx(sklearn_metrics.matthews_corrcoef(labels, predicted),
                                                           abs=1e-6)

    sts = read_split("STS-B", shared_data / "glue", "dev")
    pairs, targets = (sts.text_a[:40], sts.text_b[:40]), np.array(sts.labels[:40], "float32")
    regression = BertClassifier(backbone, num_classes=1, preprocessor=preprocessor)
    regression.compile(loss="mse", metrics=["pearson_correlation"])
    scores = regression.evaluate(pairs, targets, batch_size=16, verbose=0, return_dict=True)
    predictions = regression.predict(pairs, verbose=0)[:, 0]
    assert scores["pearson_correlation"] == pytest.approx(stats.pearsonr(predictions, targets).statistic, abs=1e-4)


def test_a_confusion_score_needs_two_classes_or_more():
    with pytest.raises(ValueError) as error:
        ClassF1Score(num_classes=1)
    assert str(error.value) == "`num_classes` must be an int >= 2, got 1."


# Before: Keras's F1Score, AUC, categorical accuracy on a classifier stopped deep in Keras (TensorFlow: a 49-line
# graph error) or scored nonsense; Pearson on a 2-class classifier reported nan, F1 on a regression Keras's error.
@pytest.mark.parametrize("num_classes, metric, message", [
    (2, lambda: keras.metrics.F1Score(), "metrics: Keras's F1Score reads one-hot labels, and this 2-class "
     "BertClassifier takes class ids and gives logits: give metrics=['f1'], which reads class ids."),
    (3, lambda: keras.metrics.AUC(), "metrics: Keras's AUC reads one-hot labels, and this 3-class BertClassifier "
     "takes class ids and gives logits: give metrics=['auc'], which reads class ids."),
    (2, lambda: "categorical_accuracy", "metrics: Keras's categorical_accuracy reads one-hot labels, and this "
     "2-class BertClassifier takes class ids and gives logits: give metrics=['accuracy'], which reads class ids."),
    (2, lambda: "pearson_correlation", "metrics: pearson_correlation scores a regression (num_classes=1), and this "
     "is a 2-class classifier: use 'accuracy', 'f1', 'precision', 'recall', 'auc' or 'matthews_correlation'."),
    (1, lambda: "f1", "metrics: f1 scores classes, and this BertClassifier is a regression (num_classes=1): use "
     "'pearson_correlation', 'mean_squared_error' or 'mean_absolute_error'."),
    (1, lambda: keras.metrics.AUC(), "metrics: AUC scores classes, and this BertClassifier is a regression "
     "(num_classes=1): use 'pearson_correlation', 'mean_squared_error' or 'mean_absolute_error'."),
])
def test_a_metric_that_cannot_read_the_classifiers_labels_is_one_line_naming_the_one_that_does(
        num_classes, metric, message):
    backbone = BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    classifier = BertClassifier(backbone, num_classes=num_classes)
    with pytest.raises(ValueError) as error:
        classifier.compile(metrics=[metric()])
    assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        classifier.compile(weighted_metrics=[metric()])
    assert str(error.value) == message
