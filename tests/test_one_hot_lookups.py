"""The position and segment embeddings as one-hot matmuls: the gathers' values and gradients, without the scatter.

Session 21's H100 profile of a BERT-base step (batch 256) spent 1.4 ms in the position table's gradient and 0.24 ms
in the segment table's: each a scatter-add of all 32,768 tokens into 128 (or 2) rows, which a GPU serialises.
As `one_hot(ids) @ table` the gradient is a matmul. These tests hold the new forms to the gathers they replace,
on every backend: the outputs equal a numpy gather and one SGD step moves each row by the sum of its tokens'
upstream gradients (numpy's scatter-add), packed rows included.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_bert_impl.layers.one_hot_embedding import OneHotEmbedding
from keras_bert_impl.layers.position_embedding import PositionEmbedding
from keras_bert_impl.models.backbone import BertBackbone

BATCH, LENGTH, HIDDEN = 3, 7, 4


def _one_sgd_step(call, inputs, upstream, table):
    """Trains `call` (Keras tensors -> outputs) one SGD step (learning rate 1) on the loss
    `mean_b sum(upstream[b] * outputs[b])` and returns (outputs before the step, `table` before, `table` after)."""
    model_inputs = [keras.Input(shape=x.shape[1:], dtype=str(x.dtype)) for x in inputs]
    model = keras.Model(model_inputs, call(*model_inputs))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0),
                  loss=lambda y_true, y_pred: ops.sum(y_true * y_pred, axis=(1, 2)))
    outputs = keras.ops.convert_to_numpy(model(inputs))
    before = keras.ops.convert_to_numpy(table)
    model.train_on_batch(inputs, upstream)
    return outputs, before, keras.ops.convert_to_numpy(table)


def _scatter_add(ids, upstream, rows):
    expected = np.zeros((rows, upstream.shape[-1]), "float32")
    np.add.at(expected, ids.reshape(-1), upstream.reshape(-1, upstream.shape[-1]) / len(upstream))
    return expected


@pytest.mark.multibackend
def test_one_hot_embedding_equals_the_gather_and_its_scatter_add_gradient():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 2, size=(BATCH, LENGTH)).astype("int32")
    upstream = rng.standard_normal((BATCH, LENGTH, HIDDEN)).astype("float32")
    layer = OneHotEmbedding(2, HIDDEN)
    layer.build((BATCH, LENGTH))
    outputs, before, after = _one_sgd_step(layer, [ids], upstream, layer.embeddings)
    np.testing.assert_allclose(outputs, before[ids], atol=1e-6)
    np.testing.assert_allclose(before - after, _scatter_add(ids, upstream, 2), atol=1e-5)


@pytest.mark.multibackend
def test_position_embedding_of_packed_rows_equals_the_gather_and_its_scatter_add_gradient():
    rng = np.random.default_rng(1)
    # Row 0: one example and padding; row 1: two packed examples; row 2: three, the last one token long.
    padding_mask = np.array([[1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 2, 2, 2, 2], [1, 1, 2, 2, 2, 3, 0]], "int32")
    positions = np.array([[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 0, 1, 2, 3], [0, 1, 0, 1, 2, 0, 6]])
    upstream = rng.standard_normal((BATCH, LENGTH, HIDDEN)).astype("float32")
    x = np.zeros((BATCH, LENGTH, HIDDEN), "float32")
    layer = PositionEmbedding(max_sequence_length=16)
    layer.build(x.shape)
    outputs, before, after = _one_sgd_step(lambda a, b: layer(a, padding_mask=b), [x, padding_mask], upstream,
                                           layer.position_embeddings)
    np.testing.assert_allclose(outputs, before[positions], atol=1e-6)
    np.testing.assert_allclose(before - after, _scatter_add(positions, upstream, 16), atol=1e-5)


@pytest.mark.multibackend
def test_backbone_keeps_its_segment_variable_and_lora_and_bf16_run_the_embedding_call():
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8)
    assert isinstance(backbone.segment_embedding, OneHotEmbedding)
    assert backbone.segment_embedding.embeddings.path == "segment_embedding/embeddings"
    ids = np.array([[0, 1, 1, 0]], "int32")
    layer = OneHotEmbedding(2, HIDDEN)
    plain = keras.ops.convert_to_numpy(layer(ids))
    layer.enable_lora(1)  # LoRA's B starts at zero: Embedding's own call, the same values
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(ids)), plain, atol=1e-6)
    half = OneHotEmbedding(2, HIDDEN, dtype="mixed_bfloat16")
    assert "bfloat16" in str(half(ids).dtype)
    restored = OneHotEmbedding.from_config(OneHotEmbedding(2, HIDDEN, name="segments").get_config())
    assert isinstance(restored, OneHotEmbedding) and restored.input_dim == 2
