"""benchmarks/gpu_session.sh: the GPU session's script parses, and names its steps in one line when misused.

Its steps run on a GPU machine; `SMOKE=1 bash benchmarks/gpu_session.sh STEP` runs each one with a tiny
config on the CPU (minutes: a manual check, docs/benchmarks.md, not a test).
"""

import os
import pathlib
import re
import subprocess

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.sh"
STEPS = ("prepare", "sweep", "ablations", "attention", "squad", "sizes", "convergence")


def test_the_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_an_unknown_step_is_one_line_naming_the_steps(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), "speedd"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OUT=str(tmp_path), PYTHON="true"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "unknown step 'speedd': expected prepare, sweep, ablations, attention, squad, sizes or convergence")


def test_every_step_of_the_usage_line_has_a_branch():
    text = SCRIPT.read_text()
    usage = re.search(r"usage: bash benchmarks/gpu_session.sh ([a-z|]+)", text).group(1).split("|")
    assert tuple(usage) == STEPS
    branches = set(re.findall(r"^  ([a-z]+)\)$", text, flags=re.M)) | {"prepare"}
    assert branches == set(STEPS)


def test_a_step_writes_three_files_within_the_device_tools_eight():
    """The device tool returns at most 8 files from $OUT: every run of a step goes into STEP.jsonl and STEP.log."""
    written = set(re.findall(r'"\$OUT/([^"]+)"', SCRIPT.read_text()))
    assert written == {"gpu.txt", "$step.jsonl", "$step.log"}, written
