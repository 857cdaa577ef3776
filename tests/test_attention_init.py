"""Width-scaled query/key/value initialisation for pretraining from scratch (issue 17; docs/pretraining.md)."""

import numpy as np
import pytest

import keras

from keras_bert_impl.models import BertBackbone
from keras_bert_impl.training.attention_init import initialize_attention_qkv, width_scaled_attention_stddev


def _backbone(hidden_dim=128, num_layers=2):
    return BertBackbone(vocabulary_size=64, num_layers=num_layers, num_heads=2, hidden_dim=hidden_dim,
                        intermediate_dim=2 * hidden_dim, max_sequence_length=16)


def test_stddev_gives_the_same_logit_spread_at_every_width():
    for width in (128, 256, 768, 1024):
        assert width * width_scaled_attention_stddev(width) ** 2 == pytest.approx(1.28)
    assert width_scaled_attention_stddev(128) == pytest.approx(0.1, abs=1e-3)


def test_only_qkv_kernels_are_redrawn_and_the_attention_no_longer_starts_uniform():
    backbone = _backbone()
    before = [keras.ops.convert_to_numpy(w) for w in backbone.weights]
    initialize_attention_qkv(backbone, stddev=0.1, seed=3)
    redrawn = 0
    for weight, old in zip(backbone.weights, before):
        new = keras.ops.convert_to_numpy(weight)
        if weight.path.endswith("qkv/kernel"):
            redrawn += 1
            assert 0.08 < new.std() < 0.1  # a normal truncated at 2 stddev has std ~0.088
            assert np.abs(new).max() <= 0.2 + 1e-6
        else:
            np.testing.assert_array_equal(new, old)
    assert redrawn == 2
    first, second = (keras.ops.convert_to_numpy(layer.qkv_dense.kernel) for layer in backbone.transformer_layers)
    assert not np.allclose(first, second)  # each layer its own draw
    # With unit-variance (LayerNorm-ed) inputs, one head's logits spread ~ d * stddev^2; BERT's 0.02 gives ~0.05.
    x = np.random.default_rng(0).standard_normal((64, 128)).astype("float32")
    q, k = x @ first[:, :64], x @ first[:, 128:192]
    assert 0.6 < ((q @ k.T) / 8.0).std() < 2.0


@pytest.mark.parametrize("stddev", [0, -0.1, float("nan")])
def test_bad_stddev_is_refused(stddev):
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        initialize_attention_qkv(_backbone(hidden_dim=16, num_layers=1), stddev=stddev)
