"""A pretraining run whose `--model_dir` is a bucket (`gs://...`; here TensorFlow's in-memory `ram://` file system,
which `tf.io.gfile` reads the same way) keeps its checkpoints there, resumes from them on a machine that has none
(a preempted TPU VM's replacement), and its export loads with `from_preset` / `--init_checkpoint`.

Before, `--model_dir gs://b/run` wrote `run_config.json` and every checkpoint under a local folder named `gs:` in
the working directory, and only the TensorBoard logs reached the bucket; and `from_preset("gs://b/run/export")`
said `Preset directory gs://b/run/export does not exist.`
"""

import json
import os
import shutil
import uuid

import numpy as np
import pytest

from test_pretrain_recipe_flags import _micro_run


def _bucket():
    return f"ram://bucket-{uuid.uuid4().hex[:8]}"


@pytest.mark.slow
def test_a_remote_model_dir_keeps_the_checkpoints_and_a_new_machine_resumes_from_them(tmp_path, monkeypatch,
                                                                                       capsys):
    import tensorflow as tf

    from keras_bert_impl import BertBackbone
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    remote = f"{_bucket()}/run"
    settings = _micro_run(tmp_path, model_dir=remote, num_steps=2, checkpoint_every=2, keep_checkpoints=1)
    first = run_pretraining(PretrainingConfig(**settings))
    assert (first["model_dir"], first["export_dir"]) == (remote, f"{remote}/export")
    assert sorted(tf.io.gfile.listdir(remote)) == ["checkpoints/", "export/", "logs/", "run_config.json"] or sorted(
        name.rstrip("/") for name in tf.io.gfile.listdir(remote)) == ["checkpoints", "export", "logs",
                                                                       "run_config.json"]
    assert not os.path.exists("gs:") and not os.path.exists("ram:")  # nothing under a folder named after the scheme
    staged = tmp_path / "cache" / "remote_model_dirs" / "ram" / remote.split("://")[1]
    assert (staged / "checkpoints" / "ckpt-000000002" / "manifest.json").exists()

    shutil.rmtree(tmp_path / "cache")  # another machine: nothing local
    capsys.readouterr()
    second = run_pretraining(PretrainingConfig(**dict(settings, num_steps=4)))
    printed = capsys.readouterr().out.splitlines()
    assert second["resumed_from_step"] == 2 and second["step"] == 4
    assert (f"--model_dir {remote}: working in {staged}, a local copy of its newest checkpoint (step 2); every "
            "checkpoint is copied back as it is written.") in printed
    # The remote side holds the new checkpoint alone (--keep_checkpoints 1), its settings, and the new export.
    assert [name.rstrip("/") for name in tf.io.gfile.listdir(f"{remote}/checkpoints")] == ["ckpt-000000004"]
    assert json.loads(tf.io.gfile.GFile(f"{remote}/run_config.json").read())["num_steps"] == 4
    exported = BertBackbone.from_preset(second["export_dir"])
    for mine, theirs in zip(exported.get_weights(), second["model"].backbone.get_weights()):
        np.testing.assert_array_equal(mine, theirs)


def _fake_checkpoint(folder, files, manifest=True, sizes=None):
    import tensorflow as tf

    tf.io.gfile.makedirs(folder)
    for name, content in files.items():
        with tf.io.gfile.GFile(f"{folder}/{name}", "wb") as f:
            f.write(content)
    if manifest:
        entries = {name: {"size": (sizes or {}).get(name, len(content)), "sha256": "-"} for name, content in
                   files.items()}
        with tf.io.gfile.GFile(f"{folder}/manifest.json", "w") as f:
            f.write(json.dumps({"format": 2, "files": entries}))


