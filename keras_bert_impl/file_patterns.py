"""A file name or a glob pattern -> the files it names: the one expansion of every input flag that takes patterns.

The name of an existing file is that file, even when it holds glob characters: `notes[1].txt` as a pattern
matches `notes1.txt` only, so such a file was "matched by no file", or, beside a `notes1.txt`, silently replaced by
it. Anything else is a pattern; its matches come sorted, directories left out. The filesystem is the caller's:
`os`'s by default, or `tensorflow.io.gfile`'s (`gs://...`), passed in, since this bottom-room module imports no
TensorFlow (the NumPy pretraining pipeline uses it on hosts without TensorFlow).

Example:
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> for name in ("notes[1].txt", "notes1.txt", "notes2.txt"):
...     open(os.path.join(folder, name), "w").close()
>>> [os.path.basename(p) for p in matching_files(os.path.join(folder, "notes[1].txt"))]
['notes[1].txt']
>>> [os.path.basename(p) for p in matching_files(os.path.join(folder, "notes?.txt"))]
['notes1.txt', 'notes2.txt']
"""

import glob
import os


def matching_files(pattern, glob_function=glob.glob, is_file=os.path.isfile):
    """The files `pattern` names, sorted: `[pattern]` when it is a file's name, else its glob matches that are files
    (an empty list when none). `glob_function` and `is_file`: the filesystem's, e.g. `tf.io.gfile.glob` and
    `lambda p: tf.io.gfile.exists(p) and not tf.io.gfile.isdir(p)` for `gs://` paths."""
    pattern = os.fspath(pattern)
    if is_file(pattern):
        return [pattern]
    if not glob.has_magic(pattern):
        return []
    return [path for path in sorted(glob_function(pattern)) if is_file(path)]


def expand_patterns(patterns, glob_function=glob.glob, is_file=os.path.isfile):
    """`matching_files` of each pattern (a str or path, or a list of them), in order: one list of files.

    Raises:
        ValueError: `no file matches '<pattern>'`, for the first pattern that names no file.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    files = []
    for pattern in patterns:
        matches = matching_files(pattern, glob_function, is_file)
        if not matches:
            raise ValueError(f"no file matches {os.fspath(pattern)!r}")
        files += matches
    return files
