"""recipes/finetune_squad.py end to end on a slice of the real dev file, and answer_question."""

import gzip
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_bert_impl import BertBackbone, BertSpanExtractor
from keras_bert_impl.tasks import span_qa as squad

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory, minilm_dir):
    """A small randomly initialised backbone with the real uncased vocabulary, saved as a preset."""
    preset = tmp_path_factory.mktemp("preset") / "tiny"
    backbone = BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=128
    )
    backbone.save_to_preset(preset, vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True)
    return preset


@pytest.fixture(scope="module")
def dev_slice(data_slices):
    data = squad.load_squad_json(data_slices / "squad" / "dev-v1.1.json.gz")
    paragraph = data["data"][0]["paragraphs"][0]
    return {"version": "1.1", "data": [{"title": "Super_Bowl_50", "paragraphs": [paragraph]}]}


def _load_recipe():
    sys.path.insert(0, str(REPO_ROOT / "recipes"))
    try:
        import finetune_squad
    finally:
        sys.path.pop(0)
    return finetune_squad


@pytest.mark.slow
def test_a_fine_tuned_model_keras_trains_further(tmp_path, tiny_preset, dev_slice):
    """`--init_checkpoint <run>/model.keras --epochs 1`: the loaded model (saved without its optimizer) trains on the
    task's loss (before: finetune refused it, "`model` is not compiled and no `loss` was given")."""
    data = tmp_path / "train.json"
    data.write_text(json.dumps(dev_slice), encoding="utf-8")
    recipe = _load_recipe()
    common = ["--version", "1.1", "--train_file", str(data), "--predict_file", str(data), "--max_seq_length", "128",
              "--doc_stride", "64", "--batch_size", "8", "--epochs", "1", "--learning_rate", "1e-3"]
    recipe.main([*common, "--preset", str(tiny_preset), "--model_dir", str(tmp_path / "run")])
    recipe.main([*common, "--init_checkpoint", str(tmp_path / "run" / "model.keras"),
                 "--model_dir", str(tmp_path / "further")])
    evaluation = json.loads((tmp_path / "further" / "eval.json").read_text())
    assert evaluation["train_windows"] > 0 and 0.0 <= evaluation["f1"] <= 100.0
    assert (tmp_path / "further" / "model.keras").exists()


