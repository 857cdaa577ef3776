"""One-line errors about a user's input file, and the UTF-8 check that every file reader shares.

- `FileFormatError(path, line, column, problem)`: a `ValueError` whose message
  is one line, `<file>, line <n>, column <c>: <problem>` (the line or column
  left out where it is None). The task readers' errors are subclasses, so
  `except FileFormatError` catches any of them: `TableFormatError` (CSV / TSV
  / JSON Lines tables), `ConllFormatError`, `GlueFormatError` (GLUE TSV) and
  `SquadFormatError` (SQuAD JSON, whose problem starts with the JSON path),
  with their encoding errors (`GlueEncodingError`, `SquadEncodingError`).
- `check_input_file(path, flag, expected)`: refuses an input file that does
  not exist, is a directory or cannot be read in one line naming the flag and what was
  expected (`--train_file x.json: no such file; expected a SQuAD .json or
  .json.gz file`), where Python's own error was `[Errno 2] No such file or
  directory: 'x.json'` or `[Errno 21] Is a directory: ...`.
- `blocks_of_lines(file)`: an open file's bytes in blocks of whole lines, each
  with the line and byte offset it starts at, for `decode_utf8`.
- `decode_utf8(data, path)`: the bytes of a file (or of one of its lines) ->
  text. A byte that is not UTF-8 (Windows-1252 or Latin-1 text, a binary
  file) raises one `FileFormatError` naming the file, the line, the column
  (in characters, as an editor counts), the byte and its offset in the file,
  with the `iconv` command that re-encodes the file. Used by every file
  reader: tables, CoNLL, GLUE TSV, SQuAD JSON, the pretraining corpus check
  (`data.text_documents.check_text_file`) and `data.corpus.read_text`.

Pure Python. It imports nothing else from the package (the bottom room of
docs/architecture.md), so that every room can use it.

Example:
>>> str(FileFormatError("train.csv", 7, "label", "the label is empty"))
"train.csv, line 7, column 'label': the label is empty"
>>> decode_utf8("café".encode("cp1252"), "menu.txt")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_bert_impl.file_errors.FileFormatError: menu.txt, line 1, column 4: byte 0xe9 at byte offset 3 of the file \
is not valid UTF-8; the file looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 \
-t UTF-8 menu.txt > utf8_menu.txt
"""

import os
import re

UTF8_BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"
# Byte-order marks of the encodings that are not UTF-8, longest first (UTF-32 LE's starts with UTF-16 LE's).
_OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32", "UTF-32LE"), (b"\x00\x00\xfe\xff", "UTF-32", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16", "UTF-16LE"), (b"\xfe\xff", "UTF-16", "UTF-16BE"),
)
_LINE_BREAK = re.compile(r"[ \t]*[\r\n]+[ \t]*")


def one_line(text):
    """`text` with every line break (and the spaces around it) replaced by one space.

    Example:
    >>> one_line("expected a header\\n  naming the columns")
    'expected a header naming the columns'
    """
    return _LINE_BREAK.sub(" ", str(text))


def file_location(path, line=None, column=None):
    """`'<file>, line <n>, column <c>'`: a column name is quoted, a 1-based position is not; None parts are left out.

    Example:
    >>> file_location("dev.tsv", 3, "label"), file_location("eng.testa", 19, 4), file_location("x.json")
    ("dev.tsv, line 3, column 'label'", 'eng.testa, line 19, column 4', 'x.json')
    """
    where = [os.fspath(path)]
    if line is not None:
        where.append(f"line {line}")
    if column is not None:
        where.append(f"column {column!r}" if isinstance(column, str) else f"column {column}")
    return ", ".join(where)


