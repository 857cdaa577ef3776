"""Dropout masks of their own on every replica of a tf.distribute strategy (TensorFlow backend).

Keras 3 draws dropout on TensorFlow from stateless random ops seeded by the layer's
`SeedGenerator`, whose state is a mirrored variable: every replica of a
`MirroredStrategy`, `MultiWorkerMirroredStrategy` or `TPUStrategy` reads the same
seed and draws the same mask for row i of its part of the batch (measured: two
replicas, `Dropout(0.5)` on 16 ones, identical masks). One device on the global
batch draws a mask per row. `draw_own_masks_on_every_replica()` makes Keras fold
the replica's id into the seed word of every random op drawn in a replica context
of more than one replica; replica 0 keeps its seed, so its masks are the ones one
device would draw. Outside a strategy, or with one replica, nothing changes.

`get_strategy` calls it for every TensorFlow strategy (so `recipes/*.py` and
`finetune` are covered); call it yourself before `fit` under a strategy you build.
(JAX draws the masks of the global batch inside one compiled step; PyTorch
processes draw their own streams: `torch_random_state`.)

Example:
>>> draw_own_masks_on_every_replica()  # on the TensorFlow backend; idempotent
True
"""

import keras

# The replica index is multiplied into the seed word; replicas up to 2**31 / 40503 (53,000) stay distinct.
_REPLICA_STRIDE = 40503


def draw_own_masks_on_every_replica():
    """Patches Keras's TensorFlow random ops to fold the replica id into their seeds; False on other backends."""
    if keras.backend.backend() != "tensorflow":
        return False
    from keras.src.backend.tensorflow import random as tf_random

    if getattr(tf_random._cast_seed, "_keras_bert_impl_per_replica", False):  # noqa: SLF001
        return True
    import tensorflow as tf

    original = tf_random._cast_seed  # noqa: SLF001 (every Keras random op on TensorFlow passes its seed through it)

    def cast_seed(seed):
        seed = original(seed)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:  # cross-replica code, or one replica
            return seed
        replica = tf.cast(context.replica_id_in_sync_group, tf.int32)
        word = tf.bitwise.bitwise_xor(seed[0], replica * _REPLICA_STRIDE)
        return tf.stack([word, seed[1]])

    cast_seed._keras_bert_impl_per_replica = True
    tf_random._cast_seed = cast_seed  # noqa: SLF001
    return True
