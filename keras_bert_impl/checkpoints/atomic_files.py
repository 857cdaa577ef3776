"""Atomic file and directory writes: readers never see a half-written file or preset.

Each temporary name holds the writer's host and process id (`.model.keras.<host>-<pid>.<random>.tmp`; for
`atomic_save`, whose writers check the suffix, `.<host>-<pid>.model.keras`). A process killed mid-write (SIGKILL,
a lost VM) leaves its temporary file or directory behind; the next write of the same target on the same host
removes those whose process is gone (`_remove_stale_temporaries`). Before, a `kill -9` during an export or a
`model.keras` save left them for good (hundreds of MB for BERT-base).
"""

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import sys
import tempfile


def _umask():
    """The process's umask, read without changing it where Linux shows it (`os.umask` sets it to read it, which a
    thread creating a file at that moment would feel)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _usual_mode(directory=False):
    """The mode `open` (0o666) or `os.makedirs` (0o777) would give under the umask: `tempfile` makes its files 0o600
    and its directories 0o700, which a rename would keep (a preset or result file unreadable to the group)."""
    return (0o777 if directory else 0o666) & ~_umask()


def _host():
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def _temporary_prefix(basename):
    """The prefix of this process's temporary names for `basename`: `.<basename>.<host>-<pid>.`"""
    return f".{basename}.{_host()}-{os.getpid()}."


def _process_is_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # (another user's live process, or no way to tell: keep its files)
        return False
    return False


def _remove_stale_temporaries(directory, basename):
    """Removes the temporary files and directories for `basename` in `directory` that a process of this host left
    when it was killed mid-write (its pid no longer runs). Those of live processes, and of other hosts (a shared
    file system), are kept."""
    host = re.escape(_host())
    name = re.escape(basename)
    patterns = (re.compile(rf"^\.{name}\.{host}-(\d+)\..+\.(?:tmp|old)$"),  # atomic_write_bytes, atomic_directory
                re.compile(rf"^\.{host}-(\d+)\.{name}$"),  # atomic_save
                re.compile(rf"^\.(\d+)\.{name}$"))  # atomic_save before 2026-12-01: the pid alone
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        for pattern in patterns:
            match = pattern.match(entry)
            if match and int(match.group(1)) != os.getpid() and _process_is_gone(int(match.group(1))):
                stale = os.path.join(directory, entry)
                with contextlib.suppress(OSError):
                    if os.path.isdir(stale) and not os.path.islink(stale):
                        shutil.rmtree(stale)
                    else:
                        os.remove(stale)
                break


def atomic_write_bytes(path, data):
    """Writes `data` to `path` via a temporary file in the same directory and `os.replace`.

    Args:
        path: destination file path.
        data: bytes to write.

    Example:
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> atomic_write_bytes(os.path.join(d, "a.bin"), b"abc")
    >>> open(os.path.join(d, "a.bin"), "rb").read()
    b'abc'
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temporaries(directory, os.path.basename(path))
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix=_temporary_prefix(os.path.basename(path)), suffix=".tmp")
    try:
        os.chmod(temp_path, _usual_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp_path, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp_path)
        raise


def atomic_save(path, save):
    """Calls `save(temp_path)` on a temporary path beside `path`, then moves it onto `path` (`os.replace`).

    For writers that take a file name, such as `model.save_weights` or
    `model.save`: the temporary name ends with `path`'s own base name, so
    suffix checks (`.weights.h5`, `.keras`) still pass. On any error the
    temporary file is removed and `path` is left untouched.

    Example:
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> atomic_save(p, lambda temp: open(temp, "w").write("abc"))
    >>> open(p).read()
    'abc'
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    _remove_stale_temporaries(directory, os.path.basename(path))
    temp_path = os.path.join(directory, f".{_host()}-{os.getpid()}.{os.path.basename(path)}")
    try:
        save(temp_path)
        os.replace(temp_path, path)
    except PermissionError as error:  # (was "[Errno 13] Permission denied: '.../.host-1581.model.keras'", the
        # temporary file's name, without what to do)
        raise OutputWriteError(error.errno, f"{path} cannot be written: {directory} is not writable (permission "
                               "denied): make it writable (or choose another output folder) and run the same command "
                               "again; a training run resumes from its last checkpoint", path) from None
    finally:
        if os.path.exists(temp_path):
            os.remove(temp_path)


class OutputWriteError(OSError):
    """A file was not written: its disk has less room than it needs (`check_room`), or its folder may not be
    written; the message (what to do included) alone, no `[Errno 28]` in front of it."""

    def __str__(self):
        return self.strerror or super().__str__()


_BYTES = {"float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "uint64": 8, "int8": 1, "uint8": 1, "bool": 1,
          "int16": 2, "uint16": 2}


def variables_bytes(variables):
    """The bytes of `variables`' values (what a weights file holds, give or take its headers)."""
    total = 0
    for variable in variables:
        count = 1
        for size in variable.shape:
            count *= int(size)
        total += count * _BYTES.get(str(getattr(variable, "dtype", "float32")), 4)
    return total


def check_room(path, needed, what):
    """Refuses, before any byte is written, to write `what` (about `needed` bytes) to `path` where its disk has less
    room free: HDF5, writing onto a full disk, failed half-way and then crashed the process (a segmentation fault,
    exit status 139) as its objects were freed, on the rerun too.

    Example:
    >>> check_room("/tmp/best.weights.h5", 10**18, "the best epoch's weights")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.checkpoints.atomic_files.OutputWriteError: /tmp/best.weights.h5: writing the best epoch's ...
    """
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    try:
        free = shutil.disk_usage(directory).free
    except OSError:  # (a folder not made yet, a remote path: the write says what is wrong)
        return
    if needed > free:
        raise OutputWriteError(errno.ENOSPC, f"{path}: writing {what} takes about {needed:,} bytes, and {free:,} are "
                               f"free in {directory}: free space there (or choose another output folder) and run the "
                               "same command again; a training run resumes from its last checkpoint", os.fspath(path))


