"""TensorFlow's retracing warning: not for Keras's step functions of several models, still for a real retrace."""

import logging

import numpy as np
import pytest

import keras_bert_impl  # noqa: F401 (puts the filter on the `tensorflow` logger)
from keras_bert_impl import BertBackbone, BertClassifier


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def tensorflow_warnings():
    logger = logging.getLogger("tensorflow")
    handler = _Records()
    logger.addHandler(handler)  # (a logger's filters run before its handlers: this sees what users see)
    yield handler.messages
    logger.removeHandler(handler)


def test_several_models_predicting_once_each_print_no_retracing_warning(tensorflow_warnings):
    inputs = {"token_ids": np.ones((4, 16), "int32"), "segment_ids": np.zeros((4, 16), "int32"),
              "padding_mask": np.ones((4, 16), "int32")}
    for _ in range(7):  # TensorFlow warns from the 5th trace in 10 calls of one function's code
        backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
        BertClassifier(backbone, num_classes=2).predict(inputs, verbose=0)
    assert not [m for m in tensorflow_warnings if "retracing" in m]


def test_a_users_own_function_retraced_still_warns(tensorflow_warnings):
    import tensorflow as tf

    @tf.function
    def double(x):
        return x * 2

    for width in range(1, 8):  # a new shape each call: a real retrace each time
        double(tf.zeros((width, width + 1)))
    assert any("triggered tf.function retracing" in m and "double" in m for m in tensorflow_warnings)
