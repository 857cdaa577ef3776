"""LayerNormalization that always computes in float32."""

import keras
from keras import ops

from keras_bert_impl.layers.layer_norm_backward import check_layer_norm_backward, layer_norm_with_explicit_backward


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class Float32LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` computed in float32, output in the layer's compute dtype.

    Under `mixed_float16` / `mixed_bfloat16` the mean and variance of a
    half-precision activation lose too much precision, so BERT implementations
    (keras-hub, TF Model Garden) normalise in float32. The variables are
    float32 (as under any mixed policy); the input is cast up, normalised and
    cast back to the compute dtype so the next matmul stays in half precision.

    Args:
        backward: `"explicit"` (default) or `"autodiff"`. On JAX, `"explicit"`
            computes the gradient with a hand-written backward pass that moves
            fewer bytes on a GPU (`layer_norm_with_explicit_backward`);
            `"autodiff"` leaves it to JAX, which moves fewer bytes when
            XLA's cuDNN LayerNorm flag (`--xla_gpu_enable_cudnn_layer_norm`)
            replaces the forward pass. The outputs are the same; TensorFlow
            and PyTorch use autodiff.
        **kwargs: `keras.layers.LayerNormalization` arguments.

    Example:
    >>> import numpy as np
    >>> ln = Float32LayerNormalization(epsilon=1e-12, dtype="mixed_bfloat16")
    >>> "bfloat16" in str(ln(np.ones((2, 4), "float32")).dtype)
    True
    """

    def __init__(self, backward="explicit", **kwargs):
        super().__init__(**kwargs)
        check_layer_norm_backward(backward, name="backward")
        self.backward = backward

    def call(self, inputs):
        compute_dtype = self.compute_dtype
        if self.backward == "explicit" and keras.backend.backend() == "jax":
            return layer_norm_with_explicit_backward(
                inputs, ops.convert_to_tensor(self.gamma), ops.convert_to_tensor(self.beta), self.epsilon,
                compute_dtype,
            )
        x = ops.cast(inputs, "float32")
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
        x = (x - mean) * ops.rsqrt(variance + self.epsilon)
        x = x * ops.cast(self.gamma, "float32") + ops.cast(self.beta, "float32")
        return ops.cast(x, compute_dtype)

    def get_config(self):
        return {**super().get_config(), "backward": self.backward}
