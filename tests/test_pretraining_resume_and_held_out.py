"""Pretraining: the run's settings are on disk before its first checkpoint, --vocab and the training files' contents
are compared on resume, the held-out batches are the same on every iteration, and a corpus of short sentences pretrains.

One micro run (2 steps, in this process) on a corpus of the bundled books' sentences of under 10 words serves
every test; the resume checks run before any model is built, so they are fast.
"""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest
from repo_scripts import load_script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "keras_bert_impl", "assets", "corpus")
VOCAB = os.path.join(CORPUS, "vocab.txt")
RUN = dict(strategy="cpu", global_batch_size=8, sequence_length=32, max_predictions_per_seq=5, num_steps=2,
           warmup_steps=1, checkpoint_every=2, log_every=1000, validation_steps=2, verbose=0, dropout=0.0)


def _short_line_corpus(source, target):
    """The real documents of `source` with only their lines of under 10 words (as a corpus of short sentences)."""
    documents, current = [], []
    with open(source, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if not words:
                if current:
                    documents.append(current)
                current = []
            elif len(words) < 10:
                current.append(line.strip())
    if current:
        documents.append(current)
    target.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return str(target)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    from keras_bert_impl.training import run_checkpoints
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    tmp_path = tmp_path_factory.mktemp("short_run")
    train = _short_line_corpus(os.path.join(CORPUS, "train.txt"), tmp_path / "short_train.txt")
    valid = _short_line_corpus(os.path.join(CORPUS, "valid.txt"), tmp_path / "short_valid.txt")
    config = tmp_path / "micro_bert.json"
    config.write_text(json.dumps({"num_layers": 1, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
                                  "max_sequence_length": 64}))
    model_dir = tmp_path / "run"
    recorded_at_save = []  # run_config.json as it was on disk when each checkpoint was about to be written
    original_save = run_checkpoints.CheckpointManager.save

    def save(self, *args, **kwargs):
        path = model_dir / "run_config.json"
        recorded_at_save.append(json.loads(path.read_text()) if path.exists() else None)
        return original_save(self, *args, **kwargs)

    arguments = dict(RUN, config=str(config), train_files=[train], validation_files=[valid], vocab=VOCAB)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_checkpoints.CheckpointManager, "save", save)
        result = run_pretraining(PretrainingConfig(model_dir=str(model_dir), **arguments))
    return {"result": result, "model_dir": model_dir, "arguments": arguments, "valid": valid, "tmp_path": tmp_path,
            "recorded_at_save": recorded_at_save}


def _argv(run, model_dir, *extra):
    a = run["arguments"]
    return ["--strategy", "cpu", "--config", a["config"], "--train_files", *a["train_files"],
            "--validation_files", *a["validation_files"], "--vocab", a["vocab"], "--global_batch_size", "8",
            "--sequence_length", "32", "--max_predictions_per_seq", "5", "--num_steps", "4", "--warmup_steps", "1",
            "--checkpoint_every", "2", "--validation_steps", "2", "--dropout", "0", "--verbose", "0",
            "--model_dir", str(model_dir), *extra]


def _error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def _vocabulary_sha256(path):
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


# === Defect: a kill between the first checkpoint and run_config.json disabled the resume check ===

def test_the_run_config_is_on_disk_before_the_first_checkpoint(short_run):
    recorded = json.loads((short_run["model_dir"] / "run_config.json").read_text())
    assert short_run["recorded_at_save"] == [recorded]
    assert recorded["seed"] == 0 and recorded["sequence_length"] == 32
    assert recorded["vocabulary_sha256"] == _vocabulary_sha256(VOCAB)
    train = short_run["arguments"]["train_files"][0]
    with open(train, "rb") as f:
        content = f.read()
    assert recorded["train_file_fingerprints"] == {
        train: {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}}


def test_a_checkpoint_without_a_run_config_is_refused_in_one_line(short_run, capsys):
    model_dir = short_run["tmp_path"] / "no_run_config"
    shutil.copytree(short_run["model_dir"], model_dir)
    shutil.rmtree(model_dir / "export")
    os.remove(model_dir / "run_config.json")  # as a kill left it, before runs recorded it at their start
    before = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*"))
    assert load_script("recipes/pretrain.py").main(_argv(short_run, model_dir, "--seed", "9")) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --model_dir {model_dir} holds the checkpoint {model_dir}/checkpoints/ckpt-000000002 but no "
        "run_config.json (the settings the run was started with), so this command's flags cannot be checked "
        "against the run's; refusing to resume it: use a new --model_dir"]
    assert sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*")) == before


