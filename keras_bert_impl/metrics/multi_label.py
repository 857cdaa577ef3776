"""Multi-label metrics in NumPy: micro and macro F1, subset accuracy and Hamming accuracy over 0/1 label matrices.

Rows are examples and columns classes (a multi-label classifier's multi-hot
targets, and its predictions: probability above a threshold). The F1 scores
follow scikit-learn's `f1_score(average="micro" / "macro")`, a class with
neither true nor predicted examples scoring 0, as there.

Example:
>>> scores = multi_label_scores([[1, 0, 1], [0, 1, 0]], [[1, 0, 0], [0, 1, 0]])
>>> {name: round(value, 4) for name, value in scores.items()}
{'micro_f1': 0.8, 'macro_f1': 0.6667, 'subset_accuracy': 0.5, 'hamming_accuracy': 0.8333}
"""

import numpy as np


def _as_matrices(labels, predictions):
    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    if labels.ndim != 2 or labels.shape != predictions.shape:
        raise ValueError(f"`labels` and `predictions` must be 0/1 matrices of one shape (examples, classes), got "
                         f"{labels.shape} and {predictions.shape}.")
    if labels.size == 0:
        raise ValueError("`labels` and `predictions` are empty.")
    for name, values in (("labels", labels), ("predictions", predictions)):
        if not np.all((values == 0) | (values == 1)):
            raise ValueError(f"`{name}` must hold 0 or 1 only (threshold probabilities first).")
    return labels.astype(bool), predictions.astype(bool)


def _f1(true_positives, predicted, actual):
    total = predicted + actual
    return np.where(total > 0, 2 * true_positives / np.maximum(total, 1), 0.0)


def multi_label_scores(labels, predictions):
    """`{"micro_f1", "macro_f1", "subset_accuracy", "hamming_accuracy"}` of 0/1 matrices `(examples, classes)`.

    micro F1 counts every (example, class) decision together; macro F1 is the
    mean of the classes' F1; subset accuracy is the fraction of examples whose
    whole label set is right; Hamming accuracy the fraction of right decisions.
    """
    labels, predictions = _as_matrices(labels, predictions)
    true_positives = np.sum(labels & predictions, axis=0)
    predicted, actual = np.sum(predictions, axis=0), np.sum(labels, axis=0)
    return {
        "micro_f1": float(_f1(true_positives.sum(), predicted.sum(), actual.sum())),
        "macro_f1": float(np.mean(_f1(true_positives, predicted, actual))),
        "subset_accuracy": float(np.mean(np.all(labels == predictions, axis=1))),
        "hamming_accuracy": float(np.mean(labels == predictions)),
    }