class FileFormatError(ValueError):
    """A problem in a user's input file; the message is one line naming the file, the line and the column.

    Args:
        path: the file.
        line: 1-based line, or None.
        column: a column name (str, shown quoted) or a 1-based position
            (character, field), or None.
        problem: what is wrong and what was expected (line breaks become spaces).

    Example:
    >>> error = FileFormatError("eng.testa", 19, 4, "tag 'I-XYZ' is not in the training file")
    >>> str(error), error.line, error.column
    ("eng.testa, line 19, column 4: tag 'I-XYZ' is not in the training file", 19, 4)
    """

    def __init__(self, path, line, column, problem):
        self.path = os.fspath(path)
        self.line = line
        self.column = column
        self.problem = problem
        super().__init__(one_line(f"{file_location(self.path, line, column)}: {problem}"))

    def __reduce__(self):  # picklable (multiprocessing, tf.data workers) with the same fields
        return type(self), (self.path, self.line, self.column, self.problem)


def check_input_file(path, flag, expected):
    """Refuses an input file that does not exist, or is a directory, in one line naming the flag and what it expects.

    Args:
        path: the file the flag names.
        flag: the flag, e.g. "--train_file" (the message starts with it and the path).
        expected: what the flag takes, e.g. "a SQuAD .json or .json.gz file".

    Raises:
        FileNotFoundError: `<flag> <path>: no such file; expected <expected>`.
        IsADirectoryError: `<flag> <path>: a directory; expected <expected>`.
        PermissionError: `<flag> <path>: cannot be read (permission denied); expected <expected>`.

    Example:
    >>> check_input_file("/nonexistent/dev.json", "--predict_file", "a SQuAD .json or .json.gz file")
    Traceback (most recent call last):
    ...
    FileNotFoundError: --predict_file /nonexistent/dev.json: no such file; expected a SQuAD .json or .json.gz file
    >>> check_input_file("/", "--train_file", "a .csv, .tsv or .jsonl table")
    Traceback (most recent call last):
    ...
    IsADirectoryError: --train_file /: a directory; expected a .csv, .tsv or .jsonl table
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path}: a directory; expected {expected}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{flag} {path}: no such file; expected {expected}")
    if not os.access(path, os.R_OK):  # (was Python's "[Errno 13] Permission denied: 'x'", without the flag)
        raise PermissionError(f"{flag} {path}: cannot be read (permission denied); expected {expected}")


def blocks_of_lines(file, block_bytes=1 << 22):
    """The bytes of an open binary file in blocks of whole lines: yields `(data, first_line, first_offset)`.

    `first_line` (1-based) and `first_offset` (0-based bytes) say where `data`
    starts in the file, as `decode_utf8` takes them. Every block but the last
    ends with a newline; the last holds the file's last line whether or not a
    newline ends it. Memory stays bounded by `block_bytes` plus the longest line.
    Shared by the readers that check a whole file before any work
    (`data.text_documents.check_text_file`, `text.vocabulary.check_input_files`).

    Example:
    >>> import io
    >>> list(blocks_of_lines(io.BytesIO(b"one\\ntwo\\nthree"), block_bytes=5))
    [(b'one\\n', 1, 0), (b'two\\n', 2, 4), (b'three', 3, 8)]
    """
    line, offset, pending = 1, 0, b""
    while True:
        block = file.read(block_bytes)
        data = pending + block
        cut = data.rfind(b"\n") + 1 if block else len(data)  # whole lines only; at the end, the rest
        piece, pending = data[:cut], data[cut:]
        if piece:
            yield piece, line, offset
            line, offset = line + piece.count(b"\n"), offset + len(piece)
        if not block:
            return


def not_text_problem(data, path, reads_gz=False):
    """What the start of a file that failed to decode as UTF-8 says it is, or None: UTF-16 or UTF-32 (a byte-order
    mark), or gzip-compressed data (its magic bytes), with what to do. Not Windows-1252, whose `iconv -f
    WINDOWS-1252` would turn such a file into garbage.

    Example:
    >>> not_text_problem("hi".encode("utf-16"), "a.tsv")
    'the file is UTF-16 (it starts with the byte-order mark 0xff 0xfe), not UTF-8: re-encode it as UTF-8, e.g. \
iconv -f UTF-16 -t UTF-8 a.tsv > utf8_a.tsv'
    >>> not_text_problem(b"\\x1f\\x8b\\x08\\x00", "corpus.txt.gz")
    'the file is gzip-compressed (it starts with the bytes 0x1f 0x8b), not text: decompress it first, e.g. \
gunzip -c corpus.txt.gz > corpus.txt'
    """
    name = os.path.basename(os.fspath(path))
    for mark, encoding, _ in _OTHER_BOMS:
        if data.startswith(mark):
            marks = " ".join(f"0x{byte:02x}" for byte in mark)
            return (f"the file is {encoding} (it starts with the byte-order mark {marks}), not UTF-8: re-encode it "
                    f"as UTF-8, e.g. iconv -f {encoding} -t UTF-8 {name} > utf8_{name}")
    if data.startswith(GZIP_MAGIC):
        plain = name[:-3] if name.lower().endswith(".gz") and len(name) > 3 else f"unzipped_{name}"
        problem = (f"the file is gzip-compressed (it starts with the bytes 0x1f 0x8b), not text: decompress it "
                   f"first, e.g. gunzip -c {name} > {plain}")
        if reads_gz and not name.lower().endswith(".gz"):
            problem += f", or name it {name}.gz (this reader decompresses .gz files itself)"
        return problem
    return None


def decode_utf8(data, path, error_class=FileFormatError, *, advice=None, first_line=1, first_offset=0,
                reads_gz=False):
    """Decodes the bytes of a UTF-8 file, or of a piece of it, naming file, line, column and byte on failure.

    A byte-order mark at the start of the file is dropped.

    Args:
        data: bytes of the whole file, or of a piece of it (say, one line)
            starting at line `first_line` and byte `first_offset` of the file.
        path: the file, for the message.
        error_class: `FileFormatError` or a subclass, raised as
            `error_class(path, line, column, problem)`.
        advice: text appended to the message (what else the user may do).
        first_line, first_offset: where `data` starts in the file (1-based
            line, 0-based byte offset); a piece starting mid-line is not supported.
        reads_gz: the reader decompresses a file named `.gz` (the message about
            a gzip file of another name then says so).

    Returns:
        The text (str).

    Raises:
        error_class: `<file>, line <n>, column <c>: byte 0x92 at byte offset
            <o> of the file is not valid UTF-8; the file looks like
            Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv ...`;
            the column counts characters of the line (the byte-order mark not
            included), the offset bytes of the file. A file that starts with a
            UTF-16 or UTF-32 byte-order mark, or with gzip's magic bytes, is
            named as such instead, without line and column
            (`not_text_problem`): `<file>: the file is UTF-16 (...), not UTF-8:
            re-encode it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8 ...`.

    Example:
    >>> decode_utf8(b"\\xef\\xbb\\xbfword O\\n", "a.conll")
    'word O\\n'
    >>> try:
    ...     decode_utf8("One.\\nA naïve ".encode("utf-8") + b"\\x93quote\\x94", "b.txt", first_line=7, first_offset=100)
    ... except FileFormatError as error:
    ...     print(error.line, error.column, error.problem.split(";")[0])
    8 9 byte 0x93 at byte offset 114 of the file is not valid UTF-8
    """
    start = 3 if first_offset == 0 and data[:3] == UTF8_BOM else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as error:
        other = not_text_problem(data, path, reads_gz) if first_offset == 0 else None
        if other:  # `advice` (say, --errors replace) would not help here
            raise error_class(path, None, None, other) from None
        bad = start + error.start
        line_start = max(data.rfind(b"\n", 0, bad) + 1, start)
        line = first_line + data.count(b"\n", 0, bad)
        column = len(data[line_start:bad].decode("utf-8", errors="replace")) + 1
        name = os.path.basename(os.fspath(path))
        problem = (
            f"byte 0x{data[bad]:02x} at byte offset {first_offset + bad} of the file is not valid UTF-8; the file "
            f"looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
            f"{name} > utf8_{name}"
        )
        raise error_class(path, line, column, problem + (advice or "")) from None


__all__ = ["FileFormatError", "check_input_file", "decode_utf8", "file_location", "not_text_problem", "one_line"]
