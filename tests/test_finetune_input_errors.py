"""The fine-tuning stories' one-line errors for a bad input file or a fine-tuned model of another task.

Before: a missing or directory SQuAD file was Python's `[Errno 2] No such file or directory: '...'` /
`[Errno 21] Is a directory: ...`; a directory given to CoNLL's `--train_file` was "no such file", a directory
SST-2/train.tsv "missing file"; a paragraph without "context" was `expected a string, got None`; and a BertClassifier
given to finetune_conll.py as `--init_checkpoint` failed on its label names (`Unknown tag '0'`), one given to
finetune_squad.py with an IndexError traceback after loading the model.
"""

import gzip
import json
import os
import pathlib
import subprocess
import sys

import pytest

from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.tasks.classification.reading import split_path
from keras_bert_impl.tasks.classification.run import ClassificationConfig
from keras_bert_impl.tasks.classification.run import read_inputs as read_glue_inputs
from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig, fine_tuned_head
from keras_bert_impl.tasks.span_qa.reading import SquadFormatError, read_squad_examples
from keras_bert_impl.tasks.span_qa.run import SpanQaConfig
from keras_bert_impl.tasks.span_qa.run import read_inputs as read_squad_inputs
from keras_bert_impl.tasks.span_qa.run import run as run_squad
from keras_bert_impl.tasks.tagging.reading import find_split_files
from keras_bert_impl.tasks.tagging.run import TaggingConfig, fine_tuned_label_names, input_files

REPO = pathlib.Path(__file__).resolve().parents[1]
SQUAD_DEV = REPO / "tests" / "data" / "slices" / "squad" / "dev-v1.1.json.gz"
SQUAD = "a SQuAD .json or .json.gz file"
CONLL = "a CoNLL-format text file (a word and its tags a line, a blank line between sentences)"


def test_check_input_file_names_the_flag_and_what_it_expects(tmp_path):
    check_input_file(SQUAD_DEV, "--predict_file", SQUAD)  # a file: nothing to say
    with pytest.raises(FileNotFoundError) as missing:
        check_input_file(tmp_path / "nope.json", "--train_file", SQUAD)
    assert str(missing.value) == f"--train_file {tmp_path}/nope.json: no such file; expected {SQUAD}"
    with pytest.raises(IsADirectoryError) as folder:
        check_input_file(tmp_path, "--train_file", SQUAD)
    assert str(folder.value) == f"--train_file {tmp_path}: a directory; expected {SQUAD}"


# === SQuAD ===


def test_squad_missing_train_file_and_directory_predict_file(tmp_path):
    config = SpanQaConfig(model_dir=str(tmp_path / "run"), predict_file=str(SQUAD_DEV),
                          train_file=str(tmp_path / "nope.json"), preset="bert_tiny_en_uncased")
    with pytest.raises(FileNotFoundError) as missing:
        read_squad_inputs(config)
    assert str(missing.value) == f"--train_file {tmp_path}/nope.json: no such file; expected {SQUAD}"
    config = SpanQaConfig(model_dir=str(tmp_path / "run"), predict_file=str(tmp_path),
                          train_file=str(SQUAD_DEV), preset="bert_tiny_en_uncased")
    with pytest.raises(IsADirectoryError) as folder:  # (the predict file is checked first, before any file is read)
        read_squad_inputs(config)
    assert str(folder.value) == f"--predict_file {tmp_path}: a directory; expected {SQUAD}"


def _squad_file(tmp_path, paragraphs):
    path = tmp_path / "dev.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}, f)
    return path


GOOD_PARAGRAPH = {"context": "The cat sat.", "qas": [{"id": "q1", "question": "Who sat?",
                                                      "answers": [{"text": "cat", "answer_start": 4}]}]}


@pytest.mark.parametrize("drop, where, expected", [
    ("context", "data[0].paragraphs[1]", '"context": a string (the paragraph\'s text)'),
    ("qas", "data[0].paragraphs[1]", '"qas": a list of questions'),
    ("question", "data[0].paragraphs[1].qas[0]", '"question": a string'),
    ("answer_start", "data[0].paragraphs[1].qas[0].answers[0]",
     '"answer_start": a non-negative int (character offset into the context)'),
])
def test_squad_missing_key_is_named_as_missing(tmp_path, drop, where, expected):
    paragraph = json.loads(json.dumps(GOOD_PARAGRAPH))
    for holder in (paragraph, paragraph["qas"][0], paragraph["qas"][0]["answers"][0]):
        holder.pop(drop, None)
    path = _squad_file(tmp_path, [GOOD_PARAGRAPH, paragraph])
    with pytest.raises(SquadFormatError) as error:
        read_squad_examples(path)
    assert str(error.value) == f'{path}: {where}: no "{drop}" key; expected {expected}.'
    # A key that holds null is still named with what it holds.
    paragraph = dict(GOOD_PARAGRAPH, context=None)
    with pytest.raises(SquadFormatError, match=r"data\[0\]\.paragraphs\[0\]\.context: expected a string, got None"):
        read_squad_examples(_squad_file(tmp_path, [paragraph]))


