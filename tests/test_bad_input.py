"""Issue 16, faults and bad input: the index of every case, and the tests of the cases no other file covers.

Each case is one test that asserts the exact one-line message a user sees, the exit code (2 for a user
error; a library call raises), and that nothing in `model_dir` was lost. Where a test already lives beside
the code it checks, this table names it instead of repeating it.

Wrong before issue 16:

| case | test |
|---|---|
| a failed first start of pretrain.py blocked its own model_dir (`--num_steps 4` with warm-up 30, a mistyped `--train_files`, `--seq_length 3`) | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`warmup_30_of_4`, `mistyped_train_files`, `sequence_length_3`), ::test_failed_start_leaves_model_dir_usable_and_debug_shows_the_traceback |
| the NaN message advised a lower `--learning_rate`, then refused that rerun | test_pretraining_run.py::test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint, ::test_resume_may_extend_num_steps_and_change_learning_rate_and_reads_legacy_run_config |
| a corrupt newest checkpoint stopped resume (no fallback) | test_checkpoint_faults.py::test_corrupt_newest_file_falls_back_to_the_previous_checkpoint, ::test_resume_past_a_corrupt_newest_checkpoint_ends_with_identical_weights, ::test_resume_with_no_intact_checkpoint_is_one_clear_error |
| `--checkpoint_every 0`: ZeroDivisionError | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`checkpoint_every_0`) |
| GLUE trained on zero examples and exited 0 | test_finetune_glue_recipe.py::test_no_training_examples_is_refused_before_training |
| SQuAD v2.0 content under `--version 1.1` crashed after training | test_squad_recipe.py::test_v2_content_under_version_1_1_and_empty_files_are_refused_before_training |
| a malformed SQuAD `--predict_file` was found only after training | test_squad_recipe.py::test_recipe_bad_predict_file_is_one_line_before_training |
| `--init_checkpoint` whose vocabulary does not match the tokenizer: gather error at step 1 | here: test_glue_init_checkpoint_vocabulary_must_match_the_tokenizer, test_squad_preset_vocabulary_must_match_the_tokenizer, test_conll_preset_vocabulary_must_match_the_tokenizer |

Poor before issue 16:

| case | test |
|---|---|
| the CoNLL recipe caught nothing; a Windows-1252 byte named no file or line | test_finetune_conll_recipe.py::test_error_windows_1252_byte (and ::test_error_* for the other CoNLL errors) |
| pretraining corpus: a binary file, Windows-1252 text, blank lines only | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`binary_corpus`, `cp1252_corpus`, `blank_lines_only`); test_pretraining_data.py::test_check_pretraining_files_names_file_line_and_byte_before_any_iteration |
| Windows-1252 in the validation files, found after the first epoch | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`cp1252_validation`) |
| a truncated `model.safetensors` / `model.weights.h5` given as a preset | test_checkpoint_errors.py::test_truncated_safetensors_names_the_file, ::test_truncated_safetensors_in_the_cache_says_to_delete_the_entry, ::test_truncated_weights_h5_of_an_own_preset_names_the_file |
| `{"data": []}` in SQuAD | test_squad_recipe.py::test_v2_content_under_version_1_1_and_empty_files_are_refused_before_training (the check); here: test_squad_file_without_questions_is_one_line_from_the_recipe |
| `model_dir` a file, or read-only | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`model_dir_is_a_file`), ::test_read_only_model_dir_is_refused_before_any_work |
| `export/` holding a user's file, refused only after training | test_pretraining_run.py::test_export_dir_holding_a_users_file_is_refused_before_training |
| a full disk during a checkpoint: TF's ResourceExhaustedError | test_checkpoint_faults.py::test_a_full_disk_is_a_checkpoint_write_error_and_the_previous_checkpoints_stay_intact; test_run_checkpoints.py::test_full_disk_keeps_the_previous_checkpoint |
| `--num_steps 0` reported `total_steps` | test_pretraining_run.py::test_bad_start_is_one_line_before_any_write (`num_steps_0`) |
| `--epochs 0` on SQuAD wrote predictions from a random span head | here: test_epochs_0_without_a_fine_tuned_model_is_refused (also CoNLL); test_non_positive_numeric_flags_are_one_line (GLUE, CoNLL, SQuAD, finetune_classifier) |
| downloads without a network: chained tracebacks naming one host | test_checkpoint_errors.py::test_every_source_failing_offline_lists_each_try_and_the_cache_dir, ::test_keras_hub_source_offline_is_one_try_among_the_others, ::test_download_of_a_refusing_host_is_one_line |
| tokenizer: `None`, numbers, dicts, a list holding `None`; a lone surrogate | test_tokenizer.py::test_bad_input_is_one_clear_line |
| tokenizer: `detokenize` with an out-of-range id | test_tokenizer.py::test_detokenize_out_of_range_id_is_named |
| tokenizer: undecodable bytes dropped silently (documented) | test_tokenizer.py::test_invalid_utf8_bytes_are_dropped_as_documented, ::test_invalid_utf8_is_read_as_replacement_characters |
| a `.pt` file or a `.zip` given to `from_preset` | test_checkpoint_errors.py::test_pt_file_is_refused_without_unpickling, ::test_zip_file_is_refused_and_not_unpacked, ::test_a_weights_file_given_as_preset_names_its_directory |
| SQuAD questions without an `answers` key skipped silently in training | here: test_squad_questions_without_answers_key_warn_once |

The shared one-line file error and UTF-8 check (`keras_bert_impl/file_errors.py`) are tested through their
readers: test_table_files.py, test_conll_data.py, test_finetune_conll_recipe.py, test_pretraining_data.py,
test_glue_data.py, test_squad_data.py; here: test_a_malformed_glue_file_is_a_file_format_error,
test_a_malformed_squad_file_is_a_file_format_error (the GLUE and SQuAD errors were plain `ValueError`s, which
`except FileFormatError` missed).
"""

