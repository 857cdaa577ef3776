"""AdamW that steps as PyTorch's `torch.optim.AdamW` (what Hugging Face fine-tunes with)."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class AdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` (same arguments) whose `epsilon` is added to the bias-corrected root of the second
    moment, as PyTorch's `AdamW` and Kingma & Ba's Algorithm 1 add it.

    Keras adds `epsilon` before the bias correction, where it weighs `1 / sqrt(1 - beta_2**t)` times more: at step 1
    an epsilon of 1e-6 acts as 3.2e-5, at step 100 as 3.2e-6. Gradients clipped to a global norm of 1 over millions
    of weights are about 1e-5 per weight, so Keras's form takes far smaller first steps, and a short fine-tuning run
    ends behind Hugging Face's on the same data and checkpoint (docs/benchmarks.md, multi-label CoNLL). Here the
    update is `lr * m_hat / (sqrt(v_hat) + epsilon)`, equal to `torch.optim.AdamW`'s
    (`tests/test_training_optimizer.py`, on every backend). Weight decay, clipping, `amsgrad`, EMA and gradient
    accumulation are Keras's.

    Example:
    >>> import numpy as np
    >>> variable = keras.Variable(np.zeros(2, "float32"))
    >>> optimizer = AdamW(learning_rate=0.1, epsilon=1e-6, weight_decay=0.0)
    >>> _ = optimizer.apply_gradients([(np.array([1e-5, -1e-5], "float32"), variable)])
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(variable)]  # keras.optimizers.AdamW: [-0.024, 0.024]
    [-0.0909, 0.0909]
    """

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        learning_rate = keras.ops.cast(learning_rate, dtype)
        gradient = keras.ops.cast(gradient, dtype)
        step = keras.ops.cast(self.iterations + 1, dtype)
        bias_correction_1 = 1 - keras.ops.power(keras.ops.cast(self.beta_1, dtype), step)
        bias_correction_2 = 1 - keras.ops.power(keras.ops.cast(self.beta_2, dtype), step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, keras.ops.multiply(keras.ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, keras.ops.multiply(keras.ops.subtract(keras.ops.square(gradient), v), 1 - self.beta_2))
        if self.amsgrad:
            v_hat = self._velocity_hats[self._get_variable_index(variable)]
            self.assign(v_hat, keras.ops.maximum(v_hat, v))
            v = v_hat
        denominator = keras.ops.add(keras.ops.sqrt(keras.ops.divide(v, bias_correction_2)), self.epsilon)
        step_size = keras.ops.divide(learning_rate, bias_correction_1)
        self.assign_sub(variable, keras.ops.divide(keras.ops.multiply(m, step_size), denominator))
