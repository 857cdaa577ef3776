"""Ctrl-C during a task's `fit`, `evaluate` or `predict` stops it by the next batch (`models/interrupts.py`).

Keras turns each batch's logs into numbers inside a bare `try/except: pass` (`pythonify_logs`); on JAX the main
thread waits there for the step's result, so a Ctrl-C that came then was dropped and the call went on. These tests
raise SIGINT inside that conversion, as if Ctrl-C came while a step computed, on every backend.
"""

import signal

import keras
import numpy as np
import pytest
from keras.src import backend as keras_backend

from keras_bert_impl import BertBackbone, BertClassifier

pytestmark = pytest.mark.multibackend


def _classifier():
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    return BertClassifier(backbone, num_classes=2)


def _features(rows=8):
    rng = np.random.default_rng(0)
    return ({"token_ids": rng.integers(1, 50, (rows, 8)).astype("int32"),
             "segment_ids": np.zeros((rows, 8), "int32"), "padding_mask": np.ones((rows, 8), "int32")},
            rng.integers(0, 2, rows))


class _ReadsEveryBatch(keras.callbacks.Callback):
    """A callback that reads each batch's logs (a progress, checkpoint or NaN callback): Keras then converts them in
    the main thread."""

    def on_train_batch_end(self, batch, logs=None):
        pass

    on_test_batch_end = on_predict_batch_end = on_train_batch_end


@pytest.fixture
def ctrl_c_in_a_conversion(monkeypatch):
    """SIGINT raised inside Keras's conversion of the logs (`convert_to_numpy`), at the conversion number given."""
    convert = keras_backend.convert_to_numpy
    state = {"conversions": 0, "at": None}

    def converting(value):
        state["conversions"] += 1
        if state["conversions"] == state["at"]:
            signal.raise_signal(signal.SIGINT)
        return convert(value)

    monkeypatch.setattr(keras_backend, "convert_to_numpy", converting)

    def arm(at):
        state["conversions"], state["at"] = 0, at

    return arm


def test_keras_alone_drops_a_ctrl_c_that_comes_in_a_conversion(ctrl_c_in_a_conversion):
    # The cause: keras.Model.fit itself goes on to the end.
    model = _classifier()
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = _features()
    ctrl_c_in_a_conversion(2)
    keras.Model.fit(model, x, y, batch_size=2, verbose=0, callbacks=[_ReadsEveryBatch()])
    assert int(model.optimizer.iterations) == 4


def test_fit_evaluate_and_predict_stop_by_the_next_batch(ctrl_c_in_a_conversion):
    model = _classifier()
    x, y = _features()
    ctrl_c_in_a_conversion(2)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=2, epochs=3, verbose=0, callbacks=[_ReadsEveryBatch()])
    assert int(model.optimizer.iterations) <= 2  # of 12
    ctrl_c_in_a_conversion(2)
    with pytest.raises(KeyboardInterrupt):
        model.evaluate(x, y, batch_size=2, verbose=0, callbacks=[_ReadsEveryBatch()])
    ctrl_c_in_a_conversion(1)
    with pytest.raises(KeyboardInterrupt):
        model.predict(x, batch_size=2, verbose=0, callbacks=[_ReadsEveryBatch()])
    # The handler is Python's again, and the model trains on from where it stopped (`failed_calls`).
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ctrl_c_in_a_conversion(None)
    before = int(model.optimizer.iterations)
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[_ReadsEveryBatch()])
    assert int(model.optimizer.iterations) == before + 4


def test_finetune_of_a_plain_keras_model_stops_by_the_next_batch(ctrl_c_in_a_conversion):
    # A packed training model (SQuAD's, CoNLL's `--packing`) is a plain keras.Model, which Task.fit does not cover:
    # `finetune` notes the signal itself.
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches
    from keras_bert_impl.training.finetuning import finetune

    keras.utils.set_random_seed(0)
    inputs = keras.Input((None,), dtype="int32", name="token_ids")
    logits = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(50, 4)(inputs)))
    model = keras.Model({"token_ids": inputs}, logits)
    x, y = _features(16)
    train = LengthBucketedBatches({"token_ids": list(x["token_ids"])}, y, batch_size=2, boundaries=[8])
    ctrl_c_in_a_conversion(3)
    with pytest.raises(KeyboardInterrupt):
        finetune(model, train, epochs=2, learning_rate=1e-3, loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True), tensorboard=False, verbose=0)
    assert int(model.optimizer.iterations) <= 3  # of 16


def test_a_handler_of_the_users_that_raises_nothing_is_left_as_it_is(ctrl_c_in_a_conversion):
    # A user's SIGINT handler that only sets a flag (stop after this epoch, say): the call goes on, as without us.
    signalled = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: signalled.append(signum))
    try:
        model = _classifier()
        x, y = _features()
        ctrl_c_in_a_conversion(2)
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[_ReadsEveryBatch()])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signalled == [signal.SIGINT] and int(model.optimizer.iterations) == 4


def test_nested_blocks_count_a_signal_once_and_put_the_handler_back():
    # `finetune` opens a block and `Task.fit` inside it another: one Ctrl-C is one count in each, and closing the
    # inner block leaves the outer block counting.
    from keras_bert_impl.models.interrupts import noting_interrupts

    handler = signal.getsignal(signal.SIGINT)
    with noting_interrupts() as outer:
        with noting_interrupts() as inner:
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
            assert (outer.signals, inner.signals) == (1, 1)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        assert outer.signals == 2 and not inner.open
    assert signal.getsignal(signal.SIGINT) is handler
