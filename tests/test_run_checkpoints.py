"""CheckpointManager: atomic saves, the manifest written last, pruning, and a full disk that leaves the
previous checkpoint intact. Corrupt checkpoints and write faults: tests/test_checkpoint_faults.py."""

import errno
import json
import os

import numpy as np
import pytest

import keras

from keras_bert_impl.training import run_checkpoints
from keras_bert_impl.training.run_checkpoints import CheckpointManager, CheckpointWriteError


def _model_and_optimizer(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _weights(model):
    return [np.array(v.numpy()) for v in model.variables]


def test_save_restore_round_trip_and_keep_prunes(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=2)
    model, optimizer = _model_and_optimizer(0)
    for step in (10, 20, 30):
        manager.save(step, model, optimizer, state={"note": step})
    assert manager.all_steps() == [20, 30]
    assert manager.latest().endswith("ckpt-000000030")
    other, other_optimizer = _model_and_optimizer(1)
    state = manager.restore(manager.latest(), other, other_optimizer)
    assert state["step"] == 30 and state["note"] == 30
    for a, b in zip(_weights(model), _weights(other)):
        np.testing.assert_array_equal(a, b)


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    manager = CheckpointManager(str(tmp_path), keep=3)
    model, optimizer = _model_and_optimizer(0)
    good = manager.save(100, model, optimizer)
    saved = _weights(model)

    # Change the weights, then let the disk fill up half-way through the next save.
    for v in model.trainable_variables:
        v.assign(v.numpy() + 1.0)
    real_savez = np.savez

    def savez_then_disk_full(file, **arrays):
        file.write(b"PK\x03\x04 partial bytes of a zip")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_checkpoints.np, "savez", savez_then_disk_full)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(200, model, optimizer)
    message = str(info.value)
    assert "ckpt-000000200" in message and "No space left on device" in message
    assert good in message and "intact" in message
    assert info.value.errno == errno.ENOSPC
    monkeypatch.setattr(run_checkpoints.np, "savez", real_savez)

    # Nothing half-written is visible: no ckpt-200, no temporary directory, and latest() is the old one.
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000100"]
    assert manager.latest() == good
    restored, restored_optimizer = _model_and_optimizer(1)
    manager.restore(manager.latest(), restored, restored_optimizer)
    for a, b in zip(saved, _weights(restored)):
        np.testing.assert_array_equal(a, b)

    # With space again, the same call succeeds.
    assert manager.save(200, model, optimizer).endswith("ckpt-000000200")


def test_a_leftover_temporary_directory_is_ignored_and_cleaned(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=3)
    model, optimizer = _model_and_optimizer(0)
    manager.save(1, model, optimizer)
    # What a SIGKILL during a save leaves behind: a temporary directory, and a
    # ckpt directory without state.json (never produced by save, but be safe).
    os.makedirs(tmp_path / ".tmp-ckpt-000000002-deadbeef")
    (tmp_path / ".tmp-ckpt-000000002-deadbeef" / "variables.npz").write_bytes(b"PK\x03")
    os.makedirs(tmp_path / "ckpt-000000003")
    assert manager.latest().endswith("ckpt-000000001")
    manager.save(4, model, optimizer)
    assert not any(name.startswith(".tmp-") for name in os.listdir(tmp_path))
    assert manager.all_steps() == [1, 4]