def test_recipe_v1_trains_predicts_and_writes_official_files(tmp_path, tiny_preset, dev_slice, capsys):
    train = tmp_path / "train.json.gz"
    with gzip.open(train, "wt", encoding="utf-8") as f:
        json.dump(dev_slice, f)
    predict = tmp_path / "dev.json"
    predict.write_text(json.dumps(dev_slice), encoding="utf-8")
    model_dir = tmp_path / "run"
    recipe = _load_recipe()
    recipe.main([
        "--version", "1.1", "--train_file", str(train), "--predict_file", str(predict),
        "--preset", str(tiny_preset), "--max_seq_length", "128", "--doc_stride", "64",
        "--batch_size", "8", "--epochs", "1", "--learning_rate", "1e-3", "--model_dir", str(model_dir),
    ])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    predictions = json.loads((model_dir / "predictions.json").read_text())
    context = dev_slice["data"][0]["paragraphs"][0]["context"]
    qids = [qa["id"] for qa in dev_slice["data"][0]["paragraphs"][0]["qas"]]
    assert sorted(predictions) == sorted(qids)
    assert all(text and text in context for text in predictions.values())
    evaluation = json.loads((model_dir / "eval.json").read_text())
    assert set(evaluation) >= {"exact_match", "f1", "train_windows", "predict_windows"}
    assert evaluation["missing_answers"] == evaluation["mismatched_answers"] == evaluation["skipped_questions"] == 0
    assert 0.0 <= evaluation["exact_match"] <= evaluation["f1"] <= 100.0
    assert printed["f1"] == evaluation["f1"]
    assert evaluation["predict_packing"] is True  # the default: several windows a row
    assert evaluation["predict_real_tokens"] <= evaluation["predict_token_slots"]
    assert (model_dir / "model.keras").exists() and not (model_dir / "null_odds.json").exists()

    # The saved .keras file answers raw questions alone, in a fresh process (its preprocessor is inside).
    script = textwrap.dedent(f"""
        import json, keras
        import keras_bert_impl
        model = keras.saving.load_model({str(model_dir / "model.keras")!r})
        context = {context!r}
        answer = model.answer("Which NFL team represented the AFC at Super Bowl 50?", context)
        print(json.dumps({{"answer": answer, "sequence_length": model.preprocessor.sequence_length,
                          "doc_stride": model.preprocessor.doc_stride}}))
    """)
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    out = json.loads(loaded.stdout.strip().splitlines()[-1])
    answer = out["answer"]
    assert (out["sequence_length"], out["doc_stride"]) == (128, 64)
    assert answer["text"] and context[answer["start"] : answer["end"]] == answer["text"]
    assert 0.0 < answer["score"] <= 1.0

    # v2.0 predict-only from the fine-tuned .keras file: null_odds.json and the tuned threshold.
    v2 = json.loads(json.dumps(dev_slice))
    v2["version"] = "v2.0"
    qas = v2["data"][0]["paragraphs"][0]["qas"]
    qas[0] = {"id": "impossible", "question": "Who painted the Mona Lisa?", "answers": [], "is_impossible": True}
    predict_v2 = tmp_path / "dev-v2.json"
    predict_v2.write_text(json.dumps(v2), encoding="utf-8")
    recipe.main([  # the tokenizer comes from the .keras file
        "--version", "2.0", "--predict_file", str(predict_v2), "--init_checkpoint", str(model_dir / "model.keras"),
        "--max_seq_length", "128", "--epochs", "0", "--model_dir", str(tmp_path / "v2"),
    ])
    null_odds = json.loads((tmp_path / "v2" / "null_odds.json").read_text())
    assert sorted(null_odds) == sorted(qa["id"] for qa in qas)
    evaluation = json.loads((tmp_path / "v2" / "eval.json").read_text())
    assert evaluation["NoAns_total"] == 1 and evaluation["HasAns_total"] == len(qas) - 1
    assert "null_score_diff_threshold" in evaluation
    predictions = json.loads((tmp_path / "v2" / "predictions.json").read_text())
    threshold = evaluation["null_score_diff_threshold"]
    assert all((predictions[q] == "") == (null_odds[q] > threshold) for q in predictions)

    # One window a row (--no-predict_packing) gives the same answers and null odds: each packed window's own
    # [CLS] scores the null answer.
    recipe.main([
        "--version", "2.0", "--predict_file", str(predict_v2), "--init_checkpoint", str(model_dir / "model.keras"),
        "--max_seq_length", "128", "--epochs", "0", "--model_dir", str(tmp_path / "v2_unpacked"),
        "--no-predict_packing",
    ])
    unpacked = json.loads((tmp_path / "v2_unpacked" / "eval.json").read_text())
    assert unpacked["predict_packing"] is False and evaluation["predict_packing"] is True
    assert unpacked["predict_token_slots"] > evaluation["predict_token_slots"]
    assert json.loads((tmp_path / "v2_unpacked" / "predictions.json").read_text()) == predictions
    unpacked_odds = json.loads((tmp_path / "v2_unpacked" / "null_odds.json").read_text())
    assert all(abs(unpacked_odds[q] - null_odds[q]) < 1e-4 for q in null_odds)

    # --max_eval_samples 2: the first two questions of the file, predicted as in the full run, and the official
    # metrics over those two only.
    recipe.main([
        "--version", "2.0", "--predict_file", str(predict_v2), "--init_checkpoint", str(model_dir / "model.keras"),
        "--max_seq_length", "128", "--epochs", "0", "--model_dir", str(tmp_path / "v2_first_two"),
        "--max_eval_samples", "2", "--null_score_diff_threshold", str(threshold),
    ])
    first_two = json.loads((tmp_path / "v2_first_two" / "predictions.json").read_text())
    assert first_two == {qa["id"]: predictions[qa["id"]] for qa in qas[:2]}
    subset = json.loads((tmp_path / "v2_first_two" / "eval.json").read_text())
    assert subset["total"] == 2 and subset["predict_questions"] == 2
    assert subset["NoAns_total"] == 1 and subset["HasAns_total"] == 1


def test_recipe_trains_on_packed_rows(tmp_path, tiny_preset, dev_slice, capsys):
    train = tmp_path / "train.json"
    train.write_text(json.dumps(dev_slice), encoding="utf-8")
    model_dir = tmp_path / "packed"
    _load_recipe().main([
        "--train_file", str(train), "--predict_file", str(train), "--preset", str(tiny_preset),
        "--max_seq_length", "128", "--doc_stride", "64", "--batch_size", "8", "--epochs", "1",
        "--learning_rate", "1e-3", "--packing", "--model_dir", str(model_dir),
    ])
    evaluation = json.loads((model_dir / "eval.json").read_text())
    assert evaluation["packing"] is True and evaluation["predict_packing"] is True
    assert np.isfinite(evaluation["train_loss"]).all()
    predictions = json.loads((model_dir / "predictions.json").read_text())
    qids = [qa["id"] for qa in dev_slice["data"][0]["paragraphs"][0]["qas"]]
    assert sorted(predictions) == sorted(qids)


