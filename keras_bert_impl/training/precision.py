"""Which numeric precision a run computes in: `--mixed_precision auto|none|bf16|fp16`.

- `resolve_mixed_precision(value, strategy_name)`: what `auto` (every recipe's
  default) means on this machine: `"bf16"` on a TPU or on a GPU with native
  bfloat16 (compute capability 8.0+: A100, H100, L4, RTX 30xx and later),
  None (float32) elsewhere. Every float32 spelling becomes None, other values
  are checked and returned as given. The runs resolve once, before building
  the model, and record the result (the pretraining resume check compares it).
- `mixed_precision_policy(value)`: the Keras dtype policy name of a value.

Older GPUs (V100, T4) stay in float32 under `auto`: their fast path is
float16, which needs loss scaling (`--mixed_precision fp16`; the optimizer is
then wrapped in a `keras.optimizers.LossScaleOptimizer`).

Example:
>>> resolve_mixed_precision("auto", strategy_name="cpu") is None
True
>>> mixed_precision_policy("bf16")
'mixed_bfloat16'
"""

import keras

_PRECISION_POLICIES = {
    None: "float32",
    "none": "float32",
    "float32": "float32",
    "fp32": "float32",
    "bf16": "mixed_bfloat16",
    "mixed_bfloat16": "mixed_bfloat16",
    "fp16": "mixed_float16",
    "mixed_float16": "mixed_float16",
}
_EXPECTED = "auto, none, bf16 or fp16 (or a Keras policy name: float32, mixed_bfloat16, mixed_float16)"


def resolve_mixed_precision(mixed_precision, strategy_name="auto", backend=None):
    """Returns `"bf16"`, `"fp16"`, a mixed Keras policy name, or None (float32), with `"auto"` decided here.

    Args:
        mixed_precision: `"auto"`, None, `"none"`, `"bf16"`, `"fp16"` or a Keras
            policy name (case-insensitive).
        strategy_name: the run's `--strategy`; `"tpu"` means bf16 under `auto`,
            `"cpu"` means float32 without asking the backend for devices.
        backend: the Keras backend whose devices are asked (default: the current one).

    Raises:
        ValueError: `--mixed_precision='fp8': expected auto, none, bf16 or fp16 (...)`.

    Example:
    >>> resolve_mixed_precision("auto", strategy_name="tpu")
    'bf16'
    >>> resolve_mixed_precision("FP32") is None
    True
    """
    key = mixed_precision.lower() if isinstance(mixed_precision, str) else mixed_precision
    if key == "auto":
        if strategy_name == "tpu":
            return "bf16"
        if strategy_name != "cpu" and _accelerator_has_bfloat16(backend or keras.backend.backend()):
            return "bf16"
        return None
    if key not in _PRECISION_POLICIES:
        raise ValueError(f"--mixed_precision={mixed_precision!r}: expected {_EXPECTED}")
    return None if _PRECISION_POLICIES[key] == "float32" else key


def mixed_precision_policy(mixed_precision):
    """Maps `None | "none" | "bf16" | "fp16" | "auto"` (or a Keras policy name) to a Keras dtype policy name.

    Example:
    >>> mixed_precision_policy("fp16"), mixed_precision_policy(None)
    ('mixed_float16', 'float32')
    """
    return _PRECISION_POLICIES[resolve_mixed_precision(mixed_precision)]


def _accelerator_has_bfloat16(backend):
    """True when the backend's first device computes in bfloat16 natively: a TPU, or a GPU with sm >= 8.0."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform == "tpu":
            return True
        return device.platform == "gpu" and _compute_capability(getattr(device, "compute_capability", None)) >= 8.0
    if backend == "torch":
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.get_device_capability(0)[0] >= 8)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return False
    return tf.config.experimental.get_device_details(gpus[0]).get("compute_capability", (0, 0))[0] >= 8


def _compute_capability(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


__all__ = ["mixed_precision_policy", "resolve_mixed_precision"]