import logging

import pytest
from repo_scripts import load_script


def _recipe(name):
    return load_script(f"recipes/{name}.py")


def _snapshot(directory):
    """{relative path: bytes} of every file under `directory`."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture
def model_dir(tmp_path):
    """A model_dir that already holds a user's file: a refused run must leave it exactly as it was."""
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "notes.txt").write_text("results of an earlier run\n")
    return directory


def _main_exit_code(recipe, argv):
    """Runs a recipe's main in-process; its exit code (main returns it or raises SystemExit)."""
    try:
        returned = recipe.main(argv)
    except SystemExit as exit_info:
        return exit_info.code
    return returned if isinstance(returned, int) else 0


def _error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


# === SQuAD ===


def test_squad_questions_without_answers_key_warn_once(data_slices, caplog):
    """The real dev slice with the `answers` key taken out of three questions: one warning, the file, the ids."""
    from keras_bert_impl.tasks.span_qa.reading import load_squad_json, read_squad_examples

    path = data_slices / "squad" / "dev-v1.1.json.gz"
    dataset = load_squad_json(path)
    qas = dataset["data"][0]["paragraphs"][0]["qas"]
    removed = [qa["id"] for qa in qas[:3]]
    for qa in qas[:3]:
        del qa["answers"]
    with caplog.at_level(logging.WARNING, logger="keras_bert_impl.tasks.span_qa.reading"):
        examples, stats = read_squad_examples(dataset, is_training=True, source=str(path))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"{path}: 3 question(s) have no 'answers' key and are skipped for training (first ids: {', '.join(removed)}); "
        "give each answerable question its answers, or mark it \"is_impossible\": true (SQuAD v2.0, --version 2.0)"
    ]
    assert stats.missing_answers == 3 and stats.skipped_questions == 3
    assert not {e.qas_id for e in examples} & set(removed)
    # For prediction they are kept, without a warning (their answers only serve the evaluation).
    caplog.clear()
    examples, stats = read_squad_examples(dataset, is_training=False, source=str(path))
    assert set(removed) <= {e.qas_id for e in examples} and stats.missing_answers == 0 and not caplog.records


def test_squad_file_without_questions_is_one_line_from_the_recipe(tmp_path, model_dir, capsys):
    from keras_bert_impl import BertBackbone, BertSpanExtractor

    empty = tmp_path / "dev.json"
    empty.write_text('{"version": "1.1", "data": []}', encoding="utf-8")
    # A fine-tuned span extractor's file: the story checks what it holds before it reads the SQuAD files.
    BertSpanExtractor(BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                                   max_sequence_length=16)).save(tmp_path / "model.keras")
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe("finetune_squad"), [
        "--predict_file", str(empty), "--init_checkpoint", str(tmp_path / "model.keras"), "--epochs", "0",
        "--model_dir", str(model_dir)])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [
        f'error: {empty}: no questions ("data" is empty): expected SQuAD articles with paragraphs and qas']
    assert _snapshot(model_dir) == before


