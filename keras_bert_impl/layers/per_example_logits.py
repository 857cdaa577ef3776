"""PerExampleLogits: the token logits of packed rows, split into one slice per example of the row."""

import keras
from keras import ops

from keras_bert_impl.layers.span_head import MASKED_LOGIT


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class PerExampleLogits(keras.layers.Layer):
    """`(batch, length)` token logits -> `(batch, examples_per_row, length)`, one slice per example of the row.

    A packed row holds several examples, numbered 1, 2, ... in its
    `padding_mask` (`keras_bert_impl.layers.packed_examples`). Slice `k`
    keeps the logits of example `k + 1`'s tokens and puts `MASKED_LOGIT` on
    every other position, so a softmax over the row's positions is that
    example's softmax over its own tokens: a span loss over slice `k` with the
    answer's position in the row is the example's loss alone in a row. Slices
    of examples a row does not have are all masked (give them the label -1,
    which `SpanLoss` ignores).

    Args:
        examples_per_row: int, the most examples a row holds.

    Example:
    >>> import numpy as np
    >>> logits = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], "float32")
    >>> ids = np.array([[1, 1, 2, 2, 0]])
    >>> out = np.asarray(PerExampleLogits(3)(logits, padding_mask=ids))
    >>> out.shape, (out > MASKED_LOGIT / 2).astype(int).tolist()
    ((1, 3, 5), [[[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 0]]])
    """

    def __init__(self, examples_per_row, **kwargs):
        super().__init__(**kwargs)
        if isinstance(examples_per_row, bool) or not isinstance(examples_per_row, int) or examples_per_row < 1:
            raise ValueError(f"`examples_per_row` must be a positive int, got {examples_per_row!r}.")
        self.examples_per_row = examples_per_row

    def call(self, logits, padding_mask):
        example_ids = ops.cast(padding_mask, "int32")
        numbers = ops.reshape(ops.arange(1, self.examples_per_row + 1, dtype="int32"), (1, -1, 1))
        own = ops.equal(ops.expand_dims(example_ids, 1), numbers)  # (batch, examples, length)
        logits = ops.cast(logits, "float32")
        return ops.where(own, ops.expand_dims(logits, 1), ops.full_like(ops.expand_dims(logits, 1), MASKED_LOGIT))

    def compute_output_spec(self, logits, padding_mask=None):
        batch, length = logits.shape
        return keras.KerasTensor((batch, self.examples_per_row, length), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config["examples_per_row"] = self.examples_per_row
        return config
