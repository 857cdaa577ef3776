"""Linear warm-up followed by linear decay: the learning-rate schedule of BERT."""

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak_learning_rate`, then linear decay to `end_learning_rate`.

    The schedule of the BERT paper (and of Hugging Face's
    `get_linear_schedule_with_warmup`): for `step < warmup_steps` the rate is
    `peak_learning_rate * step / warmup_steps`; afterwards it falls linearly
    and reaches `end_learning_rate` at `total_steps`, where it stays.

    Args:
        peak_learning_rate: float > 0. Rate at the end of warm-up.
        warmup_steps: int >= 0. Number of warm-up steps (0: no warm-up).
        total_steps: int > 0, >= `warmup_steps`. Step at which the decay ends.
        end_learning_rate: float >= 0. Final rate.
        name: optional name.

    Example:
    >>> schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=110)
    >>> [round(float(schedule(s)), 8) for s in (0, 5, 10, 60, 110, 200)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0, 0.0]
    """

    def __init__(
        self,
        peak_learning_rate,
        warmup_steps,
        total_steps,
        end_learning_rate=0.0,
        name="warmup_linear_decay",
    ):
        super().__init__()
        if not (peak_learning_rate > 0 and math.isfinite(peak_learning_rate)):
            raise ValueError(f"`peak_learning_rate` must be a finite number > 0, got {peak_learning_rate!r}.")
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"`total_steps` must be a positive int, got {total_steps!r}.")
        if (
            isinstance(warmup_steps, bool)
            or not isinstance(warmup_steps, int)
            or not 0 <= warmup_steps <= total_steps
        ):
            raise ValueError(
                f"`warmup_steps` must be an int in [0, total_steps={total_steps}], "
                f"got {warmup_steps!r}."
            )
        if end_learning_rate < 0:
            raise ValueError(f"`end_learning_rate` must be >= 0, got {end_learning_rate!r}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.end_learning_rate = float(end_learning_rate)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak = self.peak_learning_rate
        warmup = float(self.warmup_steps)
        decay_steps = float(max(self.total_steps - self.warmup_steps, 1))
        warmup_rate = peak * step / max(warmup, 1.0)
        progress = ops.minimum(ops.maximum(step - warmup, 0.0) / decay_steps, 1.0)
        decay_rate = peak + (self.end_learning_rate - peak) * progress
        return ops.where(step < warmup, warmup_rate, decay_rate)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "end_learning_rate": self.end_learning_rate,
            "name": self.name,
        }
