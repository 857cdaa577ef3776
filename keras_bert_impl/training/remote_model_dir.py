"""A `--model_dir` on a remote file system (`gs://bucket/run`, or any scheme `tf.io.gfile` reads): the run works in
a local copy and copies it there after every checkpoint.

The checkpoints are written atomically and verified (`run_checkpoints`), which needs a local file system (a
directory renamed into place, fsync). So a remote run directory is staged: `RemoteModelDir(remote)` downloads what a
resumed run needs into a local directory (`staging_directory`): the run's top-level files (`run_config.json`) and
its newest complete checkpoint, and `push()` uploads every file that is new or changed since, each checkpoint's
files before its `manifest.json`. A checkpoint counts as complete on the remote side only when its manifest is
there and every file it lists has the listed size, so a job stopped mid-upload leaves the previous checkpoint as
the one a restart resumes from. The remote checkpoints older than the oldest one kept locally are removed, as the
local ones are (`--keep_checkpoints`). TensorBoard logs and the export are copied with the checkpoints and at the
end; they are not downloaded (the logs stay on the remote side, where TensorBoard reads them).

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
        """Empties the staging directory and downloads the run's top-level files and its newest complete
        checkpoint (verified against its manifest). Returns the step of that checkpoint, or None."""
        gfile = _gfile()
        shutil.rmtree(self.local, ignore_errors=True)
        os.makedirs(self.local)
        self._uploaded = {}
        step = None
        if self._call(gfile.exists, self.remote):  # (a new run's directory is made by its first copy)
            for name in self._call(gfile.listdir, self.remote):
                name = name.rstrip("/")
                source = f"{self.remote}/{name}"
                if name not in (_CHECKPOINTS, *_NOT_DOWNLOADED) and not self._call(gfile.isdir, source):
                    self._download(name)
            step = self._newest_complete_checkpoint()
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
        one. Returns the number of files uploaded."""
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
            self._call(gfile.makedirs, destination.rsplit("/", 1)[0])
            # Under a new name, then renamed onto the old file: never a half-written file under its own name, and
            # a file system whose overwrite does not truncate (TensorFlow's `ram://`) replaced whole too.
            partial = f"{destination}.partial-{uuid.uuid4().hex[:8]}"
            self._call(gfile.copy, os.path.join(self.local, *relative.split("/")), partial)
            self._call(gfile.rename, partial, destination, overwrite=True)
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
            raise RemoteModelDirError(f"--model_dir {self.remote}{where}: {reason[:300]}") from None


def _signature(path):
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def _gfile():
    import tensorflow as tf

    return tf.io.gfile
