"""Checkpoint faults: a corrupt newest checkpoint falls back to the newest intact one; a full disk is a
`CheckpointWriteError` that leaves the earlier checkpoints intact (issue 16, "Wrong today" item 2).

Unit tests corrupt every file of the newest checkpoint in every way (truncate, flip a byte, delete,
invalid JSON), for checkpoints with a manifest and for legacy ones without; the fault-injection test
resumes a real `recipes/pretrain.py` run (`--deterministic`) from each corruption to weights identical
(max |diff| == 0.0) to an uninterrupted run.
"""

import errno
import json
import os
import shutil

import numpy as np
import pytest

import keras

from keras_bert_impl.training import run_checkpoints
from keras_bert_impl.training.run_checkpoints import (
    CheckpointManager,
    CheckpointReadError,
    CheckpointWriteError,
)

tf = pytest.importorskip("tensorflow")

DATA = "iterator.data-00000-of-00001"
FILES = ("variables.npz", "state.json", "iterator.index", DATA, "manifest.json")
MODES = ("truncate", "flip", "delete", "invalid_json")


def corrupt(path, mode, at=None):
    """Damages the file `path`: cut to half, one byte (in the middle, or at `at`) inverted, removed, or
    overwritten with invalid JSON."""
    if mode == "delete":
        os.remove(path)
        return
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if mode == "truncate":
        data = data[: len(data) // 2]
    elif mode == "flip":
        data[len(data) // 2 if at is None else at] ^= 0xFF
    elif mode == "invalid_json":
        data = bytearray(b'{"step": 4, "num_model_variables":')
    else:
        raise ValueError(mode)
    with open(path, "wb") as f:
        f.write(bytes(data))


def first_array_byte(npz):
    """Offset of a byte inside the first array's data in `npz` (a flip there changes a weight)."""
    import struct
    import zipfile

    with zipfile.ZipFile(npz) as archive:
        info = archive.infolist()[0]
    with open(npz, "rb") as f:
        f.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + name_length + extra_length + info.compress_size - 2


def make_legacy(checkpoint):
    """Turns a checkpoint into one written before manifests existed (no manifest.json, no format key)."""
    os.remove(os.path.join(checkpoint, "manifest.json"))
    state_path = os.path.join(checkpoint, "state.json")
    with open(state_path) as f:
        state = json.load(f)
    del state["checkpoint_format"]
    with open(state_path, "w") as f:
        json.dump(state, f, indent=2)


def _model_and_optimizer(seed):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _weights(model):
    return [np.array(v.numpy()) for v in model.variables]


def _dataset():
    return tf.data.Dataset.range(1000).shuffle(50, seed=3).batch(2)


@pytest.fixture
def two_checkpoints(tmp_path):
    """Checkpoints at steps 1 and 2 (different weights, iterator positions); what step 1 holds."""
    lines = []
    manager = CheckpointManager(str(tmp_path / "checkpoints"), log=lines.append)
    model, optimizer = _model_and_optimizer(0)
    iterator = iter(_dataset())
    next(iterator)
    manager.save(1, model, optimizer, iterator=iterator)
    expected_weights = _weights(model)
    expected_next = {step: next(iter_copy_after(step)).numpy() for step in (1, 2)}
    for v in model.trainable_variables:
        v.assign(v.numpy() + 1.0)
    next(iterator)
    manager.save(2, model, optimizer, iterator=iterator)
    return manager, lines, expected_weights, expected_next


def iter_copy_after(consumed):
    iterator = iter(_dataset())
    for _ in range(consumed):
        next(iterator)
    return iterator


def _expected_problem(name, mode, legacy):
    if not legacy:
        if name == "manifest.json":
            return "manifest.json: missing" if mode == "delete" else "manifest.json: bad JSON"
        return {"truncate": f"{name}: size ", "flip": f"{name}: checksum mismatch (sha256 ",
                "delete": f"{name}: missing", "invalid_json": f"{name}: size "}[mode]
    if mode == "delete":
        return {DATA: "iterator.data-*: missing"}.get(name, f"{name}: missing")
    return {"variables.npz": "variables.npz: unreadable zip (", "state.json": "state.json: bad JSON (",
            "iterator.index": "iterator.index/.data: unreadable TensorFlow checkpoint (",
            DATA: "iterator.index/.data: unreadable TensorFlow checkpoint ("}[name]


# Every file of the newest checkpoint, every way; legacy checkpoints (no manifest) likewise.
CASES = [(name, mode, legacy) for legacy in (False, True) for name in FILES for mode in MODES
         if not (legacy and name == "manifest.json")]


@pytest.mark.parametrize("name,mode,legacy", CASES,
                         ids=[f"{'legacy' if l else 'manifest'}-{n}-{m}" for n, m, l in CASES])
def test_corrupt_newest_file_falls_back_to_the_previous_checkpoint(two_checkpoints, name, mode, legacy):
    manager, lines, expected_weights, expected_next = two_checkpoints
    newest = manager.path(2)
    if legacy:
        make_legacy(manager.path(1))
        make_legacy(newest)
    assert sorted(os.listdir(newest)) == sorted(f for f in FILES if not (legacy and f == "manifest.json"))
    at = None
    if legacy and (name, mode) == ("variables.npz", "flip"):
        # Without a manifest only what the zip checks is seen: a flip in a header's extra field leaves
        # every array intact (and loadable), so flip a byte of a weight.
        at = first_array_byte(os.path.join(newest, name))
    corrupt(os.path.join(newest, name), mode, at)

    assert manager.latest() == manager.path(1)
    assert len(lines) == 1, lines
    problem = _expected_problem(name, mode, legacy)
    assert lines[0].startswith(f"Skipping checkpoint {newest}: {problem}"), lines[0]
    assert lines[0].endswith("Falling back to the next older checkpoint."), lines[0]
    assert "\n" not in lines[0]
    # Asked again (pretraining_run, then its callbacks, ask), the skip is not reported twice.
    assert manager.latest() == manager.path(1) and len(lines) == 1

    model, optimizer = _model_and_optimizer(7)
    iterator = iter(_dataset())
    state = manager.restore(manager.latest(), model, optimizer, iterator=iterator)
    assert state["step"] == 1
    for a, b in zip(expected_weights, _weights(model)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(next(iterator).numpy(), expected_next[1])

    # Restoring the corrupt one by name is one clear error naming it and the file.
    with pytest.raises(CheckpointReadError, match=f"Checkpoint {newest} is not intact: ") as info:
        manager.restore(newest, model, optimizer, iterator=iterator)
    assert problem in str(info.value)


def test_a_legacy_checkpoint_without_manifest_loads(two_checkpoints):
    manager, lines, _, expected_next = two_checkpoints
    make_legacy(manager.path(2))
    assert manager.latest() == manager.path(2) and not lines
    model, optimizer = _model_and_optimizer(7)
    iterator = iter(_dataset())
    assert manager.restore(manager.latest(), model, optimizer, iterator=iterator)["step"] == 2
    np.testing.assert_array_equal(next(iterator).numpy(), expected_next[2])


def test_the_manifest_lists_every_file_with_size_and_sha256(two_checkpoints):
    import hashlib

    manager, _, _, _ = two_checkpoints
    with open(os.path.join(manager.path(2), "manifest.json")) as f:
        manifest = json.load(f)
    assert sorted(manifest["files"]) == sorted(f for f in FILES if f != "manifest.json")
    for name, entry in manifest["files"].items():
        data = open(os.path.join(manager.path(2), name), "rb").read()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert manager.verify(manager.path(2)) == []


def test_no_intact_checkpoint_is_one_error_naming_the_directory_and_each_problem(two_checkpoints):
    manager, lines, _, _ = two_checkpoints
    corrupt(os.path.join(manager.path(2), "variables.npz"), "flip")
    corrupt(os.path.join(manager.path(1), "state.json"), "delete")
    with pytest.raises(CheckpointReadError) as info:
        manager.latest()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"No intact checkpoint in {manager.directory}: ckpt-000000002: "
                              "variables.npz: checksum mismatch (sha256 ")
    assert "; ckpt-000000001: state.json: missing. Restore them from a backup, or move " in message
    assert lines == []  # the error names every checkpoint's problem; no "Skipping ..." line before it repeats them


def test_a_newer_corrupt_checkpoint_does_not_push_out_the_one_just_written(tmp_path):
    manager = CheckpointManager(str(tmp_path), keep=1, log=lambda line: None)
    model, optimizer = _model_and_optimizer(0)
    manager.save(2, model, optimizer)
    manager.save(4, model, optimizer)  # keep=1 prunes 2
    (tmp_path / "ckpt-000000004" / "variables.npz").write_bytes(b"PK\x03\x04 garbage")
    with pytest.raises(CheckpointReadError):
        manager.latest()
    # A run started over (or resumed from elsewhere) writes step 2: it is kept, and latest() finds it.
    manager.save(2, model, optimizer)
    assert manager.all_steps() == [2, 4]
    assert manager.latest() == manager.path(2)
    # Writing step 4 again replaces the corrupt one.
    manager.save(4, model, optimizer)
    assert manager.all_steps() == [4] and manager.latest() == manager.path(4)


# --- write failures ------------------------------------------------------------------------------


def _assert_only_intact(manager, steps, expected_weights):
    assert sorted(os.listdir(manager.directory)) == [f"ckpt-{s:09d}" for s in steps]
    assert manager.latest() == manager.path(steps[-1])
    model, optimizer = _model_and_optimizer(9)
    manager.restore(manager.latest(), model, optimizer, iterator=iter(_dataset()))
    for a, b in zip(expected_weights, _weights(model)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("where", ["variables", "iterator_tf", "manifest"])
def test_a_full_disk_is_a_checkpoint_write_error_and_the_previous_checkpoints_stay_intact(
        tmp_path, monkeypatch, where):
    manager = CheckpointManager(str(tmp_path), keep=3)
    model, optimizer = _model_and_optimizer(0)
    iterator = iter(_dataset())
    manager.save(1, model, optimizer, iterator=iterator)
    good = manager.save(2, model, optimizer, iterator=iterator)
    saved = _weights(model)
    for v in model.trainable_variables:
        v.assign(v.numpy() + 1.0)

    if where == "variables":
        def savez(file, **arrays):
            file.write(b"PK\x03\x04 partial")
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(run_checkpoints.np, "savez", savez)
        cause = " (No space left on device). "
    elif where == "iterator_tf":
        def write(self, prefix, options=None):
            with open(prefix + ".index", "wb") as f:
                f.write(b"partial")
            raise tf.errors.ResourceExhaustedError(
                None, None, f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001; No space left on device")

        monkeypatch.setattr(tf.train.Checkpoint, "write", write)
        cause = " while writing iterator.* (No space left on device; TensorFlow ResourceExhaustedError: "
    else:
        def atomic_write_bytes(path, data):
            with open(path + ".part", "wb") as f:
                f.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device", path)

        monkeypatch.setattr(run_checkpoints, "atomic_write_bytes", atomic_write_bytes)
        cause = " while writing manifest.json (No space left on device). "

    with pytest.raises(CheckpointWriteError) as info:
        manager.save(3, model, optimizer, iterator=iterator)
    message = str(info.value)
    assert info.value.errno == errno.ENOSPC
    assert message.startswith(f"Could not write checkpoint {manager.path(3)}"), message
    assert cause in message, message
    assert f"The previous checkpoint {good} is intact and a restart resumes from it." in message
    assert "\n" not in message
    monkeypatch.undo()
    # No half-written checkpoint (or temporary directory) is left; the earlier two are intact.
    _assert_only_intact(manager, [1, 2], saved)
    assert manager.verify(manager.path(1)) == []
    # With space again the same save succeeds.
    assert manager.save(3, model, optimizer, iterator=iterator) == manager.path(3)
    assert manager.verify(manager.path(3)) == []


def test_the_tensorflow_error_is_kept_as_the_cause(tmp_path, monkeypatch):
    # The files are really written, then the write fails as TensorFlow reports a full disk.
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)
    iterator = iter(_dataset())
    real_write = tf.train.Checkpoint.write

    def write(self, prefix, options=None):
        real_write(self, prefix)
        # What the op raises when the disk fills while it writes.
        raise tf.errors.ResourceExhaustedError(None, None, "write failed: No space left on device")

    monkeypatch.setattr(tf.train.Checkpoint, "write", write)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save(5, model, optimizer, iterator=iterator)
    assert isinstance(info.value.__cause__, OSError)
    assert isinstance(info.value.__cause__.__cause__, tf.errors.ResourceExhaustedError)
    assert "No earlier intact checkpoint exists." in str(info.value)
    assert os.listdir(tmp_path) == []


def test_an_iterator_that_cannot_be_saved_is_not_reported_as_a_full_disk(tmp_path, monkeypatch):
    manager = CheckpointManager(str(tmp_path))
    model, optimizer = _model_and_optimizer(0)

    def write(self, prefix, options=None):
        raise tf.errors.FailedPreconditionError(None, None, "SomeDataset does not support checkpointing")

    monkeypatch.setattr(tf.train.Checkpoint, "write", write)
    with pytest.raises(tf.errors.FailedPreconditionError):
        manager.save(1, model, optimizer, iterator=iter(_dataset()))
    assert os.listdir(tmp_path) == []


# --- fault injection through the real entry point -------------------------------------------------
#
# One uninterrupted `recipes/pretrain.py` run (the tiny run of tests/test_pretraining_run.py, same
# helper and flags, `--deterministic`, every checkpoint kept) gives the reference. A run stopped after
# 2k steps holds what the reference holds at that point: checkpoints k and 2k and the run's recorded
# configuration; each case starts from exactly that state, corrupts one file of ckpt-2k, runs the same
# command to the end, and must end with weights identical to the reference's (max |diff| == 0.0).

K = 2


@pytest.fixture(scope="module")
def pretrain():
    import test_pretraining_run

    return test_pretraining_run


@pytest.fixture(scope="module")
def vocab(minilm_dir):
    return minilm_dir / "vocab.txt"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, vocab, pretrain):
    tmp_path = tmp_path_factory.mktemp("faults")
    model_dir = tmp_path / "reference"
    result = pretrain._run(_fault_command(pretrain, model_dir, vocab, tmp_path))
    assert result.returncode == 0, result.stderr[-4000:]
    steps = sorted(n for n in os.listdir(model_dir / "checkpoints"))
    assert steps[:2] == [f"ckpt-{K:09d}", f"ckpt-{2 * K:09d}"] and len(steps) > 2, steps
    return tmp_path, model_dir


def _fault_command(pretrain, model_dir, vocab, tmp_path):
    return pretrain._command(model_dir, vocab, tmp_path, "--checkpoint_every", str(K),
                             "--keep_checkpoints", "100")


def _stopped_after_2k(reference_dir, model_dir):
    """`model_dir` as a run stopped after 2k steps leaves it: checkpoints k and 2k, the run's record."""
    os.makedirs(model_dir / "checkpoints")
    for name in os.listdir(reference_dir):
        if os.path.isfile(reference_dir / name):
            shutil.copy2(reference_dir / name, model_dir / name)
    for step in (K, 2 * K):
        name = f"ckpt-{step:09d}"
        shutil.copytree(reference_dir / "checkpoints" / name, model_dir / "checkpoints" / name)


def _max_abs_diff(a_dir, b_dir):
    with np.load(os.path.join(a_dir, "variables.npz")) as a, np.load(os.path.join(b_dir, "variables.npz")) as b:
        assert a.files == b.files
        worst = 0.0
        for key in a.files:
            assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype, key
            if a[key].size:
                worst = max(worst, float(np.max(np.abs(a[key].astype("float64") - b[key].astype("float64")))))
        return worst


E2E_CASES = [("variables.npz", "truncate"), ("state.json", "invalid_json"), ("iterator.index", "flip"),
             (DATA, "flip"), ("manifest.json", "delete")]


@pytest.mark.slow
@pytest.mark.parametrize("name,mode", E2E_CASES, ids=[f"{n}-{m}" for n, m in E2E_CASES])
def test_resume_past_a_corrupt_newest_checkpoint_ends_with_identical_weights(reference, vocab, pretrain,
                                                                            name, mode):
    tmp_path, reference_dir = reference
    model_dir = tmp_path / f"{name}-{mode}"
    _stopped_after_2k(reference_dir, model_dir)
    newest = model_dir / "checkpoints" / f"ckpt-{2 * K:09d}"
    assert sorted(os.listdir(newest)) == sorted(FILES)  # a new file in a checkpoint needs a case here
    corrupt(newest / name, mode)

    result = pretrain._run(_fault_command(pretrain, model_dir, vocab, tmp_path))
    assert result.returncode == 0, result.stderr[-4000:]
    skips = [line for line in result.stderr.splitlines() if line.startswith("Skipping checkpoint")]
    assert len(skips) == 1, result.stderr[-4000:]
    assert skips[0].startswith(f"Skipping checkpoint {newest}: {_expected_problem(name, mode, False)}"), skips
    assert f"Resumed from {model_dir}/checkpoints/ckpt-{K:09d} at step {K}." in result.stdout
    # The corrupt checkpoint was rewritten by the resumed run, and every checkpoint matches the reference.
    kept = sorted(os.listdir(model_dir / "checkpoints"))
    assert kept == sorted(os.listdir(reference_dir / "checkpoints"))
    for checkpoint in kept:
        assert _max_abs_diff(model_dir / "checkpoints" / checkpoint,
                             reference_dir / "checkpoints" / checkpoint) == 0.0, checkpoint


@pytest.mark.slow
def test_resume_with_no_intact_checkpoint_is_one_clear_error(reference, vocab, pretrain):
    tmp_path, reference_dir = reference
    model_dir = tmp_path / "all-corrupt"
    _stopped_after_2k(reference_dir, model_dir)
    corrupt(model_dir / "checkpoints" / f"ckpt-{2 * K:09d}" / "variables.npz", "flip")
    corrupt(model_dir / "checkpoints" / f"ckpt-{K:09d}" / "state.json", "invalid_json")
    before = {p: (model_dir / p).read_bytes() for p in _files(model_dir)}

    result = pretrain._run(_fault_command(pretrain, model_dir, vocab, tmp_path))
    assert result.returncode == 2, result.stderr[-4000:]  # the recipe's exit code for a user error
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: No intact checkpoint in {model_dir}/checkpoints: "
        f"ckpt-{2 * K:09d}: variables.npz: checksum mismatch (sha256 " + errors[0].split("(sha256 ", 1)[1]
    ], result.stderr[-4000:]
    assert f"; ckpt-{K:09d}: state.json: size " in errors[0]
    assert "Traceback" not in result.stderr
    # The one line alone: before, a "Skipping checkpoint ..." line for each checkpoint came first and repeated it.
    assert [line for line in result.stderr.splitlines() if "ckpt-" in line] == errors, result.stderr[-4000:]
    # Nothing was changed: the corrupt checkpoints are left for the user to inspect.
    assert {p: (model_dir / p).read_bytes() for p in _files(model_dir / "checkpoints", "checkpoints")} == {
        p: b for p, b in before.items() if p.startswith("checkpoints")}


def _files(root, prefix=""):
    out = []
    for dirpath, _, filenames in os.walk(root):
        for filename in filenames:
            out.append(os.path.join(prefix, os.path.relpath(os.path.join(dirpath, filename), root)))
    return out


def test_a_weights_file_is_not_begun_where_the_disk_has_no_room_for_it(tmp_path, monkeypatch):
    # HDF5 writing best.weights.h5 onto a full disk failed half-way, then crashed the fine-tuning run (segmentation
    # fault, exit status 139), on the rerun too (session 56's audit, a real full tmpfs). Now the room is checked
    # first: the model's variables (the file leaves the optimizer's out: it was three times the model's size).
    import collections

    import h5py
    import keras
    import numpy as np

    from keras_bert_impl.checkpoints.atomic_files import OutputWriteError, save_model_atomically, save_weights_atomically

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1000)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((2, 4)), np.ones((2, 1000)), verbose=0)
    needed = (4 * 1000 + 1000) * 4  # the kernel and bias
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10**9, 10**9 - needed + 100, needed - 100))
    path = tmp_path / "best.weights.h5"
    with pytest.raises(OutputWriteError) as error:
        save_weights_atomically(model, path)
    assert str(error.value).startswith(f"{path}: writing the weights takes about {needed:,} bytes, and {needed - 100:,} "
                                       f"are free in {tmp_path}: free space there")
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr("shutil.disk_usage", lambda path: usage(10**9, 10**9 - needed - 10**4, needed + 10**4))
    save_weights_atomically(model, path)  # Adam's two moments would not have fitted beside the model's 20,000 bytes
    with h5py.File(path) as written:
        assert "optimizer" not in written and len(written["layers"]) == 1
    assert needed < os.path.getsize(path) < 2 * needed  # (with the two moments: over 3 * needed)
    save_model_atomically(model, tmp_path / "model.keras")
    assert sorted(os.listdir(tmp_path)) == ["best.weights.h5", "model.keras"]


def test_a_folder_made_read_only_is_named_not_the_temporary_file(tmp_path, monkeypatch):
    # Session 56's audit (a user who is not root, the folder made read-only mid-run): "[Errno 13] Permission denied:
    # '<model_dir>/.host-1581.model.keras'" named the temporary file and said nothing of what to do.
    from keras_bert_impl.checkpoints.atomic_files import OutputWriteError, atomic_save

    def refused(temporary):
        raise PermissionError(13, "Permission denied", temporary)

    with pytest.raises(OutputWriteError) as error:
        atomic_save(tmp_path / "model.keras", refused)
    assert str(error.value) == (f"{tmp_path / 'model.keras'} cannot be written: {tmp_path} is not writable (permission "
                                "denied): make it writable (or choose another output folder) and run the same command "
                                "again; a training run resumes from its last checkpoint")
