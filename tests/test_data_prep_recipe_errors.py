"""The data-preparation recipes' bad input is one line on stderr and exit status 2, found before any work.

recipes/build_vocab.py, recipes/prepare_pretraining_data.py and recipes/prepare_corpus.py, each run as a command
(stderr is the one line: TensorFlow's start-up log lines are filtered, `native_logs.quiet_native_logs`). Before:
build_vocab.py's every input error was a traceback with exit status 1; prepare_pretraining_data.py found a
Windows-1252 --input only inside tf.data (23 lines ending in an InvalidArgumentError) and called a --vocab directory
"not found"; prepare_corpus.py refused an --output directory only after all the work, and /proc/... with a
FileNotFoundError traceback. One case of each recipe runs as a command (each imports TensorFlow and Keras: 6 s on 2
cores); the others run in this process (`main`, the exit status its SystemExit's), as tests/test_corpus.py runs
prepare_corpus.py.
"""

import functools
import os
import pathlib
import runpy
import subprocess
import sys

import pytest
from repo_scripts import REPO, load_script

from keras_bert_impl.data import corpus

ICONV = "iconv -f WINDOWS-1252 -t UTF-8 pg84_cp1252_excerpt.txt > utf8_pg84_cp1252_excerpt.txt"
BAD_BYTE = ("line 25, column 17: byte 0x97 at byte offset 1570 of the file is not valid UTF-8; the file looks like "
            f"Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. {ICONV}")


def _cases(bad, book, vocab, folder):
    """{case: (recipe, its arguments, the stderr line expected)}; `folder` holds an empty file and a directory."""
    empty, directory = str(folder / "empty.txt"), str(folder / "a_directory")
    out = str(folder / "out.txt")
    return {
        "vocab_missing_input": ("build_vocab.py", ["--input", "nope.txt", "--output", out],
                                "error: --input: no file matches 'nope.txt'"),
        "vocab_not_utf8": ("build_vocab.py", ["--input", bad, "--output", out],
                           f"error: --input: {bad}, {BAD_BYTE}, or pass errors='replace' or 'ignore' "
                           "(--errors replace, --errors ignore)"),
        "vocab_size_0": ("build_vocab.py", ["--input", book, "--vocab_size", "0", "--output", out],
                         "error: argument --vocab_size: must be an integer > 5 (the special tokens [PAD] [UNK] [CLS] "
                         "[SEP] [MASK] come first), got '0' (see --help)"),
        "vocab_empty_input": ("build_vocab.py", ["--input", empty, "--output", out],
                              f"error: --input: the input holds no words: {empty} holds only blank lines or nothing "
                              "(expected text, one sentence or paragraph a line)"),
        "vocab_output_directory": ("build_vocab.py", ["--input", book, "--output", directory],
                                   f"error: --output {directory} is a directory: pass a file name (e.g. "
                                   f"{directory}/vocab.txt)"),
        "records_not_utf8": ("prepare_pretraining_data.py",
                             ["--input", bad, "--vocab", vocab, "--output_prefix", str(folder / "records" / "train")],
                             f"error: --input: {bad}, {BAD_BYTE}, or prepare it with recipes/prepare_corpus.py "
                             "--errors replace"),
        "records_vocab_directory": ("prepare_pretraining_data.py",
                                    ["--input", book, "--vocab", directory, "--output_prefix", str(folder / "r")],
                                    f"error: --vocab {directory} is a directory: pass its vocab.txt (a WordPiece "
                                    "vocabulary, one token a line)"),
        "corpus_output_directory": ("prepare_corpus.py", ["--input", book, "--output", directory],
                                    f"error: --output {directory} is a directory: pass a file name "
                                    f"(e.g. {directory}/train.txt)"),
        "corpus_output_in_proc": ("prepare_corpus.py", ["--input", book, "--output", "/proc/x/c.txt"],
                                  "error: --output /proc/x/c.txt cannot be written (/proc is "
                                  "read-only or not ours): pass a file in a writable directory"),
        "corpus_valid_output_in_proc": ("prepare_corpus.py",
                                        ["--input", book, "--output", out, "--valid_output", "/proc/x/v.txt",
                                         "--valid_every", "5"],
                                        "error: --valid_output /proc/x/v.txt cannot be written (/proc "
                                        "is read-only or not ours): pass a file in a writable directory"),
    }


# The cases run as commands: stderr is the one line, TensorFlow's start-up log lines filtered out by the recipe.
COMMANDS = ("vocab_not_utf8", "records_not_utf8", "corpus_output_directory")
CASES = sorted(_cases("bad", "book", "vocab", pathlib.Path("folder")))


@pytest.fixture(scope="module")
def scratch(real_data, tmp_path_factory):
    """The cases, and the folder that holds their empty file and directory."""
    folder = tmp_path_factory.mktemp("data_prep_errors")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "a_directory").mkdir()
    bad = str(real_data / "bad_input" / "pg84_cp1252_excerpt.txt")
    book = str(real_data / "corpus" / "gutenberg" / "pg84.txt")
    return _cases(bad, book, corpus.bundled_corpus()["vocab"], folder), folder


