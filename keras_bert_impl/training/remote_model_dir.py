"""A `--model_dir` on a remote file system (`gs://bucket/run`, or any scheme `tf.io.gfile` reads): the run works in
a local copy and copies it there after every checkpoint.

The checkpoints are written atomically and verified (`run_checkpoints`), which needs a local file system (a
directory renamed into place, fsync). So a remote run directory is staged: `RemoteModelDir(remote)` downloads what a
resumed run needs into a local directory (`staging_directory`): the run's top-level files (`run_config.json`) and
its newest complete checkpoint, and `push()` uploads every file that is new or changed since, each checkpoint's
files before its `manifest.json`. A checkpoint counts as complete on the remote side only when its manifest is
there and every file it lists has the listed size, so a job stopped mid-upload leaves the previous checkpoint as
the one a restart resumes from. A copy that fails mid-run is one line and the run goes on (`push_or_report`); a
newer checkpoint that only the local copy holds is kept at the next start and copied first (`pull`). The remote
checkpoints older than the oldest one kept locally are removed, as the local ones are (`--keep_checkpoints`).
TensorBoard logs and the export are copied with the checkpoints and at the end; they are not downloaded (the logs
stay on the remote side, where TensorBoard reads them).

Before, a `gs://` `--model_dir` wrote `run_config.json` and the checkpoints under a local folder named `gs:` in
the working directory (`os.makedirs("gs://b/run")`), and only the TensorBoard logs reached the bucket: a preempted
TPU VM lost the run.

Example:
>>> import os, tempfile
>>> os.environ["KERAS_BERT_IMPL_CACHE"] = tempfile.mkdtemp()
>>> is_remote("gs://bucket/bert/run1"), is_remote("runs/bert")
(True, False)
>>> os.path.relpath(staging_directory("gs://bucket/bert/run1"), os.environ["KERAS_BERT_IMPL_CACHE"])
'remote_model_dirs/gs/bucket/bert/run1'
"""

import json
import os
import re
import shutil
import uuid

from keras_bert_impl.training.pretraining_checks import (
    MAY_CHANGE_ON_RESUME,
    RUN_CONFIG_FILE,
    STARTED_WITH_KEY,
)

_CHECKPOINTS = "checkpoints"
_CHECKPOINT_NAME = re.compile(r"^ckpt-(\d+)$")
_MANIFEST = "manifest.json"
_NOT_DOWNLOADED = ("logs", "export")  # written again by the run, or read on the remote side (TensorBoard)


def is_remote(path):
    """Whether `path` names a remote location (`scheme://...`), which the run stages locally."""
    return isinstance(path, str) and "://" in path


def refuse_remote_for_finetuning(model_dir, name="model_dir"):
    """Fine-tuning writes to a local `model_dir` only: a remote one is refused in one line, `name` (the recipes'
    `--model_dir`) first (before, its files went under a local folder named `gs:`).

    >>> refuse_remote_for_finetuning("runs/sst2")
    >>> refuse_remote_for_finetuning("gs://bucket/sst2")  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: model_dir gs://bucket/sst2: fine-tuning writes its checkpoints and outputs to a local directory
    (pretraining alone works in a local copy of a remote one): give a local directory, and copy it there when the run
    ends (e.g. gsutil -m cp -r DIR gs://bucket/sst2)
    """
    if is_remote(model_dir):
        raise ValueError(f"{name} {model_dir}: fine-tuning writes its checkpoints and outputs to a local directory "
                         "(pretraining alone works in a local copy of a remote one): give a local directory, and copy "
                         f"it there when the run ends (e.g. gsutil -m cp -r DIR {model_dir})")


