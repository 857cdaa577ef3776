"""Atomic, resumable training checkpoints: model, optimizer, step and input-pipeline position.

A checkpoint is a directory `<model_dir>/checkpoints/ckpt-<step>` holding

- `variables.npz`: every model variable (weights *and* dropout seed states)
  and every optimizer variable (iteration count, moments, loss scale), by
  index, so it is backend-agnostic;
- `iterator.*`: the tf.data iterator, written with `tf.train.Checkpoint`
  (exact input position), when the run owns a checkpointable iterator;
- `state.json`: step and metadata, written last.

It is written into a `.tmp-*` sibling first and renamed into place, so a
crash (SIGKILL, full disk) leaves at worst a temporary directory that
`latest()` ignores and the next save removes; the previous checkpoint is
untouched. Only the last `keep` checkpoints are kept.
"""

import json
import os
import re
import shutil
import uuid

import numpy as np

_NAME = re.compile(r"^ckpt-(\d+)$")


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (e.g. the disk is full); the previous one is intact."""


class CheckpointManager:
    """Writes and finds checkpoints under `directory`.

    Args:
        directory: folder for the `ckpt-<step>` directories (local path).
        keep: how many of the newest checkpoints to keep.

    Example:
    >>> import tempfile
    >>> manager = CheckpointManager(tempfile.mkdtemp(), keep=2)
    >>> manager.latest() is None
    True
    """

    def __init__(self, directory, keep=3):
        if keep < 1:
            raise ValueError(f"`keep` must be >= 1, got {keep!r}.")
        self.directory = directory
        self.keep = keep

    def all_steps(self):
        if not os.path.isdir(self.directory):
            return []
        steps = []
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if match and os.path.exists(os.path.join(self.directory, name, "state.json")):
                steps.append(int(match.group(1)))
        return sorted(steps)

    def latest(self):
        """Path of the newest complete checkpoint, or None."""
        steps = self.all_steps()
        return self.path(steps[-1]) if steps else None

    def path(self, step):
        return os.path.join(self.directory, f"ckpt-{step:09d}")

    def save(self, step, model, optimizer, iterator=None, state=None):
        """Writes checkpoint `step` atomically and prunes old ones; returns its path."""
        os.makedirs(self.directory, exist_ok=True)
        self._remove_temporaries()
        final = self.path(step)
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step:09d}-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        try:
            arrays = {}
            for i, v in enumerate(model.variables):
                arrays[f"model_{i:05d}"] = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
            for i, v in enumerate(optimizer.variables):
                arrays[f"optimizer_{i:05d}"] = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
            with open(os.path.join(tmp, "variables.npz"), "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            if iterator is not None:
                import tensorflow as tf

                tf.train.Checkpoint(iterator=iterator).write(os.path.join(tmp, "iterator"))
            payload = dict(state or {}, step=step,
                           num_model_variables=len(model.variables),
                           num_optimizer_variables=len(optimizer.variables),
                           has_iterator=iterator is not None)
            with open(os.path.join(tmp, "state.json"), "w") as f:
                json.dump(payload, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(final):
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_directory(self.directory)
        except OSError as error:
            shutil.rmtree(tmp, ignore_errors=True)
            previous = self.latest()
            raise CheckpointWriteError(
                error.errno,
                f"Could not write checkpoint {final} ({error.strerror or error}). "
                + (f"The previous checkpoint {previous} is intact and a restart resumes from it."
                   if previous else "No earlier checkpoint exists.")
                + " Free disk space (or point --model_dir elsewhere) and run the same command again.",
            ) from error
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for old in self.all_steps()[: -self.keep]:
            shutil.rmtree(self.path(old), ignore_errors=True)
        return final

    def restore(self, path, model, optimizer, iterator=None):
        """Loads checkpoint `path` into `model`, `optimizer` (built) and `iterator`; returns its state."""
        with open(os.path.join(path, "state.json")) as f:
            state = json.load(f)
        if state["num_model_variables"] != len(model.variables) or state[
            "num_optimizer_variables"
        ] != len(optimizer.variables):
            raise ValueError(
                f"Checkpoint {path} holds {state['num_model_variables']} model / "
                f"{state['num_optimizer_variables']} optimizer variables, but the model has "
                f"{len(model.variables)} / {len(optimizer.variables)}: it was written by a "
                "different model or optimizer configuration."
            )
        with np.load(os.path.join(path, "variables.npz")) as arrays:
            for i, v in enumerate(model.variables):
                _assign(v, arrays[f"model_{i:05d}"], path)
            for i, v in enumerate(optimizer.variables):
                _assign(v, arrays[f"optimizer_{i:05d}"], path)
        if iterator is not None and state.get("has_iterator"):
            import tensorflow as tf

            tf.train.Checkpoint(iterator=iterator).read(os.path.join(path, "iterator")).assert_consumed()
        return state

    def _remove_temporaries(self):
        for name in os.listdir(self.directory):
            if name.startswith(".tmp-ckpt-"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)


def _fsync_directory(path):
    """Makes a rename inside `path` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _assign(variable, value, path):
    if tuple(variable.shape) != tuple(value.shape):
        raise ValueError(
            f"Checkpoint {path}: variable {variable.path} has shape {tuple(variable.shape)} "
            f"but the checkpoint holds {tuple(value.shape)}."
        )
    variable.assign(value)
