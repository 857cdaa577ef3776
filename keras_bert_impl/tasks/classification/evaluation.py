"""Step 4, evaluation: GLUE's official metric(s) on each dev split (the scorers are `keras_bert_impl.metrics.glue`),
and a labelled table's scores (`score_outputs`: accuracy and macro F1, Pearson and Spearman, or multi-label F1).

Example: the names of MNLI's two dev splits' metrics, and a task's GLUE score (the mean of its official metrics):

>>> from keras_bert_impl.tasks.classification.reading import get_task
>>> evaluate_metric_names(get_task("mnli"), ["dev_matched", "dev_mismatched"])
['matched_accuracy', 'mismatched_accuracy']
>>> glue_score(get_task("mrpc"), ["dev"], {"f1": 0.75, "accuracy": 0.5})
0.625
>>> glue_score(get_task("mrpc"), ["dev"], {"accuracy": 0.5}) is None  # no F1 yet
True
"""

import math

import numpy as np

from keras_bert_impl.metrics import glue as glue_metrics
from keras_bert_impl.metrics.glue import accuracy, f1_score, pearson, spearman
from keras_bert_impl.metrics.multi_label import multi_label_scores
from keras_bert_impl.tasks.classification.prediction import predict_split
from keras_bert_impl.tasks.classification.table_files import LabelledTable, encode_labels  # noqa: F401 (doctest)


def evaluate_splits(model, task, splits, datasets):
    """Official metrics on each labelled split; with several dev splits (MNLI) names get the split as prefix.

    Example: an untrained 1-layer regressor on eight pairs of the STS-B dev slice (tests/data/slices/glue):

    >>> import pathlib, keras_bert_impl
    >>> from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor
    >>> from keras_bert_impl.tasks.classification.batches import make_dataset
    >>> from keras_bert_impl.tasks.classification.reading import read_split
    >>> glue = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue"
    >>> split = read_split("stsb", glue, "dev").take(8)
    >>> preprocessor = BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=32)
    >>> dataset = make_dataset(split, preprocessor, batch_size=4)
    >>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> metrics = evaluate_splits(BertClassifier(backbone, num_classes=1), split.task, [split], [dataset])
    >>> list(metrics), all(-1 <= value <= 1 for value in metrics.values())  # STS-B's two correlations
    (['pearson', 'spearman'], True)
    """
    results = {}
    for split, dataset in zip(splits, datasets):
        metrics = glue_metrics.glue_metrics(task.name, split.labels, predict_split(model, dataset, len(split.labels)))
        prefix = "" if len(splits) == 1 else split.split.replace("dev_", "") + "_"
        results.update({prefix + name: value for name, value in metrics.items()})
    return results


def evaluate_metric_names(task, dev_splits):
    """Names `evaluate_splits` returns, in order (the first picks the best epoch).

    `dev_splits`: `GlueSplit`s or split names (e.g. `task.dev_splits`).
    """
    names = glue_metrics.TASK_METRICS[task.name]
    if len(dev_splits) == 1:
        return list(names)
    split_names = [s if isinstance(s, str) else s.split for s in dev_splits]
    return [s.replace("dev_", "") + "_" + n for s in split_names for n in names]


def glue_score(task, dev_splits, metrics):
    """The mean of the task's official metrics (None unless all were computed)."""
    names = evaluate_metric_names(task, dev_splits)
    if not all(n in metrics for n in names):
        return None
    return float(np.mean([metrics[n] for n in names]))


# === A labelled table's scores (your own data: recipes/finetune_classifier.py) ===


def classification_scores(label_ids, predicted_ids):
    """Accuracy and macro F1 (mean one-vs-rest F1 over the classes in labels or predictions, as scikit-learn).

    Example:
    >>> classification_scores([0, 1, 2, 2], [0, 1, 1, 2])
    {'accuracy': 0.75, 'macro_f1': 0.7777777777777777}
    """
    label_ids = np.asarray(label_ids)
    predicted_ids = np.asarray(predicted_ids)
    classes = np.union1d(label_ids, predicted_ids)
    macro_f1 = float(np.mean([f1_score(label_ids, predicted_ids, positive_label=c) for c in classes]))
    return {"accuracy": accuracy(label_ids, predicted_ids), "macro_f1": macro_f1}


def regression_scores(labels, predictions):
    """Pearson and Spearman correlations (None where undefined, e.g. constant predictions).

    Example:
    >>> regression_scores([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    {'pearson': 0.9933992677987828, 'spearman': 1.0}
    >>> regression_scores([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    {'pearson': None, 'spearman': None}
    """
    scores = {"pearson": pearson(labels, predictions), "spearman": spearman(labels, predictions)}
    return {name: None if math.isnan(value) else value for name, value in scores.items()}


def score_outputs(table, outputs, label_names=None):
    """Scores a classifier's raw `predict` outputs (logits or `(n, 1)` scores) against a labelled table.

    Multi-label outputs are logits: a class is predicted where its logit is
    above 0 (probability 0.5), as `BertClassifier.predict_labels` does.

    Example:
    >>> table = LabelledTable("dev.csv", ["a", "b"], None, ["neg", "pos"], [2, 3])
    >>> score_outputs(table, [[2.0, -1.0], [0.5, 0.1]], ["neg", "pos"])
    {'accuracy': 0.5, 'macro_f1': 0.3333333333333333}
    """
    outputs = np.asarray(outputs)
    if table.regression:
        return regression_scores(np.asarray(table.labels, "float64"), outputs.reshape(len(table), -1)[:, 0])
    if table.multi_label:
        return multi_label_scores(encode_labels(table, label_names), (outputs > 0).astype("int32"))
    return classification_scores(encode_labels(table, label_names), outputs.argmax(axis=-1))


# Step 4's name in every task (`classification.evaluate`, `tagging.evaluate`, `span_qa.evaluate`; docs/architecture.md).
evaluate = evaluate_splits
