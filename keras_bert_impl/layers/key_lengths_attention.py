"""Attention over each row's first `length` keys: padding given as lengths, not as a mask tensor.

A BERT batch pads each row on the right, so which keys are real is one
number per row. `TransformerEncoder(attention_padding="lengths")` passes that
number instead of a `(batch, 1, query, key)` boolean mask. On JAX it goes to
`jax.nn.dot_product_attention(key_value_seq_lengths=...)`, which on a GPU in
bf16/fp16 runs cuDNN's fused (flash) attention with the padding handled
inside the kernel: no mask tensor is built, read or broadcast over the heads.
Elsewhere (XLA on the CPU, TensorFlow, PyTorch) the lengths become the same
mask, so the outputs do not depend on the setting.

Only rows that hold one example, padded on the right, can be described by a
length: packed rows (several examples numbered in `padding_mask`) need the
block-diagonal mask, and `attention_padding="mask"` (the default) gives it.

Example:
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k, v = (rng.standard_normal((2, 4, 2, 8)).astype("float32") for _ in range(3))
>>> lengths = np.array([4, 2], "int32")
>>> out = np.asarray(attention_over_key_lengths(q, k, v, lengths, scale=8 ** -0.5))
>>> mask = np.arange(4)[None, :] < lengths[:, None]
>>> reference = np.asarray(keras.ops.dot_product_attention(q, k, v, mask=mask[:, None, None, :], scale=8 ** -0.5))
>>> bool(np.allclose(out, reference, atol=1e-6))
True
"""

import warnings

import keras
from keras import ops

ATTENTION_PADDINGS = ("mask", "lengths")


def key_lengths(padding_mask):
    """`(batch,)` int32: the number of real tokens of each row (`padding_mask > 0`)."""
    return ops.sum(ops.cast(ops.greater(ops.cast(padding_mask, "int32"), 0), "int32"), axis=-1)


def attention_over_key_lengths(query, key, value, lengths, scale):
    """Scaled dot-product attention in which row `b`'s queries see only its first `lengths[b]` keys.

    Args:
        query, key, value: `(batch, sequence_length, num_heads, head_dim)`.
        lengths: `(batch,)` int: real tokens per row, at the start of the row.
        scale: float, the logits' scale (`1 / sqrt(head_dim)`).

    Every query, padding ones included, attends to the real keys, as with the
    `padding_mask` path of `TransformerEncoder`.
    """
    if keras.backend.backend() == "jax":
        import jax

        lengths = ops.cast(lengths, "int32")
        if jax.default_backend() == "gpu" and str(query.dtype) in ("bfloat16", "float16"):
            try:
                return jax.nn.dot_product_attention(
                    query, key, value, scale=scale, key_value_seq_lengths=lengths, implementation="cudnn"
                )
            except Exception as error:  # cuDNN refuses some shapes and versions; XLA takes every one
                warnings.warn(f"cuDNN fused attention is not available here, XLA's attention runs instead: {error}")
        return jax.nn.dot_product_attention(
            query, key, value, scale=scale, key_value_seq_lengths=lengths, implementation="xla"
        )
    length = ops.shape(key)[1]
    mask = ops.less(ops.arange(length, dtype="int32")[None, :], ops.cast(lengths, "int32")[:, None])
    return ops.dot_product_attention(query, key, value, mask=mask[:, None, None, :], scale=scale)
