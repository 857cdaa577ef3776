"""How many training steps one host call runs: `--steps_per_execution auto|N`.

Keras's `compile(steps_per_execution=N)` hands the device N steps per call, so
the host (Python, Keras's loop, the callbacks) is paid once per N steps. On an
accelerator that is most of the gap between a step's kernels and its wall time:
on one H100, BERT-base at batch 256 ran 4,456 seq/s with 20 steps a call
against 3,693 with one (docs/benchmarks.md, session 19), and the kernels alone
take the 20-step figure's time, so more steps a call cannot gain more. On a CPU
the step itself is the cost, and the main job keeps 1 (every step logged).

`resolve_steps_per_execution` decides what `auto` (the pretraining recipe's
default) means: on a GPU or TPU, the largest of 20, 10, 5, 4 and 2 that divides
both `--checkpoint_every` (a checkpoint lands between calls) and `--log_every`
(TensorBoard sees the steps at the end of each call); 1 on a CPU, and on the
PyTorch backend, whose Keras loop runs each step from Python anyway.

Example:
>>> resolve_steps_per_execution("auto", checkpoint_every=500, log_every=20, accelerator=True)
20
>>> resolve_steps_per_execution("auto", checkpoint_every=150, log_every=25, accelerator=True)
5
>>> resolve_steps_per_execution("auto", checkpoint_every=500, log_every=20, accelerator=False)
1
>>> resolve_steps_per_execution(8, checkpoint_every=64, log_every=20, accelerator=True)
8
"""

import argparse

import keras

AUTO = "auto"
_ACCELERATOR_CHOICES = (20, 10, 5, 4, 2)


def parse_steps_per_execution(text):
    """The recipe flag's type: `"auto"` or an integer (its range is checked with the other flags).

    >>> parse_steps_per_execution("AUTO"), parse_steps_per_execution("20")
    ('auto', 20)
    """
    if str(text).strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or an integer >= 1, got {text!r}") from None


def check_steps_per_execution(value, checkpoint_every):
    """Raises `ValueError` (one line naming the flags) for a value that is not auto or an integer >= 1 dividing
    `checkpoint_every`."""
    if value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"--steps_per_execution={value!r}: expected auto or an integer >= 1")
    if checkpoint_every % value:
        raise ValueError(f"--checkpoint_every={checkpoint_every} must be a multiple of --steps_per_execution={value}")


def on_accelerator(strategy=None, backend=None):
    """True where the training step runs on a GPU or a TPU for this backend (and strategy, on TensorFlow)."""
    backend = backend or keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() in ("gpu", "tpu")
    if backend == "tensorflow":
        if strategy is not None and "TPU" in type(strategy).__name__:
            return True
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
    return False  # PyTorch: Keras's torch loop calls each step from Python


def resolve_steps_per_execution(value, checkpoint_every, log_every, accelerator):
    """Returns the number of steps per host call, with `"auto"` decided for `accelerator` (bool).

    Raises:
        ValueError: `--steps_per_execution=0: expected auto or an integer >= 1`.
    """
    check_steps_per_execution(value, checkpoint_every)
    if value != AUTO:
        return value
    if not accelerator:
        return 1
    return next((n for n in _ACCELERATOR_CHOICES if checkpoint_every % n == 0 and log_every % n == 0), 1)
