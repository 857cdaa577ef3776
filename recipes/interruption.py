"""How a recipe's process ends when a signal stops it, or once its job has returned: one line and the exit status.

Ctrl-C (SIGINT) or SIGTERM ends a recipe with one line on stderr, saying where the run was and what to do
(`Interrupted: rerun the same command to resume from the last checkpoint (...)`, `Interrupted while starting,
before any work: rerun the same command.`), and exit status 130 (143 after SIGTERM, `Stopped by SIGTERM ...`), at
any point: while the recipe imports TensorFlow and Keras, during the job (`command_line.exit_on_user_error`), while
it prints its results, while Python shuts down. Every recipe calls `one_line_on_ctrl_c` before its first import of
Keras or TensorFlow. `leave` is how the job's one-line errors end the process too: at once (`os._exit`) in a job
of several processes, whose normal exit would wait at JAX's (or PyTorch's) shutdown barrier.

`_run_state` says where the recipe is (its job not started, running or done), whether a signal came, and the
status the process leaves with; `command_line.exit_on_user_error` notes the job's start and end in it. Like
`command_line.py` and `native_logs.py` beside it, this module imports only the standard library.
"""

import atexit
import os
import re
import signal
import sys
import threading

CLEANING_UP = ("Interrupted after the run had finished, while removing its checkpoints: its outputs are in "
               "--model_dir.")
FINISHED = "Interrupted after the run had finished, while printing its results: its outputs are in --model_dir."


# Where the recipe is (`exit_on_user_error`'s job not started, running or done), and whether Ctrl-C came
# (`one_line_on_ctrl_c`): the line of a Ctrl-C outside the job, or of one that surfaced as another exception.
# `recipe_process`: a recipe's own process (`one_line_on_ctrl_c` was called), which `leave` may end at once.
# `leaving`: the line of a Ctrl-C is printed (or being printed): another signal changes nothing. `exit_status`: the
# status the recipe's process leaves with, as `sys.exit`, `leave` or an uncaught exception set it (None: 0).
# One dict a process: `command_line` reads and writes this one (`interruption._run_state`), never a copy.
_run_state = {"job": None, "interrupted": False, "signal": signal.SIGINT, "recipe_process": False,
              "leaving": False, "exit_status": None}


def one_line_on_ctrl_c():
    """Makes Ctrl-C at any point of this process end with one line on stderr and exit status 130, as Ctrl-C during
    the job does (`command_line.exit_on_user_error`): also while the recipe imports TensorFlow and Keras (seconds),
    reads its flags, or prints its results after the job. A recipe calls it when run as a script, before its first
    import of Keras or TensorFlow. With `--debug` on the command line it does nothing (the traceback); where SIGINT
    is ignored (a job started with `nohup` or in the background of a script) it leaves Ctrl-C alone.

    SIGTERM, what a scheduler or a preempted machine sends (SLURM, Kubernetes, `kill`), stops the run the same way
    (where nothing else handles it): the line begins `Stopped by SIGTERM` instead of `Interrupted`, and the exit
    status is 143 (128 + 15), as a shell reports a terminated command.

    Ctrl-C is noted before it raises `KeyboardInterrupt`: an import cut off in C code may replace that exception
    with another (NumPy's `Importing the numpy C-extensions failed` ImportError), which then ends the process with
    the same line; a `KeyboardInterrupt` lost where Python cannot raise it (a gc callback such as JAX's, a
    `__del__`: `Exception ignored in ...`) is delivered again, instead of the run going on. The line says where the
    run was: `Interrupted while starting, before any work: rerun the same command.`, or, once the job has returned,
    `Interrupted after the run had finished, while printing its results: its outputs are in --model_dir.` The
    process then leaves at once (`os._exit`): a module cut off half-imported is not finalized, which could hang or
    print. A second Ctrl-C once the line is out changes nothing.

    Once the job has returned, a signal ends the process at once with that line (nothing is left to unwind),
    wherever it comes: also after the recipe's `main` has returned, while Python shuts down. There a
    `KeyboardInterrupt` was dropped (in an exit handler, in the wait for threads), or the signal came after Python's
    last instruction or once its signal handlers were gone: exit status 0 and no line, or killed by SIGINT with none.
    A finished run's process therefore leaves from its last exit handler (`_leave_at_the_end`), with the status
    Python would have given it, instead of finishing Python's shutdown.
    """
    if "--debug" in sys.argv[1:]:
        return
    _run_state["recipe_process"] = True
    takes_ctrl_c = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    takes_sigterm = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if not (takes_ctrl_c or takes_sigterm):
        return

    def on_signal(signum, frame):
        if _run_state["leaving"]:  # the line of an earlier one is out, or being printed
            return
        _run_state["interrupted"] = True
        _run_state["signal"] = signum
        if _run_state["job"] == "done":  # nothing to unwind; and during Python's shutdown an exception is dropped
            _leave_now(signalled_line(FINISHED), interrupted_status())
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as Ctrl-C without this handler

    previous = sys.excepthook

    def hook(kind, error, trace):
        if not (issubclass(kind, KeyboardInterrupt) or _run_state["interrupted"]):
            _run_state["exit_status"] = 1  # Python's, after the traceback
            return previous(kind, error, trace)
        _leave_now(signalled_line(interrupted_outside_job_line()), interrupted_status())

    previous_unraisable = sys.unraisablehook

    def unraisable(info):
        if issubclass(info.exc_type, KeyboardInterrupt):  # raised in a gc callback or a __del__, and lost there
            # The signal again, 50 ms later, from another thread: a signal is handled in the main thread at the next
            # line of Python it runs, which is no longer this hook, nor (most probably) a callback again.
            again = threading.Timer(0.05, os.kill, (os.getpid(), _run_state["signal"]))
            again.daemon = True
            again.start()
            return
        previous_unraisable(info)

    python_exit = sys.exit

    def exit_noting_status(status=None):  # (the status a finished run leaves with, `_leave_at_the_end`)
        _run_state["exit_status"] = status
        python_exit(status)

    if takes_ctrl_c:
        signal.signal(signal.SIGINT, on_signal)
    if takes_sigterm:
        signal.signal(signal.SIGTERM, on_signal)
    sys.excepthook = hook
    sys.unraisablehook = unraisable
    sys.exit = exit_noting_status
    # Registered before Keras, TensorFlow and JAX register theirs: the last exit handler to run.
    atexit.register(_leave_at_the_end)


