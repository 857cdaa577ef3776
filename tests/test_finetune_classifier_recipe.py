"""recipes/finetune_classifier.py end to end on files built from the real SST-2 and STS-B files, and its errors.

The recipe runs in a subprocess (TensorFlow backend); its `model.keras` is then
loaded in another fresh process, which must give the same predictions on raw strings.
"""

import csv
import json
import os
import subprocess
import sys
import textwrap

import pytest
from repo_scripts import load_script

RECIPE = os.path.join(os.path.dirname(__file__), "..", "recipes", "finetune_classifier.py")
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}

# Loads a saved model in a fresh process; prints predictions on the test texts and scores on the validation file.
RELOAD = textwrap.dedent("""
    import json, sys
    import keras
    import keras_bert_impl
    from keras_bert_impl.tasks.classification.evaluation import score_outputs
    from keras_bert_impl.tasks.classification.table_files import read_table
    model_path, test_file, dev_file, text, pair, label, regression, separator = sys.argv[1:]
    pair, regression, separator = pair or None, regression == "1", separator or None
    model = keras.saving.load_model(model_path)
    test = read_table(test_file, text, text_pair_column=pair)
    dev = read_table(dev_file, text, label, text_pair_column=pair, regression=regression, label_separator=separator)
    print(json.dumps({"predictions": model.predict_labels(test.inputs, batch_size=8),
                      "dev": score_outputs(dev, model.predict(dev.inputs, batch_size=8, verbose=0), model.label_names),
                      "label_names": model.label_names, "optimizer": getattr(model, "optimizer", None) is not None}))
""")


def _run(*args):
    return subprocess.run([sys.executable, RECIPE, *map(str, args)], capture_output=True, text=True, timeout=600,
                          env=ENV)


def _reload(model_path, test_file, dev_file, text, pair, label, regression, separator=""):
    result = subprocess.run([sys.executable, "-c", RELOAD, model_path, test_file, dev_file, text, pair or "", label,
                             "1" if regression else "0", separator], capture_output=True, text=True, timeout=600,
                            env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _glue_rows(path, limit):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row for _, row in zip(range(limit), reader)]


