"""Keeps TensorFlow's and XLA's start-up log lines off a recipe's stderr: `quiet_native_logs`.

Every recipe calls it when run as a script, before its first import of TensorFlow (`--debug` keeps every line).
Only whole lines of the forms in `native_noise` are dropped; every other byte, tracebacks and one-line errors
included, passes unchanged and in order. Like `command_line.py` beside it, this module imports only the standard
library.

    >>> noise = native_noise(2, nvidia_driver=False)
    >>> bool(noise.fullmatch(b"W0000 00:00:1796012865.443741   13738 cpu_feature_guard.cc:227] ..."))
    True
    >>> bool(noise.fullmatch(b"error: --train_file: no such file"))
    False
"""

import atexit
import os
import re
import signal
import sys
import time


# Native log lines that say nothing to the user of a recipe (`quiet_native_logs`), by the least
# TF_CPP_MIN_LOG_LEVEL that hides them. TensorFlow 2.19+ and XLA log through absl, some of it before that variable
# is read (the oneDNN notice, "Could not find cuda drivers", "This TensorFlow binary is optimized ..." and its
# second line), after absl's notice that it is not initialized. At 2, also the ERROR lines that every start
# prints on a healthy machine: the cuDNN/cuFFT/cuBLAS factory registered twice, oneDNN's int64 fallback, and
# (without an NVIDIA driver: a CPU machine) the failed cuInit.
def _absl_line(levels):  # absl's format: I0000 00:00:1796012865.443741   13738 port.cc:153] ...
    return rb"[" + levels + rb"]\d{4} [\d:.]+ +\d+ \S+:\d+\] "


_NATIVE_NOISE = {
    1: [rb"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
        _absl_line(b"I") + rb".*",
        rb"To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\."],
    2: [_absl_line(b"W") + rb".*",
        rb"(?:" + _absl_line(b"E") + rb"|[\d:. -]+: E \S+:\d+\] )"  # absl's format, or TensorFlow's own
        rb"(?:Unable to register cu(?:DNN|FFT|BLAS) factory: .*|oneDNN supports DT_INT64 only on platforms with "
        rb"AVX-512\..*)"],
}
_NO_DRIVER_NOISE = _absl_line(b"E") + rb"failed call to cuInit: .*"


def native_noise(level, nvidia_driver):
    """The pattern of the whole native log lines that `quiet_native_logs` drops at TF_CPP_MIN_LOG_LEVEL `level`.

    >>> noise = native_noise(2, nvidia_driver=False)
    >>> bool(noise.fullmatch(b"I0000 00:00:1796012865.443741   13738 cudart_stub.cc:31] Could not find cuda "
    ...                      b"drivers on your machine, GPU will not be used."))
    True
    >>> bool(noise.fullmatch(b"E0000 00:00:1796012868.886684   13738 some_op.cc:131] Out of memory"))
    False
    """
    patterns = [p for least, group in _NATIVE_NOISE.items() if level >= least for p in group]
    if level >= 2 and not nvidia_driver:
        patterns.append(_NO_DRIVER_NOISE)
    return re.compile(b"|".join(patterns) or rb"(?!)")


