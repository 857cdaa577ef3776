"""Step 5, outputs: GLUE submission files, `dev_results.json` and the saved model, each written atomically.

- `write_submission(task, split, ids, predictions, output_dir)`: GLUE
  leaderboard files (`CoLA.tsv`, `MNLI-m.tsv`, ...), header `index\\tprediction`,
  labels mapped back to GLUE's strings.
- `write_dev_results(model_dir, results)`: the run's summary, `dev_results.json`.
- `save_model_atomically(model, path)`: `model.save(path)` via a temporary file (`checkpoints.atomic_files`).
"""

import os

import numpy as np

from keras_bert_impl.checkpoints.atomic_files import (  # noqa: F401 (save_model_atomically: also this module's name)
    atomic_write_json,
    atomic_write_text,
    save_model_atomically,
)
from keras_bert_impl.tasks.classification.reading import STSB_SCORE_RANGE, get_task

DEV_RESULTS_NAME = "dev_results.json"

SUBMISSION_HEADER = "index\tprediction"


def format_predictions(task, predictions):
    """Maps model outputs to GLUE's strings: class ids -> label names, STS-B scores clipped to [0, 5], 3 decimals.

    Example:
    >>> format_predictions("rte", [0, 1])
    ['entailment', 'not_entailment']
    >>> format_predictions("stsb", [5.7, 1.23456])
    ['5.000', '1.235']
    """
    task = get_task(task) if isinstance(task, str) else task
    predictions = np.asarray(predictions)
    if predictions.ndim != 1:
        raise ValueError(f"`predictions` must be 1-D (class ids or scores), got shape {predictions.shape}.")
    if task.is_regression:
        low, high = STSB_SCORE_RANGE
        return [f"{v:.3f}" for v in np.clip(predictions.astype("float64"), low, high)]
    ids = predictions.astype("int64")
    if ids.size and (ids.min() < 0 or ids.max() >= len(task.label_names)):
        raise ValueError(f"{task.name} predictions must be class ids in [0, {len(task.label_names)}), got {ids.min()}..{ids.max()}.")
    return [task.label_names[i] for i in ids]


def write_submission(task, split, ids, predictions, output_dir):
    """Writes GLUE's leaderboard file for a test split (e.g. `RTE.tsv`, `MNLI-m.tsv`) atomically.

    Args:
        task: task name or `GlueTask`.
        split: a test split of the task (`"test"`, `"test_matched"`, `"test_mismatched"`).
        ids: the test file's ids (`GlueSplit.ids`).
        predictions: class ids or STS-B scores, one per id.
        output_dir: directory to write into (created if needed).

    Returns:
        The path written.

    Example:
    >>> import tempfile
    >>> path = write_submission("mrpc", "test", ["0", "1"], [1, 0], tempfile.mkdtemp())
    >>> open(path).read()
    'index\\tprediction\\n0\\t1\\n1\\t0\\n'
    """
    task = get_task(task) if isinstance(task, str) else task
    if split not in task.submission_files:
        raise ValueError(f"{task.name} has no test split {split!r}: expected one of {list(task.submission_files)}.")
    if len(ids) != len(predictions):
        raise ValueError(f"{len(ids)} ids but {len(predictions)} predictions for {task.name} {split}.")
    rows = [SUBMISSION_HEADER] + [f"{i}\t{p}" for i, p in zip(ids, format_predictions(task, predictions))]
    path = os.path.join(os.fspath(output_dir), task.submission_files[split])
    atomic_write_text(path, "\n".join(rows) + "\n")
    return path


def write_dev_results(model_dir, results):
    """Writes `results` (the dict `run` returns) as `model_dir/dev_results.json`; returns the path."""
    path = os.path.join(os.fspath(model_dir), DEV_RESULTS_NAME)
    atomic_write_json(path, results)
    return path


# Step 5's name in every task (`classification.write_outputs`, `tagging.write_outputs`, `span_qa.write_outputs`; docs/architecture.md).
write_outputs = write_dev_results