def test_squad_file_without_data_key(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text('{"version": "1.1"}', encoding="utf-8")
    with pytest.raises(SquadFormatError) as error:
        read_squad_examples(path)
    assert str(error.value) == f'{path}: no "data" key; expected "data": a list of articles.'
    config = SpanQaConfig(model_dir=str(tmp_path / "run"), predict_file=str(path), preset="bert_tiny_en_uncased",
                          epochs=0)
    with pytest.raises(SquadFormatError) as error:  # (check_version said `no questions ("data" is empty)`)
        read_squad_inputs(config)
    assert str(error.value) == f'{path}: no "data" key; expected "data": a list of articles.'


# === CoNLL and GLUE: a directory is not "missing" ===


def test_conll_directory_train_file_and_missing_test_file(tmp_path):
    config = TaggingConfig(model_dir=str(tmp_path / "run"), train_file=str(tmp_path), validation_file=str(tmp_path),
                           preset="bert_tiny_en_uncased")
    with pytest.raises(IsADirectoryError) as folder:
        input_files(config)
    assert str(folder.value) == f"--train_file {tmp_path}: a directory; expected {CONLL}"
    dev = tmp_path / "dev.txt"
    dev.write_text("EU NNP I-NP I-ORG\n\n", encoding="utf-8")
    config = TaggingConfig(model_dir=str(tmp_path / "run"), train_file=str(dev), validation_file=str(dev),
                           test_file=str(tmp_path / "nope.txt"), preset="bert_tiny_en_uncased")
    with pytest.raises(FileNotFoundError) as missing:
        input_files(config)
    assert str(missing.value) == f"--test_file {tmp_path}/nope.txt: no such file; expected {CONLL}"


def test_an_unreadable_input_file_names_its_flag(tmp_path, monkeypatch):
    # A file that the user may not read (chmod 000), as a user who is not root saw it: simulated, since these tests
    # run as root. Before: Python's "[Errno 13] Permission denied: '...'", without the flag or the split.
    table = tmp_path / "train.tsv"
    table.write_text("sentence\tlabel\ngood\t1\n", encoding="utf-8")
    (tmp_path / "SST-2").mkdir()
    split = tmp_path / "SST-2" / "train.tsv"
    split.write_text("sentence\tlabel\ngood\t1\n", encoding="utf-8")
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (os.fspath(path) not in (str(table), str(split))
                                                                and access(path, mode, **kw)))
    with pytest.raises(PermissionError) as unreadable:
        check_input_file(table, "--train_file", "a .csv, .tsv or .jsonl table")
    assert str(unreadable.value) == (f"--train_file {table}: cannot be read (permission denied); expected a .csv, "
                                     ".tsv or .jsonl table")
    with pytest.raises(PermissionError) as unreadable:
        split_path("sst2", tmp_path, "train")
    assert str(unreadable.value) == f"sst2: {split} (the train split) cannot be read (permission denied)"


def test_conll_data_dir_that_is_missing_or_a_file(tmp_path):
    # Before: a mistyped --data_dir said "no CoNLL file for train, dev (looked for ...)", as if the folder existed.
    folder = tmp_path / "conll2003"
    expected = ("expected the folder of the CoNLL files (eng.train, eng.testa, eng.testb, or train.txt, dev.txt or "
                "valid.txt, test.txt)")
    config = TaggingConfig(model_dir=str(tmp_path / "run"), data_dir=str(folder), preset="bert_tiny_en_uncased")
    with pytest.raises(FileNotFoundError) as missing:
        input_files(config)
    assert str(missing.value) == f"--data_dir {folder}: no such directory; {expected}"
    folder.write_text("EU NNP I-NP I-ORG\n\n", encoding="utf-8")
    with pytest.raises(NotADirectoryError) as a_file:
        input_files(config)
    assert str(a_file.value) == f"--data_dir {folder}: a file; {expected}"


def test_conll_data_dir_whose_training_file_is_a_directory(tmp_path):
    (tmp_path / "eng.train").mkdir()
    (tmp_path / "eng.testa").write_text("EU NNP I-NP I-ORG\n\n", encoding="utf-8")
    with pytest.raises(IsADirectoryError) as folder:
        find_split_files(tmp_path)
    assert str(folder.value) == f"{tmp_path}/eng.train: a directory; expected the train split's file, {CONLL}"


def test_glue_split_file_that_is_a_directory(tmp_path):
    (tmp_path / "SST-2" / "train.tsv").mkdir(parents=True)
    with pytest.raises(IsADirectoryError) as folder:
        split_path("sst2", tmp_path, "train")
    assert str(folder.value) == (f"sst2: {tmp_path}/SST-2/train.tsv (the train split) is a directory; expected a "
                                 "file: a GLUE sst2 folder holds the tab-separated files train.tsv, dev.tsv, test.tsv")


