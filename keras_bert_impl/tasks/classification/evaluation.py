"""Step 4, evaluation: GLUE's official metric(s) on each dev split (the scorers are `keras_bert_impl.metrics.glue`)."""

import numpy as np

from keras_bert_impl.metrics import glue as glue_metrics
from keras_bert_impl.tasks.classification.prediction import predict_split


def evaluate_splits(model, task, splits, datasets):
    """Official metrics on each labelled split; with several dev splits (MNLI) names get the split as prefix."""
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
