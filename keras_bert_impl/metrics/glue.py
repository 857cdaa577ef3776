"""GLUE metrics in NumPy: accuracy, F1, Matthews correlation, Pearson and Spearman correlation.

`TASK_METRICS` maps each GLUE task to its official metric(s), first the
one that GLUE lists first (and that recipes use to pick the best epoch);
`glue_metrics(task, labels, predictions)` computes them, and `glue_score`
averages them into the single number per task that the GLUE leaderboard
averages (e.g. MRPC = (F1 + accuracy) / 2).

Example:
>>> glue_metrics("mrpc", [1, 0, 1, 1], [1, 0, 0, 1])
{'f1': 0.8, 'accuracy': 0.75}
>>> round(glue_score("mrpc", {'f1': 0.8, 'accuracy': 0.75}), 3)
0.775
"""

import numpy as np

# task -> official metrics, in GLUE's order.
TASK_METRICS = {
    "cola": ("matthews_corrcoef",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "stsb": ("pearson", "spearman"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "mnli_matched": ("accuracy",),
    "mnli_mismatched": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}


def _as_1d(values, name):
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got shape {array.shape}.")
    return array


def _check_pair(labels, predictions):
    labels = _as_1d(labels, "labels")
    predictions = _as_1d(predictions, "predictions")
    if labels.shape != predictions.shape:
        raise ValueError(f"`labels` and `predictions` differ in length: {labels.shape[0]} vs {predictions.shape[0]}.")
    if labels.size == 0:
        raise ValueError("`labels` and `predictions` are empty.")
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of exact matches.

    Example:
    >>> accuracy([0, 1, 1], [0, 1, 0])
    0.6666666666666666
    """
    labels, predictions = _check_pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1_score(labels, predictions, positive_label=1):
    """Binary F1 of `positive_label` (0.0 when there are no true or predicted positives), as scikit-learn.

    Example:
    >>> f1_score([1, 0, 1, 1], [1, 0, 0, 1])
    0.8
    """
    labels, predictions = _check_pair(labels, predictions)
    true_positive = np.sum((predictions == positive_label) & (labels == positive_label))
    predicted = np.sum(predictions == positive_label)
    actual = np.sum(labels == positive_label)
    if predicted + actual == 0:
        return 0.0
    return float(2 * true_positive / (predicted + actual))


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient (multi-class form; binary for CoLA), 0.0 when undefined.

    Example:
    >>> round(matthews_corrcoef([1, 1, 0, 0], [1, 0, 0, 0]), 4)
    0.5774
    """
    labels, predictions = _check_pair(labels, predictions)
    classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    true_ids, pred_ids = encoded[: labels.size], encoded[labels.size :]
    confusion = np.zeros((classes.size, classes.size), dtype=np.float64)
    np.add.at(confusion, (true_ids, pred_ids), 1)
    true_sum = confusion.sum(axis=1)
    pred_sum = confusion.sum(axis=0)
    correct = np.trace(confusion)
    samples = confusion.sum()
    cov_true_pred = correct * samples - np.dot(true_sum, pred_sum)
    cov_pred_pred = samples**2 - np.dot(pred_sum, pred_sum)
    cov_true_true = samples**2 - np.dot(true_sum, true_sum)
    denominator = cov_pred_pred * cov_true_true
    if denominator == 0:
        return 0.0
    return float(cov_true_pred / np.sqrt(denominator))


def pearson(labels, predictions):
    """Pearson correlation coefficient (nan if either side is constant, as SciPy).

    Example:
    >>> pearson([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    0.9933992677987828
    """
    labels, predictions = _check_pair(labels, predictions)
    x = labels.astype(np.float64) - labels.mean(dtype=np.float64)
    y = predictions.astype(np.float64) - predictions.mean(dtype=np.float64)
    denominator = np.sqrt(np.dot(x, x) * np.dot(y, y))
    if denominator == 0:
        return float("nan")
    return float(np.clip(np.dot(x, y) / denominator, -1.0, 1.0))


def rankdata(values):
    """Ranks starting at 1, ties given their average rank (SciPy's `rankdata(method="average")`).

    Example:
    >>> rankdata([10, 20, 10, 30]).tolist()
    [1.5, 3.0, 1.5, 4.0]
    """
    values = _as_1d(values, "values")
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    is_new = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    group = np.cumsum(is_new) - 1
    starts = np.flatnonzero(is_new)
    ends = np.concatenate([starts[1:], [values.size]])
    average = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = average[group]
    return ranks


def spearman(labels, predictions):
    """Spearman rank correlation: Pearson on average-tie ranks (as SciPy's `spearmanr`).

    Example:
    >>> spearman([1.0, 2.0, 3.0], [2.0, 4.0, 7.0])
    1.0
    """
    labels, predictions = _check_pair(labels, predictions)
    return pearson(rankdata(labels), rankdata(predictions))


_FUNCTIONS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "matthews_corrcoef": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def _check_task(task):
    if task not in TASK_METRICS:
        raise ValueError(f"Unknown GLUE task {task!r}: expected one of {sorted(TASK_METRICS)}.")


def glue_metrics(task, labels, predictions):
    """The official metrics of `task` as a dict, in GLUE's order.

    Args:
        task: a key of `TASK_METRICS` (e.g. `"cola"`, `"stsb"`).
        labels: 1-D gold labels (class ids, or floats for STS-B).
        predictions: 1-D predicted class ids (argmax of the logits), or
            floats for STS-B.

    Example:
    >>> scores = glue_metrics("stsb", [0.0, 2.5, 5.0], [0.5, 2.0, 4.0])
    >>> {name: round(value, 6) for name, value in scores.items()}
    {'pearson': 0.996616, 'spearman': 1.0}
    """
    _check_task(task)
    return {name: _FUNCTIONS[name](labels, predictions) for name in TASK_METRICS[task]}


def glue_score(task, metrics):
    """The task's single GLUE number: the mean of its official metrics.

    Example:
    >>> glue_score("cola", {"matthews_corrcoef": 0.5})
    0.5
    """
    _check_task(task)
    missing = [name for name in TASK_METRICS[task] if name not in metrics]
    if missing:
        raise ValueError(f"Metrics for {task!r} lack {missing}; got {sorted(metrics)}.")
    return float(np.mean([metrics[name] for name in TASK_METRICS[task]]))
