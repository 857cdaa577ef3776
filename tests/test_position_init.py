"""Sine/cosine starting values for the learned position table when pretraining from scratch (docs/pretraining.md)."""

import keras
import numpy as np
import pytest

from keras_bert_impl.models import BertBackbone
from keras_bert_impl.training.position_init import initialize_positions_sinusoidal, sinusoidal_position_table

pytestmark = pytest.mark.multibackend  # the recipe starting from the table: tests/test_pretraining_run.py


def test_table_is_vaswanis_encoding_at_the_embeddings_stddev():
    table = sinusoidal_position_table(512, 128)
    assert table.shape == (512, 128) and table.dtype == np.float32
    assert abs(float(table.std()) - 0.02) < 1e-6
    # Columns 2i and 2i+1 are sin and cos of p / 10000**(2i/128), up to the one scale factor.
    scale = 0.02 / np.concatenate([np.sin(np.arange(512)[:, None] * 1e-4 ** (np.arange(0, 128, 2) / 128)),
                                   np.cos(np.arange(512)[:, None] * 1e-4 ** (np.arange(0, 128, 2) / 128))],
                                  axis=1).std()
    np.testing.assert_allclose(table[:, 0] / scale, np.sin(np.arange(512)), atol=1e-5)
    np.testing.assert_allclose(table[:, 127] / scale, np.cos(np.arange(512) * 1e-4 ** (126 / 128)), atol=1e-5)


def test_every_offset_is_one_linear_map_of_the_table():
    # What makes the start useful: position p+k is the same linear map of position p for every p, so one
    # query/key map reaches "k tokens away" everywhere. A random table has no such map for 64 positions
    # in 32 dimensions.
    table = sinusoidal_position_table(64, 32).astype("float64")
    random_table = np.random.default_rng(0).normal(0, 0.02, (64, 32))
    for offset in (1, 3):
        for candidate, fits in ((table, True), (random_table, False)):
            source, target = candidate[:-offset], candidate[offset:]
            solution, *_ = np.linalg.lstsq(source, target, rcond=None)
            residual = np.abs(source @ solution - target).max() / np.abs(target).max()
            assert (residual < 1e-6) == fits, (offset, residual)


def test_an_odd_width_ends_on_a_sine_column():
    table = sinusoidal_position_table(16, 5).astype("float64")
    unscaled = table / (table[1, 0] / np.sin(1.0))  # column 0 is sin(p) times the one scale factor
    positions = np.arange(16)
    for column, (function, exponent) in enumerate([(np.sin, 0), (np.cos, 0), (np.sin, 2), (np.cos, 2), (np.sin, 4)]):
        np.testing.assert_allclose(unscaled[:, column], function(positions / 10000 ** (exponent / 5)), atol=1e-6)


def test_backbone_table_is_set_and_stays_trainable():
    backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=24)
    initialize_positions_sinusoidal(backbone)
    table = backbone.position_embedding.position_embeddings
    assert table.trainable
    np.testing.assert_allclose(keras.ops.convert_to_numpy(table), sinusoidal_position_table(24, 16))


@pytest.mark.parametrize("arguments, message", [
    ((1, 16), "max_sequence_length=1: must be an integer >= 2"),
    ((8, 0), "hidden_dim=0: must be an integer >= 1"),
    ((8, 16, 0.0), "stddev=0.0: must be a finite number > 0"),
])
def test_bad_shapes_are_refused(arguments, message):
    with pytest.raises(ValueError) as caught:
        sinusoidal_position_table(*arguments)
    assert str(caught.value) == message