def _command(recipe, argv, folder):
    """(exit status, stderr, stdout) of the recipe run as a command."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the recipe's own filter, tested
    result = subprocess.run([sys.executable, os.path.join(REPO, "recipes", recipe), *argv], capture_output=True,
                            text=True, env=env, cwd=folder, timeout=300)
    return result.returncode, result.stderr, result.stdout


@pytest.fixture
def run_state_as_it_was(monkeypatch):
    """`interruption._run_state` as it was before the test (`exit_on_user_error` notes the job in it)."""
    load_script("recipes/command_line.py")
    for key, value in list(sys.modules["interruption"]._run_state.items()):
        monkeypatch.setitem(sys.modules["interruption"]._run_state, key, value)


def _in_process(recipe, argv, folder, monkeypatch, capsys):
    """(exit status, stderr, stdout) of the recipe's main in this process."""
    monkeypatch.chdir(folder)
    with pytest.raises(SystemExit) as leaving:
        if recipe == "prepare_corpus.py":  # (its main reads sys.argv; as tests/test_corpus.py runs it)
            monkeypatch.setattr(sys, "argv", [recipe, *argv])
            runpy.run_path(str(REPO / "recipes" / recipe), run_name="__main__")
        else:
            load_script(f"recipes/{recipe}").main(argv)
    captured = capsys.readouterr()
    return leaving.value.code, captured.err, captured.out


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_and_exit_status_2(case, scratch, run_state_as_it_was, monkeypatch, capsys):
    cases, folder = scratch
    recipe, argv, line = cases[case]
    run = _command if case in COMMANDS else functools.partial(_in_process, monkeypatch=monkeypatch, capsys=capsys)
    status, err, out = run(recipe, argv, folder)
    assert (status, err) == (2, line + "\n"), err
    assert out == ""


def test_nothing_is_written_when_the_output_is_refused(scratch):
    """After the cases (run before this test): nothing written, no temporary file left, the directory untouched."""
    folder = scratch[1]
    assert sorted(os.listdir(folder)) == ["a_directory", "empty.txt"]
    assert os.listdir(folder / "a_directory") == []


def test_an_unreadable_input_or_vocab_names_its_flag(real_data, tmp_path, run_state_as_it_was, monkeypatch, capsys):
    """A file that the user may not read (chmod 000), as a user who is not root saw it (these tests run as root, who
    reads anything, so the refusal is simulated). Before: prepare_corpus.py printed Python's `[Errno 13] Permission
    denied: '...'`, without the flag; the --vocab of prepare_pretraining_data.py (and of pretrain.py) a 24-line
    TensorFlow PermissionDeniedError traceback, exit status 1."""
    import tensorflow as tf

    book = str(real_data / "corpus" / "gutenberg" / "pg84.txt")
    vocab = str(tmp_path / "vocab.txt")
    with open(corpus.bundled_corpus()["vocab"], "rb") as source, open(vocab, "wb") as target:
        target.write(source.read())
    gfile = tf.io.gfile.GFile

    def unreadable_vocab(path, mode="r"):
        if os.fspath(path) == vocab:
            raise tf.errors.PermissionDeniedError(None, None, f"{vocab}; Permission denied")
        return gfile(path, mode)

    monkeypatch.setattr(tf.io.gfile, "GFile", unreadable_vocab)
    status, err, out = _in_process("prepare_pretraining_data.py", ["--input", book, "--vocab", vocab,
                                                                   "--output_prefix", str(tmp_path / "r")],
                                   tmp_path, monkeypatch, capsys)
    assert (status, err) == (2, f"error: --vocab {vocab}: cannot be read ({vocab}; Permission denied)\n")
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: os.fspath(path) != book and access(path, mode, **kw))
    status, err, out = _in_process("prepare_corpus.py", ["--input", book, "--output", str(tmp_path / "c.txt")],
                                   tmp_path, monkeypatch, capsys)
    assert (status, err) == (2, f"error: --input {book}: cannot be read (permission denied); expected a UTF-8 text "
                                "file, or a table with --text_column\n")
    assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]


def test_a_full_disk_while_writing_shards_is_one_line_and_leaves_no_temporary_shard(scratch, tmp_path,
                                                                                     run_state_as_it_was, monkeypatch,
                                                                                     capsys):
    # A real full disk (a small tmpfs, session 56's audit): the writer's write fails, then its close fails too,
    # which skipped the removal of the temporary shards (they filled the disk, and a later --train_files 'shard-*'
    # read them) and printed a 26-line ResourceExhaustedError traceback.
    import tensorflow as tf

    real_writer = tf.io.TFRecordWriter

    class FullDiskWriter:
        def __init__(self, path):
            self.writer, self.writes = real_writer(path), 0

        def write(self, record):
            self.writes += 1
            if self.writes > 3:
                raise tf.errors.ResourceExhaustedError(None, None, f"{self.path}; No space left on device")
            self.writer.write(record)

        def close(self):
            self.writer.close()
            raise tf.errors.ResourceExhaustedError(None, None, "close failed: No space left on device")

    monkeypatch.setattr(tf.io, "TFRecordWriter", lambda path: type("W", (FullDiskWriter,), {"path": path})(path))
    cases, _ = scratch
    book = cases["vocab_size_0"][1][1]
    prefix = tmp_path / "shards" / "train"
    status, err, out = _in_process("prepare_pretraining_data.py", ["--input", book, "--vocab",
                                   corpus.bundled_corpus()["vocab"], "--output_prefix", str(prefix)],
                                   tmp_path, monkeypatch, capsys)
    shard = f"{prefix}-00000-of-00001.tfrecord.tmp-{os.getpid()}"
    assert (status, err) == (2, f"error: no space left on device (writing {shard}): free space there (or choose "
                                "another output folder) and run the same command again; a training run resumes from "
                                "its last checkpoint, and nothing half-written is read\n")
    assert os.listdir(prefix.parent) == []
