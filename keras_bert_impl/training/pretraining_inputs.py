"""From the pretraining pipeline's dicts to Keras `(x, y, sample_weight)` triples (TensorFlow)."""

import tensorflow as tf

MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask", "mask_positions")


def split_features_labels(features, nsp=True):
    """Maps one batch of `pretraining_dataset` to `(x, y, sample_weight)` for `BertPretrainer.fit`.

    `x` holds the model inputs, `y` the targets `{"mlm": mask_ids, "nsp":
    next_sentence_labels}`. The MLM sample weight is `mask_weights` rescaled
    so that its sum equals the number of prediction slots in the batch:
    Keras's default reduction divides the weighted sum by the number of
    slots, so the loss becomes the mean over the *real* masked positions of
    the whole batch -- also when a `tf.distribute` strategy splits the batch
    across replicas (each replica divides by its share of the slots and the
    gradients are summed), which keeps one-device and multi-device losses
    equal. Use with `dataset.map(split_features_labels)`.

    Args:
        features: dict with `token_ids, segment_ids, padding_mask,
            mask_positions, mask_ids, mask_weights` and (if `nsp`)
            `next_sentence_labels`.
        nsp: bool. Include the next-sentence target.

    Returns:
        `(x, y, sample_weight)` dicts.

    Example:
    >>> import numpy as np
    >>> batch = {"token_ids": np.ones((2, 4), "int32"), "segment_ids": np.zeros((2, 4), "int32"),
    ...          "padding_mask": np.ones((2, 4), "int32"), "mask_positions": np.array([[1, 0], [2, 3]], "int32"),
    ...          "mask_ids": np.array([[7, 0], [8, 9]], "int32"), "mask_weights": np.array([[1, 0], [1, 1]], "int32"),
    ...          "next_sentence_labels": np.array([0, 1], "int32")}
    >>> x, y, w = split_features_labels(batch)
    >>> w["mlm"].numpy().tolist()
    [[1.3333333730697632, 0.0], [1.3333333730697632, 1.3333333730697632]]
    """
    missing = [k for k in (*MODEL_INPUTS, "mask_ids", "mask_weights") if k not in features]
    if nsp and "next_sentence_labels" not in features:
        missing.append("next_sentence_labels")
    if missing:
        raise KeyError(
            f"split_features_labels: the batch lacks {missing}; expected the dict of "
            f"keras_bert_impl.data.pretraining_dataset (got keys {sorted(features)})."
        )
    weights = tf.cast(features["mask_weights"], tf.float32)
    slots = tf.cast(tf.size(weights), tf.float32)
    weights = weights * (slots / tf.maximum(tf.reduce_sum(weights), 1.0))
    x = {name: features[name] for name in MODEL_INPUTS}
    y = {"mlm": features["mask_ids"]}
    sample_weight = {"mlm": weights}
    if nsp:
        labels = features["next_sentence_labels"]
        y["nsp"] = labels
        sample_weight["nsp"] = tf.ones(tf.shape(labels), tf.float32)
    return x, y, sample_weight
