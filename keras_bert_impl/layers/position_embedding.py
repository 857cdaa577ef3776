"""Learned absolute position embedding."""

import keras
from keras import ops


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

    Example:
    >>> import numpy as np
    >>> layer = PositionEmbedding(max_sequence_length=16)
    >>> tuple(layer(np.zeros((2, 10, 8), "float32")).shape)
    (2, 10, 8)
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

    def call(self, inputs):
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
        positions = ops.convert_to_tensor(self.position_embeddings)
        positions = ops.slice(positions, (0, 0), (sequence_length, shape[-1]))
        return ops.broadcast_to(ops.cast(positions, self.compute_dtype), shape)

    def compute_output_shape(self, inputs_shape):
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
