"""Width-scaled initialisation of the attention's query, key and value kernels, for pretraining from scratch.

BERT draws every kernel from a normal of stddev 0.02. With LayerNorm-ed inputs of width
`d`, a query or key feature then has variance `d * 0.02**2`, and an attention logit
(a scaled dot product of the two) has a spread of about `d * stddev**2`: 0.31 for
BERT-base (d=768), but 0.05 for BERT-tiny (d=128). A narrow model's attention
therefore starts out uniform, and the query and key gradients (each proportional to
the other's small weights) are tiny: the masked-LM accuracy sits at the unigram and
bigram plateau for hundreds of steps before the model learns to use the context.
Drawing the fused query/key/value kernel with `stddev = sqrt(logit_spread / d)` gives
the logits the same spread at every width; `logit_spread=1.28` (stddev 0.1 at width
128) is what docs/pretraining.md measured on the main job. The attention output,
feed-forward and embedding kernels keep BERT's 0.02.
"""

import math

import keras

DEFAULT_LOGIT_SPREAD = 1.28


def width_scaled_attention_stddev(hidden_dim, logit_spread=DEFAULT_LOGIT_SPREAD):
    """The query/key/value kernel stddev that gives attention logits a spread of `logit_spread` at `hidden_dim`.

    Example:
    >>> round(width_scaled_attention_stddev(128), 3)
    0.1
    >>> round(width_scaled_attention_stddev(768), 3)
    0.041
    """
    if not hidden_dim > 0:
        raise ValueError(f"hidden_dim={hidden_dim!r}: must be > 0")
    return math.sqrt(logit_spread / hidden_dim)


def initialize_attention_qkv(backbone, stddev, seed=0):
    """Redraws every encoder layer's fused query/key/value kernel from a truncated normal of `stddev`.

    Biases and every other weight are left as they are. Call it on a freshly
    built backbone, before training (a checkpoint restored afterwards
    overwrites it, as it should).

    Example:
    >>> from keras_bert_impl.models import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    >>> initialize_attention_qkv(backbone, stddev=0.25)
    >>> kernel = keras.ops.convert_to_numpy(backbone.transformer_layers[0].qkv_dense.kernel)
    >>> kernel.shape, 0.15 < float(kernel.std()) < 0.3
    ((16, 48), True)
    """
    if not (isinstance(stddev, (int, float)) and math.isfinite(stddev) and stddev > 0):
        raise ValueError(f"attention init stddev={stddev!r}: must be a finite number > 0")
    for index, layer in enumerate(backbone.transformer_layers):
        kernel = layer.qkv_dense.kernel
        kernel.assign(keras.random.truncated_normal(tuple(kernel.shape), stddev=stddev, seed=seed + index,
                                                    dtype=kernel.dtype))
