"""Masked language model head that scores only the masked positions."""

import keras
from keras import ops

from keras_bert_impl.layers.float32_layer_norm import Float32LayerNormalization
from keras_bert_impl.layers.transformer_encoder import get_activation


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedLMHead(keras.layers.Layer):
    """BERT's masked-LM head over gathered positions, tied to the token embedding.

    Gathers the `max_predictions_per_seq` masked positions first and projects
    only those to the vocabulary (the paper's design: for seq 128 and 20
    predictions this is 6.4x cheaper than scoring every position). Then
    dense + activation + LayerNorm, and a projection onto the transposed token
    embedding matrix plus a per-token output bias, as in google-research/bert
    `get_masked_lm_output`. Logits are float32 under mixed precision.

    Args:
        vocabulary_size: int. Needed only when `token_embedding` is None.
        token_embedding: a `keras.layers.Embedding` whose matrix is reused
            (tied) as the output projection. If None, the head owns an
            untied `(hidden_dim, vocabulary_size)` kernel.
        activation: `"gelu"`, `"gelu_approximate"` or `"relu"`.
        layer_norm_epsilon: float.
        kernel_initializer: initializer of the transform dense layer.
        vocabulary_padding_multiple: None, or an int: the output projection is
            computed as if the vocabulary had zero rows appended up to a
            multiple of it (30,522 -> 30,592 for 128), a matmul shape GPUs tile
            evenly; the padding logits are sliced off, so the outputs, their
            shape and the weights do not change.
        **kwargs: `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, sequence_length, hidden_dim)` encoder output.
        mask_positions: int `(batch, num_predictions)` positions to score.

    Returns:
        float32 logits `(batch, num_predictions, vocabulary_size)`.

    Example:
    >>> import numpy as np
    >>> head = MaskedLMHead(vocabulary_size=50)
    >>> x = np.random.rand(2, 8, 16).astype("float32")
    >>> tuple(head(x, mask_positions=np.array([[1, 3], [0, 7]])).shape)
    (2, 2, 50)
    """

    def __init__(
        self,
        vocabulary_size=None,
        token_embedding=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        vocabulary_padding_multiple=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if vocabulary_padding_multiple is not None and (
            isinstance(vocabulary_padding_multiple, bool)
            or not isinstance(vocabulary_padding_multiple, int)
            or vocabulary_padding_multiple < 1
        ):
            raise ValueError(
                "vocabulary_padding_multiple must be None or an integer >= 1 (e.g. 128), "
                f"got {vocabulary_padding_multiple!r}"
            )
        self.vocabulary_padding_multiple = vocabulary_padding_multiple
        if token_embedding is None and vocabulary_size is None:
            raise ValueError("MaskedLMHead needs `vocabulary_size` or `token_embedding`.")
        if token_embedding is not None:
            tied = token_embedding.input_dim
            if vocabulary_size is not None and vocabulary_size != tied:
                raise ValueError(
                    f"vocabulary_size={vocabulary_size} does not match the tied "
                    f"token embedding's input_dim={tied}."
                )
            vocabulary_size = tied
        get_activation(activation)
        self.vocabulary_size = vocabulary_size
        if token_embedding is not None:
            check_float_embedding(token_embedding)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, inputs_shape, mask_positions_shape=None):
        hidden_dim = inputs_shape[-1]
        self.transform_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="transform",
        )
        self.transform_dense.build((None, None, hidden_dim))
        self.layer_norm = Float32LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build((None, None, hidden_dim))
        if self.token_embedding is None:
            self.output_kernel = self.add_weight(
                name="output_kernel",
                shape=(hidden_dim, self.vocabulary_size),
                initializer=self.kernel_initializer,
            )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocabulary_size,), initializer="zeros"
        )
        self._activation_fn = get_activation(self.activation)
        self.built = True

    def call(self, inputs, mask_positions):
        positions = ops.cast(mask_positions, "int32")
        gathered = ops.take_along_axis(inputs, positions[:, :, None], axis=1)
        x = self._activation_fn(self.transform_dense(gathered))
        x = self.layer_norm(x)
        if self.token_embedding is not None:
            check_float_embedding(self.token_embedding)
            kernel = ops.transpose(ops.cast(self.token_embedding.embeddings, self.compute_dtype))
        else:
            kernel = ops.cast(self.output_kernel, self.compute_dtype)
        padding = self._vocabulary_padding()
        if padding:
            kernel = ops.pad(kernel, [[0, 0], [0, padding]])
        logits = ops.matmul(x, kernel)
        if padding:
            logits = logits[..., : self.vocabulary_size]
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits

    def _vocabulary_padding(self):
        multiple = self.vocabulary_padding_multiple
        return -self.vocabulary_size % multiple if multiple else 0

    def compute_output_shape(self, inputs_shape, mask_positions_shape):
        return tuple(mask_positions_shape) + (self.vocabulary_size,)

    def compute_output_spec(self, inputs, mask_positions):
        shape = tuple(mask_positions.shape) + (self.vocabulary_size,)
        return keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                # A tied embedding is not serialised here: the owning model
                # recreates the tie (see BertPretrainer.get_config).
                "vocabulary_size": self.vocabulary_size,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "vocabulary_padding_multiple": self.vocabulary_padding_multiple,
            }
        )
        return config


def check_float_embedding(token_embedding):
    """One `ValueError` when the tied embedding is quantized: its matrix, as the output projection, must be float."""
    if getattr(token_embedding, "quantization_mode", None) is not None:
        raise ValueError(
            f"The masked-LM head uses the token embedding's matrix as its output projection, and that layer is "
            f"{token_embedding.quantization_mode}-quantized: quantize the BertPretrainer (or BertMaskedLM) itself, "
            "which keeps the token embedding float, rather than its backbone."
        )
