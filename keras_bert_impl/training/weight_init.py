"""The distribution a model pretrained from scratch draws its weights from: BERT's or `transformers`'.

google-research/bert (and Keras, keras-hub and this package) draw every kernel and
embedding table from a normal of stddev 0.02 *truncated at two standard deviations*,
whose effective stddev is about 0.0176. Hugging Face `transformers`
(`BertPreTrainedModel._init_weights`) draws them from a plain normal of stddev 0.02.
`WEIGHT_INITS` names the two; `redraw_plain_normal` turns a freshly built model's
weights into the second. Pretraining from scratch uses it by default
(`PretrainingConfig.weight_init="normal"`): after the 30-minute CPU pretraining it
fine-tuned better on SST-2, STS-B and CoNLL-2003 than the truncated normal
(docs/pretraining.md); `recipes/pretrain.py --weight_init truncated_normal`
restores BERT's.
"""

import keras

WEIGHT_INITS = ("truncated_normal", "normal")
# Weights drawn by their layer's initializer, by the last part of the variable's path.
DRAWN_WEIGHTS = ("kernel", "embeddings")


def redraw_plain_normal(model, stddev=0.02, seed=0, keep=("qkv",)):
    """Redraws every kernel and embedding table of `model` from a plain (untruncated) normal of `stddev`.

    Biases, LayerNorm scales and offsets are left as they are, and so are the
    weights of the layers named in `keep` (by default each encoder layer's
    fused query/key/value kernel, which `initialize_attention_qkv` draws).
    Call it on a freshly built model, before training.

    Args:
        model: a built Keras model or layer (a `BertPretrainer`, a `BertBackbone`).
        stddev: float > 0.
        seed: int; each weight gets its own seed, `seed + index`.
        keep: layer names whose weights stay as drawn.

    Returns:
        The paths of the redrawn weights.

    Example:
    >>> from keras_bert_impl.models import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=500, num_layers=1, num_heads=2,
    ...                         hidden_dim=64, intermediate_dim=128, max_sequence_length=8)
    >>> paths = redraw_plain_normal(backbone)
    >>> "token_embedding/embeddings" in paths, any("qkv" in p for p in paths)
    (True, False)
    >>> table = keras.ops.convert_to_numpy(backbone.token_embedding.embeddings)
    >>> float(abs(table).max()) > 0.04  # beyond the truncated normal's 2-sigma bound
    True
    """
    if not (isinstance(stddev, (int, float)) and stddev > 0):
        raise ValueError(f"stddev={stddev!r}: must be a number > 0")
    redrawn = []
    for index, variable in enumerate(model.weights):
        parts = variable.path.split("/")
        if parts[-1] not in DRAWN_WEIGHTS or any(part in keep for part in parts[:-1]):
            continue
        variable.assign(keras.random.normal(tuple(variable.shape), stddev=stddev, seed=seed + index,
                                            dtype=variable.dtype))
        redrawn.append(variable.path)
    return redrawn
