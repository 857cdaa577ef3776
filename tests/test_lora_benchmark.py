"""benchmarks/lora_finetuning.py: one JSON line per row on real SST-2 rows, and a bad --rows is one line."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "lora_finetuning.py"


def _run(*args):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_each_row_prints_its_accuracy_weights_and_bytes(shared_data, tmp_path):
    output = tmp_path / "rows.jsonl"
    result = _run("--data_dir", shared_data / "glue", "--train_limit", 16, "--epochs", 1, "--batch_size", 8,
                  "--sequence_length", 32, "--rank", 2, "--rows", "lora_qkv,full", "--output", output)
    assert result.returncode == 0, result.stderr[-3000:]
    lora, full = [json.loads(line) for line in output.read_text().splitlines()]
    assert [lora["row"], full["row"]] == ["lora_qkv", "full"] and lora["dev_examples"] == full["dev_examples"] == 872
    assert lora["trainable_weights"] == 6 * 2 * 384 * (1 + 3) + 384 * 2 + 2  # 6 blocks' A and B, and the head
    assert full["trainable_weights"] == full["all_weights"] == lora["all_weights"] - 6 * 2 * 384 * 4
    assert lora["learning_rate"] == 5e-4 and full["learning_rate"] == 5e-5
    assert 0 < lora["bytes_to_keep"] < 200_000 < 50_000_000 < full["bytes_to_keep"]
    assert 0 <= lora["dev_accuracy"] <= 1 and len(lora["epoch_seconds"]) == 1


def test_an_unknown_row_is_one_line():
    result = _run("--rows", "lora_everything")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --rows: unknown row 'lora_everything'; expected some of ['full', 'lora_qkv', 'lora_qkv_ffn']")