def _leave_now(line, status):
    """Prints `line` on stderr and ends the process at once (`os._exit`) with `status`, what is printed on stdout
    passed on first, and the stderr filter's last lines (`native_logs.drain_filter`). Safe in a signal handler that
    cut off a print: the line is written to file descriptor 2 directly."""
    _run_state["leaving"] = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 (closed, broken, or in the write the signal cut off: the line matters)
            pass
    data = (line + "\n").encode()
    try:
        while data:
            data = data[os.write(2, data):]
    except OSError:
        pass
    _tidy_up_before_exit()
    os._exit(status)


def _leave_at_the_end():
    """The last exit handler of a recipe's process (`one_line_on_ctrl_c`): once its job has returned (or its Ctrl-C
    line is out), the process leaves here, at once, with the status Python would have given it (`sys.exit`'s,
    `leave`'s, 1 after an uncaught exception, else 0). What Python's shutdown does after this (modules torn down,
    its signal handlers removed) would let a Ctrl-C go by with no line. The other exit handlers have run
    (JAX's and PyTorch's shutdown, logging's, the stderr filter's drain: `_leave_now`). A stdout that cannot be
    flushed (a closed pipe) is left to Python (`Exception ignored ...`, exit status 120)."""
    if not (_run_state["job"] == "done" or _run_state["leaving"]):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 (a closed pipe: Python's own way out, `Exception ignored ...`, status 120)
        return
    _tidy_up_before_exit()
    status = _run_state["exit_status"]
    status = (status or 0) if status is None or isinstance(status, int) else 1  # sys.exit("message"): 1
    # Up to here a signal runs `on_signal`, which leaves with its line. Python runs a handler only between some of
    # its instructions: one received just before `os._exit` would be lost. So this thread blocks the signals (which
    # runs the handler of one received so far) and takes any that came since from the kernel's pending set; one
    # that another thread took (Python's C handler) runs `on_signal` at the second call.
    if hasattr(signal, "pthread_sigmask") and not _run_state["leaving"]:
        signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        held = signal.sigpending() & signals
        if held:
            _run_state["interrupted"] = True
            _run_state["signal"] = signal.SIGINT if signal.SIGINT in held else signal.SIGTERM
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    if _run_state["interrupted"] and not _run_state["leaving"]:  # (noted, but its handler did not end the process)
        _leave_now(signalled_line(interrupted_outside_job_line()), interrupted_status())
    os._exit(status)


def interrupted_status():
    """The exit status of a run stopped by a signal: 128 + its number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + int(_run_state["signal"])


def signalled_line(line):
    """`line` (`Interrupted ...`) as it says which signal stopped the run: `Stopped by SIGTERM ...` for SIGTERM.

    >>> signalled_line("Interrupted: rerun the same command.")
    'Interrupted: rerun the same command.'
    """
    if _run_state["signal"] == signal.SIGTERM and line.startswith("Interrupted"):
        return "Stopped by SIGTERM" + line[len("Interrupted"):]
    return line


def interrupted_outside_job_line():
    """The line of a Ctrl-C before the job started or after it returned (`one_line_on_ctrl_c`).

    >>> job = _run_state["job"]  # (set by the jobs this process ran: `command_line.exit_on_user_error`)
    >>> _run_state["job"] = None; interrupted_outside_job_line()
    'Interrupted while starting, before any work: rerun the same command.'
    >>> _run_state["job"] = "done"; interrupted_outside_job_line()
    'Interrupted after the run had finished, while printing its results: its outputs are in --model_dir.'
    >>> _run_state["job"] = job
    """
    if _run_state["job"] == "done":
        return FINISHED
    if _run_state["job"] == "running":  # (the job's own Ctrl-C is `exit_on_user_error`'s, with its checkpoint)
        return interrupted_line()
    return "Interrupted while starting, before any work: rerun the same command."


def interrupted_line(checkpoints=None):
    """The line Ctrl-C ends a run with: rerunning the same command resumes from the newest checkpoint in
    `checkpoints` (a directory of `ckpt-<step>` checkpoints, each finished by its manifest.json), or starts again.

    >>> interrupted_line()
    'Interrupted: rerun the same command to resume from the last checkpoint in --model_dir.'
    >>> interrupted_line("/nonexistent/run/checkpoints")
    'Interrupted before the first checkpoint (/nonexistent/run/checkpoints): rerun the same command to start again.'
    """
    if checkpoints is None:
        return "Interrupted: rerun the same command to resume from the last checkpoint in --model_dir."
    try:
        names = [name for name in os.listdir(checkpoints)
                 if re.fullmatch(r"ckpt-\d+", name) and os.path.exists(os.path.join(checkpoints, name,
                                                                                      "manifest.json"))]
    except OSError:  # not there yet, or remote
        names = []
    if not names:
        return f"Interrupted before the first checkpoint ({checkpoints}): rerun the same command to start again."
    newest = max(names, key=lambda name: int(name.split("-")[1]))
    return f"Interrupted: rerun the same command to resume from the last checkpoint ({os.path.join(checkpoints, newest)})."


def several_processes_joined():
    """Whether this process is one of a JAX or PyTorch job of several processes (`--strategy multiworker`)."""
    if "keras" not in sys.modules:  # nothing has joined before Keras is imported
        return False
    from keras_bert_impl.training.strategy import several_processes_joined as joined

    return joined()


def _tidy_up_before_exit():
    """What a process does before it leaves with `os._exit`, which runs no exit handler: its private folders removed,
    and the stderr filter's last lines passed on before the shell's prompt comes (`native_logs.drain_filter`)."""
    _remove_private_folders()
    logs = sys.modules.get("native_logs")
    if logs is not None:
        logs.drain_filter()


def _remove_private_folders():
    """Removes the temporary folders of a process > 0 of a job of several
    (`finetuning_processes.remove_private_directories`) before it leaves with `os._exit`, which runs no exit handler;
    nothing where fine-tuning was never imported."""
    processes = sys.modules.get("keras_bert_impl.training.finetuning_processes")
    if processes is not None:
        processes.remove_private_directories()


def leave(line, status):
    """Prints `line` on stderr and ends the process with `status`: at once (`os._exit`) in a job of several processes.

    So does a recipe's JAX process stopped by a signal: Python's shutdown could crash after the line.

    A process of such a job that leaves normally runs JAX's shutdown barrier (or PyTorch's), which waits for
    processes that may be gone or blocked in a collective: JAX aborts it ("Terminating process because the JAX
    distributed service detected fatal errors") once the others' heartbeats time out, a minute or more later, and
    the line that says how to resume is no longer the last one. Leaving at once also lets the others' collectives
    fail now, each with its own line.
    """
    if _run_state["recipe_process"]:
        _run_state["exit_status"] = status  # (`_leave_at_the_end`)
        if _run_state["interrupted"] or status == interrupted_status():
            _run_state["leaving"] = True  # another Ctrl-C prints no second line
    print(line, file=sys.stderr, flush=True)
    # A JAX process interrupted while its step compiles or runs could crash in Python's shutdown after the line
    # (`Segmentation fault`, exit status 139, one time in two when Ctrl-C came 5-8 s into pretraining's first epoch
    # on a CPU): it leaves at once too, its output passed on first.
    keras = sys.modules.get("keras")
    interrupted_jax = (_run_state["recipe_process"] and status == interrupted_status() and keras is not None
                       and keras.backend.backend() == "jax")
    if several_processes_joined() or interrupted_jax:
        sys.stdout.flush()
        _tidy_up_before_exit()
        os._exit(status)
    raise SystemExit(status)
