"""Builds a compiled model's losses and metrics from its input's element spec, reading no batch.

On JAX and PyTorch, Keras's `fit` builds what is not built yet (the compiled loss and
metrics) from a first batch of the input before it trains, then starts training on a
new iterator of it. That costs a batch wherever the input is not a fresh, replayable
dataset: a tf.data iterator the run owns and checkpoints (pretraining) loses one batch
per `fit` call, so a resumed run would skip one batch more than the uninterrupted run;
a shuffled tf.data input spends one of its reshuffles on it, so a resumed run would see
other orders. Building from the element spec reads nothing.

Example:
>>> import keras, tensorflow as tf
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> model.optimizer.built
False
>>> dataset = tf.data.Dataset.from_tensors((tf.zeros((4, 3)), tf.zeros((4, 1))))
>>> build_from_element_spec(model, dataset.element_spec)
>>> model.optimizer.built
True
"""

import keras


def build_from_element_spec(model, element_spec):
    """Builds `model` (compiled) as `fit` would from a first batch, from `element_spec` (a `tf.TensorSpec` tree).

    A dimension the spec leaves unknown (length buckets) gets a concrete 1: JAX needs whole shapes here.
    """
    def symbolic(spec):
        return keras.KerasTensor(tuple(1 if d is None else d for d in spec.shape.as_list()), spec.dtype.name)

    model._symbolic_build(data_batch=keras.tree.map_structure(symbolic, element_spec))  # noqa: SLF001
