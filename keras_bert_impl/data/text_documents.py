"""Pretraining text files -> documents: the reader shared by `pretraining` and `document_records`.

The text format: one sentence (or paragraph) a line, a blank line between
documents, UTF-8 (checked: the error names the file and the line).

- `expand_files(files)`: file names and glob patterns (local or `gs://`) ->
  a sorted list of non-empty files.
- `read_documents(path, file_index)`: one file -> a `tf.data.Dataset` of
  `(document, document id)`, the document's sentences joined by newlines.
- `check_text_file(path)`, `check_text_files(files)`: the files read once
  before any work, each error one line naming the file (and line, column).
"""

import os

import tensorflow as tf

from keras_bert_impl.file_errors import UTF8_BOM, FileFormatError, blocks_of_lines, decode_utf8, not_text_problem
from keras_bert_impl.file_patterns import matching_files
from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)

_PREPARE_ADVICE = ", or prepare it with recipes/prepare_corpus.py --errors replace"
_BINARY_HEAD = 8000  # a NUL byte in the first 8,000 bytes: a binary file (git's test)
# Tables, which the fine-tuning recipes read: as pretraining text, their header, commas and labels would be trained on.
TABLE_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json", ".ndjson", ".parquet", ".xlsx", ".xls")


def table_file_problem(path):
    """What to do with a table given as pretraining text (by its extension), or None for any other file.

    Example:
    >>> print(table_file_problem("reviews.csv"))
    a table (.csv), not pretraining text (one sentence a line, a blank line between documents): write its text \
column as such, each row a document, with python recipes/prepare_corpus.py --input reviews.csv --text_column \
COLUMN --output reviews.txt
    >>> table_file_problem("train.txt") is None
    True
    """
    extension = os.path.splitext(str(path))[1].lower()
    if extension not in TABLE_EXTENSIONS:
        return None
    text = os.path.splitext(os.path.basename(str(path)))[0] + ".txt"
    return (f"a table ({extension}), not pretraining text (one sentence a line, a blank line between documents): "
            f"write its text column as such, each row a document, with python recipes/prepare_corpus.py --input "
            f"{path} --text_column COLUMN --output {text}")


def _binary_file_error(head, path):
    """The `FileFormatError` of a file whose first bytes `head` hold a NUL byte (a binary file), or None.

    Checked before any line is decoded: an executable or an image usually has a byte that is not UTF-8 before its
    first NUL, and was named as Windows-1252 text with an `iconv` command that would have turned it into garbage
    text. A file that starts with a UTF-16 / UTF-32 byte-order mark or gzip's magic bytes is left to
    `decode_utf8`, which names it as such.
    """
    nul = head.find(b"\x00", 0, _BINARY_HEAD)
    if nul < 0 or not_text_problem(head, path) is not None:
        return None
    line_start = head.rfind(b"\n", 0, nul) + 1
    if line_start == 0 and head.startswith(UTF8_BOM):
        line_start = len(UTF8_BOM)
    column = len(head[line_start:nul].decode("utf-8", errors="replace")) + 1
    return FileFormatError(
        path, head.count(b"\n", 0, nul) + 1, column,
        f"a NUL byte (at byte offset {nul}): this is a binary file, not UTF-8 text with one sentence a line",
    )


def expand_files(files):
    """Expands file names and glob patterns (local or `gs://`) into a sorted file list.

    Args:
        files: a string or a list of strings.

    Raises:
        ValueError: a pattern that matches no file (named), or an empty file.

    Example:

    >>> expand_files("../shared/data/corpus/gutenberg/pg84.txt")  # doctest: +SKIP
    ['../shared/data/corpus/gutenberg/pg84.txt']
    """
    if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__"):
        files = [files]
    files = [f.decode() if isinstance(f, bytes) else str(f) for f in files]
    if not files:
        raise ValueError("files is empty: pass at least one file or glob pattern")
    expanded = []
    for pattern in files:
        matches = matching_files(pattern, tf.io.gfile.glob, gfile_is_file)
        if not matches:
            if tf.io.gfile.glob(pattern):
                raise ValueError(f"{pattern!r} matches only directories")
            raise ValueError(f"no file matches {pattern!r}")
        for path in matches:
            if tf.io.gfile.stat(path).length == 0:
                raise ValueError(f"{path} is empty: a pretraining text file needs at least one sentence")
            expanded.append(path)
    return expanded


def gfile_is_file(path):
    """Whether `path` (local or `gs://`) is a file: `file_patterns.matching_files`'s `is_file` on `tf.io.gfile`."""
    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