# === Defect: --vocab was not compared on resume (only its size, through the model config) ===

def test_a_vocab_of_the_same_size_in_another_order_is_refused(short_run, capsys):
    model_dir = short_run["tmp_path"] / "other_vocab"
    shutil.copytree(short_run["model_dir"], model_dir)
    shutil.rmtree(model_dir / "export")
    with open(VOCAB, encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    special = [t for t in tokens if t.startswith("[") and t.endswith("]")]
    others = [t for t in tokens if t not in special]
    permuted = short_run["tmp_path"] / "vocab_permuted.txt"
    permuted.write_text("\n".join(special + list(np.random.default_rng(0).permutation(others))) + "\n",
                        encoding="utf-8")
    assert load_script("recipes/pretrain.py").main(_argv(short_run, model_dir, "--vocab", str(permuted))) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --model_dir {model_dir} holds a run with a different configuration; refusing to resume it. "
        f'Differences: --vocab (sha256 of its tokens): "{_vocabulary_sha256(VOCAB)}" in {model_dir} vs '
        f'"{_vocabulary_sha256(permuted)}" now. Only --num_steps, --learning_rate, --warmup_steps may change on '
        "resume: restore the other flags, or use a new --model_dir."]


def test_a_run_config_recorded_before_the_vocabulary_hash_still_resumes(short_run, tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable

    recorded = json.loads((short_run["model_dir"] / "run_config.json").read_text())
    settings = dict(recorded)
    del recorded["vocabulary_sha256"]
    (tmp_path / "run_config.json").write_text(json.dumps(recorded))
    assert check_resumable(str(tmp_path), settings) == []


# === Defect: a training file replaced at the same path resumed silently (only its path was compared) ===

def _run_on_own_train_file(short_run, name):
    """A copy of the short run whose training file is its own copy (`<name>/train.txt`), recorded as the run's."""
    from keras_bert_impl.training.pretraining_checks import training_file_fingerprints

    model_dir = short_run["tmp_path"] / name
    shutil.copytree(short_run["model_dir"], model_dir)
    shutil.rmtree(model_dir / "export")
    train = model_dir / "train.txt"
    shutil.copy(short_run["arguments"]["train_files"][0], train)
    recorded = json.loads((model_dir / "run_config.json").read_text())
    recorded["train_files"] = [str(train)]
    recorded["train_file_fingerprints"] = training_file_fingerprints([str(train)])
    (model_dir / "run_config.json").write_text(json.dumps(recorded))
    return model_dir, train


def _resume_argv(short_run, model_dir, train):
    argv = _argv(short_run, model_dir)
    argv[argv.index("--train_files") + 1] = str(train)
    return argv


def test_a_training_file_replaced_by_a_longer_one_is_refused_naming_the_sizes(short_run, capsys):
    model_dir, train = _run_on_own_train_file(short_run, "longer_train_file")
    before = train.stat().st_size
    with open(train, "a", encoding="utf-8") as f:
        f.write("\nA document added after the run started.\nIt has two lines.\n")
    before_files = sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*"))
    assert load_script("recipes/pretrain.py").main(_resume_argv(short_run, model_dir, train)) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --model_dir {model_dir} holds a run with a different configuration; refusing to resume it. "
        f"Differences: --train_files changed since the run started ({train}: size {before:,} -> "
        f"{train.stat().st_size:,} bytes). Only --num_steps, --learning_rate, --warmup_steps may change on resume: "
        "put the original training file back, or use a new --model_dir."]
    assert sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*")) == before_files


def test_a_training_file_replaced_by_one_of_the_same_size_is_refused(short_run, capsys):
    model_dir, train = _run_on_own_train_file(short_run, "same_size_train_file")
    content = train.read_bytes()
    train.write_bytes(content.replace(b"the", b"THE", 1))
    assert len(train.read_bytes()) == len(content) and train.read_bytes() != content
    assert load_script("recipes/pretrain.py").main(_resume_argv(short_run, model_dir, train)) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --model_dir {model_dir} holds a run with a different configuration; refusing to resume it. "
        f"Differences: --train_files changed since the run started ({train}: same size, other content). Only "
        "--num_steps, --learning_rate, --warmup_steps may change on resume: put the original training file back, "
        "or use a new --model_dir."]


