"""Atomic, verified, resumable training checkpoints: model, optimizer, step and input position.

A checkpoint is a directory `<model_dir>/checkpoints/ckpt-<step>` holding

- `variables.npz`: every model variable (weights *and* dropout seed states)
  and every optimizer variable (iteration count, moments, loss scale), by
  index, with each variable's path in `state.json`: PyTorch lists a model's
  variables in another order than TensorFlow and JAX, so a checkpoint
  written on one backend is restored on another by path
  (`checkpoint_variable_order.restore_order`);
- `iterator.index`, `iterator.data-*`: the tf.data iterator, written with
  `tf.train.Checkpoint` (exact input position), when the run owns a
  checkpointable iterator;
- `state.json`: step and metadata;
- `manifest.json`: the name, size and sha256 of every other file, written
  *last* and atomically (temporary file, fsync, rename). A checkpoint of
  this format without a valid manifest is incomplete by definition.

It is written into a `.tmp-*` sibling first and renamed into place, so a
crash (SIGKILL, full disk) leaves at worst a temporary directory that
`latest()` ignores and the next save removes; the previous checkpoint is
untouched. A write that fails with an `OSError` (or TensorFlow's
`ResourceExhaustedError` & co. from the iterator write) raises
`CheckpointWriteError` naming the checkpoint. Only the last `keep`
checkpoints are kept.

Reading verifies: `latest()` returns the newest checkpoint whose files match
its manifest (sizes, then sha256) and parse (`state.json` as JSON, the zip of
`variables.npz`, the iterator's TensorFlow index). A corrupt newest checkpoint
is skipped with one line on stderr saying which file was wrong and how, and
the next older intact one is used; if none is intact, `CheckpointReadError`
names the directory and every checkpoint's problem. Checkpoints written
before manifests existed (no `manifest.json`, no `checkpoint_format` in
`state.json`) still load: they are verified by parsing every file in full.
"""

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import uuid
import zipfile

import numpy as np

from keras_bert_impl.checkpoints.atomic_files import atomic_write_bytes
from keras_bert_impl.training.checkpoint_variable_order import restore_order, variable_path

_NAME = re.compile(r"^ckpt-(\d+)$")
MANIFEST = "manifest.json"
STATE = "state.json"
VARIABLES = "variables.npz"
ITERATOR_PREFIX = "iterator"
# `state.json` of a checkpoint with a manifest says so; one without it is a legacy checkpoint.
FORMAT = 2
_STATE_KEYS = ("step", "num_model_variables", "num_optimizer_variables")


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (e.g. the disk is full); the previous one is intact.

    `errno` is the cause's; the message is the one line alone (no `[Errno 28]` in front of it)."""

    def __str__(self):
        return self.strerror or super().__str__()


class CheckpointReadError(ValueError):
    """No intact checkpoint could be read; the message names each checkpoint and what is wrong."""


def _stderr(line):
    print(line, file=sys.stderr, flush=True)


