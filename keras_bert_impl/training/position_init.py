"""Sinusoidal starting values for BERT's learned position embeddings, for pretraining from scratch.

BERT learns its position embeddings, and draws them at random like every other
table. A random table gives the model 512 unrelated vectors: before its attention
can look at "the token before this one" it has to learn, position by position,
which vector comes after which. A narrow model pretrained for a few minutes spends
much of its run on that plateau (masked-LM accuracy about 0.14, the unigram and
bigram level), and the step at which it leaves depends on the seed.

`sinusoidal_position_table` fills the table with the fixed encoding of Vaswani et
al. (2017): sines and cosines of geometrically spaced frequencies. For any offset
`k`, the encoding of position `p + k` is the same linear map (a rotation per
frequency pair) of the encoding of `p`, so one query/key map reaches the
neighbouring token at every position at once. The table stays a trainable weight
(nothing about the architecture changes, and checkpoints convert to and from
keras-hub and Hugging Face as before); only its starting values differ, scaled to
the stddev of the other embeddings (0.02) so that the embedding sum starts with the
same proportions. Measured on the main job in docs/pretraining.md;
`recipes/pretrain.py --position_init random` restores BERT's random draw.
"""

import numpy as np

POSITION_INITS = ("sinusoidal", "random")


def sinusoidal_position_table(max_sequence_length, hidden_dim, stddev=0.02):
    """The `(max_sequence_length, hidden_dim)` sine/cosine table, scaled to an overall stddev of `stddev`.

    Column `2i` holds `sin(p / 10000 ** (2i / hidden_dim))` and column `2i + 1` the
    cosine of the same angle (Vaswani et al., 2017), for positions `p` from 0; an
    odd `hidden_dim` ends on a sine column.

    Example:
    >>> table = sinusoidal_position_table(64, 8)
    >>> table.shape, round(float(table.std()), 4)
    ((64, 8), 0.02)
    >>> # Position p+1 is one fixed rotation of position p in each frequency pair:
    >>> c, s = np.cos(1.0), np.sin(1.0)  # the first pair's frequency is 1
    >>> rotation = np.array([[c, s], [-s, c]])
    >>> bool(np.allclose(table[1:, :2], table[:-1, :2] @ rotation.T, atol=1e-6))
    True
    """
    if isinstance(max_sequence_length, bool) or not isinstance(max_sequence_length, int) or max_sequence_length < 2:
        raise ValueError(f"max_sequence_length={max_sequence_length!r}: must be an integer >= 2")
    if isinstance(hidden_dim, bool) or not isinstance(hidden_dim, int) or hidden_dim < 1:
        raise ValueError(f"hidden_dim={hidden_dim!r}: must be an integer >= 1")
    if not (isinstance(stddev, (int, float)) and np.isfinite(stddev) and stddev > 0):
        raise ValueError(f"stddev={stddev!r}: must be a finite number > 0")
    positions = np.arange(max_sequence_length, dtype="float64")[:, None]
    frequencies = 1.0 / 10000.0 ** (np.arange(0, hidden_dim, 2, dtype="float64") / hidden_dim)
    table = np.empty((max_sequence_length, hidden_dim), "float64")
    table[:, 0::2] = np.sin(positions * frequencies)
    table[:, 1::2] = np.cos(positions * frequencies[: hidden_dim // 2])  # an odd width ends on a sine
    return (table * (stddev / table.std())).astype("float32")


def initialize_positions_sinusoidal(backbone, stddev=0.02):
    """Sets `backbone`'s position embedding table to `sinusoidal_position_table` (it stays trainable).

    Call it on a freshly built backbone, before training (a checkpoint restored
    afterwards overwrites it, as it should).

    Example:
    >>> import keras
    >>> from keras_bert_impl.models import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    >>> initialize_positions_sinusoidal(backbone)
    >>> table = backbone.position_embedding.position_embeddings
    >>> bool(np.allclose(keras.ops.convert_to_numpy(table), sinusoidal_position_table(8, 16))), table.trainable
    (True, True)
    """
    table = backbone.position_embedding.position_embeddings
    length, dim = (int(size) for size in table.shape)
    table.assign(sinusoidal_position_table(length, dim, stddev=stddev).astype(table.dtype))
