"""An interrupted fine-tuning run resumes at its last finished epoch: `finetune(..., model_dir=...)` run again.

After every epoch (its evaluation included) `FinetuningCheckpoint` writes
`<model_dir>/checkpoints/ckpt-<epoch>` with the atomic, verified
`run_checkpoints.CheckpointManager` that pretraining uses: every model and
optimizer variable (weights, dropout seed states, AdamW moments, the step
count that drives the learning-rate schedule) and, in `state.json`, the
history so far, the best epoch's value and metrics, and the run's settings
(`finetuning_run_settings`), and on PyTorch every process's global random generators
(Keras's unseeded dropout draws from them there: `torch_random_state`). Only
the newest is kept, and a finished run removes them (its outputs are
`best.weights.h5` and the task's files). The best epoch's weights file is
written after the epoch's checkpoint, so it is never newer than the
checkpoint a run resumes from; a run stopped between the two resumes from a
checkpoint of the best epoch itself, whose weights it takes.

`resume_from_latest(...)` finds the newest intact checkpoint, refuses one written by a
run with other settings (one line naming every setting that differs, its two values, and the
folder to remove), and restores it; `finetune` then trains the remaining
epochs. A `tf.data` input continues exactly where the interrupted run was:
`finetune` feeds it as one repeated stream, and the resumed run skips the
finished epochs' batches of it, so epoch k sees the batches and shuffle order
it would have seen, and the resumed run ends with the uninterrupted run's
weights. (Other inputs, e.g. a `PyDataset`, resume at the right epoch, with
the order their own shuffling gives.)

Example:
>>> finetuning_run_settings(epochs=3, steps_per_epoch=10, learning_rate=2e-5, warmup_proportion=0.1, weight_decay=0.01,
...              clipnorm=1.0, optimizer="adamw", monitor="accuracy")["steps_per_epoch"]
10
"""

import hashlib
import json
import os
import shlex
import shutil
import sys

import keras

from keras_bert_impl.checkpoints.atomic_files import load_weights_without_optimizer, save_weights_atomically
from keras_bert_impl.training.run_checkpoints import CheckpointManager
from keras_bert_impl.training.starting_point_identity import changed_in_place, moved_line, same_bytes, same_path
from keras_bert_impl.training.torch_random_state import checkpoint_entry

CHECKPOINTS = "checkpoints"


def data_digest(*parts):
    """A short sha256 of a run's training examples (their `repr`): `finetune(..., run_identity=...)` refuses to
    resume a checkpoint of a run that trained on other data.

    Example:
    >>> data_digest(["a great film"], [1]) == data_digest(["a great film"], [1]) != data_digest(["a dull film"], [1])
    True
    """
    digest = hashlib.sha256()
    for part in parts:
        part = part.tolist() if hasattr(part, "tolist") else part  # (NumPy's repr elides long arrays)
        digest.update(repr(part).encode("utf-8", "backslashreplace"))
    return digest.hexdigest()[:16]


# Settings that checkpoints record since a later version than their first: one without them resumes unchecked.
LATER_SETTINGS = ("dtype_policy", "starting_point_sha256")


def finetuning_run_settings(**settings):
    """What a checkpoint must share with the run that resumes it (the step count, the schedule, the optimizer)."""
    return {key: value if isinstance(value, (int, float, str, type(None))) else repr(value)
            for key, value in settings.items()}


def checkpoint_manager(model_dir):
    """The `CheckpointManager` of `model_dir/checkpoints`, keeping the newest checkpoint only."""
    return CheckpointManager(os.path.join(model_dir, CHECKPOINTS), keep=1)


