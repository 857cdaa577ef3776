"""The unigram floor of masked-LM accuracy: what always guessing the most frequent token scores.

A pretraining run's held-out MLM accuracy means little on its own: on English
text, guessing "the" (or ".") at every masked position already scores about
0.07. `unigram_floor` measures that floor on the same held-out batches, with
the same weights, as Keras's `mlm_accuracy`, so that the two can be compared
directly (`recipes/pretrain.py` prints both).
"""

import numpy as np


def unigram_floor(batches, steps=None):
    """Accuracy of always guessing the most frequent masked token of `batches`.

    The token is the most frequent *weighted* label of the masked positions of
    `batches` themselves, so the floor is, if anything, generous to the
    baseline. Weights are the `sample_weight["mlm"]` of
    `split_features_labels`, exactly as `BertPretrainer`'s `mlm_accuracy` uses them.

    Args:
        batches: iterable (or `tf.data.Dataset`) of `(x, y, sample_weight)`
            with `y["mlm"]` the masked token ids and `sample_weight["mlm"]`
            their weights (0 for padding slots).
        steps: int or None. Use only the first `steps` batches (as
            `model.evaluate(..., steps=steps)` does); None reads them all.

    Returns:
        dict `token_id` (int), `accuracy` (float), `masked_positions` (int), or
        None when the batches hold no masked position.

    Example:
    >>> import numpy as np
    >>> batch = ({}, {"mlm": np.array([[7, 7, 0], [8, 7, 9]])},
    ...          {"mlm": np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])})
    >>> floor = unigram_floor([batch])
    >>> floor["token_id"], round(floor["accuracy"], 3), floor["masked_positions"]
    (7, 0.6, 5)
    """
    weight_per_token = {}
    total_weight = 0.0
    positions = 0
    for index, (_, labels, weights) in enumerate(batches):
        if steps is not None and index >= steps:
            break
        ids = np.asarray(labels["mlm"]).reshape(-1)
        w = np.asarray(weights["mlm"], dtype="float64").reshape(-1)
        real = w > 0
        ids, w = ids[real], w[real]
        positions += int(real.sum())
        total_weight += float(w.sum())
        for token, weight in zip(*_weighted_counts(ids, w)):
            weight_per_token[token] = weight_per_token.get(token, 0.0) + weight
    if not weight_per_token:
        return None
    token = max(weight_per_token, key=weight_per_token.get)
    return {"token_id": int(token), "accuracy": weight_per_token[token] / total_weight,
            "masked_positions": positions}


def _weighted_counts(ids, weights):
    unique, inverse = np.unique(ids, return_inverse=True)
    return unique.tolist(), np.bincount(inverse, weights=weights).tolist()
