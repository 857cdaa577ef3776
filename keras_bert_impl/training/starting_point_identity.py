"""What identifies the checkpoint a run starts from, so that a resume finds it where it was typed another way,
moved or copied.

A fine-tuning run records its starting point as given (`--init_checkpoint runs/pre/export`, a preset name, a Hub
id) and, for a local file or folder, the sha256 of its files (`starting_point_sha256`); pretraining records its
`--init_checkpoint` the same way. On resume, the same folder typed another way (`same_path`: `./runs/pre/export/`)
or the same bytes at another path (`same_bytes`: the folder moved to another disk, the export copied to another
machine) is the same run; other files at another path are another run, refused. The same path whose files changed
since the run started (an export written again by a pretraining run that went on) resumes: the checkpoint holds the
run's weights, and `changed_in_place` is the line that says so, and how to start from the new files instead.

Example:
>>> import os, shutil, tempfile
>>> export = tempfile.mkdtemp()
>>> with open(os.path.join(export, "config.json"), "w") as f:
...     _ = f.write('{"num_layers": 2}')
>>> before = starting_point_sha256(export)
>>> moved = shutil.move(export, tempfile.mkdtemp())
>>> same_bytes(before, starting_point_sha256(moved)), starting_point_sha256("bert_tiny_en_uncased")
(True, None)
"""

import hashlib
import os

from keras_bert_impl.checkpoints.download import sha256_of_file


def same_path(recorded, given):
    """Whether two spellings of a setting name the same existing file or folder from here (`runs/pre/export`,
    `./runs/pre/export/` and its absolute path): a starting point typed another way is the same run.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> same_path(folder, folder + "/./"), same_path(folder, os.path.dirname(folder)), same_path(1, 1)
    (True, False, False)
    """
    if not (isinstance(recorded, str) and isinstance(given, str) and os.path.exists(given)):
        return False
    return os.path.realpath(recorded) == os.path.realpath(given)


def starting_point_sha256(path):
    """The sha256 (hex) of a local starting point's files, or None where `path` is no local file or folder (a
    preset name, a Hub id, a `gs://` path: identified by what is typed alone).

    A folder's files are hashed in the order of their paths relative to it, each with its relative path and size,
    so that the folder moved or copied elsewhere has the same sha256 and a file renamed or changed in it another;
    hidden files and folders (`.cache`, `.gitattributes`) are left out, as a download tool's bookkeeping.
    """
    if not isinstance(path, str) or "://" in path or not os.path.exists(path):
        return None
    if os.path.isfile(path):
        files = [(os.path.basename(path), path)]
    else:
        files = []
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
            files.extend((os.path.relpath(os.path.join(folder, name), path), os.path.join(folder, name))
                         for name in names if not name.startswith("."))
        files.sort()
    digest = hashlib.sha256()
    for relative, full in files:  # each file's path, size and own sha256 (`download.sha256_of_file`)
        digest.update(f"{relative}\0{os.path.getsize(full)}\0{sha256_of_file(full)}\n".encode(
            "utf-8", "surrogateescape"))
    return digest.hexdigest()


def same_bytes(recorded_sha256, given_sha256):
    """Whether a starting point at another path holds the files the run started from (both hashed, and equal)."""
    return bool(recorded_sha256) and recorded_sha256 == given_sha256


def moved_line(name, recorded, given):
    """The line a run prints when it resumes with its starting point at another path (`same_bytes`).

    >>> moved_line("--init_checkpoint", "runs/pre/export", "/mnt/pre/export")
    'Resuming with --init_checkpoint /mnt/pre/export: the files of runs/pre/export, moved or copied (the same bytes, sha256).'
    """
    return f"Resuming with {name} {given}: the files of {recorded}, moved or copied (the same bytes, sha256)."


def changed_in_place(name, path, model_dir):
    """The line a run prints when it resumes although its starting point's files changed at the same path.

    >>> changed_in_place("--init_checkpoint", "runs/pre/export", "runs/mrpc")  # doctest: +NORMALIZE_WHITESPACE
    'Resuming runs/mrpc although the files of --init_checkpoint runs/pre/export changed since the run started: the run
    goes on from its checkpoint (which holds its weights); to start from the new files, remove runs/mrpc/checkpoints
    or pass another model_dir.'
    """
    return (f"Resuming {model_dir} although the files of {name} {path} changed since the run started: the run goes "
            f"on from its checkpoint (which holds its weights); to start from the new files, remove "
            f"{os.path.join(model_dir, 'checkpoints')} or pass another model_dir.")
