"""The recipes' native-log filter (recipes/native_logs.py): TensorFlow's and XLA's start-up lines off stderr, every
other byte passed unchanged and in order, the filter's last lines passed before the recipe ends (or after it is
killed)."""

import os
import signal
import subprocess
import sys

import pytest
from repo_scripts import REPO, load_script

native_logs = load_script("recipes/native_logs.py")


# === Defect: TensorFlow's start-up log lines (oneDNN, cuda drivers, "This TensorFlow binary is optimized", absl's
# notice, cuInit) cluttered the stderr of every recipe; TensorFlow 2.19+ logs them through absl, whatever
# TF_CPP_MIN_LOG_LEVEL says ===

NATIVE_LINES = (  # as TensorFlow 2.21 wrote them on a CPU machine, and the cuDNN line of a GPU machine
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1796012865.443431   13738 port.cc:153] oneDNN custom operations are on. You may see slightly "
    b"different numerical results due to floating-point round-off errors from different computation orders.\n"
    b"I0000 00:00:1796012865.443741   13738 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU "
    b"will not be used.\n"
    b"I0000 00:00:1796012865.484045   13738 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    b"available CPU instructions in performance-critical operations.\n"
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the "
    b"appropriate compiler flags.\n"
    b"E0000 00:00:1758131045.203198 3722035 cuda_dnn.cc:8579] Unable to register cuDNN factory: Attempting to "
    b"register factory for plugin cuDNN when one has already been registered\r\n"
    b"2025-09-17 14:44:05.176998: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:467] Unable to register "
    b"cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered\n"
    b"E0000 00:00:1796012868.886684   13738 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512. "
    b"Falling back to the default Eigen-based implementation if present.\n"
    b"E0000 00:00:1796012868.016785   13738 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    b"Failed call to cuInit: UNKNOWN ERROR (303)\n"
)


def _filtered(data, level=2, nvidia_driver=False):
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    os.write(source_write, data)
    os.close(source_write)
    native_logs._forward_lines(source_read, target_write, native_logs.native_noise(level, nvidia_driver))
    os.close(source_read)
    os.close(target_write)
    with os.fdopen(target_read, "rb") as target:
        return target.read()


def test_the_native_filter_drops_only_whole_start_up_lines():
    real = (b"E0000 00:00:1796012868.1   13738 bfc_allocator.cc:1] Allocator ran out of memory\n"
            b"Traceback (most recent call last):\nerror: --train_file x.csv: no such file\n")
    progress = b"\r 50%|#####     | 1/2"  # a partial line (a progress bar on stderr) passes at once
    assert _filtered(NATIVE_LINES + real + progress) == real + progress
    # With an NVIDIA driver, a failed cuInit is news; at TF_CPP_MIN_LOG_LEVEL=1 the errors and warnings stay.
    assert _filtered(NATIVE_LINES, nvidia_driver=True).endswith(b"(303)\n")
    assert _filtered(NATIVE_LINES, level=1) == b"".join(
        line for line in NATIVE_LINES.splitlines(keepends=True) if line.startswith((b"E", b"2025")))
    assert _filtered(b"I0000 00:00:1.2  1 port.cc:153] an info line without its newline") == b""


@pytest.mark.parametrize("level, argv, shown", [
    (None, [], ("2", "")),  # the default: quiet
    (None, ["--debug"], ("None", "I0000")),  # --debug: every line, TF_CPP_MIN_LOG_LEVEL untouched
    ("0", [], ("0", "I0000")),  # the user's level is kept, and followed
    ("1", [], ("1", "")),
])
def test_quiet_native_logs_follows_the_users_level_and_debug_shows_everything(level, argv, shown):
    script = ("import os, sys\n"
              "import native_logs\n"
              "native_logs.quiet_native_logs()\n"
              "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
              "os.write(2, b'I0000 00:00:1796012865.4   13738 port.cc:153] oneDNN custom operations are on.\\n')\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    result = subprocess.run([sys.executable, "-c", script, *argv], cwd=os.path.join(REPO, "recipes"),
                            capture_output=True, text=True, timeout=300, env=env)
    assert (result.returncode, result.stdout.strip(), result.stderr[:5]) == (0, *shown), result.stderr


def test_the_filter_outlives_a_killed_recipe_and_passes_its_last_words():
    script = ("import os, signal, sys\n"
              "import native_logs\n"
              "native_logs.quiet_native_logs()\n"
              "os.write(2, b'I0000 00:00:1796012865.4   13738 port.cc:153] oneDNN custom operations are on.\\n')\n"
              "print('error: the last words', file=sys.stderr, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"), capture_output=True,
                            text=True, timeout=300, env=env)
    assert (result.returncode, result.stderr) == (-signal.SIGKILL, "error: the last words\n")


def test_a_recipe_ends_after_the_filter_has_passed_its_last_lines(tmp_path):
    """The process ends only once the filter has written everything (before, the shell's prompt could come first,
    and a file the caller read at once missed the last lines); the filter holds no file of the recipe but its two."""
    script = ("import os, sys\n"
              "import native_logs\n"
              "os.dup2(1, 40)\n"  # a file of the recipe above the filter's own descriptors (it held such files)
              "native_logs.quiet_native_logs()\n"
              "pid = native_logs._filter['pid']\n"
              "import time\n"
              "deadline = time.monotonic() + 10\n"  # (the filter closes the files it inherited as it starts)
              "while os.path.isdir('/proc') and len(os.listdir(f'/proc/{pid}/fd')) > 2 and time.monotonic() < deadline:\n"
              "    time.sleep(0.01)\n"
              "print(len(os.listdir(f'/proc/{pid}/fd')) if os.path.isdir('/proc') else 2)\n"
              "os.write(2, b'I0000 00:00:1796012865.4   13738 port.cc:153] oneDNN custom operations are on.\\n')\n"
              "for i in range(20000):\n"
              "    sys.stderr.write(f'line {i} of a long report\\n')\n"
              "print('error: the last line', file=sys.stderr)\n"
              "sys.exit(2)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        result = subprocess.run([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"),
                                stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=300, env=env)
    lines = (tmp_path / "stderr.txt").read_text().splitlines()  # read at once: nothing may still be on its way
    assert (result.returncode, result.stdout.strip()) == (2, "2")
    assert lines[0] == "line 0 of a long report" and len(lines) == 20001 and lines[-1] == "error: the last line"


@pytest.mark.parametrize("script", ["recipes/native_logs.py", "recipes/command_line.py", "recipes/interruption.py"])
def test_the_docstring_examples_of_the_recipes_shared_modules_run(script):
    """`--doctest-modules keras_bert_impl` does not reach the recipes' folder: their examples run here."""
    import doctest

    results = doctest.testmod(load_script(script), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert results.attempted > 0 and results.failed == 0, results
