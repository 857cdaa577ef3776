"""SequencePooling: one vector per sequence from BERT's token vectors (mean over real tokens, or [CLS])."""

import keras
from keras import ops

POOLING_MODES = ("mean", "cls")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SequencePooling(keras.layers.Layer):
    """Pools `(batch, length, hidden)` token vectors to `(batch, hidden)`, optionally L2-normalised.

    `"mean"` averages the vectors of the real tokens (`padding_mask` 1), as
    sentence-transformers' mean pooling does; `"cls"` takes position 0.

    Args:
        mode: `"mean"` or `"cls"`.
        normalize: divide each vector by its L2 norm (cosine similarity is then a dot product).

    Example:
    >>> import numpy as np
    >>> x = np.array([[[1.0, 0.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
    >>> mask = np.array([[1, 1, 0]])
    >>> np.asarray(SequencePooling("mean", normalize=False)(x, padding_mask=mask)).tolist()
    [[2.0, 2.0]]
    >>> np.round(np.asarray(SequencePooling("cls")(x, padding_mask=mask)), 3).tolist()
    [[1.0, 0.0]]
    """

    def __init__(self, mode="mean", normalize=True, **kwargs):
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise ValueError(f"`mode` must be one of {POOLING_MODES}, got {mode!r}.")
        self.mode = mode
        self.normalize = bool(normalize)

    def call(self, sequence_output, padding_mask):
        x = ops.cast(sequence_output, "float32")
        if self.mode == "cls":
            pooled = x[:, 0, :]
        else:
            mask = ops.cast(ops.expand_dims(padding_mask, -1), "float32")
            pooled = ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1e-9)
        if self.normalize:
            pooled = pooled / ops.maximum(ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True)), 1e-12)
        return pooled

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[-1])

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "normalize": self.normalize}
