"""A pretraining run resumes where its files moved and across the release that froze the masked-LM-only pooler.

- The training and held-out files at other paths, byte for byte the same (another mount after a preemption, the
  bundled corpus of a new install): the run resumes, says so in one line, and keeps its held-out curve. Before, it
  was refused ("--train_files: [old path] vs [new path]"): a run on the defaults could not resume from another
  install at all.
- A masked-LM-only run whose checkpoints were written while the pooler still trained (before `BertPretrainer(
  nsp=False)` froze it) resumes with the pooler trained, as it started, and continues exactly as it would have: the
  same losses as the same run never stopped. Before, the checkpoint's 4 extra optimizer slots stopped the resume
  ("holds 36 model / 73 optimizer variables, but the model has 36 / 69").
- A run stopped on one backend resumes on another (a TPU job's TensorFlow checkpoint on a GPU machine with JAX or
  PyTorch): PyTorch lists the model's variables in another order, and the checkpoint's recorded paths put each array
  back where it belongs. Before, the PyTorch resume stopped at 'token_embedding/embeddings has shape (4291, 128) but
  the checkpoint holds (4291,)'.
- The starting checkpoint (`--init_checkpoint`) moved or copied elsewhere, its files the same bytes: the run
  resumes, saying so; another checkpoint is refused; the same folder written again resumes, saying that the run goes
  on from its checkpoint. Before, only the same folder typed another way resumed.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "keras_bert_impl", "assets", "corpus")
RUN = dict(strategy="cpu", global_batch_size=8, sequence_length=32, max_predictions_per_seq=5, warmup_steps=1,
           checkpoint_every=2, log_every=1000, validation_steps=2, verbose=0, dropout=0.0,
           vocab=os.path.join(CORPUS, "vocab.txt"))


def _files(folder):
    """A copy of the bundled corpus's first 300 lines (train) and 100 lines (held out) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train.txt", 300), ("valid.txt", 100)):
        with open(os.path.join(CORPUS, name), encoding="utf-8") as f:
            text = "".join(line for _, line in zip(range(lines), f))
        (folder / name).write_text(text, encoding="utf-8")
    return str(folder / "train.txt"), str(folder / "valid.txt")


def _config(tmp_path, model_dir, files, num_steps, **extra):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    micro = tmp_path / "micro_bert.json"
    micro.write_text(json.dumps({"num_layers": 1, "num_heads": 2, "hidden_dim": 16, "intermediate_dim": 32,
                                 "max_sequence_length": 64}))
    train, valid = files
    return PretrainingConfig(model_dir=str(model_dir), config=str(micro), train_files=[train],
                             validation_files=[valid], num_steps=num_steps, **RUN, **extra)


@pytest.mark.slow
def test_moved_training_and_held_out_files_resume_with_one_line_and_keep_the_curve(tmp_path, capsys):
    from keras_bert_impl.training.pretraining_run import run_pretraining

    model_dir = tmp_path / "run"
    # Masked LM alone, as a run started today: its pooler frozen from the start, and so when it resumes.
    run_pretraining(_config(tmp_path, model_dir, _files(tmp_path / "data"), num_steps=2, nsp=False))
    shutil.move(tmp_path / "data", tmp_path / "mounted_elsewhere")
    capsys.readouterr()
    moved = _files(tmp_path / "mounted_elsewhere")  # (the same bytes: the test writes what it moved)
    resumed = run_pretraining(_config(tmp_path, model_dir, moved, num_steps=4, nsp=False))
    printed = capsys.readouterr().out
    assert resumed["resumed_from_step"] == 2 and resumed["step"] == 4
    assert (f'Resuming with --train_files ["{moved[0]}"]: the files of ["{tmp_path}/data/train.txt"], moved (the '
            "same bytes, sha256).") in printed.splitlines()
    assert "held-out set changed" not in printed and "The pooler trains on" not in printed
    assert [step for step, _ in resumed["held_out_curve"]] == [2, 4]
    assert json.loads((model_dir / "run_config.json").read_text())["train_files"] == [moved[0]]