# === --epochs 0 and other numeric flags of the fine-tuning recipes ===


@pytest.mark.parametrize("recipe_name, head", [("finetune_squad", "span head"), ("finetune_conll", "tagging head")])
def test_epochs_0_without_a_fine_tuned_model_is_refused(recipe_name, head, data_slices, model_dir, capsys):
    extra = ["--predict_file", str(data_slices / "squad" / "dev-v1.1.json.gz")] if recipe_name == "finetune_squad" else []
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe(recipe_name), [
        *extra, "--preset", "all_minilm_l6_v2_en", "--epochs", "0", "--model_dir", str(model_dir)])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --epochs=0 predicts without training, but --preset all_minilm_l6_v2_en has no trained {head}: the "
        f"predictions would come from a random {head}. Pass --epochs 1 or more (with training data), or "
        "--init_checkpoint a fine-tuned model.keras to predict only"]
    assert _snapshot(model_dir) == before


def _glue_dir(data_slices, tmp_path):
    """The vendored STS-B slice (real rows) as a GLUE data dir."""
    data_dir = tmp_path / "glue"
    (data_dir / "STS-B").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        (data_dir / "STS-B" / name).write_bytes((data_slices / "glue" / "STS-B" / name).read_bytes())
    return data_dir


NUMERIC_FLAG_CASES = {
    "glue_epochs_0": ("finetune_glue", ("--epochs", "0"),
                      "error: --epochs=0 predicts without training, but --preset all_minilm_l6_v2_en has no trained "
                      "classification head: the predictions would come from a random classification head. Pass "
                      "--epochs 1 or more (with training data), or --init_checkpoint a fine-tuned model.keras to "
                      "predict only"),
    "glue_batch_size_0": ("finetune_glue", ("--batch_size", "0"), "error: --batch_size=0: must be an integer >= 1"),
    "glue_learning_rate_0": ("finetune_glue", ("--learning_rate", "0"),
                             "error: --learning_rate=0.0: must be a finite number > 0"),
    # Before: inf trained to a loss of nan, and the recipe saved that model with exit status 0.
    "squad_learning_rate_inf": ("finetune_squad", ("--learning_rate", "inf"),
                                "error: --learning_rate=inf: must be a finite number > 0"),
    "glue_warmup_2": ("finetune_glue", ("--warmup_proportion", "2"),
                      "error: --warmup_proportion=2.0: must be a number in [0, 1]"),
    "conll_epochs_negative": ("finetune_conll", ("--epochs", "-1"),
                              "error: --epochs=-1: must be an integer >= 1 (or 0 with a fine-tuned --init_checkpoint "
                              "model.keras, to predict only)"),
    "conll_max_train_samples_0": ("finetune_conll", ("--max_train_samples", "0"),
                                  "error: --max_train_samples=0: must be an integer >= 1"),
    "squad_max_eval_samples_0": ("finetune_squad", ("--max_eval_samples", "0"),
                                 "error: --max_eval_samples=0: must be an integer >= 1"),
    "conll_dropout_1": ("finetune_conll", ("--dropout", "1"), "error: --dropout=1.0: must be a number in [0, 1)"),
    "squad_doc_stride_0": ("finetune_squad", ("--doc_stride", "0"), "error: --doc_stride=0: must be an integer >= 1"),
    "squad_n_best_size_0": ("finetune_squad", ("--n_best_size", "0"), "error: --n_best_size=0: must be an integer >= 1"),
    "squad_epochs_negative": ("finetune_squad", ("--epochs", "-2"),
                              "error: --epochs=-2: must be an integer >= 1 (or 0 with a fine-tuned --init_checkpoint "
                              "model.keras, to predict only)"),
    # --epochs 0 predicts only, with a fine-tuned model.keras (before: refused by the flag parser in every case).
    "classifier_epochs_0": ("finetune_classifier", ("--epochs", "0"),
                            "error: --epochs=0 predicts without training, but --preset all_minilm_l6_v2_en has no "
                            "trained classification head: the predictions would come from a random classification "
                            "head. Pass --epochs 1 or more (with training data), or --init_checkpoint a fine-tuned "
                            "model.keras to predict only"),
    "classifier_batch_size_0": ("finetune_classifier", ("--batch_size", "0"),
                                "error: argument --batch_size: must be positive, got 0 (see --help)"),
    "classifier_learning_rate_inf": ("finetune_classifier", ("--learning_rate", "inf"),
                                     "error: argument --learning_rate: must be a finite number > 0, got inf (see "
                                     "--help)"),
    "classifier_learning_rate_nan": ("finetune_classifier", ("--learning_rate", "nan"),
                                     "error: argument --learning_rate: must be a finite number > 0, got nan (see "
                                     "--help)"),
    # Before: `invalid parse value: 'abc'` (argparse names the function).
    "classifier_learning_rate_abc": ("finetune_classifier", ("--learning_rate", "abc"),
                                     "error: argument --learning_rate: must be a number > 0, got 'abc' (see --help)"),
    "classifier_epochs_1.5": ("finetune_classifier", ("--epochs", "1.5"),
                              "error: argument --epochs: must be an integer >= 1 (or 0 with a fine-tuned "
                              "--init_checkpoint model.keras, to predict only), got '1.5' (see --help)"),
}


