"""benchmarks/gpu_session.sh: the GPU session's script parses, and names its steps in one line when misused.

Its steps run on a GPU machine; `SMOKE=1 bash benchmarks/gpu_session.sh STEP` runs each one with a tiny
config on the CPU (minutes: a manual check, docs/benchmarks.md, not a test).
"""

import os
import pathlib
import re
import subprocess

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.sh"
STEPS = ("prepare", "sweep", "ablations", "attention", "squad", "sizes", "profile", "convergence", "lease")


def test_the_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_an_unknown_step_is_one_line_naming_the_steps(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), "speedd"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OUT=str(tmp_path), PYTHON="true"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "unknown step 'speedd': expected prepare, sweep, ablations, attention, squad, sizes, profile, convergence "
        "or lease")


def test_every_step_of_the_usage_line_has_a_branch():
    text = SCRIPT.read_text()
    usage = re.search(r"usage: bash benchmarks/gpu_session.sh ([a-z|]+)", text).group(1).split("|")
    assert tuple(usage) == STEPS
    branches = set(re.findall(r"^  ([a-z]+)\)$", text, flags=re.M)) | {"prepare"}
    assert branches == set(STEPS)


def test_a_step_writes_at_most_five_files_within_the_device_tools_eight():
    """The device tool returns at most 8 files from $OUT: every run of a step goes into STEP.jsonl and STEP.log;
    the two step profiles also write their per-instruction times."""
    written = set(re.findall(r'"\$OUT/([^"]+)"', SCRIPT.read_text()))
    assert written == {"gpu.txt", "$step.jsonl", "$step.log", "profile_ops_bert_dropout.json",
                       "profile_ops_lengths.json"}, written


def test_lease_starts_no_run_once_its_budget_is_spent(tmp_path):
    """`lease` packs a whole 15-minute lease into one call: a run is started only while MIN_LEFT_S of BUDGET_S
    are left, and each one it does not start is a line of lease.jsonl saying so (session 18's H100 call)."""
    import json

    result = subprocess.run(["bash", str(SCRIPT), "lease"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OUT=str(tmp_path), PYTHON="true", BUDGET_S="0"))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (tmp_path / "lease.jsonl").read_text().splitlines()]
    assert [line["run"] for line in lines] == ["best_base_b256", "ablation_triton_gemm_on",
                                               "pretrain_convergence_bf16_vs_fp32", "base_seq512_best",
                                               "large_seq128_best", "squad_base_bf16_finetune_cublas",
                                               "ablation_dropout_threefry16",
                                               "ablation_qkv_split", "ablation_cublaslt", "ablation_float8",
                                               "hlo_attention_mask", "sweep_base_b64"]
    assert len(lines) == 12 and all(line["skipped"].endswith("s of the budget left") for line in lines)


def test_a_second_lease_call_starts_from_the_named_run(tmp_path):
    """FROM=NAME: a second call on a still-warm machine runs NAME and what follows it, nothing before (session
    21 typed its second call by hand, and the shell ate an empty `--peers ""`)."""
    import json

    result = subprocess.run(["bash", str(SCRIPT), "lease"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OUT=str(tmp_path), PYTHON="true", BUDGET_S="0",
                                     FROM="ablation_cublaslt"))
    assert result.returncode == 0, result.stderr
    runs = [json.loads(line)["run"] for line in (tmp_path / "lease.jsonl").read_text().splitlines()]
    assert runs == ["ablation_cublaslt", "ablation_float8", "hlo_attention_mask", "sweep_base_b64"]


def test_a_cut_run_keeps_the_figures_it_printed(tmp_path):
    """A run cut at the deadline (or failing) still leaves a lease.jsonl line with the progress lines it printed
    on stderr: session 21's `bert_dropout_philox` printed its seq/s and was then cut, and its figure had to be
    read out of the log by hand."""
    import json

    fake = tmp_path / "fake_python"
    fake.write_text('#!/usr/bin/env bash\n[[ $1 == benchmarks/* ]] || exit 0  # the set-up\'s python -c / -m calls\n'
                    'echo \'[base] {"ours": {"train_seq_s": 3859.04}}\' >&2\necho "not JSON" >&2\nexit 3\n')
    fake.chmod(0o755)
    out = tmp_path / "out"
    result = subprocess.run(["bash", str(SCRIPT), "lease"], capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, OUT=str(out), PYTHON=str(fake), FROM="sweep_base_b64"))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (out / "lease.jsonl").read_text().splitlines()]
    assert lines == [{"run": "sweep_base_b64", "exit": 3,
                      "progress": ['[base] {"ours": {"train_seq_s": 3859.04}}']}]
