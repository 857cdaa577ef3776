"""recipes/finetune_conll.py end to end on a slice of the real CoNLL-2003 files, and entity spans from raw text."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from repo_scripts import load_script

from keras_bert_impl.tasks import tagging

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
RECIPE = REPO_ROOT / "recipes" / "finetune_conll.py"


def _recipe():
    return load_script("recipes/finetune_conll.py")


@pytest.fixture(scope="module")
def trained(shared_data, minilm_dir, tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("conll_run")
    summary = _recipe().main([
        "--data_dir", str(shared_data / "conll2003"), "--preset", str(minilm_dir),
        "--max_train_samples", "64", "--max_eval_samples", "24", "--epochs", "1",
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
        "--epochs", "0", "--max_eval_sentences", "24",  # the old name of --max_eval_samples
        "--max_seq_length", "64", "--model_dir", str(tmp_path),
    ])
    assert again["dev_f1"] == pytest.approx(summary["dev_f1"])
    assert (tmp_path / "dev_predictions.txt").read_text() == (model_dir / "dev_predictions.txt").read_text()


@pytest.mark.slow
def test_fine_tuned_model_trains_further_with_its_labels(trained, shared_data, tmp_path):
    """`--init_checkpoint <run>/model.keras --epochs 1`: the loaded model (saved without its optimizer) trains on the
    task's loss (before: finetune refused it, "`model` is not compiled and no `loss` was given")."""
    model_dir, summary = trained
    further = _recipe().main([
        "--data_dir", str(shared_data / "conll2003"), "--init_checkpoint", str(model_dir / "model.keras"),
        "--epochs", "1", "--max_train_samples", "32", "--max_eval_samples", "24", "--batch_size", "16",
        "--max_seq_length", "64", "--model_dir", str(tmp_path), "--no_test_each_epoch",
    ])
    assert further["labels"] == summary["labels"] and further["train_sentences"] == 32
    assert further["best_epoch"] == 1 and 0.0 <= further["dev_f1"] <= 1.0
    assert (tmp_path / "model.keras").exists()


def test_recipe_flag_errors(capsys):
    recipe = _recipe()
    with pytest.raises(SystemExit) as exit_info:
        recipe.parse_args(["--preset", "x", "--model_dir", "/tmp/x"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "error: --data_dir (or --train_file and --validation_file) is required unless --epochs 0 (see --help)\n"
    )
    with pytest.raises(SystemExit):
        recipe.parse_args(["--preset", "x", "--model_dir", "/tmp/x", "--data_dir", "d", "--tag_column", "0"])
    assert "error: --tag_column 0 is the word column" in capsys.readouterr().err
    args = recipe.parse_args(["--init_checkpoint", "m.keras", "--epochs", "0", "--model_dir", "/tmp/x"])
    assert args.tokenizer is None  # a .keras model brings its own tokenizer


def _slice(path, target, sentences):
    """The first `sentences` sentences of a real CoNLL file, byte for byte."""
    lines, count = [], 0
    with open(path, "rb") as f:
        for line in f:
            lines.append(line)
            if not line.strip() and len(lines) > 1 and lines[-2].strip() and not lines[-2].startswith(b"-DOCSTART-"):
                count += 1
                if count == sentences:
                    break
    target.write_bytes(b"".join(lines))
    return target


def _run_recipe(*args):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, str(RECIPE), *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=300)


def _error_line(result):
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