def staging_directory(remote):
    """The local directory where a run with `--model_dir remote` works: `remote_model_dirs/<scheme>/<path>` under
    `$KERAS_BERT_IMPL_CACHE`, or under `~/.cache/keras_bert_impl`."""
    scheme, rest = remote.split("://", 1)
    parts = [part for part in rest.split("/") if part not in ("", ".", "..")]
    root = os.environ.get("KERAS_BERT_IMPL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "keras_bert_impl")
    return os.path.join(os.path.abspath(os.path.expanduser(root)), "remote_model_dirs", scheme, *parts)


class RemoteModelDirError(OSError):
    """The remote `--model_dir` cannot be read or written: one line naming it, the file and the reason."""


class RemoteModelDir:
    """A remote run directory and its local staging copy: `local` is where the run works.

    Args:
        remote: the run's `--model_dir` (`gs://bucket/run`).
        local: the staging directory (default `staging_directory(remote)`); emptied, then filled with what the
            remote directory holds for a resume.
        log: where the one-line reports go (default: stdout).
    """

    def __init__(self, remote, local=None, log=None):
        self.remote = remote.rstrip("/")
        self.local = local or staging_directory(self.remote)
        self._log = log or (lambda line: print(line, flush=True))
        self._uploaded = {}  # relative path -> (size, mtime_ns) of the local file when it was last uploaded
        self.pull()

    # --- download ---

    def pull(self):
        """Downloads the run's top-level files and its newest complete checkpoint (verified against its manifest)
        into an emptied staging directory; returns the step of that checkpoint, or None.

        The staging directory is kept instead, and copied to the remote side at once, when it holds an intact
        checkpoint newer than the remote side's newest complete one and the same `run_config.json` (or the remote
        side has none): a run whose copies failed (the bucket out of reach, its permissions changed) left the
        newer checkpoint only here, and emptying the directory would lose it."""
        gfile = _gfile()
        exists = self._call(gfile.exists, self.remote)  # (a new run's directory is made by its first copy)
        step = self._newest_complete_checkpoint() if exists else None
        kept = self._newer_local_checkpoint(step)
        if kept is not None:
            self._log(f"--model_dir {self.remote}: its local copy {self.local} holds checkpoint step {kept}, newer "
                      f"than the one copied there ({'step ' + str(step) if step is not None else 'none'}): an "
                      "earlier copy failed. Working in the local copy, which is copied there now (remove it to start "
                      "from what the remote side holds instead).")
            self._uploaded = {}
            self.push()
            return kept
        shutil.rmtree(self.local, ignore_errors=True)
        os.makedirs(self.local)
        self._uploaded = {}
        if exists:
            for name in self._call(gfile.listdir, self.remote):
                name = name.rstrip("/")
                source = f"{self.remote}/{name}"
                if name not in (_CHECKPOINTS, *_NOT_DOWNLOADED) and not self._call(gfile.isdir, source):
                    self._download(name)
        if step is not None:
            folder = f"{_CHECKPOINTS}/ckpt-{step:09d}"
            for name in self._call(gfile.listdir, f"{self.remote}/{folder}"):
                self._download(f"{folder}/{name.rstrip('/')}")
            self._log(f"--model_dir {self.remote}: working in {self.local}, a local copy of its newest checkpoint "
                      f"(step {step}); every checkpoint is copied back as it is written.")
        else:
            self._log(f"--model_dir {self.remote}: working in {self.local}; every checkpoint is copied there as "
                      "it is written.")
        return step

    def _newer_local_checkpoint(self, remote_step):
        """The step of the staging directory's newest intact checkpoint when it is newer than `remote_step` and the
        local `run_config.json` is the remote one (or the remote side has none); else None."""
        from keras_bert_impl.training.run_checkpoints import CheckpointManager, CheckpointReadError

        local_config = os.path.join(self.local, RUN_CONFIG_FILE)
        manager = CheckpointManager(os.path.join(self.local, _CHECKPOINTS), log=lambda line: None)
        if not os.path.isfile(local_config) or not any(
                remote_step is None or step > remote_step for step in manager.all_steps()):
            return None  # (the usual case, in step with the remote side: no checkpoint is read)
        remote_config = f"{self.remote}/{RUN_CONFIG_FILE}"
        if self._call(_gfile().exists, remote_config):
            with open(local_config, "rb") as f:
                mine = _run_identity(f.read())
            if _run_identity(self._call(_read_bytes, remote_config)) != mine:
                return None  # another run was started there since: the remote side is the run
        try:
            newest = manager.latest()  # the newest intact one (verified against its manifest)
        except CheckpointReadError:
            return None
        step = newest and int(_CHECKPOINT_NAME.match(os.path.basename(newest)).group(1))
        return step if step is not None and (remote_step is None or step > remote_step) else None

    def _remote_checkpoints(self):
        """`{step: folder name}` of the remote checkpoints, complete or not."""
        gfile = _gfile()
        folder = f"{self.remote}/{_CHECKPOINTS}"
        if not self._call(gfile.isdir, folder):
            return {}
        steps = {}
        for name in self._call(gfile.listdir, folder):
            match = _CHECKPOINT_NAME.match(name.rstrip("/"))
            if match:
                steps[int(match.group(1))] = name.rstrip("/")
        return steps

    def _newest_complete_checkpoint(self):
        gfile = _gfile()
        for step, name in sorted(self._remote_checkpoints().items(), reverse=True):
            folder = f"{self.remote}/{_CHECKPOINTS}/{name}"
            manifest = f"{folder}/{_MANIFEST}"
            if not self._call(gfile.exists, manifest):
                self._log(f"--model_dir {self.remote}: {_CHECKPOINTS}/{name} was not copied in full (no "
                          f"{_MANIFEST}); resuming from an earlier checkpoint.")
                continue
            try:
                with gfile.GFile(manifest, "rb") as f:
                    files = json.loads(f.read().decode("utf-8"))["files"]
                sizes = {name: self._call(gfile.stat, f"{folder}/{name}").length for name in files}
            except (ValueError, KeyError, TypeError, RemoteModelDirError) as error:
                self._log(f"--model_dir {self.remote}: {_CHECKPOINTS}/{name} is unreadable ({error}); resuming from "
                          "an earlier checkpoint.")
                continue
            wrong = [name for name, entry in files.items() if sizes[name] != entry.get("size")]
            if wrong:
                self._log(f"--model_dir {self.remote}: {_CHECKPOINTS}/{name} was not copied in full ({wrong[0]} has "
                          f"{sizes[wrong[0]]:,} bytes, its manifest says {files[wrong[0]].get('size'):,}); resuming "
                          "from an earlier checkpoint.")
                continue
            return step
        return None

    def _download(self, relative):
        target = os.path.join(self.local, *relative.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self._call(_gfile().copy, f"{self.remote}/{relative}", target, overwrite=True)
        self._uploaded[relative] = _signature(target)  # (the remote side holds it already)

    # --- upload ---

    def push(self):
        """Uploads every local file that is new or changed since it was downloaded or last uploaded (a checkpoint's
        `manifest.json` after its other files), then removes the remote checkpoints older than the oldest local
        one. Returns the number of files uploaded.

        Raises `RemoteModelDirError` (one line, which says that the local copy keeps the files and that the same
        command, run again on this machine, copies them: `pull` keeps a newer local checkpoint)."""
        try:
            return self._push()
        except RemoteModelDirError as error:
            raise RemoteModelDirError(f"{str(error).rstrip('.')}. The run's files are kept in its local copy "
                                      f"{self.local}: the same command, run again on this machine, copies them "
                                      "there.") from None

    def push_or_report(self):
        """`push`, a failure reported in one line instead of raised: a run goes on training when a checkpoint
        could not be copied (a bucket out of reach for a while), and its next checkpoint copies every file
        again. Returns the number of files uploaded, or None."""
        try:
            return self._push()
        except RemoteModelDirError as error:
            self._log(f"{str(error).rstrip('.')}. Training goes on: the checkpoint is kept in the local copy "
                      f"{self.local}, and the next checkpoint copies it there again.")
            return None

    def _push(self):
        gfile = _gfile()
        ordinary, manifests = [], []
        for folder, subfolders, names in os.walk(self.local):
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))  # `.tmp-ckpt-*`
            for name in sorted(names):
                if name.startswith("."):  # the run lock, temporary files
                    continue
                relative = os.path.relpath(os.path.join(folder, name), self.local).replace(os.sep, "/")
                (manifests if name == _MANIFEST else ordinary).append(relative)
        checkpoint_folder = os.path.join(self.local, _CHECKPOINTS)
        local_checkpoints = sorted(int(match.group(1)) for match in map(
            _CHECKPOINT_NAME.match, os.listdir(checkpoint_folder) if os.path.isdir(checkpoint_folder) else ())
            if match)
        uploaded = 0
        for relative in ordinary + manifests:
            signature = _signature(os.path.join(self.local, *relative.split("/")))
            if self._uploaded.get(relative) == signature:
                continue
            destination = f"{self.remote}/{relative}"
            # Under a new name, then renamed onto the old file: never a half-written file under its own name, and
            # a file system whose overwrite does not truncate (TensorFlow's `ram://`) replaced whole too.
            partial = f"{destination}.partial-{uuid.uuid4().hex[:8]}"
            try:
                self._call(gfile.makedirs, destination.rsplit("/", 1)[0])
                self._call(gfile.copy, os.path.join(self.local, *relative.split("/")), partial)
                self._call(gfile.rename, partial, destination, overwrite=True)
            except RemoteModelDirError as error:
                raise RemoteModelDirError(f"--model_dir {self.remote}: {relative} could not be copied there "
                                          f"({error.reason.rstrip('.')})") from None
            self._uploaded[relative] = signature
            uploaded += 1
        if local_checkpoints:
            for step, name in self._remote_checkpoints().items():
                if step < local_checkpoints[0]:
                    self._call(gfile.rmtree, f"{self.remote}/{_CHECKPOINTS}/{name}")
                    self._uploaded = {k: v for k, v in self._uploaded.items()
                                      if not k.startswith(f"{_CHECKPOINTS}/{name}/")}
        return uploaded

    def _call(self, function, *args, **kwargs):
        """A `tf.io.gfile` call whose failure is one line naming the remote directory (not TensorFlow's text)."""
        import tensorflow as tf

        try:
            return function(*args, **kwargs)
        except (tf.errors.OpError, OSError) as error:
            reason = getattr(error, "message", None) or str(error)
            reason = " ".join(reason.split())
            where = "" if args[0] == self.remote else f" ({args[0]})"
            failure = RemoteModelDirError(f"--model_dir {self.remote}{where}: {reason[:300]}")
            failure.reason = reason[:300]
            raise failure from None


def _run_identity(run_config):
    """A run's `run_config.json` bytes without the settings a resume may change: equal for two copies of one run
    whose later resume changed `--num_steps` (the local copy written, its upload failed)."""
    try:
        settings = json.loads(run_config.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return run_config
    if not isinstance(settings, dict):
        return run_config
    return {key: value for key, value in settings.items() if key not in (*MAY_CHANGE_ON_RESUME, STARTED_WITH_KEY)}


def _read_bytes(path):
    with _gfile().GFile(path, "rb") as f:
        return f.read()


def _signature(path):
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def _gfile():
    import tensorflow as tf

    return tf.io.gfile
