"""How a run hands the attention its padding: `--attention_padding auto|mask|lengths`.

`BertBackbone(attention_padding="lengths")` gives each layer's attention one
length per row instead of a `(batch, 1, query, key)` mask; on JAX, on a GPU,
in bf16/fp16, that is cuDNN's fused attention with the padding inside the
kernel. It computes the same numbers (tests/test_key_lengths_attention.py),
so the setting is how, not what: it is not part of a checkpoint's
architecture, and a run may resume with another.

`resolve_attention_padding` decides what `auto` (the pretraining recipe's
default) means here: `"lengths"` where the fused kernel runs in training, that is
on JAX with a GPU, computing in bf16 or fp16, with attention dropout 0 (dropout
on the probabilities materialises them, so the kernel cannot run; pretraining's
default dropout is 0); `"mask"` everywhere else. On one H100 (BERT-base, batch
256, bf16, attention dropout 0) lengths ran 4,456 seq/s against the mask's
4,361 (docs/benchmarks.md, session 18).

Example:
>>> resolve_attention_padding("auto", mixed_precision=None, attention_dropout=0.0)
'mask'
>>> resolve_attention_padding("lengths", mixed_precision=None, attention_dropout=0.1)
'lengths'
"""

import keras

ATTENTION_PADDING_CHOICES = ("auto", "mask", "lengths")
_HALF_PRECISIONS = ("bf16", "fp16", "mixed_bfloat16", "mixed_float16")


def check_attention_padding(attention_padding):
    """Raises `ValueError` (one line naming the flag) unless `attention_padding` is auto, mask or lengths."""
    if attention_padding not in ATTENTION_PADDING_CHOICES:
        raise ValueError(f"--attention_padding={attention_padding!r}: expected "
                         f"{', '.join(ATTENTION_PADDING_CHOICES[:-1])} or {ATTENTION_PADDING_CHOICES[-1]}")


def resolve_attention_padding(attention_padding, mixed_precision, attention_dropout, backend=None):
    """Returns `"mask"` or `"lengths"`, with `"auto"` decided for this machine.

    Args:
        attention_padding: `"auto"`, `"mask"` or `"lengths"`.
        mixed_precision: the run's resolved precision (`resolve_mixed_precision`'s
            result: None for float32, `"bf16"`, `"fp16"` or a mixed policy name).
        attention_dropout: the dropout rate on the attention probabilities in training.
        backend: the Keras backend (default: the current one).

    Raises:
        ValueError: `--attention_padding='pad': expected auto, mask or lengths`.
    """
    check_attention_padding(attention_padding)
    if attention_padding != "auto":
        return attention_padding
    if (backend or keras.backend.backend()) != "jax" or mixed_precision not in _HALF_PRECISIONS or attention_dropout:
        return "mask"
    import jax

    return "lengths" if jax.default_backend() == "gpu" else "mask"
