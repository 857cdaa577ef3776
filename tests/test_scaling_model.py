"""benchmarks/scaling_model.py: one JSON line, the parameter formula equal to a built model, sane rows (issue 19)."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_scaling_model_prints_one_json_line_with_both_models_and_1_to_1024_devices():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "scaling_model.py")], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = proc.stdout.strip().splitlines()
    result = json.loads(line)
    assert result["parameter_formula_check"]["equal"]
    assert result["inputs"]["single_device_seq_per_s"] == 2132.0
    base, large = result["models"]["bert_base"], result["models"]["bert_large"]
    assert base["gradient_bytes_per_step"] == 4 * base["trainable_parameters"]
    assert 109_482_240 < base["trainable_parameters"] < 111_000_000
    assert 335_141_888 < large["trainable_parameters"] < 337_000_000
    for model in (base, large):
        for platform in ("h100_nvlink_ib", "tpu_v5p_ici"):
            rows = [r for r in model["rows"] if r["platform"] == platform]
            assert [r["accelerators"] for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
            assert rows[0]["efficiency"] == 1.0 and rows[0]["allreduce_ms"] == 0.0
            efficiencies = [r["efficiency"] for r in rows]
            assert efficiencies == sorted(efficiencies, reverse=True) and efficiencies[-1] > 0.5
            speeds = [r["seq_per_s"] for r in rows]
            assert speeds == sorted(speeds)
    assert base["rows"][0]["seq_per_s"] == 2132.0
