"""BERT's optimizer: AdamW (or LAMB) with decoupled weight decay, clipping and the warm-up schedule."""

import keras

from keras_bert_impl.optimizers import GlobalClipAdamW, GlobalClipLamb
from keras_bert_impl.training.precision import mixed_precision_policy
from keras_bert_impl.training.schedule import WarmupLinearDecay

# Substrings of variable names that get no weight decay: LayerNorm scale and
# offset ("gamma", "beta") and every bias ("bias", the MLM head's "output_bias"),
# as in google-research/bert `optimization.py`.
NO_WEIGHT_DECAY_NAMES = ("gamma", "beta", "bias")


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
