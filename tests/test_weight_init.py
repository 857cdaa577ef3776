"""transformers' plain-normal init as an alternative to BERT's truncated normal (issue 17; docs/pretraining.md)."""

import numpy as np
import pytest

import keras

from keras_bert_impl.models import BertBackbone
from keras_bert_impl.models.pretrainer import BertPretrainer
from keras_bert_impl.training.weight_init import redraw_plain_normal


def _pretrainer():
    backbone = BertBackbone(vocabulary_size=300, num_layers=2, num_heads=2, hidden_dim=128,
                            intermediate_dim=256, max_sequence_length=64)
    return BertPretrainer(backbone)


def test_every_kernel_and_table_but_qkv_is_redrawn_from_a_plain_normal():
    model = _pretrainer()
    before = {w.path: keras.ops.convert_to_numpy(w) for w in model.weights}
    redrawn = redraw_plain_normal(model, stddev=0.02, seed=5)
    assert sorted(redrawn) == sorted([
        "token_embedding/embeddings", "segment_embedding/embeddings", "position_embedding/embeddings",
        "mlm_head/transform/kernel", "nsp_head/logits/kernel", "pooled_dense/kernel",
        *(f"transformer_layer_{i}/{name}/kernel" for i in (0, 1)
          for name in ("attention_output", "intermediate", "output"))])
    for weight in model.weights:
        new, old = keras.ops.convert_to_numpy(weight), before[weight.path]
        if weight.path in redrawn:
            assert not np.array_equal(new, old)
            if new.size >= 10_000:  # a plain normal: std 0.02 and values beyond the truncated normal's 2 sigma
                assert 0.019 < new.std() < 0.021, weight.path
                assert np.mean(np.abs(new) > 0.04) > 0.03, weight.path
                assert 0.0165 < old.std() < 0.0185, weight.path  # BERT's truncated normal: about 0.0176
        else:  # QKV kernels, biases, LayerNorm scales and offsets
            np.testing.assert_array_equal(new, old)


def test_bad_stddev_is_refused():
    with pytest.raises(ValueError, match=r"stddev=0: must be a number > 0"):
        redraw_plain_normal(_pretrainer(), stddev=0)