class FinetuningCheckpoint(keras.callbacks.Callback):
    """Writes a resumable checkpoint after every epoch (after the callbacks before it, e.g. the evaluation).

    Args:
        manager: a `CheckpointManager` (`checkpoint_manager(model_dir)`).
        settings: `finetuning_run_settings(...)` of this run.
        tracker: the run's `BestEpochCheckpoint`, whose best epoch is saved too.
        timer: the run's `EpochTimer`.
        history: the epochs before this run's first (a resumed run's), `{name: [value, ...]}`.
        writes: False on the processes > 0 of a job of several (they run the same code, process 0 writes).
    """

    def __init__(self, manager, settings, tracker, timer, history=None, writes=True):
        super().__init__()
        self.writes = writes  # in a job of several processes, process 0 alone writes the checkpoints
        self.manager = manager
        self.settings = settings
        self.tracker = tracker
        self.timer = timer
        self.history = {key: list(values) for key, values in (history or {}).items()}

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        state = {
            "finetune": self.settings,
            "history": self.history,
            "epoch_seconds": list(self.timer.epoch_seconds),
            "best": {"value": self.tracker.best_value, "epoch": self.tracker.best_epoch,
                     "metrics": self.tracker.best_metrics, "monitor": self.tracker.monitor,
                     "epochs_without_improvement": self.tracker.epochs_without_improvement,
                     "stopped_early": self.tracker.stopped_early},
        }
        state.update(checkpoint_entry())  # PyTorch: every process's generators (gathered: call on all)
        if self.writes:
            self.manager.save(epoch + 1, self.model, self.model.optimizer, state=state)
        # Then the best weights file: a run killed in between resumes from a checkpoint whose epoch is the best one
        # and holds its weights (`resume_from_latest`); never from one older than the file.
        self.tracker.save_best_weights()


def epochs_done_in(manager):
    """The epochs the newest intact checkpoint of `manager` holds (0 without one): what a resumed run skips."""
    path = manager.latest()
    return 0 if path is None else int(_read_state(path)["step"])


def resume_from_latest(manager, model, settings, tracker, timer, best_weights_file=None):
    """Restores the newest intact checkpoint of `manager` into `model` (compiled), `tracker` and `timer`.

    `best_weights_file` is the run's best weights (default `tracker.weights_path`): in a job of several
    processes, process 0's file in the shared model_dir, which every process reads.

    Returns:
        `(epochs_done, history, saved)`: 0, {} and None when there is none (whether early stopping ended it
        is `tracker.stopped_early`); `saved` is the checkpoint's state, whose PyTorch generators the run
        restores at its first batch (`torch_random_state.restoring_at_first_batch`).

    Raises:
        ValueError: the checkpoint was written by a run with other `settings` (one line).
    """
    path = manager.latest()
    if path is None:
        return 0, {}, None
    state = _read_state(path)
    if "finetune" not in state:
        raise ValueError(f"{path} is not a fine-tuning checkpoint (a pretraining run's?): fine-tune into another "
                         "model_dir")
    saved = state["finetune"]
    model_dir = os.path.dirname(manager.directory)
    starting = settings.get("starting_point")
    moved = same_bytes(saved.get("starting_point_sha256"), settings.get("starting_point_sha256"))
    differences = []  # every one, in one line (was the first alone: a rerun per difference, ~20 s each)
    for key, value in settings.items():
        if key not in saved and key in LATER_SETTINGS:  # a checkpoint of an earlier version, which did not record it
            continue
        if key == "starting_point_sha256":  # compared with the path: its files changed in place, or moved
            if saved.get(key) != value and same_path(saved.get("starting_point"), starting):
                print(changed_in_place("starting point", starting, model_dir), file=sys.stderr)
            continue
        if key == "starting_point" and saved.get(key) != value and moved and not same_path(saved.get(key), value):
            print(moved_line("starting point", saved.get(key), value), file=sys.stderr)
            continue
        if saved.get(key) != value and not same_path(saved.get(key), value):
            differences.append(f"{key}={saved.get(key)!r}, and this run has {key}={value!r}"
                               f"{_SETTING_HINTS.get(key, '')}")
    if differences:
        raise ValueError(
            f"{path} was written by a fine-tuning run with " + "; with ".join(differences) + ": run the same "
            f"command as before to resume it, or remove {os.path.dirname(path)} (or pass another model_dir) to "
            "start again"
        )
    model.optimizer.build(model.trainable_variables)
    best = state["best"]
    best_is_last = best["epoch"] == state["step"]  # the checkpoint holds the best weights themselves
    best_weights_file = best_weights_file or tracker.weights_path
    best_is_lost = False
    if best["epoch"] is not None and not best_is_last and best_weights_file:
        # First, so that the checkpoint's restore comes last (an older run's file holds its optimizer's state too).
        best_is_lost = not _read_best_weights(model, best_weights_file, best, state["step"])
        tracker.best_weights = None if best_is_lost else model.get_weights()
    state = manager.restore(path, model, model.optimizer)
    tracker.best_value, tracker.best_epoch, tracker.best_metrics = best["value"], best["epoch"], best["metrics"]
    if best_is_lost:  # the best of the epochs whose weights are here: from the checkpoint's on
        tracker.best_epoch = state["step"]
        tracker.best_metrics = {key: values[-1] for key, values in state["history"].items() if values}
        tracker.best_value = tracker.best_metrics.get(best["monitor"], best["value"])
        best = dict(best, epochs_without_improvement=0)
    if best_is_last or best_is_lost:  # (its weights file may not have been written before the run stopped)
        tracker.best_weights = model.get_weights()
        if tracker.weights_path:
            save_weights_atomically(model, tracker.weights_path)
    tracker.monitor = best["monitor"] if tracker.monitor is None else tracker.monitor
    tracker.epochs_without_improvement = best["epochs_without_improvement"]
    tracker.stopped_early = bool(best["stopped_early"])
    timer.epoch_seconds = list(state["epoch_seconds"])
    print(f"Resuming from {path}: {state['step']} epoch(s) done", file=sys.stderr)
    return state["step"], state["history"], state


