"""Learned absolute position embedding."""

import keras
from keras import ops

from keras_bert_impl.layers.packed_examples import positions_from_example_ids


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class PositionEmbedding(keras.layers.Layer):
    """Learned absolute position embeddings, as in BERT.

    Holds a `(max_sequence_length, hidden_dim)` table and returns its first
    `sequence_length` rows, broadcast to the batch of the input. Works for
    any input length up to `max_sequence_length`; a longer input raises a
    `ValueError` that names both numbers.

    Args:
        max_sequence_length: int. The largest sequence length supported.
        initializer: initializer of the table. Defaults to
            `TruncatedNormal(stddev=0.02)`, as in the original BERT.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: tensor of shape `(batch, sequence_length, hidden_dim)`; only
            its shape is used.
        padding_mask: optional int tensor `(batch, sequence_length)`. Without
            it, token `i` gets row `i`. With it, positions restart at 0 on each
            example of a row that packs several (the mask holds example ids 1,
            2, ...; `packed_examples.positions_from_example_ids`); a 0/1 mask
            gives the same rows as no mask.

    Example:
    >>> import numpy as np
    >>> layer = PositionEmbedding(max_sequence_length=16)
    >>> tuple(layer(np.zeros((2, 10, 8), "float32")).shape)
    (2, 10, 8)

    Two examples packed in one row: the second starts again at row 0.
    >>> x = np.zeros((1, 5, 8), "float32")
    >>> out = np.asarray(layer(x, padding_mask=np.array([[1, 1, 1, 2, 2]])))
    >>> bool(np.allclose(out[0, 3], out[0, 0]) and np.allclose(out[0, 4], out[0, 1]))
    True
    """

    def __init__(self, max_sequence_length, initializer=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(max_sequence_length, int) or max_sequence_length <= 0:
            raise ValueError(
                "`max_sequence_length` must be a positive int, got "
                f"{max_sequence_length!r}."
            )
        self.max_sequence_length = max_sequence_length
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length, hidden_dim),
            initializer=self.initializer,
            trainable=True,
        )
        self.built = True

    def call(self, inputs, padding_mask=None):
        shape = ops.shape(inputs)
        sequence_length = shape[-2]
        if isinstance(sequence_length, int) and sequence_length > self.max_sequence_length:
            raise ValueError(
                f"Input sequence length {sequence_length} is longer than "
                f"max_sequence_length={self.max_sequence_length} of "
                f"layer '{self.name}'. Truncate the input to at most "
                f"{self.max_sequence_length} tokens or build the model with a "
                "larger max_sequence_length."
            )
        table = ops.slice(ops.convert_to_tensor(self.position_embeddings), (0, 0), (sequence_length, shape[-1]))
        table = ops.cast(table, self.compute_dtype)
        if padding_mask is not None:
            # Positions are below `sequence_length`: row `b`'s rows of the table are `one_hot(positions) @ table`.
            # Its gradient is then a matmul too; a gather's would be a scatter-add of every row of the batch into
            # the same `sequence_length` rows, which a GPU serialises (1.4 ms a BERT-base step on an H100).
            positions = positions_from_example_ids(padding_mask)
            return ops.matmul(ops.one_hot(positions, sequence_length, dtype=self.compute_dtype), table)
        return ops.broadcast_to(table, shape)

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_sequence_length": self.max_sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
