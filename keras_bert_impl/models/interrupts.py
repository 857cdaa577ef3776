"""Ctrl-C during `fit`, `evaluate` or `predict` stops the call by the next batch, on every backend.

Keras turns each batch's logs into Python numbers inside a bare `try: ... except: pass`
(`keras.src.utils.python_utils.pythonify_logs`, Keras 3.15). On JAX the main thread waits for the step's result
inside that conversion, so a Ctrl-C that arrives there raises its `KeyboardInterrupt` into the bare `except`, which
drops it, and training goes on. Keras converts there, in the main thread, whenever a callback reads the logs of
every batch (a progress, checkpoint or NaN callback of the user's or of the recipes). So on JAX a fine-tuning run
on SQuAD's NumPy batches went on to its end after Ctrl-C, and after SIGTERM; with Python's own handler the signal
was lost altogether (exit status 0).

`noting_interrupts()` wraps, for one call, the Python handlers of SIGINT and SIGTERM (Python's
`default_int_handler`, or a recipe's: `recipes/interruption.py`), so that each signal whose handler raises
`KeyboardInterrupt` is also counted (a handler of the user's that only sets a flag stays as it is).
`StopAtNotedInterrupt`, a callback that `Task` adds to each call, raises `KeyboardInterrupt` at the next batch or
epoch when a signal came during the call (its block's `Noting`; never once the call has returned): a `KeyboardInterrupt` that came out stops the call there anyway, and one
that Keras dropped is raised again where nothing drops it. A signal that Python does not handle (`SIG_DFL`,
`SIG_IGN`: SIGTERM in a notebook, a job started with `nohup`) is left alone; so are calls outside the main thread,
where no signal handler runs.

Example:
>>> import keras, numpy as np, signal
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> class CtrlC(keras.callbacks.Callback):  # a Ctrl-C that Keras drops, as its bare `except` does
...     def on_train_batch_end(self, batch, logs=None):
...         if batch == 1:
...             try:
...                 signal.raise_signal(signal.SIGINT)
...             except KeyboardInterrupt:
...                 pass
>>> try:
...     with noting_interrupts() as noting:
...         model.fit(np.ones((8, 2)), np.ones(8), batch_size=2, verbose=0,
...                   callbacks=[CtrlC(), StopAtNotedInterrupt(noting)])
... except KeyboardInterrupt:
...     print("stopped after", int(model.optimizer.iterations), "steps of 4")
stopped after 2 steps of 4
"""

import contextlib
import signal
import threading

import keras


class Noting:
    """What one `noting_interrupts` block counts: `signals` raised as `KeyboardInterrupt` while it is `open`."""

    def __init__(self):
        self.signals = 0
        self.open = True


_open_notings = []  # the blocks now open, innermost last
_counting_handlers = set()  # the handlers that open blocks installed: a nested block (a task's `fit` inside
# `finetune`) does not wrap them again, so each signal is counted once


@contextlib.contextmanager
def noting_interrupts():
    """Within it, each SIGINT and SIGTERM whose Python handler raises `KeyboardInterrupt` is counted as it raises:
    yields the `Noting` that a `StopAtNotedInterrupt` reads. Outside the main thread it counts nothing."""
    noting = Noting()
    wrapped = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(number)
            if not callable(previous) or previous in _counting_handlers:
                continue  # SIG_DFL, SIG_IGN (or None: not set from Python) left alone; an open block's counts already

            def counting(signum, frame, previous=previous):
                try:
                    return previous(signum, frame)
                except KeyboardInterrupt:  # (a handler of the user's that raises nothing is left to do as it does)
                    for each in _open_notings:
                        each.signals += 1
                    raise

            signal.signal(number, counting)
            _counting_handlers.add(counting)
            wrapped[number] = (previous, counting)
    _open_notings.append(noting)
    try:
        yield noting
    finally:
        noting.open = False
        _open_notings.remove(noting)
        for number, (previous, counting) in wrapped.items():
            _counting_handlers.discard(counting)
            if signal.getsignal(number) is counting:  # (unless the call installed a handler of its own meanwhile)
                signal.signal(number, previous)


class StopAtNotedInterrupt(keras.callbacks.Callback):
    """Raises `KeyboardInterrupt` at the next batch or epoch once `noting` (its call's `noting_interrupts` block)
    has counted a signal; nothing once the block is closed. It reads no logs, so Keras still dispatches the
    batch-end callbacks as it would without it."""

    def __init__(self, noting):
        super().__init__()
        self.noting = noting

    def _stop_if_signalled(self, *args, **kwargs):
        if self.noting.open and self.noting.signals:
            self.noting.signals = 0
            raise KeyboardInterrupt

    on_train_batch_begin = on_test_batch_begin = on_predict_batch_begin = _stop_if_signalled
    on_epoch_begin = on_epoch_end = _stop_if_signalled


def with_interrupt_check(callbacks, noting):
    """`callbacks` (None, a callback or a list of them) with a `StopAtNotedInterrupt(noting)` added; a
    `CallbackList` as it is."""
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return callbacks
    if callbacks is None:
        callbacks = []
    elif isinstance(callbacks, keras.callbacks.Callback):
        callbacks = [callbacks]
    return [*callbacks, StopAtNotedInterrupt(noting)]