def test_recipe_rejects_bad_flags(capsys):
    recipe = _load_recipe()
    with pytest.raises(SystemExit) as exit_info:
        recipe.parse_args(["--predict_file", "x.json", "--preset", "p", "--model_dir", "m"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "error: --train_file is required unless --epochs 0 (see --help)\n"


def _run_recipe(*args):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, str(REPO_ROOT / "recipes" / "finetune_squad.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_recipe_bad_predict_file_is_one_line_before_training(tmp_path, tiny_preset, dev_slice):
    train = tmp_path / "train.json"
    train.write_text(json.dumps(dev_slice), encoding="utf-8")
    truncated = tmp_path / "dev.json"
    truncated.write_text(json.dumps(dev_slice)[:500], encoding="utf-8")  # a real file cut short
    args = ["--train_file", train, "--predict_file", truncated, "--preset", tiny_preset, "--max_seq_length", "128",
            "--epochs", "1", "--model_dir", tmp_path / "run"]
    result = _run_recipe(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {truncated}: not valid JSON at line 1 column 83: Unterminated string starting at."]
    assert not (tmp_path / "run").exists()  # found before any training
    debug = _run_recipe(*args, "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "SquadFormatError" in debug.stderr


def test_answer_question_returns_a_span_of_the_raw_context(tiny_preset):
    from keras_bert_impl.tasks.span_qa.prediction import answer_question, answer_questions
    from keras_bert_impl.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_preset(str(tiny_preset))
    model = BertSpanExtractor(BertBackbone.from_preset(str(tiny_preset)))
    context = "Der Fluss Rhein fließt durch Köln. " * 12  # non-ASCII, several windows at 64 tokens
    answer = answer_question(model, tokenizer, "Where does the Rhine flow?", context, sequence_length=64, doc_stride=16)
    assert answer["text"] == context[answer["start"] : answer["end"]] and answer["text"]
    assert 0.0 < answer["probability"] <= 1.0 and isinstance(answer["score"], float)
    # v2.0 with a threshold below every null odds: "no answer".
    no_answer = answer_question(model, tokenizer, "Where?", context, sequence_length=64, doc_stride=16,
                                version="2.0", null_score_diff_threshold=-1e9)
    assert no_answer["text"] == ""
    with pytest.raises(ValueError, match=r"contexts\[1\]: expected a non-empty string, got ' '"):
        answer_questions(model, tokenizer, ["a?", "b?"], ["text", " "])
    with pytest.raises(ValueError, match="Got 1 questions but 2 contexts"):
        answer_questions(model, tokenizer, ["a?"], ["x", "y"])


@pytest.mark.parametrize("training", [True, False])
def test_dataset_knows_its_number_of_batches(tiny_preset, data_slices, training):
    """Keras progress bars read `len(dataset)`: the real number of steps (no "ran out of data")."""
    from keras_bert_impl.text.tokenizer import BertTokenizer

    data = squad.load_squad_json(data_slices / "squad" / "dev-v1.1.json.gz")
    data = {"version": "1.1", "data": data["data"][:1]}
    examples, _ = squad.read_squad_examples(data, is_training=training)
    features = squad.encode_examples(examples[:120], BertTokenizer.from_preset(str(tiny_preset)),
                                                  sequence_length=128, doc_stride=64, is_training=training)
    dataset = features.to_dataset(8, training=training, seed=0)
    assert len(dataset) == sum(1 for _ in dataset) == sum(1 for _ in dataset)  # two epochs


def test_v2_content_under_version_1_1_and_empty_files_are_refused_before_training(tmp_path):
    from keras_bert_impl.tasks.span_qa.run import check_version

    article = {"title": "T", "paragraphs": [{"context": "The cat sat.", "qas": [
        {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0}]},
        {"id": "q2", "question": "Who stood?", "answers": []}]}]}
    with pytest.raises(ValueError, match=r"dev.json: 1 question\(s\) have no answers \(first ids: q2\)"):
        check_version({"version": "1.1", "data": [article]}, "dev.json", "1.1")
    with pytest.raises(ValueError, match="holds SQuAD v2.0 content .* pass --version 2.0"):
        check_version({"version": "v2.0", "data": [article]}, "dev.json", "1.1")
    check_version({"version": "v2.0", "data": [article]}, "dev.json", "2.0")  # fine under 2.0
    with pytest.raises(ValueError, match=r'train.json: no questions \("data" is empty\)'):
        check_version({"version": "1.1", "data": []}, "train.json", "1.1")
