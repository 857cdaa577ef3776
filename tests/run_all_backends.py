"""Runs the test suite once per Keras backend: tensorflow (every test, plus every `>>>` example in the package's
docstrings via `--doctest-modules keras_bert_impl`), then jax and torch (the `multibackend` layer/model tests); the
TensorFlow tests in parts, each with fresh worker processes, so that no worker's memory grows through the whole
suite. Each run spreads its tests over worker processes (pytest-xdist, one per core, 2 to 4): many tests are
single-threaded Python and TensorFlow dispatch or wait on subprocesses. Extra arguments go to pytest, after ours.

Two tiers. By default (what `.ci/run` and the README's test command run) the tests marked `slow` are left out:
those that took 12 s or more on 2 cores under TensorFlow (session 47, `--durations=0`), and the `multibackend` ones
of 6.5 s or more (they run once per backend, and under JAX they took about three times as long: compilation):
recipes run to the end, runs killed and resumed, training across two processes, fits on raw text, loss-and-SGD-step
equivalences, the longer docs snippets. The fast tier keeps, for each recipe, its error paths and one end-to-end
run (pretraining, the table classifier, CoNLL, SQuAD v1.1; GLUE's, 70 s and more each, run only in `--full`, share
the table classifier's fine-tuning loop), one data-parallel run per backend (two processes on TensorFlow and
PyTorch, two host devices on JAX), parity with transformers on the real checkpoint, one fit on raw strings on every
backend, and the output equivalences of packing, the fused projection and the length-masked attention. `--full` runs
every test (two to three hours on 2 cores): before a release, after a change to a recipe, to training or to a model.

    python tests/run_all_backends.py            # all three backends, the fast tier (CI)
    python tests/run_all_backends.py --full     # every test, slow ones included (on 2 cores: two to three hours)
    python tests/run_all_backends.py -x -q      # with pytest flags
    python tests/run_all_backends.py -n 0       # in this one process, serially
    KERAS_BERT_IMPL_BACKENDS=jax python tests/run_all_backends.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

BACKENDS = os.environ.get("KERAS_BERT_IMPL_BACKENDS", "tensorflow,jax,torch").split(",")
# Workers per run: one per core, at least 2 (the tests wait on subprocesses too) and at most 4 (each worker
# holds TensorFlow, JAX and PyTorch models: a few GB of memory).
WORKERS = min(4, max(2, os.cpu_count() or 1))
# The TensorFlow run (every test) goes in this many parts, each with fresh workers: a worker's memory only grows
# (TensorFlow, JAX and PyTorch keep what they allocate): in one part of 1,249 tests a worker reached 17 GB and the
# kernel killed it on a 24 GB machine; in two parts (every other file) the larger worker reached 12.5 GB (session 45).
TENSORFLOW_PARTS = 3


def test_files_in_parts(parts, folder="tests"):
    """The test files of `folder` in `parts` lists of about the same bytes of test code (the largest file first,
    each into the part with the fewest bytes so far; each part in name order): a rough measure of the work.

    >>> [len(part) > 0 for part in test_files_in_parts(3)]
    [True, True, True]
    """
    files = [os.path.join(folder, name) for name in os.listdir(folder)
             if name.startswith("test_") and name.endswith(".py")]
    split, sizes = [[] for _ in range(parts)], [0] * parts
    for path in sorted(files, key=lambda path: (-os.path.getsize(path), path)):
        lightest = sizes.index(min(sizes))
        split[lightest].append(path)
        sizes[lightest] += os.path.getsize(path)
    return [sorted(part) for part in split]


def marker_expression(backend, full):
    """The `-m` expression of one backend's run: TensorFlow runs every test, the others the `multibackend` ones;
    the fast tier leaves the `slow` ones out.

    >>> marker_expression("tensorflow", full=False), marker_expression("jax", full=False)
    ('not slow', 'multibackend and not slow')
    >>> marker_expression("tensorflow", full=True), marker_expression("torch", full=True)
    (None, 'multibackend')
    """
    expression = None if backend == "tensorflow" else "multibackend"
    if full:
        return expression
    return "not slow" if expression is None else f"{expression} and not slow"


def main(argv):
    full = "--full" in argv
    argv = [a for a in argv if a != "--full"]
    tier = ("every test, slow ones included (--full)" if full
            else "the fast tier: the tests marked slow are left out (--full runs them)")
    print(f"=== {tier}", flush=True)
    failed, began = [], time.time()
    for backend in BACKENDS:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
        # The 20 slowest tests of each run are listed at its end: where CI's time goes (`--durations=N` overrides).
        durations = [] if any(a.startswith("--durations") for a in argv) else ["--durations=20"]
        # `worksteal` rebalances the long tests at the end of a run; a later `-n` in argv overrides ours.
        workers = ["-n", str(WORKERS), "--dist", "worksteal"]
        # Our `-m` goes before the extra arguments: a `-m` of the caller's replaces it.
        expression = marker_expression(backend, full)
        selection = [] if expression is None else ["-m", expression]
        pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *durations, *workers, *selection, *argv]
        if backend == "tensorflow":
            # The docstring examples run on the package only (tests/ holds scripts that are not modules).
            commands = [pytest + part for part in test_files_in_parts(TENSORFLOW_PARTS)]
            commands.append(pytest + ["keras_bert_impl", "--doctest-modules"])
        else:
            commands = [pytest + ["tests"]]
        for command in commands:
            print(f"\n=== KERAS_BACKEND={backend}: {' '.join(command)}", flush=True)
            start = time.time()
            code = subprocess.call(command, env=env)
            # The disk left after each run: tests write models and checkpoints, and a full disk fails what follows.
            free = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
            print(f"=== KERAS_BACKEND={backend}: exit {code} in {time.time() - start:.0f}s "
                  f"({free:.1f} GiB free in {tempfile.gettempdir()})", flush=True)
            if code != 0 and backend not in failed:
                failed.append(backend)
    took = f"in {time.time() - began:.0f}s"
    if failed:
        print(f"FAILED on backends: {', '.join(failed)} ({took})")
        return 1
    print(f"All backends passed ({took}).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
