"""recipes/finetune_conll.py end to end on a slice of the real CoNLL-2003 files, and entity spans from raw text."""

import importlib.util
import json
import pathlib

import pytest

RECIPE = pathlib.Path(__file__).resolve().parents[1] / "recipes" / "finetune_conll.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("finetune_conll", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trained(shared_data, minilm_dir, tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("conll_run")
    summary = _recipe().main([
        "--data_dir", str(shared_data / "conll2003"), "--preset", str(minilm_dir),
        "--max_train_sentences", "64", "--max_eval_sentences", "24", "--epochs", "1",
        "--batch_size", "16", "--learning_rate", "1e-4", "--max_seq_length", "64",
        "--model_dir", str(model_dir), "--seed", "1",
        "--predict_text", "EU rejects German call to boycott British lamb.", "--predict_text", "",
    ])
    return model_dir, summary


def test_recipe_writes_results_and_predictions(trained):
    model_dir, summary = trained
    for name in ("dev", "test"):
        results = json.loads((model_dir / f"{name}_results.json").read_text())
        assert {"precision", "recall", "f1", "per_type", "report"} <= set(results)
        assert results["num_sentences"] == 24
        assert results["f1"] == summary[f"{name}_f1"]
        lines = (model_dir / f"{name}_predictions.txt").read_text().split("\n")
        sentences = [block for block in "\n".join(lines).split("\n\n") if block.strip()]
        assert len(sentences) == 24
        assert all(len(line.split(" ")) == 3 for line in lines if line)
    assert lines[:1] == ["SOCCER O " + lines[0].split(" ")[2]]  # eng.testb starts with "SOCCER"
    assert json.loads((model_dir / "labels.json").read_text())[0] == "O"
    assert (model_dir / "model.keras").exists() and (model_dir / "best.weights.h5").exists()
    assert summary["best_epoch"] == 1 and len(summary["history"]["dev_f1"]) == 1
    assert summary["history"]["test_f1"][0] == summary["test_f1"]
    # Entity spans for raw text: character offsets into the text; an empty text has none.
    text = "EU rejects German call to boycott British lamb."
    spans, empty = summary["entities"]
    assert empty == []
    for span in spans:
        assert span["type"] in ("PER", "ORG", "LOC", "MISC")
        assert text[span["start"] : span["end"]] == span["text"]


def test_fine_tuned_model_reloads_and_predicts_the_same(trained, shared_data, minilm_dir, tmp_path):
    model_dir, summary = trained
    again = _recipe().main([
        "--data_dir", str(shared_data / "conll2003"), "--init_checkpoint", str(model_dir / "model.keras"),
        "--tokenizer", str(minilm_dir), "--epochs", "0", "--max_eval_sentences", "24",
        "--max_seq_length", "64", "--model_dir", str(tmp_path),
    ])
    assert again["dev_f1"] == pytest.approx(summary["dev_f1"])
    assert (tmp_path / "dev_predictions.txt").read_text() == (model_dir / "dev_predictions.txt").read_text()


def test_recipe_flag_errors(capsys):
    recipe = _recipe()
    with pytest.raises(SystemExit):
        recipe.parse_args(["--preset", "x", "--model_dir", "/tmp/x"])
    assert "--data_dir is required unless --epochs 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        recipe.parse_args(["--init_checkpoint", "m.keras", "--epochs", "0", "--model_dir", "/tmp/x"])
    assert "with a .keras --init_checkpoint pass --tokenizer" in capsys.readouterr().err


def test_split_words_offsets():
    from keras_bert_impl.tasks.tagging.prediction import split_words

    text = "Inzamam-ul-Haq scored 1,874 runs for Pakistan's side."
    words = split_words(text)
    assert [w for w, _, _ in words][:3] == ["Inzamam-ul-Haq", "scored", "1"]
    assert "Pakistan's" in [w for w, _, _ in words]
    assert all(text[s:e] == w for w, s, e in words)