def save_weights_atomically(model, path):
    """Writes the model's weights to `path` (a `.weights.h5` file) via `atomic_save` (readers never see half a
    file), once `check_room` finds room for them. Its optimizer's state is left out: a fine-tuning run's
    `best.weights.h5` is read back into a model only (its checkpoints hold the optimizer), and with Adam's two
    moments the file was three times the model's size (273 MB for a 91 MB model).

    Example:
    >>> import keras, tempfile, os
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> p = os.path.join(tempfile.mkdtemp(), "best.weights.h5")
    >>> save_weights_atomically(m, p); os.path.exists(p)
    True
    """
    check_room(path, variables_bytes(model.weights), "the weights")
    atomic_save(path, lambda temp_path: save_weights_without_optimizer(model, temp_path))


def save_weights_without_optimizer(model, path):
    """`model.save_weights(path)`, without the optimizer's variables (see `load_weights_without_optimizer`)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        model.save_weights(path)
        return
    from keras.src.saving import saving_lib  # (Keras's own writer: the public one has no `objects_to_skip`)

    saving_lib.save_weights_only(model, path, objects_to_skip=[optimizer])


def load_weights_without_optimizer(model, path):
    """`model.load_weights(path)`, leaving the model's optimizer as it is: a file written by
    `save_weights_without_optimizer` holds none (and `load_weights` would warn "Skipping variable loading for
    optimizer"), an older one the state that a checkpoint restores anyway.

    Example:
    >>> import keras, tempfile, os, numpy as np
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]); m.compile("adam", "mse")
    >>> m.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0)  # doctest: +ELLIPSIS
    <...>
    >>> p = os.path.join(tempfile.mkdtemp(), "best.weights.h5")
    >>> save_weights_atomically(m, p); load_weights_without_optimizer(m, p)
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        model.load_weights(path)
        return
    from keras.src.saving import saving_lib

    saving_lib.load_weights_only(model, path, objects_to_skip=[optimizer])


def save_model_atomically(model, path):
    """`model.save(path)` (a `.keras` file) via `atomic_save`: a run stopped while saving leaves the previous file,
    or none, never half of one (the fine-tuning runs' `model.keras`).

    Example:
    >>> import keras, tempfile, os
    >>> m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> p = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> save_model_atomically(m, p); sorted(os.listdir(os.path.dirname(p)))
    ['model.keras']
    """
    check_room(path, variables_bytes(model.weights), "the model")
    atomic_save(path, model.save)


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically. See `atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, obj):
    """Writes `obj` as indented JSON to `path` atomically. See `atomic_write_bytes`."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _remove_moved_aside(old, target):
    """Removes the previous `target`, moved aside to `old`; one that may not be removed (another user's files) is
    named, as the new one is in place (it was left behind silently)."""
    try:
        shutil.rmtree(old)
    except OSError as error:
        print(f"warning: {target} is written; its previous contents, moved aside to {old}, could not be removed "
              f"({error.strerror or error}): remove that folder by hand", file=sys.stderr)


@contextlib.contextmanager
def atomic_directory(target, replaceable_files=()):
    """Yields a temporary directory that becomes `target` when the block succeeds.

    The temporary directory is created beside `target` (same filesystem) and
    renamed onto it at the end, so `target` is either absent/old or complete.
    If `target` exists it must be empty or hold only names listed in
    `replaceable_files` (a previous save of the same kind); it is then swapped
    out and deleted. On any error the temporary directory is removed and
    `target` is left untouched.

    Args:
        target: path of the directory to create.
        replaceable_files: names that may be present in an existing `target`.

    Example:
    >>> import tempfile, os
    >>> root = tempfile.mkdtemp()
    >>> with atomic_directory(os.path.join(root, "preset")) as tmp:
    ...     open(os.path.join(tmp, "config.json"), "w").write("{}")
    2
    >>> os.listdir(os.path.join(root, "preset"))
    ['config.json']
    """
    target = os.path.abspath(os.fspath(target))
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    if os.path.exists(target):
        if not os.path.isdir(target):
            raise FileExistsError(f"Cannot write a directory at {target}: a file with that name exists.")
        foreign = sorted(set(os.listdir(target)) - set(replaceable_files))
        if foreign:
            raise FileExistsError(
                f"Refusing to overwrite {target}: it already holds {foreign[:10]}, which this save "
                f"did not write (it only replaces {sorted(replaceable_files)}). Choose an empty or new directory."
            )
    _remove_stale_temporaries(parent, os.path.basename(target))
    temp_dir = tempfile.mkdtemp(dir=parent, prefix=_temporary_prefix(os.path.basename(target)), suffix=".tmp")
    try:
        os.chmod(temp_dir, _usual_mode(directory=True))
        yield temp_dir
        if os.path.exists(target):
            old = tempfile.mkdtemp(dir=parent, prefix=_temporary_prefix(os.path.basename(target)), suffix=".old")
            os.rmdir(old)
            os.replace(target, old)
            os.replace(temp_dir, target)
            _remove_moved_aside(old, target)
        else:
            os.replace(temp_dir, target)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
