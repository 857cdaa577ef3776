"""LayerNormalization that always computes in float32."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Float32LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` computed in float32, output in the layer's compute dtype.

    Under `mixed_float16` / `mixed_bfloat16` the mean and variance of a
    half-precision activation lose too much precision, so BERT implementations
    (keras-hub, TF Model Garden) normalise in float32. The variables are
    float32 (as under any mixed policy); the input is cast up, normalised and
    cast back to the compute dtype so the next matmul stays in half precision.

    Example:
    >>> import numpy as np
    >>> ln = Float32LayerNormalization(epsilon=1e-12, dtype="mixed_bfloat16")
    >>> "bfloat16" in str(ln(np.ones((2, 4), "float32")).dtype)
    True
    """

    def call(self, inputs):
        compute_dtype = self.compute_dtype
        x = ops.cast(inputs, "float32")
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        x = (x - mean) * ops.rsqrt(variance + self.epsilon)
        x = x * ops.cast(self.gamma, "float32") + ops.cast(self.beta, "float32")
        return ops.cast(x, compute_dtype)