def _write_csv(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows([r["sentence"], r["label"]] for r in rows)
    return path


def _predictions(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0] == "index\tprediction"
    indices, values = zip(*(line.split("\t") for line in lines[1:]))
    assert list(indices) == [str(i) for i in range(len(lines) - 1)]
    return list(values)


@pytest.fixture(scope="module")
def sst2_files(shared_data, tmp_path_factory):
    glue = shared_data / "glue" / "SST-2"
    root = tmp_path_factory.mktemp("sst2")
    train = _write_csv(root / "train.csv", _glue_rows(glue / "train.tsv", 64))
    dev = _write_csv(root / "dev.csv", _glue_rows(glue / "dev.tsv", 32))
    test = root / "test.tsv"  # GLUE's own unlabelled test file, first 12 rows: columns index, sentence
    test.write_bytes(b"\n".join((glue / "test.tsv").read_bytes().split(b"\n")[:13]) + b"\n")
    return train, dev, test


@pytest.fixture(scope="module")
def sst2_run(sst2_files, tmp_path_factory):
    """One recipe run: SST-2 train CSV (first 48 of 64 rows by --max_train_samples), dev CSV, and a test CSV."""
    train, dev, test = sst2_files
    root = tmp_path_factory.mktemp("sst2_run")
    # GLUE's test file names its column "sentence": as a user would, write it as a CSV with the training column.
    test_csv = root / "test.csv"
    with open(test, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    with open(test_csv, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "text"])
        writer.writerows([r["index"], r["sentence"]] for r in rows)
    out = root / "out"
    result = _run("--train_file", train, "--validation_file", dev, "--test_file", test_csv, "--text_column", "text",
                  "--label_column", "label", "--model_dir", out, "--epochs", 2, "--batch_size", 8,
                  "--max_seq_length", 64, "--learning_rate", 5e-5, "--seed", 1, "--max_train_samples", 48,
                  "--warmup_proportion", 0.2)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result, test_csv


def test_sst2_csv_run_writes_results_model_and_predictions(sst2_run):
    out, result, _ = sst2_run
    results = json.load(open(out / "dev_results.json"))
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed == {"accuracy": results["accuracy"], "macro_f1": results["macro_f1"],
                       "test_predictions": str(out / "test_predictions.tsv")}
    assert 0.0 <= results["accuracy"] <= 1.0 and 0.0 <= results["macro_f1"] <= 1.0
    assert results["validation_examples"] == 32 and results["train_examples"] == 48 and results["test_examples"] == 12
    assert results["label_names"] == ["0", "1"] and results["epochs"] == 2 and results["regression"] is False
    # Scored after every epoch (before: once, after training), the best epoch's weights kept and scored.
    history = results["validation_history"]
    assert sorted(history) == ["val_accuracy", "val_macro_f1"] and len(history["val_accuracy"]) == 2
    assert results["best_epoch"] == 1 + history["val_accuracy"].index(max(history["val_accuracy"]))
    assert results["accuracy"] == pytest.approx(max(history["val_accuracy"]), abs=1e-6)
    assert results["warmup_proportion"] == 0.2 and results["early_stopping_patience"] is None
    assert results["train_seconds"] > 0 and results["eval_seconds"] > 0 and results["sequence_length"] == 64
    assert results["final_train_loss"] > 0 and "pearson" not in results
    assert results["mixed_precision"] is None  # `auto` on a CPU: float32
    assert (out / "model.keras").is_file()
    predictions = _predictions(out / "test_predictions.tsv")
    assert len(predictions) == 12 and set(predictions) <= {"0", "1"}


@pytest.mark.slow
def test_model_keras_in_a_fresh_process_gives_the_same_predictions(sst2_run, sst2_files):
    out, _, test_csv = sst2_run
    results = json.load(open(out / "dev_results.json"))
    reloaded = _reload(str(out / "model.keras"), str(test_csv), str(sst2_files[1]), "text", None, "label", False)
    assert reloaded["predictions"] == _predictions(out / "test_predictions.tsv")
    assert reloaded["dev"] == {"accuracy": results["accuracy"], "macro_f1": results["macro_f1"]}
    assert reloaded["label_names"] == ["0", "1"] and reloaded["optimizer"] is False


def test_a_runs_model_keras_labels_new_rows_without_training(sst2_run, sst2_files, tmp_path):
    """`--init_checkpoint <run>/model.keras --epochs 0`: the same test predictions and validation scores as the run
    that wrote it, no training file read, no model rewritten."""
    out, _, test_csv = sst2_run
    trained = json.load(open(out / "dev_results.json"))
    predicted = tmp_path / "predicted"
    result = _run("--init_checkpoint", out / "model.keras", "--epochs", 0, "--test_file", test_csv,
                  "--validation_file", sst2_files[1], "--text_column", "text", "--label_column", "label",
                  "--model_dir", predicted, "--batch_size", 8)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _predictions(predicted / "test_predictions.tsv") == _predictions(out / "test_predictions.tsv")
    results = json.load(open(predicted / "dev_results.json"))
    assert (results["accuracy"], results["macro_f1"]) == (trained["accuracy"], trained["macro_f1"])
    assert results["epochs"] == 0 and results["label_names"] == ["0", "1"] and results["sequence_length"] == 64
    assert "best_epoch" not in results and "train_examples" not in results and results["test_examples"] == 12
    assert not (predicted / "model.keras").exists() and not (predicted / "checkpoints").exists()
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed == {"accuracy": trained["accuracy"], "macro_f1": trained["macro_f1"],
                       "test_predictions": str(predicted / "test_predictions.tsv")}


def test_scoring_into_the_training_runs_directory_is_refused_and_keeps_its_results(sst2_run, sst2_files):
    """A run that only scores (`--epochs 0 --validation_file`) into the training run's `--model_dir` would replace
    its `dev_results.json` (best epoch, history, timings): one line, before the model loads, and nothing changed."""
    out, _, _ = sst2_run
    before = (out / "dev_results.json").read_bytes()
    result = _run("--init_checkpoint", out / "model.keras", "--epochs", 0, "--validation_file", sst2_files[1],
                  "--text_column", "text", "--label_column", "label", "--model_dir", out)
    _assert_one_line_error(result, f"error: --model_dir {out} holds the model.keras of a training run and its scores "
                                   "(dev_results.json): --epochs 0 would replace them. Give another --model_dir for "
                                   "this run's outputs (--init_checkpoint reads the model from wherever it is)")
    assert (out / "dev_results.json").read_bytes() == before


@pytest.mark.slow
def test_a_runs_model_keras_trains_further_on_rows_of_its_labels(sst2_run, sst2_files, tmp_path):
    out, _, _ = sst2_run
    train, dev, _ = sst2_files
    further = tmp_path / "further"
    result = _run("--init_checkpoint", out / "model.keras", "--train_file", train, "--validation_file", dev,
                  "--text_column", "text", "--label_column", "label", "--model_dir", further, "--epochs", 1,
                  "--batch_size", 8, "--max_train_samples", 16)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.load(open(further / "dev_results.json"))
    assert results["train_examples"] == 16 and results["label_names"] == ["0", "1"] and results["best_epoch"] == 1
    assert results["sequence_length"] == 64  # the fine-tuned model's preprocessor, not the flag's default 128
    assert (further / "model.keras").is_file()


@pytest.mark.slow
def test_stsb_pairs_regression_from_jsonl_and_tsv(shared_data, tmp_path):
    sts = shared_data / "glue" / "STS-B"
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"sentence1": r["sentence1"], "sentence2": r["sentence2"],
                                         "score": float(r["score"])}) + "\n"
                             for r in _glue_rows(sts / "train.tsv", 48)), encoding="utf-8")
    dev = tmp_path / "dev.tsv"  # the real GLUE file's first 24 rows, bytes unchanged
    dev.write_bytes(b"\n".join((sts / "dev.tsv").read_bytes().split(b"\n")[:25]) + b"\n")
    test = tmp_path / "test.tsv"  # unlabelled
    test.write_bytes(b"\n".join((sts / "test.tsv").read_bytes().split(b"\n")[:9]) + b"\n")
    out = tmp_path / "out"
    result = _run("--train_file", train, "--validation_file", dev, "--test_file", test,
                  "--text_column", "sentence1", "--text_pair_column", "sentence2", "--label_column", "score",
                  "--regression", "--output_dir", out, "--epochs", 1, "--batch_size", 8, "--sequence_length", 64,
                  "--learning_rate", 5e-5)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.load(open(out / "dev_results.json"))
    assert set(results) >= {"pearson", "spearman"} and "accuracy" not in results
    assert all(results[k] is None or -1.0 <= results[k] <= 1.0 for k in ("pearson", "spearman"))
    assert results["label_names"] is None and results["regression"] is True
    assert results["validation_examples"] == 24 and results["train_examples"] == 48 and results["test_examples"] == 8
    scores = [float(v) for v in _predictions(out / "test_predictions.tsv")]
    assert len(scores) == 8
    reloaded = _reload(str(out / "model.keras"), str(test), str(dev), "sentence1", "sentence2", "score", True)
    assert reloaded["predictions"] == pytest.approx(scores, rel=1e-5, abs=1e-5)
    assert reloaded["dev"] == pytest.approx({k: results[k] for k in ("pearson", "spearman")}, abs=1e-6)
    # The same output_dir again, without a test file: the earlier run's predictions do not stay beside the new model.
    again = _run("--train_file", train, "--validation_file", dev, "--text_column", "sentence1", "--text_pair_column",
                 "sentence2", "--label_column", "score", "--regression", "--output_dir", out, "--epochs", 1,
                 "--batch_size", 8, "--sequence_length", 64, "--learning_rate", 5e-5, "--seed", 1)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not (out / "test_predictions.tsv").exists() and not (out / "checkpoints").exists()