@pytest.fixture(scope="module")
def slices(shared_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("conll_slices")
    conll = shared_data / "conll2003"
    return {
        "train": _slice(conll / "eng.train", folder / "train.txt", 40),
        "dev": _slice(conll / "eng.testa", folder / "dev.txt", 20),
        "test": _slice(conll / "eng.testb", folder / "test.txt", 20),
        "folder": folder,
    }


def _files(slices, **replace):
    names = {"train": "--train_file", "dev": "--validation_file", "test": "--test_file"}
    paths = {**{k: slices[k] for k in names}, **replace}
    return [x for name, flag in names.items() for x in (flag, paths[name])]


def test_error_windows_1252_byte(slices, shared_data, minilm_dir, tmp_path):
    excerpt = (shared_data / "bad_input" / "pg1342_cp1252_excerpt.txt").read_bytes()
    words = next(line for line in excerpt.split(b"\r\n") if b"\x92" in line).split()
    dev = tmp_path / "dev_cp1252.txt"
    dev.write_bytes(slices["dev"].read_bytes() + b"".join(w + b" NN I-NP O\n" for w in words) + b"\n")
    line = _error_line(_run_recipe(*_files(slices, dev=dev), "--preset", minilm_dir, "--model_dir", tmp_path / "run"))
    assert line == (
        f"error: {dev}, line 501, column 5: byte 0x92 at byte offset 7685 of the file is not valid UTF-8; the file "
        "looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
        "dev_cp1252.txt > utf8_dev_cp1252.txt"
    )
    assert not (tmp_path / "run").exists()  # checked before any work


def test_error_validation_tag_not_in_training(slices, minilm_dir, tmp_path):
    dev = tmp_path / "dev.txt"
    dev.write_bytes(slices["dev"].read_bytes().replace(b"LEICESTERSHIRE NNP I-NP I-ORG", b"LEICESTERSHIRE NNP I-NP I-TEAM"))
    line = _error_line(_run_recipe(*_files(slices, dev=dev), "--preset", minilm_dir, "--model_dir", tmp_path / "run"))
    assert line == (
        f"error: {dev}, line 5, column 4: tag 'I-TEAM' (type 'TEAM') is not in the training file {slices['train']}, "
        "whose entity types are ['LOC', 'MISC', 'ORG', 'PER']"
    )


def test_error_ragged_line(slices, minilm_dir, tmp_path):
    test = tmp_path / "test.txt"
    test.write_bytes(slices["test"].read_bytes().replace(b"SOCCER NN I-NP O", b"SOCCER O"))
    line = _error_line(_run_recipe(*_files(slices, test=test), "--preset", minilm_dir, "--model_dir", tmp_path / "r"))
    assert line == f"error: {test}, line 3, column 3: expected 4 space-separated columns as on line 1, got 2: 'SOCCER O'"


def test_error_bad_tag(slices, minilm_dir, tmp_path):
    train = tmp_path / "train.txt"
    train.write_bytes(slices["train"].read_bytes().replace(b"EU NNP I-NP I-ORG", b"EU NNP I-NP ORG"))
    line = _error_line(_run_recipe(*_files(slices, train=train), "--preset", minilm_dir, "--model_dir", tmp_path / "r"))
    assert line == (
        f"error: {train}, line 3, column 4: Unknown tag 'ORG': expected 'O' or '<prefix>-<TYPE>' with prefix one of "
        "B, I, E, S (e.g. 'B-PER', 'I-LOC')."
    )


def test_error_wrong_tag_scheme(slices, minilm_dir, tmp_path):
    line = _error_line(_run_recipe(*_files(slices), "--tag_scheme", "iob2", "--preset", minilm_dir,
                                   "--model_dir", tmp_path / "r"))
    assert line == (
        f"error: {slices['train']}, line 3, column 4: tag 'I-ORG' follows 'O' (or the sentence start); in IOB2 every "
        "entity starts with 'B-ORG'. If the file is IOB1 (the original CoNLL-2003 files are), read it with "
        "tag_scheme='iob1' (--tag_scheme iob1), which converts (I- starting an entity becomes B-)."
    )


def test_error_tag_column_out_of_range(slices, minilm_dir, tmp_path):
    line = _error_line(_run_recipe(*_files(slices), "--tag_column", "5", "--preset", minilm_dir,
                                   "--model_dir", tmp_path / "r"))
    assert line == (
        f"error: {slices['train']}, line 1: tag_column=5 (--tag_column) names no tag column: the line has 4 "
        "columns, the first holds the word, so the tag column is 1..3 (0-based) or -1..-3"
    )


def test_error_missing_file_and_debug_traceback(slices, minilm_dir, tmp_path):
    missing = tmp_path / "nope.txt"
    args = [*_files(slices, test=missing), "--preset", minilm_dir, "--model_dir", tmp_path / "r"]
    assert _error_line(_run_recipe(*args)) == (f"error: --test_file {missing}: no such file; expected a CoNLL-format text file (a word and its tags a line, a blank line between sentences)")
    debug = _run_recipe(*args, "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    assert f"FileNotFoundError: --test_file {missing}: no such file; expected a CoNLL-format text file (a word and its tags a line, a blank line between sentences)" in debug.stderr


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory, minilm_dir):
    """A small randomly initialised backbone with the real uncased vocabulary, saved as a preset."""
    from keras_bert_impl import BertBackbone

    preset = tmp_path_factory.mktemp("preset") / "tiny"
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                            max_sequence_length=64)
    backbone.save_to_preset(preset, vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True)
    return preset


