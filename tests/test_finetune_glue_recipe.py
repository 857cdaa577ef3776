"""recipes/finetune_glue.py end to end on slices of the real RTE and STS-B files, and its error paths."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_impl.tasks import classification as glue

RECIPE = os.path.join(os.path.dirname(__file__), "..", "recipes", "finetune_glue.py")


def _slice_task(glue_dir, tmp_path, folder, lines):
    """The task folder with the first `lines` lines (header included) of each real file."""
    target = tmp_path / "glue" / folder
    target.mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        with open(glue_dir / folder / name, "rb") as f:
            head = f.read().split(b"\n")[:lines]
        (target / name).write_bytes(b"\n".join(head) + b"\n")
    return tmp_path / "glue"


def _run(*args):
    return subprocess.run([sys.executable, RECIPE, *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"})


@pytest.mark.slow
def test_run_glue_rte_slice_writes_results_submission_and_model(shared_data, tmp_path):
    from keras_bert_impl.tasks.classification.run import ClassificationConfig, run

    data_dir = _slice_task(shared_data / "glue", tmp_path, "RTE", 25)  # 24 examples per split
    model_dir = str(tmp_path / "out")
    results = run(ClassificationConfig("rte", data_dir, model_dir, sequence_length=32, batch_size=8, epochs=2,
                                       learning_rate=5e-5, seed=1, save_model=True, verbose=0))
    on_disk = json.load(open(os.path.join(model_dir, "dev_results.json")))
    assert on_disk["best"] == results["best"] and list(results["best"]) == ["accuracy"]
    assert results["train_examples"] == 24 and results["dev_examples"] == {"dev": 24}
    assert len(results["history"]["accuracy"]) == 2 and results["best_epoch"] in (1, 2)
    assert results["history"]["loss"][0] > 0 and results["train_sequences_per_second"] > 0
    lines = open(os.path.join(model_dir, "submission", "RTE.tsv")).read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 25
    assert {l.split("\t")[1] for l in lines[1:]} <= {"entailment", "not_entailment"}
    assert os.path.exists(os.path.join(model_dir, "best.weights.h5")) and os.listdir(os.path.join(model_dir, "logs"))
    # The saved model carries its preprocessor: raw strings in, label names out.
    model = keras.saving.load_model(os.path.join(model_dir, "model.keras"))
    dev = glue.read_split("rte", data_dir, "dev")
    labels = model.predict_labels((dev.text_a[:4], dev.text_b[:4]))
    assert len(labels) == 4 and set(labels) <= {"entailment", "not_entailment"}
    pairs = model.predict_labels(list(zip(dev.text_a[:4], dev.text_b[:4])))
    assert pairs == labels

    # Trained further from the saved model (saved without its optimizer: before, finetune refused it as "not
    # compiled"), on the task's loss.
    further = run(ClassificationConfig("rte", data_dir, str(tmp_path / "further"), init_checkpoint=os.path.join(
        model_dir, "model.keras"), sequence_length=32, batch_size=8, epochs=1, seed=1, verbose=0, predict_test=False))
    assert further["epochs_run"] == 1 and further["train_examples"] == 24 and further["history"]["loss"][0] > 0

    # Predict only, as the CoNLL and SQuAD stories: the saved model scores dev as its best epoch did, and writes the
    # same submission, without a training file (removed here) or any training.
    os.remove(os.path.join(data_dir, "RTE", "train.tsv"))
    again = run(ClassificationConfig("rte", data_dir, str(tmp_path / "again"), init_checkpoint=os.path.join(
        model_dir, "model.keras"), epochs=0, verbose=0))
    assert again["best"] == pytest.approx(results["best"]) and again["epochs_run"] == 0
    assert (again["best_epoch"], again["train_examples"], again["history"]) == (None, 0, {})
    assert open(os.path.join(tmp_path, "again", "submission", "RTE.tsv")).read() == "\n".join(lines) + "\n"
    with pytest.raises(ValueError, match=r"model.keras: a model of 2 output\(s\), but stsb is regression \(one "
                                         r"output\): pass the model fine-tuned on stsb"):
        run(ClassificationConfig("stsb", _slice_task(shared_data / "glue", tmp_path / "stsb", "STS-B", 9),
                                 str(tmp_path / "stsb_run"), init_checkpoint=os.path.join(model_dir, "model.keras"),
                                 epochs=0))


@pytest.mark.slow
def test_regression_on_stsb_slice_loss_goes_down(data_slices, tmp_path):
    from keras_bert_impl.tasks.classification.run import ClassificationConfig, run

    data_dir = _slice_task(data_slices / "glue", tmp_path, "STS-B", 33)
    results = run(ClassificationConfig("stsb", data_dir, str(tmp_path / "out"), sequence_length=32, batch_size=8,
                                       epochs=2, learning_rate=1e-4, seed=0, verbose=0))
    assert list(results["best"]) == ["pearson", "spearman"]
    assert results["history"]["loss"][-1] < results["history"]["loss"][0]
    scores = [float(l.split("\t")[1]) for l in open(tmp_path / "out" / "submission" / "STS-B.tsv").read().splitlines()[1:]]
    assert len(scores) == 32 and all(0.0 <= s <= 5.0 for s in scores)


def test_unknown_task_lists_valid_names(tmp_path):
    result = _run("--task", "mnlii", "--data_dir", str(tmp_path), "--model_dir", str(tmp_path / "o"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "error: unknown --task 'mnlii'; valid tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli (see --help)"
    )


def test_missing_file_in_data_dir_is_named(shared_data, tmp_path):
    data_dir = _slice_task(shared_data / "glue", tmp_path, "MRPC", 5)
    os.remove(data_dir / "MRPC" / "dev.tsv")
    args = ("--task", "mrpc", "--data_dir", str(data_dir), "--model_dir", str(tmp_path / "o"))
    result = _run(*args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "mrpc: missing file" in errors[0] and "MRPC/dev.tsv (the dev split)" in errors[0]
    debug = _run(*args, "--debug")  # --debug shows the traceback
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "MRPC/dev.tsv (the dev split)" in debug.stderr


def test_no_training_examples_is_refused_before_training(data_slices, tmp_path):
    # STS-B slice (vendored): --train_limit 0 (the old name of --max_train_samples), and a header-only train.tsv.
    data_dir = tmp_path / "glue"
    (data_dir / "STS-B").mkdir(parents=True)
    for name in ("train.tsv", "dev.tsv", "test.tsv"):
        (data_dir / "STS-B" / name).write_bytes((data_slices / "glue" / "STS-B" / name).read_bytes())
    train = data_dir / "STS-B" / "train.tsv"
    model_dir = tmp_path / "o"
    result = _run("--task", "stsb", "--data_dir", str(data_dir), "--model_dir", str(model_dir), "--train_limit", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == "error: --max_train_samples=0: must be an integer >= 1"
    train.write_bytes(train.read_bytes().split(b"\n")[0] + b"\n")  # the header only
    result = _run("--task", "stsb", "--data_dir", str(data_dir), "--model_dir", str(model_dir))
    assert result.returncode == 2 and result.stderr.splitlines()[-1].startswith(
        f"error: {train}: no training examples (it has a header only)")
    assert not (model_dir / "dev_results.json").exists()


@pytest.mark.slow
def test_packed_regression_on_stsb_slice_trains_the_classifier(data_slices, tmp_path):
    """--packing: several pairs per row, trained through packed_training_model(); dev is read unpacked."""
    from keras_bert_impl.tasks.classification.run import ClassificationConfig, run

    data_dir = _slice_task(data_slices / "glue", tmp_path, "STS-B", 33)
    results = run(ClassificationConfig("stsb", data_dir, str(tmp_path / "out"), sequence_length=128, batch_size=8,
                                       epochs=2, learning_rate=1e-4, seed=0, verbose=0, packing=True,
                                       save_model=True))
    assert results["config"]["packing"] is True
    assert results["history"]["loss"][-1] < results["history"]["loss"][0]
    assert list(results["best"]) == ["pearson", "spearman"]
    # The saved classifier is the one the packed model trained: it scores raw pairs.
    model = keras.saving.load_model(str(tmp_path / "out" / "model.keras"))
    dev = glue.read_split("stsb", data_dir, "dev")
    assert len(model.predict_labels((dev.text_a[:3], dev.text_b[:3]))) == 3


def test_packing_needs_the_pooled_head(data_slices, tmp_path):
    data_dir = _slice_task(data_slices / "glue", tmp_path, "STS-B", 5)
    result = _run("--task", "stsb", "--data_dir", str(data_dir), "--model_dir", str(tmp_path / "m"),
                  "--packing", "--pooling", "mean")
    assert result.returncode == 2
    assert "error: --packing needs --pooling pooled (each example's [CLS]); --pooling='mean'" in result.stderr


def test_packed_batches_refuse_a_split_without_labels(data_slices, tmp_path, minilm_dir):
    from keras_bert_impl.text.classifier_preprocessor import BertClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer

    data_dir = _slice_task(data_slices / "glue", tmp_path, "STS-B", 5)
    test = glue.read_split("stsb", data_dir, "test")
    preprocessor = BertClassifierPreprocessor(BertTokenizer.from_preset(str(minilm_dir)), sequence_length=32)
    with pytest.raises(ValueError) as error:
        glue.make_packed_dataset(test, preprocessor, 8)
    assert str(error.value) == f"{test.path}: no labels (a test split): packed batches are for training"


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_scores_of_an_uninterrupted_one(shared_data, tmp_path):
    """`finetune_glue.py` on the first 32 RTE examples, 3 epochs: killed (SIGKILL) once its first epoch's checkpoint
    exists, then the same command again. It resumes from that checkpoint and ends with the history, best epoch and
    dev accuracy of the run that was never interrupted, and leaves no checkpoint behind."""
    import signal
    import time

    data_dir = _slice_task(shared_data / "glue", tmp_path, "RTE", 33)
    flags = ["--task", "rte", "--data_dir", str(data_dir), "--sequence_length", "32", "--batch_size", "8",
             "--epochs", "3", "--learning_rate", "5e-5", "--seed", "1", "--no_predict_test"]
    straight = _run(*flags, "--model_dir", str(tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr[-3000:]

    model_dir = tmp_path / "killed"
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    job = subprocess.Popen([sys.executable, RECIPE, *flags, "--model_dir", str(model_dir)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoints = model_dir / "checkpoints"
    deadline = time.time() + 300
    while not (checkpoints.is_dir() and any(p.name.startswith("ckpt-") for p in checkpoints.iterdir())):
        assert job.poll() is None and time.time() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
    job.wait()
    done = sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("ckpt-"))
    assert done and done[-1] in ("ckpt-000000001", "ckpt-000000002")  # killed before the end

    resumed = _run(*flags, "--model_dir", str(model_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resuming from {checkpoints / done[-1]}: {int(done[-1][5:])} epoch(s) done" in resumed.stderr
    expected = json.load(open(tmp_path / "straight" / "dev_results.json"))
    results = json.load(open(model_dir / "dev_results.json"))
    assert results["best_epoch"] == expected["best_epoch"] and results["best"] == pytest.approx(expected["best"])
    for key, values in expected["history"].items():
        np.testing.assert_allclose(results["history"][key], values, rtol=1e-4, err_msg=key)
    assert not checkpoints.exists()
