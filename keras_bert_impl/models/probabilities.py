"""`softmax`: logits to probabilities in NumPy, the one copy the task models' pipelines share."""

import numpy as np


def softmax(logits):
    """Softmax over the last axis, in float64 (the maximum subtracted first, so large logits do not overflow).

    Example:
    >>> softmax([[0.0, 0.0], [1000.0, 0.0]]).round(3).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    >>> softmax([]).tolist()
    []
    """
    logits = np.asarray(logits, "float64")
    if logits.size == 0:
        return logits
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)