def _read_best_weights(model, path, best, epochs_done):
    """Loads the best epoch's weights file into `model`; False where it is gone (removed: the run warns, and keeps
    the best of the epochs from its checkpoint's on). One that cannot be read is one line: before, h5py's "Unable
    to synchronously open file (truncated file: ...)", naming no file; a removed one ended the run with the best
    epoch's scores but the last epoch's weights."""
    what = f"the weights of epoch {best['epoch']}, the best so far ({best['monitor']} {best['value']:.4g})"
    if not os.path.exists(path):
        print(f"warning: {path} is gone; it held {what}: this run keeps the best of epochs {epochs_done} to the "
              "last", file=sys.stderr)
        return False
    try:
        load_weights_without_optimizer(model, path)
    except Exception as error:  # (h5py's OSError, Keras's ValueError of a file of another model)
        raise ValueError(f"{path} cannot be read ({' '.join(str(error).split())}): it holds {what}; put it back "
                         f"from a copy, or remove it (rm {shlex.quote(path)}) and run the same command again, which "
                         f"then keeps the best of epochs {epochs_done} to the last") from None
    return True


# How many runs of this process have written their outputs and gone on to remove their checkpoints
# (`FinetuneResult.remove_checkpoints`): a Ctrl-C from then on interrupts no work, which recipes/command_line.py
# says (was "Interrupted before the first checkpoint ...: rerun the same command to start again", and the rerun
# trained anew).
finished = {"outputs_written": 0}

# Nobody passes steps_per_epoch: the batch size and the number of training examples make it (was only
# "steps_per_epoch=4, and this run has steps_per_epoch=8" for a rerun with another --batch_size).
# What a setting of a checkpoint is, in the recipes' flags, where its name does not say.
_SETTING_HINTS = {
    "steps_per_epoch": " (the batches of an epoch: the batch size, --batch_size, or the number of training examples "
                       "changed)",
    "dtype_policy": " (the precision the model computes in: --mixed_precision)",
    "train_data": " (a digest of the training examples: the training file, its labels, or --max_train_samples "
                  "changed)",
}


def remove_checkpoints(manager):
    """A finished run's checkpoints are removed: its outputs are the best weights and the task's files. Each is
    renamed aside before it is deleted (`CheckpointManager.remove`): a kill meanwhile leaves no half-deleted
    checkpoint that a rerun would refuse."""
    if os.path.isdir(manager.directory):
        for step in manager.all_steps():
            manager.remove(manager.path(step))
    shutil.rmtree(manager.directory, ignore_errors=True)


def _read_state(path):
    with open(os.path.join(path, "state.json")) as f:
        return json.load(f)