def test_restore_of_a_different_model_names_the_checkpoint(tmp_path):
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)
    path = manager.save(5, model, optimizer)
    keras.utils.set_random_seed(0)
    bigger = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(2)])
    bigger_optimizer = keras.optimizers.AdamW(1e-3)
    bigger_optimizer.build(bigger.trainable_variables)
    with pytest.raises(ValueError) as info:
        manager.restore(path, bigger, bigger_optimizer)
    assert str(info.value) == (
        f"Checkpoint {path} holds 2 model / 6 optimizer variables, but the model has 4 / 10: it was written by a "
        f"different model or optimizer configuration. Run the command that wrote it to resume that run, or remove "
        f"{tmp_path} (or use another model_dir) to start this one.")
    # Before: the shapes alone, and no word on what to do (a fine-tuning run resumed with another number of classes).
    wider = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5)])
    wider_optimizer = keras.optimizers.AdamW(1e-3)
    wider_optimizer.build(wider.trainable_variables)
    with pytest.raises(ValueError) as info:
        manager.restore(path, wider, wider_optimizer)
    assert str(info.value).endswith(
        "but the checkpoint holds (4, 3) (another model: e.g. another number of classes). Run the command that wrote "
        f"it to resume that run, or remove {tmp_path} (or use another model_dir) to start this one.")


def test_the_manifest_is_written_last_and_verifies(tmp_path, monkeypatch):
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)
    real_write_manifest = run_checkpoints._write_manifest
    seen = []

    def spy(directory):
        # Everything else is complete on disk, and the checkpoint is not yet visible under its name.
        seen.append(sorted(os.listdir(directory)))
        assert not os.path.exists(manager.path(3)) and manager.latest() is None
        real_write_manifest(directory)

    monkeypatch.setattr(run_checkpoints, "_write_manifest", spy)
    path = manager.save(3, model, optimizer)
    assert seen == [["state.json", "variables.npz"]]
    assert sorted(os.listdir(path)) == ["manifest.json", "state.json", "variables.npz"]
    with open(os.path.join(path, "state.json")) as f:
        assert json.load(f)["checkpoint_format"] == run_checkpoints.FORMAT
    assert manager.verify(path) == [] and manager.latest() == path


# === A full disk at the last fine-tuning epoch: the previous checkpoint is kept while the new one is written, so a
# disk with room for one checkpoint fails; the message says so, with the bytes needed and free ===