# === A fine-tuned model of another task as --init_checkpoint ===


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A BertClassifier's and a BertTokenClassifier's model.keras (one layer, 16 wide, no preprocessor)."""
    from keras_bert_impl import BertBackbone, BertClassifier, BertTokenClassifier

    folder = tmp_path_factory.mktemp("models")

    def backbone():
        return BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)

    paths = {"classifier": folder / "classifier" / "model.keras", "tagger": folder / "tagger" / "model.keras"}
    for path in paths.values():
        path.parent.mkdir()
    BertClassifier(backbone(), label_names=["0", "1"]).save(paths["classifier"])
    BertTokenClassifier(backbone(), 3, label_names=["O", "B-PER", "I-PER"]).save(paths["tagger"])
    return {name: str(path) for name, path in paths.items()}


def test_conll_refuses_a_classifier(models):
    with pytest.raises(ValueError) as error:  # (was "Unknown tag '0': expected 'O' or '<prefix>-<TYPE>' ...")
        fine_tuned_label_names(models["classifier"])
    assert str(error.value) == (f"--init_checkpoint {models['classifier']}: a BertClassifier, not a "
                                "BertTokenClassifier; pass the model.keras of a finetune_conll.py run")
    assert fine_tuned_label_names(models["tagger"]) == ["O", "B-PER", "I-PER"]


def test_squad_refuses_a_classifier_before_loading_it(models, tmp_path):
    expected = (f"--init_checkpoint {models['classifier']}: a BertClassifier, not a BertSpanExtractor; pass the "
                "model.keras of a finetune_squad.py run")
    config = SpanQaConfig(model_dir=str(tmp_path / "run"), predict_file=str(SQUAD_DEV),
                          init_checkpoint=models["classifier"], epochs=0)
    with pytest.raises(ValueError) as error:  # (was an IndexError traceback, after the model was loaded)
        run_squad(config)
    assert str(error.value) == expected
    # Before any file is read (was: after SQuAD's train and dev files, minutes on the full set).
    config = SpanQaConfig(model_dir=str(tmp_path / "run"), predict_file=str(tmp_path / "nowhere.json"),
                          init_checkpoint=models["classifier"], epochs=0)
    with pytest.raises(ValueError) as error:
        read_squad_inputs(config)
    assert str(error.value) == expected


def test_glue_and_table_classifier_refuse_a_tagger(models, tmp_path):
    config = ClassificationConfig(task="sst2", data_dir=str(tmp_path / "nowhere"), model_dir=str(tmp_path / "run"),
                                  init_checkpoint=models["tagger"], epochs=0)
    with pytest.raises(ValueError) as error:  # (was "a model of 3 output(s), but sst2 is 2 classes", once loaded)
        read_glue_inputs(config)
    assert str(error.value) == (f"--init_checkpoint {models['tagger']}: a BertTokenClassifier, not a "
                                "BertClassifier; pass the model.keras of a finetune_glue.py run")
    config = TableClassificationConfig(None, None, "text", None, str(tmp_path / "run"), preset=models["tagger"],
                                       epochs=0)
    with pytest.raises(ValueError) as error:
        fine_tuned_head(config)
    assert str(error.value) == (f"--init_checkpoint {models['tagger']}: a BertTokenClassifier, not a "
                                "BertClassifier; pass the model.keras of a finetune_classifier.py run")
    config = ClassificationConfig(task="stsb", data_dir=str(tmp_path / "nowhere"), model_dir=str(tmp_path / "run"),
                                  init_checkpoint=models["classifier"], epochs=0)
    with pytest.raises(ValueError) as error:  # (the number of classes, now before any file or weight is read)
        read_glue_inputs(config)
    assert str(error.value) == (f"--init_checkpoint {models['classifier']}: a model of 2 output(s), but stsb is "
                                "regression (one output): pass the model fine-tuned on stsb")


# === End to end: one `error:` line and exit status 2 ===


def _error_line(recipe, *args):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, str(REPO / "recipes" / recipe), *map(str, args)], capture_output=True,
                            text=True, env=env, cwd=REPO, timeout=300)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


def test_squad_recipe_prints_one_error_line_for_a_missing_file(tmp_path):
    line = _error_line("finetune_squad.py", "--train_file", tmp_path / "nope.json", "--predict_file", SQUAD_DEV,
                       "--preset", "all_minilm_l6_v2_en", "--epochs", "1", "--model_dir", tmp_path / "squad")
    assert line == f"error: --train_file {tmp_path}/nope.json: no such file; expected {SQUAD}"


def test_conll_recipe_prints_one_error_line_for_another_tasks_model(models, tmp_path):
    line = _error_line("finetune_conll.py", "--train_file", SQUAD_DEV, "--validation_file", SQUAD_DEV,
                       "--init_checkpoint", models["classifier"], "--epochs", "1", "--model_dir", tmp_path / "conll")
    assert line == (f"error: --init_checkpoint {models['classifier']}: a BertClassifier, not a "
                    "BertTokenClassifier; pass the model.keras of a finetune_conll.py run")