class CheckpointManager:
    """Writes, verifies and finds checkpoints under `directory`.

    Args:
        directory: folder for the `ckpt-<step>` directories (local path).
        keep: how many of the newest checkpoints to keep.
        log: called with one line for every corrupt checkpoint skipped
            (default: print to stderr).

    Example:
    >>> import tempfile
    >>> manager = CheckpointManager(tempfile.mkdtemp(), keep=2)
    >>> manager.latest() is None
    True
    """

    def __init__(self, directory, keep=3, log=None):
        if keep < 1:
            raise ValueError(f"`keep` must be >= 1, got {keep!r}.")
        self.directory = directory
        self.keep = keep
        self.log = log or _stderr
        self._verified = {}  # path -> (file signature, problems)
        self._reported = set()

    def all_steps(self):
        """Steps of every `ckpt-<step>` directory holding a checkpoint file, intact or not.

        An empty directory (nothing `save` could have left) is ignored.
        """
        if not os.path.isdir(self.directory):
            return []
        steps = []
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if match and any(os.path.exists(os.path.join(self.directory, name, marker))
                             for marker in (MANIFEST, STATE, VARIABLES)):
                steps.append(int(match.group(1)))
        return sorted(steps)

    def latest(self):
        """Path of the newest intact checkpoint, or None when there is no checkpoint.

        Corrupt newer checkpoints are skipped, each reported once through `log`.
        Raises `CheckpointReadError` when checkpoints exist but none is intact.
        """
        path, skipped = self._newest_intact()
        if path is None and skipped:
            raise CheckpointReadError(
                f"No intact checkpoint in {self.directory}: "
                + "; ".join(f"{os.path.basename(p)}: {', '.join(problems)}" for p, problems in skipped)
                + f". Restore them from a backup, or move {self.directory} away to start from scratch."
            )
        return path

    def path(self, step):
        return os.path.join(self.directory, f"ckpt-{step:09d}")

    def verify(self, path):
        """The problems of checkpoint `path` as `"<file>: <what is wrong>"` strings; empty when intact."""
        signature = _signature(path)
        cached = self._verified.get(path)
        if cached is not None and cached[0] == signature:
            return list(cached[1])
        try:
            problems = _verify(path)
        except OSError as error:  # the directory changed or vanished while being read
            problems = [f"{os.path.basename(path)}: unreadable ({_describe(error)})"]
        self._verified[path] = (signature, tuple(problems))
        return problems

    def save(self, step, model, optimizer, iterator=None, state=None):
        """Writes checkpoint `step` atomically and prunes old ones; returns its path."""
        final = self.path(step)
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step:09d}-{uuid.uuid4().hex[:8]}")
        needed = None  # the variables' bytes: about the size of the checkpoint
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._remove_temporaries()
            os.makedirs(tmp)
            arrays = {}
            for i, v in enumerate(model.variables):
                arrays[f"model_{i:05d}"] = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
            for i, v in enumerate(optimizer.variables):
                arrays[f"optimizer_{i:05d}"] = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
            needed = sum(array.nbytes for array in arrays.values())
            with open(os.path.join(tmp, VARIABLES), "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            if iterator is not None:
                _write_iterator(iterator, os.path.join(tmp, ITERATOR_PREFIX))
            payload = dict(state or {}, step=step,
                           num_model_variables=len(model.variables),
                           num_optimizer_variables=len(optimizer.variables),
                           backend=_backend(),
                           model_variable_paths=[variable_path(v) for v in model.variables],
                           optimizer_variable_paths=[variable_path(v) for v in optimizer.variables],
                           has_iterator=iterator is not None,
                           checkpoint_format=FORMAT)
            with open(os.path.join(tmp, STATE), "w") as f:
                json.dump(payload, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            _write_manifest(tmp)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.rename(tmp, final)
            _fsync_directory(self.directory)
        except OSError as error:
            shutil.rmtree(tmp, ignore_errors=True)
            previous, _ = self._newest_intact(report=False)
            if previous:  # its files, the iterator's state too (5 MB more than the variables for BERT-tiny)
                needed = max(needed or 0, _directory_bytes(previous))
            where = (f" while writing {os.path.basename(os.fspath(error.filename))}"
                     if isinstance(getattr(error, "filename", None), (str, bytes, os.PathLike)) else "")
            raise CheckpointWriteError(
                error.errno,
                f"Could not write checkpoint {final}{where} ({error.strerror or error}). "
                + (f"The previous checkpoint {previous} is intact and a restart resumes from it."
                   if previous else "No earlier intact checkpoint exists.")
                + (_space_needed(self.directory, needed, previous) if error.errno in _DISK_FULL else "")
                + _what_to_do(error.errno, self.directory),
            ) from error
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        # Prune among the checkpoints up to this one: a newer one can only be left over from a corrupt
        # checkpoint skipped on resume, and must not push the one just written out.
        older = [s for s in self.all_steps() if s <= step]
        for old in older[: -self.keep]:
            self.remove(self.path(old))
        return final

    def remove(self, path):
        """Removes checkpoint `path` so that a kill at any moment leaves it whole or gone: it is renamed to a
        `.tmp-ckpt-*` name first (which `latest` ignores and the next save removes), then deleted. (Deleted in
        place, a checkpoint killed half-way was a manifest without its files: a finished fine-tuning run killed
        while it removed its checkpoints then refused every rerun with 'No intact checkpoint'.)"""
        doomed = os.path.join(self.directory, f".tmp-ckpt-removed-{os.path.basename(path)}-{uuid.uuid4().hex[:8]}")
        try:
            os.rename(path, doomed)
        except OSError:
            doomed = path  # gone already, or not renamable: deleted where it is
        shutil.rmtree(doomed, ignore_errors=True)

    def restore(self, path, model, optimizer, iterator=None):
        """Loads checkpoint `path` into `model`, `optimizer` (built) and `iterator`; returns its state.

        The checkpoint is verified first (see `verify`); a problem raises `CheckpointReadError`.
        """
        problems = self.verify(path)
        if problems:
            raise CheckpointReadError(f"Checkpoint {path} is not intact: {'; '.join(problems)}.")
        with open(os.path.join(path, STATE)) as f:
            state = json.load(f)
        if state["num_model_variables"] != len(model.variables) or state[
            "num_optimizer_variables"
        ] != len(optimizer.variables):
            written_by = ("a fine-tuning run (its model_dir is not a pretraining run's)" if "finetune" in state
                          else "a different model or optimizer configuration")
            raise ValueError(
                f"Checkpoint {path} holds {state['num_model_variables']} model / "
                f"{state['num_optimizer_variables']} optimizer variables, but the model has "
                f"{len(model.variables)} / {len(optimizer.variables)}: it was written by {written_by}. "
                f"{_START_AGAIN.format(directory=os.path.dirname(path))}"
            )
        variables_file = os.path.join(path, VARIABLES)
        model_order = restore_order(state.get("model_variable_paths"), model.variables)
        optimizer_order = restore_order(state.get("optimizer_variable_paths"), optimizer.variables)
        written_on = state.get("backend")
        try:
            with np.load(variables_file) as arrays:
                for v, i in zip(model.variables, model_order):
                    _assign(v, arrays[f"model_{i:05d}"], path, written_on)
                for v, i in zip(optimizer.variables, optimizer_order):
                    _assign(v, arrays[f"optimizer_{i:05d}"], path, written_on)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            if isinstance(error, ValueError) and str(error).startswith(f"Checkpoint {path}: variable"):
                raise
            raise CheckpointReadError(
                f"Checkpoint {path}: cannot read {variables_file} ({_describe(error)})."
            ) from error
        if iterator is not None and state.get("has_iterator"):
            import tensorflow as tf

            prefix = os.path.join(path, ITERATOR_PREFIX)
            try:
                tf.train.Checkpoint(iterator=iterator).read(prefix).assert_consumed()
            except (tf.errors.OpError, AssertionError, ValueError) as error:
                raise CheckpointReadError(
                    f"Checkpoint {path}: cannot restore the input iterator from {prefix}.* "
                    f"({_describe(error)})."
                ) from error
        return state

    def _newest_intact(self, report=True):
        """(newest intact path or None, [(path, problems) of the newer corrupt ones]).

        The corrupt ones are reported (`log`, once each) only when an older intact checkpoint is used: when none is
        intact, `latest`'s one `CheckpointReadError` names them all (it used to follow a line for each).
        """
        skipped = []
        for step in reversed(self.all_steps()):
            path = self.path(step)
            problems = self.verify(path)
            if not problems:
                for corrupt, its_problems in skipped if report else ():
                    key = (corrupt, tuple(its_problems))
                    if key not in self._reported:
                        self._reported.add(key)
                        self.log(f"Skipping checkpoint {corrupt}: {'; '.join(its_problems)}. "
                                 "Falling back to the next older checkpoint.")
                return path, skipped
            skipped.append((path, problems))
        return None, skipped

    def _remove_temporaries(self):
        for name in os.listdir(self.directory):
            if name.startswith(".tmp-ckpt-"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)


# --- writing -------------------------------------------------------------------------------------

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _what_to_do(number, directory):
    """The last sentence of a `CheckpointWriteError`, by the cause's errno."""
    if number in _DISK_FULL:
        return " Free disk space (or point --model_dir elsewhere) and run the same command again."
    if number in _NOT_WRITABLE:
        return f" Make {directory} writable (or point --model_dir elsewhere) and run the same command again."
    return " Remove the cause (or point --model_dir elsewhere) and run the same command again."


def _directory_bytes(directory):
    """The bytes of the files in `directory` (a checkpoint's), 0 where it cannot be read."""
    try:
        return sum(entry.stat().st_size for entry in os.scandir(directory) if entry.is_file())
    except OSError:
        return 0


def _free_bytes(directory):
    """The bytes free to this user in `directory`'s filesystem, or None where that cannot be known."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def _space_needed(directory, needed, previous):
    """The sentence of a full disk's `CheckpointWriteError`: how much the new checkpoint needs, beside the previous
    one (kept until the new one is complete: a checkpoint is never lost nor half-written), and what is free.

    >>> print(_space_needed("/nonexistent/m/checkpoints", 2_000_000, "/nonexistent/m/checkpoints/ckpt-000000004"))
    ... # doctest: +NORMALIZE_WHITESPACE
     The new checkpoint needs about 2,000,000 bytes beside the previous one, which is kept until the new one is
     complete.
    """
    free = _free_bytes(directory)
    size = f"about {needed:,} bytes" if needed is not None else "room"
    beside = " beside the previous one, which is kept until the new one is complete" if previous else ""
    where = f"; {free:,} bytes are free in {directory}." if free is not None else "."
    return f" The new checkpoint needs {size}{beside}{where}"


def _write_iterator(iterator, prefix):
    """`tf.train.Checkpoint(iterator=...).write(prefix)`, TensorFlow's I/O errors raised as `OSError`."""
    import tensorflow as tf

    try:
        tf.train.Checkpoint(iterator=iterator).write(prefix)
    except (tf.errors.FailedPreconditionError, tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
        raise  # the pipeline cannot be saved (a bug or an unsupported dataset), not an I/O failure
    except tf.errors.OpError as error:
        code = {tf.errors.ResourceExhaustedError: errno.ENOSPC,
                tf.errors.PermissionDeniedError: errno.EACCES,
                tf.errors.NotFoundError: errno.ENOENT}.get(type(error), errno.EIO)
        raise OSError(code, f"{os.strerror(code)}; TensorFlow {_describe(error)}", prefix + ".*") from error


def _write_manifest(directory):
    """Writes `manifest.json` (name, size, sha256 of every file) last and atomically; fsyncs each file."""
    files = {}
    for name in sorted(os.listdir(directory)):
        full = os.path.join(directory, name)
        if name == MANIFEST or not os.path.isfile(full):
            continue
        digest, size = _hash_file(full, fsync=True)
        files[name] = {"size": size, "sha256": digest}
    manifest = {"format": FORMAT, "files": files}
    atomic_write_bytes(os.path.join(directory, MANIFEST), (json.dumps(manifest, indent=2) + "\n").encode())
    _fsync_directory(directory)


def _hash_file(path, fsync=False):
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                break
            digest.update(block)
            size += len(block)
        if fsync:
            os.fsync(f.fileno())
    return digest.hexdigest(), size


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


# --- verifying -----------------------------------------------------------------------------------


def _signature(path):
    """What `verify` results are cached against: each file's name, inode, size and times."""
    try:
        entries = []
        for name in sorted(os.listdir(path)):
            st = os.stat(os.path.join(path, name))
            entries.append((name, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        return tuple(entries)
    except OSError:
        return None


def _verify(path):
    """The problems of checkpoint directory `path` (see `CheckpointManager.verify`)."""
    manifest_path = os.path.join(path, MANIFEST)
    manifest = None
    if os.path.exists(manifest_path):
        try:
            with open(manifest_path, "rb") as f:
                manifest = json.loads(f.read().decode("utf-8"))
            files = manifest["files"]
            if not isinstance(files, dict) or not all(
                isinstance(e, dict) and isinstance(e.get("size"), int) and isinstance(e.get("sha256"), str)
                for e in files.values()
            ):
                raise ValueError("'files' is not a table of {size, sha256}")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
            return [f"{MANIFEST}: bad JSON ({_describe(error)})"]
        except OSError as error:
            return [f"{MANIFEST}: unreadable ({_describe(error)})"]

    problems = []
    if manifest is not None:
        for name, entry in sorted(manifest["files"].items()):
            full = os.path.join(path, name)
            if not os.path.exists(full):
                problems.append(f"{name}: missing")
                continue
            size = os.path.getsize(full)
            if size != entry["size"]:
                problems.append(f"{name}: size {size} bytes, the manifest says {entry['size']} "
                                "(truncated or overwritten)")
                continue
            try:
                digest, _ = _hash_file(full)
            except OSError as error:
                problems.append(f"{name}: unreadable ({_describe(error)})")
                continue
            if digest != entry["sha256"]:
                problems.append(f"{name}: checksum mismatch (sha256 {digest[:12]}..., the manifest says "
                                f"{entry['sha256'][:12]}...)")
        for name in (STATE, VARIABLES):
            if name not in manifest["files"]:
                problems.append(f"{MANIFEST}: does not list {name}")
        if problems:
            return problems

    state, state_problem = _read_state(path, legacy=manifest is None)
    if state_problem:
        return [state_problem]
    legacy = manifest is None
    problems += _check_variables(path, state, full_read=legacy)
    if state.get("has_iterator"):
        problems += _check_iterator(path, full_read=legacy)
    return problems


def _read_state(path, legacy):
    full = os.path.join(path, STATE)
    if not os.path.exists(full):
        return None, f"{STATE}: missing"
    try:
        with open(full, "rb") as f:
            state = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        return None, f"{STATE}: bad JSON ({_describe(error)})"
    except OSError as error:
        return None, f"{STATE}: unreadable ({_describe(error)})"
    if not isinstance(state, dict):
        return None, f"{STATE}: bad JSON (not an object)"
    lacking = [key for key in _STATE_KEYS if not isinstance(state.get(key), int)]
    if lacking:
        return None, f"{STATE}: bad JSON (no integer {', '.join(lacking)})"
    if legacy and state.get("checkpoint_format", 1) >= FORMAT:
        return None, f"{MANIFEST}: missing (state.json says the checkpoint was written with one)"
    return state, None


def _check_variables(path, state, full_read):
    """Opens `variables.npz` as a zip, checks every expected array is there; reads them all if `full_read`."""
    full = os.path.join(path, VARIABLES)
    if not os.path.exists(full):
        return [f"{VARIABLES}: missing"]
    expected = [f"model_{i:05d}" for i in range(state["num_model_variables"])] + [
        f"optimizer_{i:05d}" for i in range(state["num_optimizer_variables"])]
    try:
        if full_read:
            # numpy reads each member only as far as its array, so the zip's CRC-32 is checked here.
            with zipfile.ZipFile(full) as archive:
                bad = archive.testzip()
            if bad is not None:
                return [f"{VARIABLES}: unreadable zip (bad CRC-32 for {bad})"]
        with np.load(full) as arrays:
            present = set(arrays.files)
            absent = [key for key in expected if key not in present]
            if absent:
                return [f"{VARIABLES}: lacks {len(absent)} of {len(expected)} arrays ({absent[0]}, ...)"]
            if full_read:
                for key in expected:
                    arrays[key]  # noqa: B018 -- parses the array's header and reads its data
    except zipfile.BadZipFile as error:
        return [f"{VARIABLES}: unreadable zip ({_describe(error)})"]
    except (OSError, ValueError, EOFError, KeyError) as error:
        return [f"{VARIABLES}: unreadable ({_describe(error)})"]
    return []


def _check_iterator(path, full_read):
    """Parses the iterator's TensorFlow checkpoint index; reads every tensor too if `full_read`."""
    index = os.path.join(path, ITERATOR_PREFIX + ".index")
    if not os.path.exists(index):
        return [f"{ITERATOR_PREFIX}.index: missing"]
    if not any(name.startswith(ITERATOR_PREFIX + ".data-") for name in os.listdir(path)):
        return [f"{ITERATOR_PREFIX}.data-*: missing"]
    import tensorflow as tf

    try:
        prefix = os.path.join(path, ITERATOR_PREFIX)
        dtypes = tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()
        if full_read and dtypes:
            # RestoreV2 (not `reader.get_tensor`, which cannot return the iterator's variant state)
            # reads every entry, checking its CRC-32C and parsing it.
            names = sorted(dtypes)
            tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                                 dtypes=[dtypes[name] for name in names])
    except (tf.errors.OpError, ValueError, RuntimeError) as error:
        return [f"{ITERATOR_PREFIX}.index/.data: unreadable TensorFlow checkpoint ({_describe(error)})"]
    return []


def _describe(error):
    """`Type: first line of the message`, at most 200 characters."""
    text = getattr(error, "message", None) or str(error) or repr(error)
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text.strip())  # TensorFlow's op prefix
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"\s*\[Op:\w+\]$", "", first)
    if len(first) > 200:
        first = first[:197] + "..."
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# What to do with a checkpoint of another model (said after what differs).
_START_AGAIN = ("Run the command that wrote it to resume that run, or remove {directory} (or use another model_dir) "
                "to start this one.")


def _backend():
    import keras

    return keras.backend.backend()


def _assign(variable, value, path, written_on=None):
    if tuple(variable.shape) != tuple(value.shape):
        here = _backend()
        cause = (f"written on the {written_on} backend, whose variables this one ({here}) cannot match by name: "
                 f"resume it with KERAS_BACKEND={written_on}" if written_on and written_on != here
                 else "another model: e.g. another number of classes")
        raise ValueError(
            f"Checkpoint {path}: variable {variable.path} has shape {tuple(variable.shape)} "
            f"but the checkpoint holds {tuple(value.shape)} ({cause}). "
            f"{_START_AGAIN.format(directory=os.path.dirname(path))}"
        )
    variable.assign(value)
