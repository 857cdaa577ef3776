"""An embedding looked up by a one-hot matmul: for small tables such as BERT's segment embedding."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class OneHotEmbedding(keras.layers.Embedding):
    """`keras.layers.Embedding` computed as `one_hot(ids) @ embeddings`.

    The same variables and outputs as `keras.layers.Embedding`; only the
    gradient is computed differently. A gather's gradient is a scatter-add,
    and for a table of a few rows (BERT's 2 segments) every token of the batch
    adds into the same rows: on a GPU those updates serialise (0.24 ms a step
    for the segment table of BERT-base at batch 256 on an H100, session 21's
    profile). As a matmul the gradient is `one_hot(ids)^T @ upstream`, a
    reduction the matmul units do in a few microseconds, accumulated in
    float32. The one-hot matrix has `input_dim` columns, so keep this for
    small tables; the token embedding stays a gather. LoRA and quantized
    tables run `keras.layers.Embedding`'s own call.

    Example:
    >>> import numpy as np
    >>> layer = OneHotEmbedding(2, 4)
    >>> ids = np.array([[0, 1, 1]])
    >>> out = layer(ids)
    >>> bool(np.allclose(out, np.take(layer.embeddings.numpy(), ids, axis=0)))
    True
    """

    def call(self, inputs):
        if self.lora_enabled or self.quantization_mode:
            return super().call(inputs)
        table = ops.cast(self.embeddings, self.compute_dtype)
        return ops.matmul(ops.one_hot(ops.cast(inputs, "int32"), self.input_dim, dtype=self.compute_dtype), table)