def quiet_native_logs(argv=None):
    """Keeps TensorFlow's and XLA's start-up log lines off stderr, unless `--debug` is on the command line. A
    recipe calls it when run as a script, before its first import of TensorFlow.

    TF_CPP_MIN_LOG_LEVEL becomes 2 (TensorFlow's own INFO and WARNING lines off, errors on) unless the user set
    it. The lines that TensorFlow 2.19+ and XLA log through absl regardless of it are dropped from file descriptor
    2 by a forked filter process (`native_noise` at that level: only whole lines of those forms; every other byte,
    Python's tracebacks and one-line errors included, passes unchanged and in order). The filter holds no other
    file of this process, ignores Ctrl-C and ends when the last writer of the pipe is gone: it outlives a killed
    recipe, so that what a crash writes last is still shown. A recipe that ends normally (an error's one line and
    exit status 2 included) hands fd 2 back to the real stderr and waits for the filter to pass its last lines (up
    to `FILTER_DRAIN_SECONDS`): the shell's prompt comes after them, not before.
    """
    argv = sys.argv[1:] if argv is None else argv
    if "--debug" in argv or "tensorflow" in sys.modules:  # (too late: a test running a recipe in its own process)
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
    except ValueError:
        return
    if level < 1:
        return
    noise = native_noise(level, nvidia_driver=os.path.exists("/proc/driver/nvidia/version"))
    try:
        sys.stderr.flush()
        original = os.dup(2)
        read_end, write_end = os.pipe()
        child = os.fork()
    except (OSError, AttributeError, ValueError):  # no stderr, no fork (Windows): the lines stay
        return
    if child == 0:  # the filter: holds no other file of this process (its stdout, a pipe of the caller, included)
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            # A SIGTERM sent to the whole group (SLURM's scancel, systemd, `kill -- -PGID`) would end the filter
            # before the recipe's `Stopped by SIGTERM` line passes it; it ends at end of file, once the recipe is gone.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            keep = sorted((read_end, original))
            os.closerange(0, keep[0])
            os.closerange(keep[0] + 1, keep[1])
            os.closerange(keep[1] + 1, _open_files_limit())
            _forward_lines(read_end, original, noise)
        finally:
            os._exit(0)
    os.close(read_end)
    os.dup2(write_end, 2)
    os.close(write_end)
    _filter["pid"], _filter["stderr"] = child, original
    atexit.register(drain_filter)


FILTER_DRAIN_SECONDS = 5.0
_filter = {"pid": None, "stderr": None}  # quiet_native_logs's filter process, and the real stderr's descriptor


def _open_files_limit():
    try:
        return min(os.sysconf("SC_OPEN_MAX"), 1 << 20)
    except (OSError, ValueError):
        return 1 << 16


def drain_filter():
    """At a normal exit: fd 2 is the real stderr again (Python's last words during shutdown go there directly), so
    the filter reads end of file once this process's subprocesses are gone, and is waited for, so that it has
    passed every line before this process ends."""
    pid, original = _filter["pid"], _filter["stderr"]
    if pid is None:
        return
    _filter["pid"] = None
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, RuntimeError):  # (RuntimeError: a signal handler cut off a write to it)
            pass
    try:
        os.dup2(original, 2)
    except OSError:
        return
    deadline = time.monotonic() + FILTER_DRAIN_SECONDS
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)


def _forward_lines(source, target, noise):
    """Copies `source` to `target` until end of file, less the whole lines that one of `noise` matches in full. A
    partial line that cannot begin such a line (a progress bar's carriage-return update) is passed on at once."""

    def write(data):
        while data:
            try:
                data = data[os.write(target, data):]
            except InterruptedError:
                continue
            except OSError:  # the reader has gone: keep draining, so that the writer never blocks
                return

    def is_noise(line):
        return bool(noise.fullmatch(line.rstrip(b"\r")))

    def may_be_noise(start):
        return bool(re.match(rb"[IWE]\d{0,4}(?: |$)|[\d -]+$|\d{4}-", start)) or any(
            prefix.startswith(start) or start.startswith(prefix) for prefix in (b"WARNING: All log", b"To enable"))

    pending, passing = b"", False  # passing: the start of the current line was passed on already
    while True:
        try:
            chunk = os.read(source, 1 << 16)
        except InterruptedError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        out = []
        for line in lines:
            if passing or not is_noise(line):
                out.append(line + b"\n")
            passing = False
        if pending and (passing or not may_be_noise(pending)):
            out.append(pending)
            pending, passing = b"", True
        write(b"".join(out))
    if pending and not is_noise(pending):
        write(pending)