@pytest.mark.slow
def test_two_column_iobes_files_train_and_the_saved_model_tags_raw_text(slices, tiny_preset, tmp_path):
    """Your own files: 2 columns (word tag), IOBES, converted from the real slices; then the .keras file alone."""
    converted = {}
    for name in ("train", "dev", "test"):
        sentences = tagging.read_conll(slices[name])
        converted[name] = tmp_path / f"{name}.bioes"
        tagging.write_conll(converted[name], sentences, tag_scheme="iobes")
    assert "S-ORG" in converted["train"].read_text()
    model_dir = tmp_path / "run"
    summary = _recipe().main([
        *map(str, _files(converted)), "--tag_scheme", "iobes", "--preset", str(tiny_preset), "--epochs", "1",
        "--batch_size", "8", "--max_seq_length", "64", "--model_dir", str(model_dir), "--seed", "1",
    ])
    assert summary["labels"] == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert summary["tag_scheme"] == "iobes" and 0.0 <= summary["dev_f1"] <= 1.0
    results = json.loads((model_dir / "test_results.json").read_text())
    assert results["num_sentences"] == 20 and results["file"] == str(converted["test"])
    _check_saved_model_tags_raw_text(model_dir / "model.keras", summary["labels"])


def test_a_run_stopped_after_its_last_epoch_resumes_and_writes_the_best_epochs_outputs(slices, tiny_preset,
                                                                                         tmp_path, monkeypatch):
    """Before: a run stopped after its last epoch (Ctrl-C while it wrote its outputs) stopped at every rerun on
    `IndexError: list index out of range` (the best epoch's evaluation looked up among the epochs run in this
    process: none), and never wrote its results."""
    from keras_bert_impl.tasks.tagging import run as tagging_run

    flags = [*map(str, _files(slices)), "--preset", str(tiny_preset), "--epochs", "2", "--batch_size", "8",
             "--max_seq_length", "64", "--model_dir", str(tmp_path / "run"), "--seed", "1", "--no_test_each_epoch"]
    written = tagging_run.write_conll_outputs

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tagging_run, "write_conll_outputs", stopped)
    with pytest.raises(SystemExit) as leaving:  # (the recipe's Ctrl-C: one line, exit status 130)
        _recipe().main(flags)
    assert leaving.value.code == 130
    assert os.listdir(tmp_path / "run" / "checkpoints") == ["ckpt-000000002"]
    monkeypatch.setattr(tagging_run, "write_conll_outputs", written)
    summary = _recipe().main(flags)  # resumed: both epochs done, the best one's weights restored and scored
    assert len(summary["history"]["dev_f1"]) == 2
    results = json.loads((tmp_path / "run" / "dev_results.json").read_text())
    assert results["f1"] == summary["dev_f1"] == summary["history"]["dev_f1"][summary["best_epoch"] - 1]
    assert (tmp_path / "run" / "test_results.json").exists() and not (tmp_path / "run" / "checkpoints").exists()


def _check_saved_model_tags_raw_text(path, labels):
    script = textwrap.dedent(f"""
        import json, keras
        import keras_bert_impl
        model = keras.saving.load_model({str(path)!r})
        entities = model.predict_entities(["John lives in Paris."])
        print(json.dumps({{"labels": model.label_names, "entities": entities,
                          "sequence_length": model.preprocessor.sequence_length}}))
    """)
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["labels"] == labels and out["sequence_length"] == 64
    [entities] = out["entities"]
    for entity in entities:
        assert "John lives in Paris."[entity["start"] : entity["end"]] == entity["text"]
        assert entity["type"] in ("PER", "ORG", "LOC", "MISC") and 0.0 <= entity["score"] <= 1.0


@pytest.mark.slow
def test_saved_model_of_the_conll_run_tags_raw_text(trained):
    model_dir, summary = trained
    _check_saved_model_tags_raw_text(model_dir / "model.keras", summary["labels"])


def test_split_words_offsets():
    from keras_bert_impl.text.token_classifier_preprocessor import split_words

    text = "Inzamam-ul-Haq scored 1,874 runs for Pakistan's side (U.S. rated it AA+), didn't he..."
    words = split_words(text)
    assert [w for w, _, _ in words] == ["Inzamam-ul-Haq", "scored", "1,874", "runs", "for", "Pakistan", "'s", "side",
                                        "(", "U.S.", "rated", "it", "AA+", ")", ",", "did", "n't", "he", "..."]
    assert all(text[s:e] == w for w, s, e in words)


def test_split_words_gives_back_the_words_of_real_conll_sentences(shared_data):
    # Before: `'s`, `n't`, `1,000` and `U.S.` were split otherwise than CoNLL-2003 writes them, so fit on
    # " ".join(words) stopped on "13 words but 9 labels" for a third of the training sentences, and
    # predict_entities gave ('LOC', "Germany's") where Hugging Face's pipeline gives 'Germany'.
    from keras_bert_impl.tasks.tagging.reading import read_conll
    from keras_bert_impl.text.token_classifier_preprocessor import split_words

    sentences = read_conll(shared_data / "conll2003" / "eng.train")
    words = [list(sentence.words) for sentence in sentences]
    same = sum([w for w, _, _ in split_words(" ".join(sentence))] == sentence for sentence in words)
    assert len(words) == 14041 and same / len(words) > 0.94, same