@pytest.mark.slow
def test_multi_label_entity_types_from_jsonl_and_csv(shared_data, tmp_path):
    """Each CoNLL-2003 sentence labelled with the entity types it mentions (none, one or several)."""
    from keras_bert_impl.tasks.tagging.reading import read_conll

    def rows(path, count):
        sentences = [s for s in read_conll(shared_data / "conll2003" / path) if len(s.words) >= 4][:count]
        return [(" ".join(s.words), list(dict.fromkeys(t[2:] for t in s.tags if t != "O"))) for s in sentences]

    train = tmp_path / "train.jsonl"  # labels as JSON lists
    train.write_text("".join(json.dumps({"text": t, "types": types}) + "\n" for t, types in rows("eng.train", 48)),
                     encoding="utf-8")
    dev_rows = rows("eng.testa", 24)
    dev = tmp_path / "dev.csv"  # labels joined by "|" in one cell, "" for none
    with open(dev, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([("text", "types"), *((t, "|".join(types)) for t, types in dev_rows)])
    out = tmp_path / "out"
    result = _run("--train_file", train, "--validation_file", dev, "--test_file", dev, "--text_column", "text",
                  "--label_column", "types", "--multi_label", "--label_separator", "|", "--output_dir", out,
                  "--epochs", 1, "--batch_size", 8, "--sequence_length", 64, "--learning_rate", 1e-4)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.load(open(out / "dev_results.json"))
    assert results["label_names"] == ["LOC", "MISC", "ORG", "PER"] and results["multi_label"] is True
    assert all(0.0 <= results[k] <= 1.0 for k in ("micro_f1", "macro_f1", "subset_accuracy", "hamming_accuracy"))
    assert "accuracy" not in results
    predicted = [value.split("|") if value else [] for value in _predictions(out / "test_predictions.tsv")]
    assert len(predicted) == 24 and all(set(p) <= set(results["label_names"]) for p in predicted)
    reloaded = _reload(str(out / "model.keras"), str(dev), str(dev), "text", "", "types", False, "|")
    assert reloaded["predictions"] == predicted  # predict_labels: one list of names per text
    assert reloaded["dev"] == pytest.approx({k: results[k] for k in reloaded["dev"]}, abs=1e-6)

    flags = ["--train_file", train, "--validation_file", dev, "--text_column", "text", "--label_column", "types",
             "--output_dir", tmp_path / "other", "--multi_label", "--regression"]
    _assert_one_line_error(_run(*flags), "error: --multi_label and --regression exclude each other (labels are names, "
                                         "or one score) (see --help)")


# === Errors: exit code 2, one line, no traceback, nothing written ===


def _assert_one_line_error(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    # TensorFlow's import may log to stderr first; the recipe's own output is this one last line.
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def _error_run(tmp_path, train, dev, *extra):
    out = tmp_path / "out"
    result = _run("--train_file", train, "--validation_file", dev, "--text_column", "text", "--label_column", "label",
                  "--output_dir", out, "--epochs", 1, *extra)
    assert not out.exists()  # checked before the model is built: nothing written
    return result


def test_unknown_validation_label_exits_2(sst2_files, tmp_path):
    train, dev, _ = sst2_files
    lines = dev.read_text(encoding="utf-8").splitlines()
    lines[7] = lines[7][: lines[7].rindex(",")] + ",positive"
    bad = tmp_path / "dev.csv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _assert_one_line_error(_error_run(tmp_path, train, bad), f"error: {bad}, line 8, column 'label': label 'positive'",
                           "training labels ['0', '1']")


def test_undecodable_byte_exits_2(shared_data, sst2_files, tmp_path):
    train, dev, _ = sst2_files
    raw = (shared_data / "bad_input" / "pg84_cp1252_excerpt.txt").read_bytes()
    bad_line = raw.split(b"\r\n")[raw[:1570].count(b"\n")]  # holds the first invalid byte (0x97, an em dash)
    bad = tmp_path / "train.csv"
    bad.write_bytes(train.read_bytes() + b'"' + bad_line.replace(b'"', b'""') + b'",0\r\n')
    line = train.read_bytes().count(b"\n") + 1
    _assert_one_line_error(_error_run(tmp_path, bad, dev), f"error: {bad}, line {line}, column ",
                           "byte 0x97", "not valid UTF-8", "re-encode it as UTF-8")


def test_ragged_csv_and_missing_test_column_exit_2(sst2_files, tmp_path):
    train, dev, _ = sst2_files
    lines = train.read_text(encoding="utf-8").splitlines()
    lines[10] = "an unquoted, comma-holding text,1"
    bad = tmp_path / "train.csv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _assert_one_line_error(_error_run(tmp_path, bad, dev), f"error: {bad}, line 11, column 3: 3 fields where")
    test = tmp_path / "test.tsv"
    test.write_text("index\tsentence\n0\ta fine film\n", encoding="utf-8")
    _assert_one_line_error(_error_run(tmp_path, train, dev, "--test_file", test),
                           f"error: {test}, line 1, column 'text': no such column", "'index', 'sentence'")


def test_missing_file_and_bad_flags_exit_2(sst2_files, tmp_path):
    train, _, _ = sst2_files
    error = _assert_one_line_error(_error_run(tmp_path, train, tmp_path / "absent.csv"))
    assert error == f"error: --validation_file {tmp_path / 'absent.csv'}: no such file; expected a .csv, .tsv or .jsonl table"
    error = _assert_one_line_error(_error_run(tmp_path, tmp_path, train))  # (was "[Errno 21] Is a directory: ...")
    assert error == f"error: --train_file {tmp_path}: a directory; expected a .csv, .tsv or .jsonl table"
    result = _run("--train_file", train, "--validation_file", train, "--text_column", "text",
                  "--output_dir", tmp_path / "out")
    error = _assert_one_line_error(result, "--label_column")
    assert error == "error: --epochs 3 trains: give --label_column too (see --help)"
    assert result.stderr.strip().count("\n") == 0  # the flag parser fails before TensorFlow is imported
    error = _assert_one_line_error(_error_run(tmp_path, train, train, "--warmup_proportion", "1.5"))
    assert error == "error: --warmup_proportion=1.5: must be a number in [0, 1)"


def test_flags_parse_to_config():
    recipe = load_script("recipes/finetune_classifier.py")
    config = recipe.parse_args(["--train_file", "a.csv", "--validation_file", "b.jsonl", "--text_column", "t",
                                "--label_column", "y", "--output_dir", "o", "--max_seq_length", "96",
                                "--regression", "--max_train_samples", "10", "--text_pair_column", "u"])
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig

    assert config == TableClassificationConfig(
        train_file="a.csv", validation_file="b.jsonl", text_column="t", label_column="y", model_dir="o",
        text_pair_column="u", regression=True, sequence_length=96, max_train_samples=10)
    assert config.preset == "all_minilm_l6_v2_en" and config.test_file is None
    assert (config.warmup_proportion, config.early_stopping_patience) == (0.1, None)
    assert config.mixed_precision == "auto"  # bf16 on a bf16 GPU or a TPU, float32 here
    assert recipe.parse_args(["--train_file", "a", "--validation_file", "b", "--text_column", "t",
                              "--label_column", "y", "--model_dir", "o", "--sequence_length", "32"]).sequence_length == 32
    assert recipe.parse_args(["--train_file", "a", "--validation_file", "b", "--text_column", "t",
                              "--label_column", "y", "--output_dir", "o", "--seq_length", "48"]).sequence_length == 48
    # A pretraining export, by the other recipes' flag name.
    assert recipe.parse_args(["--train_file", "a", "--validation_file", "b", "--text_column", "t",
                              "--label_column", "y", "--model_dir", "o", "--init_checkpoint", "run/export"]
                             ).preset == "run/export"


# Compares a saved model's backbone with the preset's: which weights the run changed.
CHANGED_WEIGHTS = textwrap.dedent("""
    import json, sys
    import keras, numpy as np
    import keras_bert_impl
    model = keras.saving.load_model(sys.argv[1])
    preset = keras_bert_impl.BertBackbone.from_preset("all_minilm_l6_v2_en")
    saved = {v.path: keras.ops.convert_to_numpy(v) for v in model.backbone.weights}
    print(json.dumps(sorted({path.split("/")[-2] if "transformer_layer" in path else path
                             for path, value in ((v.path, keras.ops.convert_to_numpy(v)) for v in preset.weights)
                             if not np.array_equal(saved[path], value)})))
""")


@pytest.mark.slow
def test_lora_rank_trains_only_the_qkv_projections_and_saves_a_plain_model(sst2_files, tmp_path):
    train, dev, _ = sst2_files
    out = tmp_path / "out"
    result = _run("--train_file", train, "--validation_file", dev, "--text_column", "text", "--label_column", "label",
                  "--model_dir", out, "--epochs", 1, "--batch_size", 8, "--sequence_length", 64,
                  "--learning_rate", 5e-4, "--lora_rank", 4, "--max_train_samples", 32)
    assert result.returncode == 0, result.stderr[-3000:]
    changed = subprocess.run([sys.executable, "-c", CHANGED_WEIGHTS, str(out / "model.keras")], capture_output=True,
                             text=True, timeout=600, env=ENV)
    assert changed.returncode == 0, changed.stderr[-3000:]
    # The saved kernels hold the merged factors: the qkv kernels moved, every other backbone weight is the preset's.
    assert json.loads(changed.stdout.strip().splitlines()[-1]) == ["qkv"]
    result = _run("--train_file", train, "--validation_file", dev, "--text_column", "text", "--label_column", "label",
                  "--model_dir", tmp_path / "bad", "--lora_rank", 0)
    _assert_one_line_error(result, "argument --lora_rank: must be positive, got 0")


@pytest.mark.parametrize("recipe_path, flags", [
    ("recipes/finetune_glue.py", ["--task", "sst2", "--data_dir", "glue"]),
    ("recipes/finetune_classifier.py", ["--train_file", "a.csv", "--validation_file", "b.csv", "--text_column", "t",
                                        "--label_column", "y"]),
    ("recipes/finetune_conll.py", ["--data_dir", "conll", "--preset", "p"]),
    ("recipes/finetune_squad.py", ["--train_file", "t.json", "--predict_file", "d.json", "--preset", "p"]),
])
def test_every_finetuning_recipe_takes_lora_rank_into_its_config(recipe_path, flags):
    import dataclasses

    recipe = load_script(recipe_path)  # (puts recipes/ on the path: command_line imports)
    from command_line import config_from_args

    def config_of(*extra):
        args = recipe.parse_args([*flags, "--model_dir", "m", *extra])
        if dataclasses.is_dataclass(args):
            return args
        if hasattr(recipe, "config_from_args"):
            return recipe.config_from_args(args)
        from keras_bert_impl.tasks.span_qa.run import SpanQaConfig
        from keras_bert_impl.tasks.tagging.run import TaggingConfig

        return config_from_args(args, TaggingConfig if "conll" in recipe_path else SpanQaConfig)

    config = config_of("--lora_rank", "8")
    assert config.lora_rank == 8
    # The learning rate follows: LoRA's 5e-4 unless given; the task's own rate without LoRA.
    assert config.learning_rate == 5e-4
    assert config_of("--lora_rank", "8", "--learning_rate", "1e-4").learning_rate == 1e-4
    assert config_of().learning_rate == {"glue": 2e-5, "classifier": 2e-5, "conll": 5e-5, "squad": 3e-5}[
        recipe_path.split("finetune_")[1][:-3]]