@pytest.mark.parametrize("case", sorted(NUMERIC_FLAG_CASES))
def test_non_positive_numeric_flags_are_one_line(case, data_slices, tmp_path, model_dir, capsys):
    recipe_name, flag, message = NUMERIC_FLAG_CASES[case]
    glue = _glue_dir(data_slices, tmp_path)
    squad_file = str(data_slices / "squad" / "dev-v1.1.json.gz")
    base = {
        "finetune_glue": ["--task", "stsb", "--data_dir", str(glue)],
        # CoNLL-2003 is not vendored; the flag is refused before any file is opened.
        "finetune_conll": ["--preset", "all_minilm_l6_v2_en", "--train_file", str(tmp_path / "eng.train"),
                           "--validation_file", str(tmp_path / "eng.testa")],
        "finetune_squad": ["--preset", "all_minilm_l6_v2_en", "--train_file", squad_file, "--predict_file", squad_file],
        "finetune_classifier": ["--train_file", str(glue / "STS-B" / "train.tsv"), "--validation_file",
                                str(glue / "STS-B" / "dev.tsv"), "--text_column", "sentence1", "--label_column",
                                "score", "--regression", "--output_dir", str(model_dir)],
    }[recipe_name]
    if recipe_name != "finetune_classifier":
        base += ["--model_dir", str(model_dir)]
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe(recipe_name), [*base, *flag])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [message]
    assert _snapshot(model_dir) == before


# === --init_checkpoint with another vocabulary ===


@pytest.fixture
def export_without_vocabulary(tmp_path):
    """A pretraining export without vocab.txt: 4,291 embedding rows (a vocabulary built from one book)."""
    from keras_bert_impl import BertBackbone

    export = tmp_path / "export"
    BertBackbone(vocabulary_size=4291, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                 max_sequence_length=128).save_to_preset(str(export))
    return export


def _vocabulary_message(flag, export):
    return (f"error: {flag} {export} has 4291 embedding rows but the tokenizer of all_minilm_l6_v2_en has 30522 "
            "tokens: put the checkpoint's own vocab.txt next to its weights, or pass the --preset whose tokenizer it "
            "was trained with")


def test_glue_init_checkpoint_vocabulary_must_match_the_tokenizer(data_slices, tmp_path, model_dir,
                                                                   export_without_vocabulary, capsys):
    """--init_checkpoint without a vocabulary under the --preset's 30,522-token tokenizer."""
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe("finetune_glue"), [
        "--task", "stsb", "--data_dir", str(_glue_dir(data_slices, tmp_path)), "--preset", "all_minilm_l6_v2_en",
        "--init_checkpoint", str(export_without_vocabulary), "--model_dir", str(model_dir)])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [_vocabulary_message("--init_checkpoint", export_without_vocabulary)]
    assert _snapshot(model_dir) == before


def test_squad_preset_vocabulary_must_match_the_tokenizer(data_slices, model_dir, export_without_vocabulary, capsys):
    squad_file = str(data_slices / "squad" / "dev-v1.1.json.gz")
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe("finetune_squad"), [
        "--train_file", squad_file, "--predict_file", squad_file, "--preset", str(export_without_vocabulary),
        "--tokenizer", "all_minilm_l6_v2_en", "--sequence_length", "128", "--model_dir", str(model_dir)])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [_vocabulary_message("--preset", export_without_vocabulary)]
    assert _snapshot(model_dir) == before


