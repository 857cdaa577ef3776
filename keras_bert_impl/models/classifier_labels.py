"""A classifier's labels as its loss takes them (`BertClassifier.label_ids`): label names, class ids, multi-hot rows
or regression scores, each checked, turned into class ids, multi-hot float32 rows or float32 scores."""

import re
import warnings

import numpy as np


def label_ids(labels, num_classes, label_names=None, multi_label=False):
    """`BertClassifier.label_ids` of a classifier with these `num_classes` (1: regression), `label_names` (or None)
    and `multi_label`: class ids, float32 scores, or multi-hot float32 rows; a label that is not a class of the
    classifier raises one line naming the example.

    Example:
    >>> label_ids(["positive", "negative", 1], 2, ["negative", "positive"]).tolist()
    [1, 0, 1]
    >>> label_ids([[0, 2], [], {1}], 3, multi_label=True).tolist()
    [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    >>> label_ids(["2.5", 1], 1).tolist()  # regression: scores, strings of numbers too (a column of a file)
    [2.5, 1.0]
    """
    if hasattr(labels, "tolist") and not isinstance(labels, np.ndarray):  # a pandas Series, a tensor
        labels = labels.tolist()
    if isinstance(labels, (list, tuple)):  # 0-d tensors (a `datasets` column in torch format): their numbers
        labels = [_number_of_scalar_tensor(value) for value in labels]
    if multi_label:
        return _multi_hot(labels, num_classes, label_names)
    values = labels if isinstance(labels, np.ndarray) else np.asarray(labels, dtype=object)
    values = values.reshape(1) if values.ndim == 0 else values
    if values.ndim == 2 and values.shape[1] == 1:  # a column, (N, 1), as Keras's sparse losses take it
        values = values[:, 0]
    if values.ndim != 1:
        one_hot = (values.ndim == 2 and values.shape[1] == num_classes > 1
                   and all(set(row) <= {0, 1, 0.0, 1.0} and sum(row) == 1 for row in values.tolist()))
        hint = " These are one-hot rows: give their class ids, y.argmax(-1)." if one_hot else ""
        raise ValueError(f"`y` must hold one label per example (shape (N,) or (N, 1)), got shape {values.shape}."
                         + hint)
    if num_classes == 1:  # regression: numbers, or strings of numbers (a column read from a file); finite
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                scores = values.astype("float32")
        except (TypeError, ValueError):
            scores = None
        if scores is None or not np.isfinite(scores).all():
            index = next(i for i, value in enumerate(values) if not _is_finite_score(value))
            number = values[index] is not None and _is_finite_score(values[index], finite=False)
            kind = "a finite number" if number else "a number"
            raise ValueError(
                f"Example {index}: label {values[index]!r} is not {kind} (num_classes=1 is regression)."
            )
        integers = values.dtype.kind in "iub" or (values.dtype.kind == "O" and all(
            isinstance(value, (int, np.integer, np.bool_)) for value in values))
        if len(scores) > 1 and integers and np.isin(scores, (0.0, 1.0)).all():  # ids of two classes, surely
            # stacklevel 4: past this function and `BertClassifier.label_ids`, the caller's caller (`fit`'s).
            warnings.warn("num_classes=1 is regression (one score, mean squared error), and every label is 0 or 1: "
                          "for two classes, build the classifier with num_classes=2.", stacklevel=4)
        return scores
    if values.dtype.kind in "iub":  # True / False: class ids 1 / 0 (`df.label == 1`)
        ids = values.astype("int64")
    else:
        names = {name: i for i, name in enumerate(label_names or ())}
        ids = np.empty(len(values), "int64")
        for index, value in enumerate(values):
            if isinstance(value, (str, bytes, np.str_)):
                value = value.decode("utf-8") if isinstance(value, bytes) else str(value)
                if not label_names and re.fullmatch(r"\s*[+-]?\d+\s*", value):
                    ids[index] = int(value)  # a class id read from a file ("0", "1"), as a regression's "3.8"
                    continue
                if not label_names:
                    raise ValueError(
                        f"Example {index}: label {value!r} is a name, but this classifier has no label_names: "
                        f"give class ids 0..{num_classes - 1}, or build it with label_names=[...]."
                    )
                if value not in names:
                    raise ValueError(
                        f"Example {index}: label {value!r} is not one of the label_names {label_names}."
                    )
                ids[index] = names[value]
            elif isinstance(value, (int, np.integer, np.bool_)) or (
                    isinstance(value, (float, np.floating)) and float(value).is_integer()):
                ids[index] = int(value)
            else:
                several = isinstance(value, (list, tuple, set, frozenset, np.ndarray))
                raise ValueError(
                    f"Example {index}: label {value!r} is not a class id (int) or a label name (str)."
                    + (" Several labels per example need a multi_label=True classifier." if several else "")
                )
    outside = np.nonzero((ids < 0) | (ids >= num_classes))[0]
    if len(outside):
        index = int(outside[0])
        raise ValueError(
            f"Example {index}: label {int(ids[index])} is not a class of this {num_classes}-class classifier "
            f"(ids 0..{num_classes - 1}); {len(outside)} label(s) in all are outside."
        )
    return ids