def test_changed_training_files_are_named_each_with_what_changed(tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable, training_file_fingerprints

    for name, text in (("a.txt", "One line.\n"), ("b.txt", "Two.\n"), ("gone.txt", "Three.\n")):
        (tmp_path / name).write_text(text)
    pattern = str(tmp_path / "*.txt")
    settings = {"adam_beta2": 0.999, "train_files": [pattern],
                "train_file_fingerprints": training_file_fingerprints([pattern])}
    (tmp_path / "run_config.json").write_text(json.dumps(settings))
    assert check_resumable(str(tmp_path), settings) == []
    (tmp_path / "a.txt").write_text("One longer line.\n")
    (tmp_path / "b.txt").write_text("Owt.\n")
    os.remove(tmp_path / "gone.txt")
    (tmp_path / "new.txt").write_text("Four.\n")
    settings["train_file_fingerprints"] = training_file_fingerprints([pattern])
    with pytest.raises(ValueError) as error:
        check_resumable(str(tmp_path), settings)
    assert str(error.value) == (
        f"--model_dir {tmp_path} holds a run with a different configuration; refusing to resume it. "
        f"Differences: --train_files changed since the run started ({tmp_path}/a.txt: size 10 -> 17 bytes; "
        f"{tmp_path}/b.txt: same size, other content; {tmp_path}/gone.txt: no longer there; {tmp_path}/new.txt: "
        "new (not there when the run started)). Only --num_steps, --learning_rate, --warmup_steps may change on "
        "resume: put the original training files back, or use a new --model_dir.")
    # Another --train_files is named as the flag that differs; the files' contents add nothing.
    with pytest.raises(ValueError) as error:
        check_resumable(str(tmp_path), dict(settings, train_files=[str(tmp_path / "a.txt")]))
    assert "--train_files changed" not in str(error.value)
    assert str(error.value).endswith("restore the other flags, or use a new --model_dir.")


def test_a_run_config_recorded_before_the_training_file_fingerprints_still_resumes(short_run, tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable

    recorded = json.loads((short_run["model_dir"] / "run_config.json").read_text())
    settings = dict(recorded, train_file_fingerprints={"changed.txt": {"bytes": 1, "sha256": "0" * 64}})
    del recorded["train_file_fingerprints"]
    (tmp_path / "run_config.json").write_text(json.dumps(recorded))
    assert check_resumable(str(tmp_path), settings) == []


# === Defect: the held-out set was redrawn on every pass ===

def _batches(dataset, count):
    return [{k: np.asarray(v) for k, v in batch.items()} for batch, _ in zip(dataset, range(count))]


def test_the_held_out_batches_are_the_same_on_every_iteration_and_training_batches_are_not(short_run):
    from keras_bert_impl.data.pretraining import pretraining_dataset
    from keras_bert_impl.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(VOCAB)
    common = dict(sequence_length=32, max_predictions_per_seq=5, batch_size=8, seed=1)
    held_out = pretraining_dataset(short_run["valid"], tokenizer, shuffle=False, redraw_each_iteration=False,
                                   **common)
    first, second = _batches(held_out, 3), _batches(held_out, 3)
    for a, b in zip(first, second):
        assert sorted(a) == sorted(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    training = pretraining_dataset(short_run["valid"], tokenizer, **common)
    first, second = _batches(training, 3), _batches(training, 3)
    assert any(not np.array_equal(a["mask_positions"], b["mask_positions"]) for a, b in zip(first, second))


def test_the_numpy_twin_gives_the_same_held_out_batches_on_every_iteration(short_run, tmp_path):
    from keras_bert_impl.data.array_pretraining import ArrayPretrainingBatches, write_document_arrays
    from keras_bert_impl.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(VOCAB)
    with open(short_run["valid"], encoding="utf-8") as f:
        documents = [d.splitlines() for d in f.read().split("\n\n") if d.strip()]
    documents = [[[int(t) for t in row] for row in tokenizer.tokenize(d).to_list()] for d in documents]
    path = str(tmp_path / "valid.npz")
    write_document_arrays(documents, tokenizer.get_vocabulary(), path)
    common = dict(sequence_length=32, max_predictions_per_seq=5, batch_size=8, seed=1, shuffle_buffer_size=16)
    held_out = ArrayPretrainingBatches(path, shuffle=False, redraw_each_iteration=False, **common)
    first, second = _batches(held_out, 3), _batches(held_out, 3)
    for a, b in zip(first, second):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    training = ArrayPretrainingBatches(path, **common)
    first, second = _batches(training, 3), _batches(training, 3)
    assert any(not np.array_equal(a["mask_positions"], b["mask_positions"]) for a, b in zip(first, second))


def test_the_final_accuracy_and_the_unigram_floor_read_the_same_held_out_positions(short_run):
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_inputs import split_features_labels
    from keras_bert_impl.training.pretraining_run import (
        PretrainingConfig,
        default_dataset_fn,
        held_out_dataset,
    )
    from keras_bert_impl.training.unigram_floor import unigram_floor

    result = short_run["result"]
    config = PretrainingConfig(model_dir=str(short_run["model_dir"]), **short_run["arguments"])
    held_out = held_out_dataset(default_dataset_fn(config), config, BertTokenizer(VOCAB)).map(
        split_features_labels)
    positions = sum(int(np.sum(np.asarray(w["mlm"]) > 0)) for _, _, w in _batches_xyw(held_out,
                                                                                     config.validation_steps))
    floor = unigram_floor(held_out, config.validation_steps)
    assert floor == {k: v for k, v in result["unigram_floor"].items() if k != "token"}
    assert result["unigram_floor"]["masked_positions"] == positions
    # The model, evaluated again on a new iterator (twice): the accuracy the run printed.
    for _ in range(2):
        again = result["model"].evaluate(held_out, steps=config.validation_steps, verbose=0, return_dict=True)
        assert again["mlm_accuracy"] == pytest.approx(result["validation"]["mlm_accuracy"], abs=1e-7)
    # Keras's evaluation after each epoch goes on with one iterator: it reads the same batches again.
    iterator = iter(held_out)
    cycle = [next(iterator) for _ in range(2 * config.validation_steps)]
    for a, b in zip(cycle[:config.validation_steps], cycle[config.validation_steps:]):
        np.testing.assert_array_equal(a[0]["mask_positions"], b[0]["mask_positions"])


def _batches_xyw(dataset, count):
    return [batch for batch, _ in zip(dataset, range(count))]


# === Defect: a corpus whose lines are all under 10 words failed in the probe sentences ===

def test_a_corpus_of_short_sentences_pretrains_and_probes_its_longest_lines(short_run):
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_callbacks import probe_sentences

    assert short_run["result"]["step"] == 2 and len(short_run["result"]["masked_word_guesses"]) == 3
    with open(short_run["valid"], encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    assert max(len(line.split()) for line in lines) == 9
    longest = sorted(enumerate(lines), key=lambda item: (-len(item[1].split()), item[0]))[:3]
    tokenizer = BertTokenizer(VOCAB)
    probe = probe_sentences([short_run["valid"]], tokenizer, 32)
    for row, (_, line) in enumerate(longest):
        tokens = probe["token_ids"][row].copy()
        real = probe["mask_weights"][row] > 0
        tokens[probe["mask_positions"][row][real]] = probe["mask_ids"][row][real]
        length = int(probe["padding_mask"][row].sum())
        assert tokens[1:length - 1].tolist() == [int(t) for t in tokenizer.tokenize([line]).to_list()[0]][:30]


# === Defect: a second resume named the previous resume's --learning_rate as the one the run was started with ===

def test_every_resume_names_the_value_the_run_was_started_with(tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable, record_run_config, resume_change_message

    settings = {"sequence_length": 32, "num_steps": 2, "learning_rate": 1e-3, "warmup_steps": 1, "adam_beta2": 0.999}
    record_run_config(str(tmp_path), settings, fresh=True)  # the run starts
    first = dict(settings, num_steps=4, learning_rate=5e-4)  # resumed with a lower learning rate
    assert [resume_change_message(*c) for c in check_resumable(str(tmp_path), first)] == [
        "Resuming with --learning_rate 0.0005 (the run was started with 0.001).",
        "Resuming with --num_steps 4 (the run was started with 2)."]
    record_run_config(str(tmp_path), first)  # after the resumed run's checkpoint
    record_run_config(str(tmp_path), first)  # the next checkpoint: unchanged
    second = dict(settings, num_steps=6, learning_rate=2e-4)
    assert [resume_change_message(*c) for c in check_resumable(str(tmp_path), second)] == [
        "Resuming with --learning_rate 0.0002 (the run was started with 0.001; its last checkpoint was written "
        "with 0.0005).",
        "Resuming with --num_steps 6 (the run was started with 2; its last checkpoint was written with 4)."]
    record_run_config(str(tmp_path), second)
    recorded = json.loads((tmp_path / "run_config.json").read_text())
    assert recorded["learning_rate"] == 2e-4 and recorded["started_with"] == {"num_steps": 2, "learning_rate": 1e-3}
    assert check_resumable(str(tmp_path), second) == []  # the same command again: nothing changed, nothing said
    # A record left by a failed start without a checkpoint is no earlier run's: a fresh start replaces it whole.
    record_run_config(str(tmp_path), settings, fresh=True)
    assert json.loads((tmp_path / "run_config.json").read_text()) == settings