def _disk_full_at_savez(monkeypatch, calls_before=0):
    """`np.savez` fails with ENOSPC (after `calls_before` good calls), as a full disk makes it fail."""
    real_savez, calls = np.savez, []

    def savez(file, **arrays):
        calls.append(1)
        if len(calls) <= calls_before:
            return real_savez(file, **arrays)
        file.write(b"PK\x03\x04 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(run_checkpoints.np, "savez", savez)


def test_a_full_disk_says_how_many_bytes_the_checkpoint_needs_beside_the_previous_one(tmp_path, monkeypatch):
    manager = CheckpointManager(str(tmp_path), keep=1)
    model, optimizer = _model_and_optimizer(0)
    good = manager.save(1, model, optimizer)
    needed = sum(np.asarray(v.numpy()).nbytes for v in [*model.variables, *optimizer.variables])
    # Beside a previous checkpoint, its size (its iterator's state too, which the variables' bytes left out: a real
    # full disk's message asked for 12.6 MB where a checkpoint took 17.7 MB).
    beside = sum(entry.stat().st_size for entry in os.scandir(good))
    assert beside > needed
    _disk_full_at_savez(monkeypatch)
    monkeypatch.setattr(run_checkpoints, "_free_bytes", lambda directory: 4_096 if directory == str(tmp_path) else 0)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(2, model, optimizer)
    assert str(info.value) == (
        f"Could not write checkpoint {tmp_path}/ckpt-000000002 (No space left on device). The previous "
        f"checkpoint {good} is intact and a restart resumes from it. The new checkpoint needs about {beside:,} bytes "
        f"beside the previous one, which is kept until the new one is complete; 4,096 bytes are free in {tmp_path}. "
        "Free disk space (or point --model_dir elsewhere) and run the same command again.")
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000001"] and manager.latest() == good
    # The first checkpoint of a run: nothing beside it.
    with pytest.raises(CheckpointWriteError) as info:
        CheckpointManager(str(tmp_path / "new"), keep=1).save(1, model, optimizer)
    assert str(info.value).endswith(
        f"No earlier intact checkpoint exists. The new checkpoint needs about {needed:,} bytes; 0 bytes are free in "
        f"{tmp_path / 'new'}. Free disk space (or point --model_dir elsewhere) and run the same command again.")


def test_a_folder_that_cannot_be_written_says_to_make_it_writable_not_to_free_disk_space(tmp_path, monkeypatch):
    """Before: `[Errno 1] Could not write checkpoint ... Free disk space ...` for a folder made read-only mid-run."""
    manager = CheckpointManager(str(tmp_path), keep=1)
    model, optimizer = _model_and_optimizer(0)
    good = manager.save(1, model, optimizer)

    def savez(file, **arrays):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(run_checkpoints.np, "savez", savez)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(2, model, optimizer)
    assert info.value.errno == errno.EPERM
    assert str(info.value) == (
        f"Could not write checkpoint {tmp_path}/ckpt-000000002 (Operation not permitted). The previous checkpoint "
        f"{good} is intact and a restart resumes from it. Make {tmp_path} writable (or point --model_dir elsewhere) "
        "and run the same command again.")

    def savez_io_error(file, **arrays):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(run_checkpoints.np, "savez", savez_io_error)  # any other cause: neither space nor rights
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(2, model, optimizer)
    assert str(info.value) == (
        f"Could not write checkpoint {tmp_path}/ckpt-000000002 (Input/output error). The previous checkpoint {good} "
        "is intact and a restart resumes from it. Remove the cause (or point --model_dir elsewhere) and run the same "
        "command again.")


def test_a_full_disk_at_the_last_finetuning_epoch_keeps_the_previous_checkpoint_and_a_rerun_finishes(
        tmp_path, monkeypatch, capsys):
    import tensorflow as tf

    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 3, size=64).astype("int32")

    def run(model_dir):
        setup_finetuning(seed=0)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
        model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        train = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(64, seed=0).batch(16)
        finetune(model, train, epochs=3, learning_rate=1e-2, model_dir=str(model_dir), seed=0, verbose=0,
                 restore_best_weights=False, tensorboard=False)
        return [np.array(keras.ops.convert_to_numpy(w)) for w in model.weights]

    straight = run(tmp_path / "straight")
    model_dir = tmp_path / "full_disk"
    checkpoints = model_dir / "checkpoints"
    with monkeypatch.context() as patch:
        _disk_full_at_savez(patch, calls_before=2)  # epochs 1 and 2 are written, epoch 3's checkpoint is not
        with pytest.raises(CheckpointWriteError) as info:
            run(model_dir)
    message = str(info.value)
    assert message.startswith(f"Could not write checkpoint {checkpoints}/ckpt-000000003 (No space left "
                              f"on device). The previous checkpoint {checkpoints}/ckpt-000000002 is intact and a "
                              "restart resumes from it. The new checkpoint needs about "), message
    assert "beside the previous one, which is kept until the new one is complete;" in message
    assert f"bytes are free in {checkpoints}. Free disk space" in message and "\n" not in message
    assert os.listdir(checkpoints) == ["ckpt-000000002"]
    assert CheckpointManager(str(checkpoints)).verify(str(checkpoints / "ckpt-000000002")) == []
    capsys.readouterr()
    resumed = run(model_dir)  # with room again: epoch 3 from the checkpoint of epoch 2
    assert f"Resuming from {checkpoints}/ckpt-000000002: 2 epoch(s) done" in capsys.readouterr().err
    for a, b in zip(straight, resumed):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)
    assert not checkpoints.exists()


# === Defect: a finished fine-tuning run killed while it removed its checkpoints left ckpt-<n>/manifest.json alone,
# and every rerun of the same command stopped on "No intact checkpoint in ...: state.json: missing" ===

def _killed_half_way(path, ignore_errors=False):
    """`shutil.rmtree` cut off by SIGKILL: every file but manifest.json deleted, then the process is gone."""
    for root, _, files in os.walk(path):
        for name in files:
            if name != "manifest.json":
                os.remove(os.path.join(root, name))
    raise KeyboardInterrupt("killed")


