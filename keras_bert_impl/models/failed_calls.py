"""What a `fit`, `evaluate` or `predict` that stops with an error (or Ctrl-C) leaves behind, undone.

Keras leaves two kinds of wreck after a call that raises, and `Task` undoes
both, so the model trains, scores and predicts again with the weights it had
reached:

- TensorFlow keeps the half-built step function of a first trace that failed;
  every later `fit` then stops on "Creating variables on a non-first call to
  a function decorated with tf.function". The step function is dropped, so the
  next call traces a new one.
- JAX detaches the weights from the model while it runs (they travel through
  the compiled step as a state, and go back at the end of the epoch): after an
  error in `evaluate` or `predict`, or inside the first step of `fit` (Keras's
  `fit` puts them back in a `finally` after later steps), the variables hold
  nothing, and the next call stops on "'NoneType' object is not callable". The
  weights of the last step that ran (or, before any step ran, those the call
  began with) are put back.

Example:
>>> import keras
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> class Stop(keras.callbacks.Callback):
...     def on_train_batch_begin(self, batch, logs=None):
...         raise KeyboardInterrupt
>>> try:
...     run_recoverably(model, "train_function", lambda: model.fit(
...         keras.ops.ones((4, 3)), keras.ops.ones((4, 1)), callbacks=[Stop()], verbose=0))
... except KeyboardInterrupt:
...     print("stopped")
stopped
>>> model.predict(keras.ops.ones((1, 3)), verbose=0).shape
(1, 1)
"""

import keras


def run_recoverably(model, function_name, call):
    """Runs `call()` (the model's `fit`, `evaluate` or `predict`); if it raises, undoes what it left and re-raises.

    Args:
        model: the `keras.Model` the call runs.
        function_name: the step function Keras keeps for the call: `"train_function"`, `"test_function"` or
            `"predict_function"`; dropped after an error.
        call: a function of no arguments.
    """
    on_jax = keras.backend.backend() == "jax"
    if on_jax:
        model._jax_state = None  # so that a state found after an error is this call's
        values_before = [(variable, variable._value) for variable in _jax_variables(model)]
    try:
        return call()
    except BaseException as error:
        setattr(model, function_name, None)
        if on_jax:
            _reattach_jax_weights(model, values_before, error)
        raise


def _jax_variables(model):
    """Every variable Keras's JAX trainer may detach: the model's, its metrics' and its optimizer's, once each."""
    optimizer = getattr(model, "optimizer", None)
    groups = (model.variables, model.metrics_variables, optimizer.variables if optimizer is not None else ())
    return list({id(variable): variable for group in groups for variable in group}.values())


def _reattach_jax_weights(model, values_before, error):
    """Gives each detached variable its value after the last step that ran, or its value before the call."""
    state = getattr(model, "_jax_state", None)
    if state and not getattr(model, "_jax_state_synced", True) and not _any_deleted(state):
        model.jax_state_sync()  # Keras's own re-attachment, as at the end of an epoch
    model._jax_state = None
    model._jax_state_synced = True
    lost = []
    for variable, value in values_before:
        if variable._value is None:
            if value is None or _is_deleted(value):
                lost.append(variable.path)
            else:
                variable._value = value
    if lost:
        error.add_note(f"The model's weights were lost in the failed call ({len(lost)} variables, e.g. {lost[0]}): "
                       "load them again (from_preset, or the last checkpoint) before going on.")


def _any_deleted(state):
    return any(_is_deleted(value) for values in state.values() if values for value in values)


def _is_deleted(value):
    is_deleted = getattr(value, "is_deleted", None)
    return bool(is_deleted()) if callable(is_deleted) else False