def test_files_moved_in_another_order_or_changed_are_still_refused(tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable, training_file_fingerprints

    old = _files(tmp_path / "old")
    (tmp_path / "old" / "more.txt").write_text("One more document.\n")
    started = [old[0], str(tmp_path / "old" / "more.txt")]
    settings = {"adam_beta2": 0.999, "train_files": started, "train_file_fingerprints": training_file_fingerprints(
        started)}
    (tmp_path / "run_config.json").write_text(json.dumps(settings))
    shutil.copytree(tmp_path / "old", tmp_path / "new")
    moved = [str(tmp_path / "new" / "train.txt"), str(tmp_path / "new" / "more.txt")]
    assert check_resumable(str(tmp_path), dict(settings, train_files=moved, train_file_fingerprints=(
        training_file_fingerprints(moved)))) == [("train_files", started, started, moved)]
    # In another order the run would read other batches at the resumed step: refused, naming the flag.
    reordered = moved[::-1]
    with pytest.raises(ValueError, match=r"Differences: --train_files: \["):
        check_resumable(str(tmp_path), dict(settings, train_files=reordered,
                                            train_file_fingerprints=training_file_fingerprints(reordered)))
    (tmp_path / "new" / "more.txt").write_text("One other document.\n")
    with pytest.raises(ValueError, match=r"Differences: --train_files: \["):
        check_resumable(str(tmp_path), dict(settings, train_files=moved,
                                            train_file_fingerprints=training_file_fingerprints(moved)))


def test_a_starting_checkpoint_typed_another_way_is_the_same_run(tmp_path):
    from keras_bert_impl.training.pretraining_checks import check_resumable

    export = tmp_path / "pretrained" / "export"
    export.mkdir(parents=True)
    settings = {"adam_beta2": 0.999, "init_checkpoint": str(export)}
    (tmp_path / "run_config.json").write_text(json.dumps(settings))
    assert check_resumable(str(tmp_path), dict(settings, init_checkpoint=f"{tmp_path}/pretrained/./export/")) == []
    with pytest.raises(ValueError, match=r"Differences: --init_checkpoint: "):
        check_resumable(str(tmp_path), dict(settings, init_checkpoint=str(tmp_path / "pretrained")))


def test_a_starting_checkpoint_moved_or_copied_resumes_and_one_changed_in_place_goes_on(tmp_path):
    """Before: `--init_checkpoint` was compared by path, so a run whose starting export moved to another disk (or was
    copied to another machine) could not resume. Now its files' sha256 is recorded and compared too."""
    from keras_bert_impl.training.pretraining_checks import check_resumable, resume_change_message
    from keras_bert_impl.training.starting_point_identity import starting_point_sha256

    export = tmp_path / "pretrained" / "export"
    export.mkdir(parents=True)
    (export / "config.json").write_text('{"num_layers": 1}')
    (export / "model.weights.h5").write_bytes(bytes(range(256)) * 64)
    started = {"adam_beta2": 0.999, "init_checkpoint": str(export),
               "init_checkpoint_sha256": starting_point_sha256(str(export))}
    (tmp_path / "run_config.json").write_text(json.dumps(started))

    def now(path):
        return dict(started, init_checkpoint=str(path), init_checkpoint_sha256=starting_point_sha256(str(path)))

    moved = shutil.move(str(export), str(tmp_path / "disk2" / "export"))
    change = check_resumable(str(tmp_path), now(moved))
    assert change == [("init_checkpoint", str(export), str(export), moved)]
    assert resume_change_message(*change[0]) == (
        f"Resuming with --init_checkpoint {moved}: the files of {export}, moved or copied (the same bytes, sha256).")
    # Another checkpoint at another path (a weight changed) is another run: refused, naming the flag alone.
    other = shutil.copytree(moved, str(tmp_path / "other"))
    with open(os.path.join(other, "model.weights.h5"), "r+b") as f:
        f.write(b"\xff")
    with pytest.raises(ValueError) as error:
        check_resumable(str(tmp_path), now(other))
    assert f'Differences: --init_checkpoint: "{export}" in {tmp_path} vs "{other}" now.' in str(error.value)
    assert "sha256" not in str(error.value)
    # The same path written again since the run started (a pretraining run that went on): the run goes on from its
    # checkpoint, and says how to start from the new files instead.
    shutil.rmtree(moved)
    shutil.copytree(other, str(export))
    change = check_resumable(str(tmp_path), now(export))
    assert [key for key, *_ in change] == ["init_checkpoint_sha256"]
    assert resume_change_message(*change[0], model_dir=str(tmp_path), init_checkpoint=str(export)) == (
        f"Resuming {tmp_path} although the files of --init_checkpoint {export} changed since the run started: the "
        f"run goes on from its checkpoint (which holds its weights); to start from the new files, remove "
        f"{tmp_path / 'checkpoints'} or pass another model_dir.")
    # A run recorded before the sha256 was: compared by path, as then.
    (tmp_path / "run_config.json").write_text(json.dumps({"adam_beta2": 0.999, "init_checkpoint": str(export)}))
    assert check_resumable(str(tmp_path), now(export)) == []
    with pytest.raises(ValueError, match="Differences: --init_checkpoint: "):
        check_resumable(str(tmp_path), now(other))


@pytest.mark.slow
def test_a_masked_lm_run_whose_checkpoints_trained_the_pooler_resumes_as_it_started(tmp_path, capsys):
    from keras_bert_impl.models import pretrainer
    from keras_bert_impl.training.pretraining_run import run_pretraining

    files = _files(tmp_path / "data")
    earlier_release = pytest.MonkeyPatch()  # what BertPretrainer(nsp=False) did then: the pooler stayed trainable
    earlier_release.setattr(pretrainer, "freeze_unused_pooler", lambda backbone: None)
    try:
        never_stopped = run_pretraining(_config(tmp_path, tmp_path / "never_stopped", files, num_steps=4, nsp=False))
        run_pretraining(_config(tmp_path, tmp_path / "run", files, num_steps=2, nsp=False))
    finally:
        earlier_release.undo()
    capsys.readouterr()
    resumed = run_pretraining(_config(tmp_path, tmp_path / "run", files, num_steps=4, nsp=False))
    printed = capsys.readouterr().out.splitlines()
    assert ("The pooler trains on, as when this run started (its checkpoints hold the pooler's optimizer slots); a "
            "new masked-LM-only run freezes it, since masked LM alone never reads it.") in printed
    assert resumed["resumed_from_step"] == 2
    assert resumed["history"]["loss"] == pytest.approx(never_stopped["history"]["loss"][1:], rel=1e-6)
    assert resumed["validation"] == pytest.approx(never_stopped["validation"], rel=1e-6)


# Resumes a run in a fresh process on KERAS_BACKEND (argv: the config as JSON); prints its result as JSON.
RESUME = """
import json, sys
from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining
result = run_pretraining(PretrainingConfig(**json.loads(sys.argv[1])))
print(json.dumps({"history": result["history"], "validation": result["validation"],
                  "resumed_from_step": result["resumed_from_step"]}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_tensorflow_run_resumes_on_another_backend_to_the_same_losses(tmp_path, backend):
    from keras_bert_impl.training.pretraining_run import run_pretraining

    files = _files(tmp_path / "data")
    run_pretraining(_config(tmp_path, tmp_path / "run", files, num_steps=2))
    shutil.copytree(tmp_path / "run", tmp_path / "elsewhere")
    on_tensorflow = run_pretraining(_config(tmp_path, tmp_path / "run", files, num_steps=4))
    config = dataclasses.asdict(_config(tmp_path, tmp_path / "elsewhere", files, num_steps=4))
    done = subprocess.run([sys.executable, "-c", RESUME, json.dumps(config)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = json.loads(done.stdout.strip().splitlines()[-1])
    assert resumed["resumed_from_step"] == 2
    assert resumed["history"]["loss"] == pytest.approx(on_tensorflow["history"]["loss"], rel=1e-4)
    assert resumed["validation"] == pytest.approx(on_tensorflow["validation"], rel=1e-4)
