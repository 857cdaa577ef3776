"""BERT's optimizer: AdamW (or LAMB) with decoupled weight decay, clipping and the warm-up schedule."""

import keras

from keras_bert_impl.training.precision import mixed_precision_policy
from keras_bert_impl.training.schedule import WarmupLinearDecay

# Substrings of variable names that get no weight decay: LayerNorm scale and
# offset ("gamma", "beta") and every bias ("bias", the MLM head's "output_bias"),
# as in google-research/bert `optimization.py`.
NO_WEIGHT_DECAY_NAMES = ("gamma", "beta", "bias")


class _ClipAfterAllReduce:
    """Clips by the global norm of the *summed* gradient under a multi-replica tf.distribute strategy.

    Keras clips each replica's partial gradient before the all-reduce, so with
    N replicas the clipped update differs from the one-device update. This
    mixin all-reduces first, clips the full gradient, and skips the second
    all-reduce: one-device and multi-device training take identical steps.

    Several PyTorch processes (`--strategy multiworker` on torch, `torch_processes`)
    have no all-reduce of their own in Keras's step: here each process's gradient
    (the mean over its rows) becomes the mean over every process before clipping,
    the gradient of the global batch, so every process takes the same step.
    """

    def _clip_gradients(self, grads):
        self._reduced_before_clipping = False
        if keras.backend.backend() == "torch":
            from keras_bert_impl.training import torch_processes

            grads = torch_processes.all_reduce_mean(grads)
        if self.global_clipnorm and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            context = tf.distribute.get_replica_context()
            if context is not None and context.num_replicas_in_sync > 1:
                present = [i for i, g in enumerate(grads) if g is not None]
                reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
                grads = list(grads)
                for i, g in zip(present, reduced):
                    grads[i] = g
                self._reduced_before_clipping = True
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if getattr(self, "_reduced_before_clipping", False):
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalClipAdamW(_ClipAfterAllReduce, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` whose global-norm clipping sees the all-reduced gradient, and whose `epsilon` is
    added to the bias-corrected root of the second moment, as PyTorch's `AdamW` (what Hugging Face fine-tunes with)
    and Kingma & Ba's Algorithm 1 add it.

    Keras adds `epsilon` before the bias correction, where it weighs `1 / sqrt(1 - beta_2**t)` times more: at step 1
    BERT's 1e-6 acts as 3.2e-5, at step 100 as 3.2e-6. Gradients clipped to a global norm of 1 over millions of
    weights are about 1e-5 per weight, so Keras's form takes far smaller first steps, and a short fine-tuning run
    ends behind Hugging Face's on the same data and checkpoint (docs/finetuning.md). Here the update is
    `lr * m_hat / (sqrt(v_hat) + epsilon)`, equal to `torch.optim.AdamW`'s (`tests/test_training_optimizer.py`).

    Example:
    >>> import numpy as np
    >>> variable = keras.Variable(np.zeros(2, "float32"))
    >>> optimizer = GlobalClipAdamW(learning_rate=0.1, epsilon=1e-6, weight_decay=0.0)
    >>> _ = optimizer.apply_gradients([(np.array([1e-5, -1e-5], "float32"), variable)])
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(variable)]  # Keras's AdamW: [-0.024, 0.024]
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


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalClipLamb(_ClipAfterAllReduce, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` whose global-norm clipping sees the all-reduced gradient."""


def create_optimizer(
    learning_rate,
    num_train_steps,
    warmup_steps,
    optimizer="adamw",
    weight_decay=0.01,
    clipnorm=1.0,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    end_learning_rate=0.0,
    gradient_accumulation_steps=None,
    mixed_precision=None,
):
    """Builds the optimizer of BERT pretraining and fine-tuning.

    AdamW (the paper) or LAMB (large-batch TPU pretraining, You et al. 2019)
    with a `WarmupLinearDecay` schedule, decoupled weight decay that skips
    LayerNorm and bias weights, and clipping by global norm. With
    `mixed_precision="fp16"` the optimizer is wrapped in a
    `keras.optimizers.LossScaleOptimizer` (dynamic loss scaling); bf16 needs
    none.

    Args:
        learning_rate: float. Peak learning rate (after warm-up).
        num_train_steps: int. Total optimizer steps; the rate reaches 0 there.
        warmup_steps: int. Linear warm-up steps.
        optimizer: `"adamw"` or `"lamb"`.
        weight_decay: float. Decoupled weight decay rate (0 or None: none).
        clipnorm: float or None. Clip gradients to this *global* norm.
        beta_1, beta_2, epsilon: Adam moments; BERT uses 0.9, 0.999, 1e-6.
        end_learning_rate: float. Rate at `num_train_steps`.
        gradient_accumulation_steps: int > 1 or None. Apply the averaged
            gradient of this many batches at once (larger effective batch).
        mixed_precision: None, `"bf16"` or `"fp16"` (or `"auto"`, see
            `precision.resolve_mixed_precision`). Only `"fp16"` changes the
            optimizer (loss scaling); set the dtype policy separately.

    Returns:
        A `keras.optimizers.Optimizer`.

    Example:
    >>> opt = create_optimizer(1e-4, num_train_steps=1000, warmup_steps=100)
    >>> type(opt).__name__, float(opt.weight_decay)
    ('GlobalClipAdamW', 0.01)
    """
    name = optimizer.lower() if isinstance(optimizer, str) else optimizer
    if name not in ("adamw", "lamb"):
        raise ValueError(f"Unknown optimizer={optimizer!r}: expected 'adamw' or 'lamb'.")
    if gradient_accumulation_steps is not None and (
        isinstance(gradient_accumulation_steps, bool)
        or not isinstance(gradient_accumulation_steps, int)
        or gradient_accumulation_steps < 1
    ):
        raise ValueError(
            "`gradient_accumulation_steps` must be None or a positive int, "
            f"got {gradient_accumulation_steps!r}."
        )
    if gradient_accumulation_steps == 1:
        gradient_accumulation_steps = None
    if clipnorm is not None and not clipnorm > 0:
        raise ValueError(f"`clipnorm` must be None or > 0, got {clipnorm!r}.")
    policy = mixed_precision_policy(mixed_precision)
    schedule = WarmupLinearDecay(
        learning_rate, warmup_steps, num_train_steps, end_learning_rate=end_learning_rate
    )
    cls = GlobalClipAdamW if name == "adamw" else GlobalClipLamb
    kwargs = dict(
        learning_rate=schedule,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=gradient_accumulation_steps,
    )
    if weight_decay:
        kwargs["weight_decay"] = weight_decay
    elif name == "adamw":
        kwargs["weight_decay"] = 0.0
    opt = cls(**kwargs)
    if weight_decay:
        opt.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_NAMES))
    if policy == "mixed_float16":
        opt = keras.optimizers.LossScaleOptimizer(opt)
    return opt
