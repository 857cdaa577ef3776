"""One run at a time in a `--model_dir`: an exclusive lock that the run holds from before it reads its checkpoints
until it returns.

Two processes started on the same `--model_dir` (a second terminal, a job scheduler that retried) would each train
and write checkpoints there: one's checkpoint save removes the other's half-written checkpoint (which then stopped
with a misleading "Could not write checkpoint ... Free disk space"), and the two interleave checkpoints and
`run_config.json` of two runs. `hold_model_dir` takes an exclusive `flock` on `<model_dir>/.run.lock`; the second
process is refused in one line that names the holder. The kernel releases the lock when the holding process ends,
however it ends (Ctrl-C, an error, SIGKILL, a crash), so a killed run never leaves a stale lock behind: the same
command resumes at once. The lock file itself stays (removing it could let two later runs lock two different
files); it holds the holder's pid, host and start time, for the message.

Not locked: a remote `--model_dir` (`gs://...`), a platform without `fcntl` (Windows), and a filesystem that does
not support locks (some network filesystems: `ENOLCK`).

Example:
>>> import tempfile
>>> model_dir = tempfile.mkdtemp()
>>> with hold_model_dir(model_dir):
...     try:
...         with hold_model_dir(model_dir):
...             pass
...     except ModelDirInUseError as error:
...         print(str(error).split(" (pid")[0] == f"--model_dir {model_dir} is in use by another run")
True
"""

import contextlib
import errno
import os
import shlex
import socket
import time

from keras_bert_impl.checkpoints.atomic_files import OutputWriteError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = ".run.lock"
_UNSUPPORTED = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class ModelDirInUseError(ValueError):
    """Another process holds the `--model_dir`'s run lock; the message names it and what to do."""


def _holder(fd):
    """What the lock file says about the process holding it: `pid 1234 on host, started 2026-11-30 01:23:45`."""
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    return text or "a process that has not yet written its pid"


def _open_lock_file(path, model_dir):
    """The lock file's descriptor, and whether it may be written. Another user's lock file (a run started as root,
    resumed as oneself) is locked read-only, without this run's pid in it (was a bare "[Errno 13] Permission denied:
    '.../.run.lock'"); one that cannot even be read is one line saying what to do."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644), True
    except PermissionError:
        try:
            return os.open(path, os.O_RDONLY), False
        except OSError:
            pass
    owner = _owner(path)
    raise OutputWriteError(
        errno.EACCES, f"{path} cannot be opened (permission denied{owner}): it is the run lock of --model_dir "
        f"{model_dir} and holds no state; remove it (rm {shlex.quote(path)}) once no run uses that folder, or run as "
        "the user who owns the folder, then run the same command again", path) from None


def _owner(path):
    """`; it belongs to root` (or nothing where the owner is not known)."""
    try:
        import pwd

        return f"; it belongs to {pwd.getpwuid(os.stat(path).st_uid).pw_name}"
    except (ImportError, KeyError, OSError):
        return ""


@contextlib.contextmanager
def hold_model_dir(model_dir):
    """Holds `model_dir`'s run lock for the `with` block (creating `model_dir` if needed).

    Raises:
        ModelDirInUseError: another process holds it: `--model_dir DIR is in use by another run (pid P on HOST,
            started T): two runs in one --model_dir would overwrite each other's checkpoints; wait for it to end (or
            stop it), then run the same command again to resume, or pass another --model_dir`.
    """
    if fcntl is None or "://" in str(model_dir):
        yield None
        return
    model_dir = os.fspath(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, LOCK_FILE)
    fd, writable = _open_lock_file(path, model_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except OSError as error:
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ModelDirInUseError(
                    f"--model_dir {model_dir} is in use by another run ({_holder(fd)}): two runs in one --model_dir "
                    "would overwrite each other's checkpoints; wait for it to end (or stop it), then run the same "
                    "command again to resume, or pass another --model_dir"
                ) from None
            if error.errno not in _UNSUPPORTED:
                raise
            locked = False  # a filesystem without locks: run unlocked, as before
        if locked and writable:
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n".encode(), 0)
            except OSError as error:  # a full disk: named (it was a bare "[Errno 28] No space left on device")
                raise OSError(error.errno, error.strerror, path) from None
        yield path if locked else None
    finally:
        os.close(fd)  # releases the lock


__all__ = ["LOCK_FILE", "ModelDirInUseError", "hold_model_dir"]