def test_a_checkpoint_copied_in_part_is_passed_over_for_the_one_before(tmp_path):
    import tensorflow as tf

    from keras_bert_impl.training.remote_model_dir import RemoteModelDir

    remote = f"{_bucket()}/run"
    with tf.io.gfile.GFile(f"{remote}/run_config.json", "w") as f:
        f.write('{"num_steps": 6}')
    _fake_checkpoint(f"{remote}/checkpoints/ckpt-000000002", {"state.json": b'{"step": 2}', "variables.npz": b"2"})
    _fake_checkpoint(f"{remote}/checkpoints/ckpt-000000004", {"state.json": b'{"step": 4}', "variables.npz": b"44"},
                     sizes={"variables.npz": 1000})
    _fake_checkpoint(f"{remote}/checkpoints/ckpt-000000006", {"state.json": b'{"step": 6}'}, manifest=False)
    tf.io.gfile.makedirs(f"{remote}/logs/train")
    lines = []
    staged = RemoteModelDir(remote, local=str(tmp_path / "local"), log=lines.append)
    assert lines == [
        f"--model_dir {remote}: checkpoints/ckpt-000000006 was not copied in full (no manifest.json); resuming from "
        "an earlier checkpoint.",
        f"--model_dir {remote}: checkpoints/ckpt-000000004 was not copied in full (variables.npz has 2 bytes, its "
        "manifest says 1,000); resuming from an earlier checkpoint.",
        f"--model_dir {remote}: working in {tmp_path / 'local'}, a local copy of its newest checkpoint (step 2); "
        "every checkpoint is copied back as it is written.",
    ]
    assert sorted(os.listdir(tmp_path / "local")) == ["checkpoints", "run_config.json"]  # no logs: they stay there
    assert sorted(os.listdir(tmp_path / "local" / "checkpoints" / "ckpt-000000002")) == [
        "manifest.json", "state.json", "variables.npz"]
    assert staged.push() == 0  # nothing changed: nothing uploaded

    # A new checkpoint: its files, then its manifest; the remote ones older than the oldest local one go.
    new = tmp_path / "local" / "checkpoints" / "ckpt-000000008"
    new.mkdir()
    (new / "state.json").write_text('{"step": 8}')
    (new / "manifest.json").write_text('{"format": 2, "files": {"state.json": {"size": 11}}}')
    shutil.rmtree(tmp_path / "local" / "checkpoints" / "ckpt-000000002")
    (tmp_path / "local" / ".run.lock").write_text("")
    assert staged.push() == 2
    assert sorted(name.rstrip("/") for name in tf.io.gfile.listdir(f"{remote}/checkpoints")) == ["ckpt-000000008"]
    assert not tf.io.gfile.exists(f"{remote}/.run.lock")
    # A new run's remote directory does not exist yet: the run says where it works all the same.
    lines.clear()
    fresh = f"{_bucket()}/new_run"
    RemoteModelDir(fresh, local=str(tmp_path / "fresh"), log=lines.append)
    assert lines == [f"--model_dir {fresh}: working in {tmp_path / 'fresh'}; every checkpoint is copied there as it "
                     "is written."]


def test_an_unreadable_remote_model_dir_is_one_line(tmp_path):
    from keras_bert_impl.training.remote_model_dir import RemoteModelDir, RemoteModelDirError

    with pytest.raises(RemoteModelDirError) as error:
        RemoteModelDir("nosuchscheme://bucket/run", local=str(tmp_path / "local"), log=lambda line: None)
    message = str(error.value)
    assert message == ("--model_dir nosuchscheme://bucket/run: File system scheme 'nosuchscheme' not implemented "
                       "(file: 'nosuchscheme://bucket/run')")
    assert "\n" not in message


def test_a_remote_export_loads_as_a_preset_and_is_copied_again_only_when_it_changed(tmp_path, monkeypatch):
    import tensorflow as tf

    from keras_bert_impl import BertBackbone
    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets

    monkeypatch.setenv("KERAS_BERT_IMPL_CACHE", str(tmp_path / "cache"))
    backbone = BertBackbone(vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]))
    backbone.save_to_preset(str(tmp_path / "export"), vocabulary=str(tmp_path / "vocab.txt"), lowercase=False)
    remote = f"{_bucket()}/run/export"
    tf.io.gfile.makedirs(remote)
    for name in os.listdir(tmp_path / "export"):
        tf.io.gfile.copy(str(tmp_path / "export" / name), f"{remote}/{name}")

    loaded = BertBackbone.from_preset(remote)
    for mine, theirs in zip(loaded.get_weights(), backbone.get_weights()):
        np.testing.assert_array_equal(mine, theirs)
    assert resolve_tokenizer_assets(remote)["lowercase"] is False
    cached = tmp_path / "cache" / "remote" / "ram" / remote.split("://")[1] / "model.weights.h5"
    first_copy = cached.stat().st_mtime_ns
    BertBackbone.from_preset(remote)
    assert cached.stat().st_mtime_ns == first_copy  # unchanged on the remote side: not copied again
    with pytest.raises(FileNotFoundError, match=f"Preset directory {remote}-missing does not exist."):
        BertBackbone.from_preset(f"{remote}-missing")


