"""TensorFlow's "N out of the last M calls to ... triggered tf.function retracing" warning, where Keras's own step
functions set it off without any retracing: left out, once, for the whole process (`quiet_keras_step_retracing`).

TensorFlow counts the traces of a `tf.function` by its Python code (`__code__`), not by the function object. Keras
makes each model's train, test and predict step functions from the same code, so the first `predict` of each new
model is a trace of "the same function". A notebook that fine-tunes a model, reloads it and compares the two, or
runs a classifier beside a tagger, reaches five first calls in ten and gets a paragraph that blames the user's
code (seven models predicting once each, with one input shape: "5 out of the last 5 calls ... triggered
tf.function retracing"). A filter on the `tensorflow` logger drops the warning where it names one of Keras's
step functions (`TensorFlowTrainer.make_train_function`, `make_test_function`, `make_predict_function`); the
retracing of any other function (a user's own `tf.function`) still warns. Our models' batches keep few shapes
(length buckets, filled last batches), and Keras traces its step functions with `reduce_retracing=True`.

Only the standard library: the filter goes on the logger before TensorFlow is imported (or never is).

Example:
>>> import logging
>>> quiet_keras_step_retracing()
>>> [type(f).__name__ for f in logging.getLogger("tensorflow").filters]
['KerasStepRetracingFilter']
>>> record = logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, "5 out of the last 5 calls to <function "
...     "TensorFlowTrainer.make_predict_function.<locals>.one_step_on_data_distributed at 0x7f> triggered tf.function "
...     "retracing. Tracing is expensive", None, None)
>>> KerasStepRetracingFilter().filter(record)
False
"""

import logging

_KERAS_STEP_FUNCTIONS = tuple(f"TensorFlowTrainer.make_{step}_function.<locals>." for step in ("train", "test", "predict"))


class KerasStepRetracingFilter(logging.Filter):
    """Drops TensorFlow's retracing warning about a Keras step function; passes every other record."""

    def filter(self, record):
        message = record.getMessage()
        return not ("triggered tf.function retracing" in message and any(f in message for f in _KERAS_STEP_FUNCTIONS))


def quiet_keras_step_retracing():
    """Puts `KerasStepRetracingFilter` on the `tensorflow` logger (once: calling again adds nothing)."""
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, KerasStepRetracingFilter) for f in logger.filters):
        logger.addFilter(KerasStepRetracingFilter())