def _multi_hot(labels, num_classes, label_names):
    """Multi-label `labels` (see `label_ids`) -> float32 `(examples, num_classes)`."""
    if isinstance(labels, np.ndarray) and labels.ndim == 2 and labels.dtype.kind in "biuf":
        if labels.shape[1] != num_classes:
            raise ValueError(f"`y` has shape {labels.shape}: multi-hot rows of this multi_label classifier have "
                             f"num_classes={num_classes} columns.")
        rows = labels
    elif isinstance(labels, (list, tuple, np.ndarray)):
        rows = list(labels)
    else:
        raise ValueError(f"`y` of a multi_label classifier must hold one list of labels (or one multi-hot row) "
                         f"per example, got {type(labels).__name__}.")
    names = {name: i for i, name in enumerate(label_names or ())}
    targets = np.zeros((len(rows), num_classes), "float32")
    for index, row in enumerate(rows):
        if hasattr(row, "tolist") and not isinstance(row, (str, bytes)):
            row = row.tolist()
        if isinstance(row, (str, bytes)) or not isinstance(row, (list, tuple, set, frozenset)):
            raise ValueError(
                f"Example {index}: a multi_label classifier takes a list of labels per example (names or ids, "
                f"[] for none) or a multi-hot row of {num_classes} numbers, got {row!r}."
            )
        if _is_multi_hot(row, num_classes):
            values = np.asarray(row, "float32")
            if not np.all((values >= 0) & (values <= 1)):
                raise ValueError(f"Example {index}: multi-hot row {row!r} has values outside [0, 1].")
            targets[index] = values
            continue
        for value in row:
            targets[index, _class_index(value, index, names, num_classes, label_names)] = 1.0
    return targets


def _class_index(value, index, names, num_classes, label_names):
    """One multi-label label (a name from `label_names` or a class id) of example `index` -> its class id."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, (str, np.str_)):
        if not label_names:
            raise ValueError(f"Example {index}: label {value!r} is a name, but this classifier has no "
                             f"label_names: give class ids 0..{num_classes - 1}, or build it with "
                             "label_names=[...].")
        if value not in names:
            raise ValueError(f"Example {index}: label {value!r} is not one of the label_names {label_names}.")
        return names[value]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < num_classes:
        return int(value)
    raise ValueError(f"Example {index}: label {value!r} is not a class of this {num_classes}-class "
                     f"classifier (ids 0..{num_classes - 1}, or names from label_names).")


def _is_multi_hot(row, num_classes):
    """Whether a multi-label example's `row` is a multi-hot row (`num_classes` numbers, floats or 0/1 ints) rather
    than a list of class ids."""
    numbers = (bool, int, float, np.bool_, np.integer, np.floating)
    if isinstance(row, (set, frozenset)) or len(row) != num_classes or not all(isinstance(v, numbers) for v in row):
        return False
    # Ints are multi-hot only when each is 0 or 1: [0, 2] of a 2-class classifier lists two ids.
    return any(isinstance(v, (float, np.floating)) for v in row) or all(v in (0, 1) for v in row)


def _is_finite_score(value, finite=True):
    """Whether `value` reads as a regression label as `astype("float32")` reads it (a number or a string of one),
    and is finite there."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            score = np.asarray([value], dtype=object).astype("float32")[0]
    except (TypeError, ValueError, OverflowError):
        return False
    return bool(np.isfinite(score)) or not finite


def _number_of_scalar_tensor(value):
    """A 0-d tensor of any backend (PyTorch's `tensor(1)`, TensorFlow's, JAX's) as its Python number; else `value`.

    >>> import numpy as np
    >>> _number_of_scalar_tensor(np.array(1)), _number_of_scalar_tensor("pos")
    (1, 'pos')
    """
    if getattr(value, "ndim", None) == 0 and not isinstance(value, (str, bytes)):
        if hasattr(value, "item"):
            return value.item()
        if hasattr(value, "numpy"):  # (TensorFlow's)
            return value.numpy().item()
    return value
