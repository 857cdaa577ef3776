"""benchmarks/squad.py: fine-tuning and prediction speed with random weights from a config alone, in bf16, on a
host without TensorFlow (issue 18: row 7 and the fine-tuning epochs row)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "squad.py"
TINY_HF_CONFIG = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
                  "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
                  "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def _run(*args, backend="tensorflow"):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_random_weights_from_a_config_alone_time_both_frameworks(tmp_path, data_slices, minilm_dir):
    squad_file = data_slices / "squad" / "dev-v1.1.json.gz"
    common = ["--squad_file", squad_file, "--num_train_articles", 1, "--train_questions", 6, "--eval_questions", 6]
    exported = _run(*common, "--export_features", tmp_path / "features")
    assert exported.returncode == 0, exported.stderr[-2000:]
    config_dir = tmp_path / "tiny"  # a config and the vocabulary, no weights
    config_dir.mkdir()
    (config_dir / "config.json").write_text(json.dumps(TINY_HF_CONFIG))
    (config_dir / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    # Two bf16 fine-tuning epochs on each side, then prediction: what a GPU host times without the checkpoint.
    result = _run(*common, "--features", tmp_path / "features", "--epochs", 2, "--batch_size", 4, "--random_weights",
                  "--mixed_precision", "bf16", "--preset", config_dir, "--hf_dir", config_dir,
                  "--predict_batch_size", 4, backend="jax")
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["random_weights"] is True and line["mixed_precision"] == "bf16" and line["eval_windows"] >= 6
    assert line["train_windows"] >= 6 and line["epochs"] == 2
    for side in ("keras_jax", "hf_torch"):
        assert line[side]["predict_windows_per_s_warm"] > 0 and len(line[side]["predict_pass_seconds"]) == 2
        assert len(line[side]["epoch_seconds"]) == 2 and line[side]["train_windows_per_s"] > 0
        assert line[side]["final_loss"] > 0


def test_negative_epochs_are_refused(capsys):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import squad

    with pytest.raises(SystemExit):
        squad.parse_args(["--epochs", "-1"])
    assert capsys.readouterr().err.strip().splitlines()[-1].split(": error: ", 1)[1] == "--epochs must be >= 0, got -1"