@tf.autograph.experimental.do_not_convert
def read_documents(path, file_index):
    """A file -> dataset of (document: sentences joined by newlines, document id int64)."""
    text = tf.io.read_file(path)
    text = tf.strings.regex_replace(text, "^\ufeff", "")
    lines = tf.strings.strip(tf.strings.split(text, "\n"))
    # Invalid UTF-8 does not survive a transcoding with replacement; the line
    # is looked for only when the whole file fails the check.
    valid = tf.equal(tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace"), text)

    def first_bad_line():
        roundtrip = tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="replace")
        bad = tf.cast(tf.where(tf.not_equal(roundtrip, lines))[:, 0], tf.int64)
        return tf.concat([bad, [-1]], 0)[0] + 1

    line = tf.cond(valid, lambda: tf.constant(0, tf.int64), first_bad_line)
    check = tf.debugging.Assert(
        valid,
        ["invalid UTF-8 in", path, "at line", line,
         "; pretraining text must be UTF-8 (convert it, e.g. iconv -f cp1252 -t utf-8)"],
    )
    with tf.control_dependencies([check]):
        blank = tf.equal(lines, "")
    doc_index = tf.cumsum(tf.cast(blank, tf.int64))
    keep = tf.logical_not(blank)
    documents = tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(lines, keep), tf.boolean_mask(doc_index, keep),
        nrows=tf.reduce_sum(tf.cast(blank, tf.int64)) + 1,
    )
    documents = tf.gather(documents, tf.where(documents.row_lengths() > 0)[:, 0])
    # One string per document (sentences joined by newlines): dense elements
    # batch and shuffle cheaper than ragged ones.
    documents = tf.strings.reduce_join(documents, axis=1, separator="\n")
    ids = tf.cast(file_index, tf.int64) * (1 << 32) + tf.range(tf.size(documents, out_type=tf.int64))
    return tf.data.Dataset.from_tensor_slices((documents, ids))


def check_text_file(path):
    """Reads a pretraining text file once and raises `ValueError` if it is not usable text.

    Run before training (as `recipes/pretrain.py` does), this finds in seconds
    what the pipeline would otherwise find only at the first step, inside a
    TensorFlow traceback: bytes that are not UTF-8 (Windows-1252 text, a
    binary or compressed file; `keras_bert_impl.file_errors.decode_utf8`
    names the file, line, column and byte), a NUL byte, a file of blank
    lines only, a file that cannot be read, a table (`.csv`, `.tsv`,
    `.jsonl`, ...: `table_file_problem` names the command that writes its
    text column as pretraining text).
    Reads in blocks, so memory stays bounded by the longest line.

    Args:
        path: a text file (local or `gs://`).

    Returns:
        The number of non-blank lines.

    Example:

    >>> from keras_bert_impl.data.corpus import bundled_corpus
    >>> check_text_file(bundled_corpus()["valid"]) > 0
    True
    """
    table = table_file_problem(path)
    if table is not None:
        raise FileFormatError(path, None, None, table)
    offset, line_number, sentences = 0, 0, 0

    def check_line(line):
        nonlocal offset, line_number, sentences
        line_number += 1
        start = offset
        offset += len(line) + 1
        text = decode_utf8(line, path, advice=_PREPARE_ADVICE, first_line=line_number, first_offset=start)
        if "\x00" in text:
            nul = start + line.index(b"\x00")
            raise FileFormatError(
                path, line_number, text.index(chr(0)) + 1,
                f"a NUL byte (at byte offset {nul}): this is a binary file, not UTF-8 text with one sentence a line",
            )
        if text.strip():
            sentences += 1

    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            for piece, first_line, _ in blocks_of_lines(f):
                if first_line == 1:
                    binary = _binary_file_error(piece, path)
                    if binary is not None:
                        raise binary
                lines = piece.split(b"\n")
                if piece.endswith(b"\n"):
                    lines.pop()
                for line in lines:
                    check_line(line)
    except tf.errors.OpError as error:
        raise ValueError(f"{path}: cannot be read ({error.message})") from None
    if sentences == 0:
        raise ValueError(f"{path} holds only blank lines: a pretraining text file needs at least one sentence")
    return sentences



def check_text_files(files):
    """`expand_files(files)`, then `check_text_file` on every file, before any work: returns the expanded list.

    What `recipes/prepare_pretraining_data.py` and `document_records` check up front, as pretraining checks its
    text files (`pretraining.check_pretraining_files`): the first problem is one `ValueError` naming the pattern or
    the file (bytes that are not UTF-8: the line, column and byte, and the `iconv` command that re-encodes it),
    instead of a TensorFlow `InvalidArgumentError` from inside the tokenising pipeline.

    Example:

    >>> from keras_bert_impl.data.corpus import bundled_corpus
    >>> len(check_text_files(bundled_corpus()["valid"]))
    1
    """
    paths = expand_files(files)
    for path in paths:
        check_text_file(path)
    return paths
