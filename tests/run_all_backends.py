"""Runs the test suite once per Keras backend: tensorflow (everything, plus every `>>>` example
in the package's docstrings via `--doctest-modules keras_bert_impl`), then jax and torch (the
`multibackend` layer/model tests). Extra arguments go to pytest.

    python tests/run_all_backends.py            # all three backends
    python tests/run_all_backends.py -x -q      # with pytest flags
    KERAS_BERT_IMPL_BACKENDS=jax python tests/run_all_backends.py
"""

import os
import subprocess
import sys
import time

BACKENDS = os.environ.get("KERAS_BERT_IMPL_BACKENDS", "tensorflow,jax,torch").split(",")


def main(argv):
    failed = []
    for backend in BACKENDS:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
        command = [sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", *argv]
        if backend == "tensorflow":
            command += ["keras_bert_impl", "--doctest-modules"]
        else:
            command += ["-m", "multibackend"]
        print(f"\n=== KERAS_BACKEND={backend}: {' '.join(command)}", flush=True)
        start = time.time()
        code = subprocess.call(command, env=env)
        print(f"=== KERAS_BACKEND={backend}: exit {code} in {time.time() - start:.0f}s", flush=True)
        if code != 0:
            failed.append(backend)
    if failed:
        print(f"FAILED on backends: {', '.join(failed)}")
        return 1
    print("All backends passed.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
