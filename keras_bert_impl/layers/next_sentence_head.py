"""Next-sentence-prediction head."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class NextSentenceHead(keras.layers.Layer):
    """2-way IsNext / NotNext classifier on the pooled [CLS] output.

    Label 0 means "B is the actual next segment" (IsNext) and 1 "B is random"
    (NotNext), the convention of google-research/bert and Hugging Face.
    Logits are float32 under mixed precision.

    Args:
        kernel_initializer: initializer of the dense kernel.
        **kwargs: `keras.layers.Layer` arguments.

    Example:
    >>> import numpy as np
    >>> head = NextSentenceHead()
    >>> tuple(head(np.random.rand(3, 16).astype("float32")).shape)
    (3, 2)
    """

    def __init__(self, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, inputs_shape):
        self.dense = keras.layers.Dense(
            2, kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy, name="logits"
        )
        self.dense.build(inputs_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (2,)

    def compute_output_spec(self, pooled_output):
        return keras.KerasTensor(tuple(pooled_output.shape[:-1]) + (2,), dtype="float32")

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        return config