def _real_checkpoint(directory, step):
    """A checkpoint `run_checkpoints` verifies (a one-layer model and its optimizer)."""
    import keras

    from keras_bert_impl.training.run_checkpoints import CheckpointManager

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD()
    optimizer.build(model.trainable_variables)
    return CheckpointManager(str(directory), keep=3).save(step, model, optimizer)


def test_a_checkpoint_whose_copy_failed_is_kept_and_copied_by_the_next_start(tmp_path, monkeypatch):
    """Before, a run whose copy to the bucket failed lost its newer checkpoints at the next start: the staging
    directory was emptied and the bucket's older checkpoint downloaded."""
    import tensorflow as tf

    from keras_bert_impl.training.remote_model_dir import RemoteModelDir, RemoteModelDirError

    remote, local = f"{_bucket()}/run", tmp_path / "local"
    settings = {"num_steps": 4, "seed": 0, "learning_rate": 1e-4}
    with tf.io.gfile.GFile(f"{remote}/run_config.json", "w") as f:
        f.write(json.dumps(settings))
    tf.io.gfile.makedirs(f"{remote}/checkpoints")
    lines = []
    staged = RemoteModelDir(remote, local=str(local), log=lines.append)
    _real_checkpoint(local / "checkpoints", 2)
    assert staged.push() == 3  # the checkpoint's state, variables and manifest (run_config.json is there)

    # The bucket goes out of reach: the next checkpoint is kept locally and the run goes on, saying so.
    copy = tf.io.gfile.copy

    def unreachable(source, destination, overwrite=False):
        if destination.startswith("ram://"):
            raise tf.errors.UnavailableError(None, None, "503 Service Unavailable")
        return copy(source, destination, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "copy", unreachable)
    _real_checkpoint(local / "checkpoints", 4)
    (local / "run_config.json").write_text(json.dumps(dict(settings, num_steps=6)))  # a resume extended the run
    lines.clear()
    assert staged.push_or_report() is None
    assert lines == [f"--model_dir {remote}: run_config.json could not be copied there (503 "
                     f"Service Unavailable). Training goes on: the checkpoint is kept in the local copy {local}, and "
                     "the next checkpoint copies it there again."]
    with pytest.raises(RemoteModelDirError) as error:  # (the copy at the end of a run raises)
        staged.push()
    assert str(error.value) == (f"--model_dir {remote}: run_config.json could not be copied "
                                f"there (503 Service Unavailable). The run's files are kept in its local copy {local}: "
                                "the same command, run again on this machine, copies them there.")

    # The same command again, the bucket back: the newer local checkpoint is kept and copied there first.
    monkeypatch.setattr(tf.io.gfile, "copy", copy)
    lines.clear()
    RemoteModelDir(remote, local=str(local), log=lines.append)
    assert lines == [f"--model_dir {remote}: its local copy {local} holds checkpoint step 4, newer than the one "
                     "copied there (step 2): an earlier copy failed. Working in the local copy, which is copied there "
                     "now (remove it to start from what the remote side holds instead)."]
    assert sorted(name.rstrip("/") for name in tf.io.gfile.listdir(f"{remote}/checkpoints")) == [
        "ckpt-000000002", "ckpt-000000004"]
    assert json.loads(tf.io.gfile.GFile(f"{remote}/run_config.json").read())["num_steps"] == 6

    # Another run started in the bucket since (other defining settings): the bucket is the run, the local copy goes.
    _real_checkpoint(local / "checkpoints", 6)
    with tf.io.gfile.GFile(f"{remote}/run_config.json", "w") as f:
        f.write(json.dumps(dict(settings, seed=1)))
    lines.clear()
    RemoteModelDir(remote, local=str(local), log=lines.append)
    assert lines[-1] == (f"--model_dir {remote}: working in {local}, a local copy of its newest checkpoint (step 4); "
                         "every checkpoint is copied back as it is written.")
    assert sorted(os.listdir(local / "checkpoints")) == ["ckpt-000000004"]