def test_conll_preset_vocabulary_must_match_the_tokenizer(shared_data, tmp_path, model_dir, export_without_vocabulary,
                                                          capsys):
    files = {}
    for name in ("eng.train", "eng.testa"):  # the first 200 lines of the real files, byte for byte
        files[name] = tmp_path / name
        files[name].write_bytes(b"".join((shared_data / "conll2003" / name).open("rb").readlines()[:200]))
    before = _snapshot(model_dir)
    code = _main_exit_code(_recipe("finetune_conll"), [
        "--train_file", str(files["eng.train"]), "--validation_file", str(files["eng.testa"]), "--preset",
        str(export_without_vocabulary), "--tokenizer", "all_minilm_l6_v2_en", "--model_dir", str(model_dir)])
    assert code == 2
    assert _error_lines(capsys.readouterr().err) == [_vocabulary_message("--preset", export_without_vocabulary)]
    assert _snapshot(model_dir) == before


def test_classification_pooling_must_be_pooled_or_mean():
    """`ClassificationConfig(pooling=...)` (the API behind `finetune_glue.py --pooling`) names the flag and the choices."""
    from keras_bert_impl.tasks.classification.run import ClassificationConfig, check_flags

    with pytest.raises(ValueError) as error:
        check_flags(ClassificationConfig(task="sst2", data_dir="glue", model_dir="m", pooling="max"))
    assert str(error.value) == "--pooling='max': must be one of pooled, mean"


def test_a_pretraining_config_key_the_backbone_does_not_take_is_one_line_naming_the_file(tmp_path):
    """`pretrain.py --config F.json` with Hugging Face's key names: before, the backbone dropped them and the run
    pretrained a model of another size."""
    import json

    from keras_bert_impl.training.pretraining_run import PretrainingConfig, backbone_config

    path = tmp_path / "bert.json"
    path.write_text(json.dumps({"num_layers": 2, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
                                "max_position_embeddings": 128}))
    with pytest.raises(ValueError) as error:
        backbone_config(PretrainingConfig(config=str(path)), vocabulary_size=100)
    assert str(error.value).startswith(
        f"--config {str(path)!r}: BertBackbone got an unknown argument `max_position_embeddings` (did you mean "
        "`max_sequence_length`?): it takes vocabulary_size, num_layers,")


# === One family of file errors ===


def test_a_malformed_glue_file_is_a_file_format_error(tmp_path):
    """`except FileFormatError` catches a bad GLUE TSV row, with `.path` and `.line`; the message is as before."""
    import pickle

    from keras_bert_impl.file_errors import FileFormatError
    from keras_bert_impl.tasks.classification import GlueFormatError, read_split

    (tmp_path / "RTE").mkdir()
    path = tmp_path / "RTE" / "dev.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\tA cat.\tAn animal.\tentailment\n1\tA dog.\tentailment\n")
    with pytest.raises(FileFormatError) as error:
        read_split("rte", tmp_path, "dev")
    assert type(error.value) is GlueFormatError and isinstance(error.value, ValueError)
    assert (error.value.path, error.value.line, error.value.column) == (str(path), 3, None)
    assert str(error.value) == (
        f"{path}, line 3: 3 fields (a missing field); expected 4 tab-separated fields, as the header.")
    assert error.value.problem == "3 fields (a missing field); expected 4 tab-separated fields, as the header."
    assert str(pickle.loads(pickle.dumps(error.value))) == str(error.value)


def test_a_malformed_squad_file_is_a_file_format_error(tmp_path):
    """`except FileFormatError` catches a bad SQuAD element (the JSON path starts the problem) and invalid JSON."""
    import json
    import pickle

    from keras_bert_impl.file_errors import FileFormatError
    from keras_bert_impl.tasks.span_qa import SquadFormatError, load_squad_json, read_squad_examples

    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat.",
        "qas": [{"id": "q1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": "4"}]}]}]}]}))
    with pytest.raises(FileFormatError) as error:
        read_squad_examples(path)
    assert type(error.value) is SquadFormatError and isinstance(error.value, ValueError)
    assert (error.value.path, error.value.line, error.value.column) == (str(path), None, None)
    assert str(error.value) == (
        f"{path}: data[0].paragraphs[0].qas[0].answers[0].answer_start: expected a non-negative int (character "
        "offset into the context), got '4'.")
    assert str(pickle.loads(pickle.dumps(error.value))) == str(error.value)
    path.write_text('{"data": [\n  {"title": "T",, }\n]}')
    with pytest.raises(FileFormatError) as error:
        load_squad_json(path)
    assert type(error.value) is SquadFormatError and error.value.path == str(path)
    assert str(error.value) == (
        f"{path}: not valid JSON at line 2 column 17: Expecting property name enclosed in double quotes.")
