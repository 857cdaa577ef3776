"""The callbacks of `finetune` (`training/finetuning.py`), each usable on its own with `model.fit`.

- `FiniteLossCheck(learning_rate)`: an epoch whose training loss is nan or inf ends the run in one line, before
  anything of that epoch is evaluated or saved.
- `EpochTimer()`: each epoch's training wall time (evaluation excluded), what `FinetuneResult.epoch_seconds` and
  the checkpoints keep.
- `BestEpochCheckpoint(eval_fn, monitor, ...)`: the task's own score after every epoch (added to the logs, so
  History and TensorBoard have it), the best epoch's weights kept and saved atomically, early stopping.
"""

import inspect
import math
import time

import keras

from keras_bert_impl.checkpoints.atomic_files import save_weights_atomically


class FiniteLossCheck(keras.callbacks.Callback):
    """Ends the run in one line when an epoch's training loss is not finite (nan, inf), before anything of that
    epoch is evaluated or saved: the checkpoints of the epochs before stay. (Keras's `TerminateOnNaN` would end
    `fit` quietly, and the run would then save the diverged weights as its result.) Read at the epoch's end, not
    every batch: no step waits for the host.

    Example:
    >>> check = FiniteLossCheck(learning_rate=1e3)
    >>> check.on_epoch_end(0, {"loss": float("nan")})
    Traceback (most recent call last):
    ...
    ValueError: the training loss of epoch 1 is nan: training diverged (learning_rate=1000), and nothing of this epoch is kept; train again with a lower learning rate, in a new model_dir (the same one resumes only with the same settings).
    """

    def __init__(self, learning_rate):
        super().__init__()
        self.learning_rate = learning_rate

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise ValueError(
                f"the training loss of epoch {epoch + 1} is {float(loss)}: training diverged "
                f"(learning_rate={self.learning_rate:g}), and nothing of this epoch is kept; train again with a "
                "lower learning rate, in a new model_dir (the same one resumes only with the same settings)."
            )


class EpochTimer(keras.callbacks.Callback):
    """Records the wall time of each training epoch (before evaluation callbacks run)."""

    def __init__(self):
        super().__init__()
        self.epoch_seconds = []
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._last_batch_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = getattr(self, "_last_batch_end", None) or time.perf_counter()
        self.epoch_seconds.append(end - self._start)


class BestEpochCheckpoint(keras.callbacks.Callback):
    """Runs `eval_fn` each epoch, keeps (and atomically saves) the best weights, stops early.

    Values returned by `eval_fn` are added to the epoch's `logs`, so later
    callbacks (TensorBoard, CSVLogger) and `History` record them; a training
    value of the same name (a compiled "accuracy" beside the dev "accuracy")
    is kept as `train_<name>`.

    Args:
        eval_fn: None or callable `eval_fn(model) -> dict[str, float]`.
        monitor: key of the logs that decides "best" (None: keep the last epoch).
        mode: `"auto"`, `"min"` or `"max"`.
        weights_path: None or a `*.weights.h5` path written atomically on improvement.
        early_stopping_patience: None or int epochs without improvement before stopping.

    Example:
    >>> cb = BestEpochCheckpoint(eval_fn=lambda m: {"f1": 0.5}, monitor="f1")
    >>> cb.monitor
    'f1'
    """

    def __init__(self, eval_fn=None, monitor=None, mode="auto", weights_path=None, early_stopping_patience=None):
        super().__init__()
        self.eval_fn = eval_fn
        self.monitor = monitor
        self.mode = mode
        self.weights_path = weights_path
        self.early_stopping_patience = early_stopping_patience
        self.best_value = None
        self.best_epoch = None
        self.best_metrics = {}
        self.best_weights = None
        self.stopped_early = False
        self.epochs_without_improvement = 0
        # With resumable checkpoints, `FinetuningCheckpoint` writes the weights file after the epoch's checkpoint.
        self.save_after_checkpoint = False
        self.unsaved = False
        if weights_path is not None and not str(weights_path).endswith(".weights.h5"):
            raise ValueError(f"`weights_path` must end in '.weights.h5', got {weights_path!r}.")

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        if self.eval_fn is not None:
            results = (self.eval_fn(self.model, epoch=epoch + 1) if "epoch" in inspect.signature(self.eval_fn).parameters
                       else self.eval_fn(self.model))
            if not isinstance(results, dict) or not results:
                raise ValueError(f"`eval_fn` must return a non-empty dict of metric values, got {results!r}.")
            for key, value in results.items():
                if key in logs:
                    # A training value of the same name (the compiled "accuracy" beside a dev "accuracy") stays,
                    # as train_<name>: the progress bar, History and TensorBoard no longer show dev for train.
                    logs[f"train_{key}"] = logs[key]
                logs[key] = float(value)
            if self.monitor is None:
                self.monitor = next(iter(results))
        if self.monitor is None:
            return
        if self.monitor not in logs:
            raise ValueError(
                f"monitor={self.monitor!r} is not among this epoch's values {sorted(logs)}: "
                f"choose one of them."
            )
        value = float(logs[self.monitor])
        mode = _resolve_mode(self.monitor, self.mode)
        improved = (
            self.best_value is None
            or (not math.isnan(value) and (value > self.best_value if mode == "max" else value < self.best_value))
        )
        if improved:
            self.best_value = value
            self.best_epoch = epoch + 1
            self.best_metrics = {k: float(v) for k, v in logs.items()}
            self.best_weights = self.model.get_weights()
            self.epochs_without_improvement = 0
            self.unsaved = True
            if not self.save_after_checkpoint:
                self.save_best_weights()
        else:
            self.epochs_without_improvement += 1
            if self.early_stopping_patience is not None and self.epochs_without_improvement >= self.early_stopping_patience:
                self.model.stop_training = True
                self.stopped_early = True

    def save_best_weights(self):
        """Writes the best epoch's weights (the model's, after an improvement) to `weights_path`, atomically."""
        if self.unsaved and self.weights_path is not None:
            save_weights_atomically(self.model, self.weights_path)
        self.unsaved = False


def _resolve_mode(monitor, mode):
    if mode != "auto":
        return mode
    return "min" if ("loss" in monitor or "error" in monitor) else "max"