@pytest.mark.parametrize("removal", ["finished fine-tuning run", "pruned by a save"])
def test_a_kill_while_checkpoints_are_removed_leaves_none_half_deleted(tmp_path, monkeypatch, removal):
    import shutil

    from keras_bert_impl.training.finetuning_resume import remove_checkpoints

    manager = CheckpointManager(str(tmp_path / "checkpoints"), keep=1)
    model, optimizer = _model_and_optimizer(0)
    manager.save(1, model, optimizer)
    monkeypatch.setattr(shutil, "rmtree", _killed_half_way)
    with pytest.raises(KeyboardInterrupt):
        remove_checkpoints(manager) if removal.startswith("finished") else manager.save(2, model, optimizer)
    monkeypatch.undo()
    # The rerun's view: no checkpoint at all (a finished run starts again), or the new one, intact.
    expected = None if removal.startswith("finished") else manager.path(2)
    assert CheckpointManager(str(tmp_path / "checkpoints")).latest() == expected
    assert all(name.startswith(".tmp-ckpt-") or name == os.path.basename(expected or "")
               for name in os.listdir(tmp_path / "checkpoints"))
    manager.save(3, model, optimizer)  # the next save removes what the kill left
    assert os.listdir(tmp_path / "checkpoints") == ["ckpt-000000003"]


class _Listed:
    """A model or optimizer as the manager sees it: its `variables`, in the order its backend lists them."""

    def __init__(self, variables):
        self.variables = list(variables)


@pytest.mark.multibackend
def test_a_checkpoint_restores_by_path_where_another_backend_lists_the_variables_in_another_order(tmp_path):
    """PyTorch lists a model's variables in another order than TensorFlow and JAX (the embeddings first, the heads
    last): a checkpoint records each variable's path, so one written on a backend resumes on another. Before, the
    arrays went by position and the first mismatch read 'token_embedding/embeddings has shape (4291, 128) but the
    checkpoint holds (4291,)'."""
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)
    path = manager.save(5, model, optimizer)
    state = json.loads(open(os.path.join(path, "state.json")).read())
    assert state["model_variable_paths"] == [v.path for v in model.variables]
    assert state["backend"] == keras.backend.backend()
    # Built second in this process, its unnamed layers are numbered otherwise ("dense_1" where the first said
    # "dense"), as a notebook's model against a fresh process's: matched all the same.
    other, other_optimizer = _model_and_optimizer(1)
    assert [v.path for v in other.variables] != state["model_variable_paths"]
    reordered, reordered_optimizer = _Listed(other.variables[::-1]), _Listed(other_optimizer.variables[::-1])
    manager.restore(path, reordered, reordered_optimizer)
    for a, b in zip(_weights(model) + _weights(optimizer), _weights(other) + _weights(other_optimizer)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.multibackend
def test_a_checkpoint_from_another_backend_that_does_not_match_says_which(tmp_path):
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)
    path = manager.save(5, model, optimizer)
    state_file = os.path.join(path, "state.json")
    state = json.loads(open(state_file).read())
    elsewhere = "torch" if keras.backend.backend() != "torch" else "jax"
    # Unnamed layers numbered otherwise (another process's history): no path matches, so arrays go by position.
    state.update(backend=elsewhere, model_variable_paths=["dense_9/bias", "dense_9/kernel"])
    open(state_file, "w").write(json.dumps(state))
    run_checkpoints._write_manifest(path)
    reordered = _Listed(model.variables[::-1])
    with pytest.raises(ValueError) as info:
        manager.restore(path, reordered, optimizer)
    assert str(info.value) == (
        f"Checkpoint {path}: variable {model.variables[1].path} has shape (3,) but the checkpoint holds (4, 3) "
        f"(written on the {elsewhere} backend, whose variables this one ({keras.backend.backend()}) cannot match by "
        f"name: resume it with KERAS_BACKEND={elsewhere}). Run the command that wrote it to resume that run, or "
        f"remove {tmp_path} (or use another model_dir) to start this one.")
