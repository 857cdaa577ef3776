"""Step 1, reading: GLUE's nine tasks' TSV files (or any labelled text table in their layout), label maps.

Pure Python, no TensorFlow needed:

- `TASKS` / `get_task(name)`: the nine tasks (`cola, sst2, mrpc, stsb, qqp,
  mnli, qnli, rte, wnli`) with their folder, files, columns and label set.
- `read_split(task, data_dir, split)` -> `GlueSplit` (columns: `ids`,
  `text_a`, `text_b`, `labels`). `data_dir` is either the GLUE root (holding
  `CoLA/`, `SST-2/`, ...) or the task's own folder. Splits: `train`, `dev`,
  `test` (MNLI: `dev_matched`, `dev_mismatched`, `test_matched`,
  `test_mismatched`). Test splits have `labels=None`.

Files are read exactly as GLUE ships them: UTF-8 with an optional byte-order
mark (MRPC), LF or CRLF line ends, with or without a final newline, quoting
off (fields contain unbalanced `"`), surrounding whitespace of sentences
removed (SST-2 has a space before the tab). Layouts are checked: a wrong
header, a row with a missing or extra field, an empty sentence, a label
outside the task's set or an STS-B score outside [0, 5] raise
`GlueFormatError` naming the file, the line and what was expected. Only QQP
skips malformed rows (with a logged count, `GlueSplit.skipped_rows`), as the
reference processors do, since copies of QQP in circulation contain rows with
missing fields.

The next steps: `features` (encode), `batches` (tf.data and NumPy),
`evaluation`, `outputs` (submission files, dev_results.json), `prediction`,
and `run` (the fine-tuning story).

Example:
>>> import os
>>> split = read_split("rte", os.environ.get("GLUE_DIR", "../shared/data/glue"), "dev")  # doctest: +SKIP
>>> len(split), split.text_a[0][:20], split.label_names[split.labels[0]]  # doctest: +SKIP
(277, 'Dana Reeve, the wido', 'not_entailment')
"""

import dataclasses
import logging
import math
import os

import numpy as np

from keras_bert_impl.file_errors import UTF8_BOM, FileFormatError, decode_utf8

logger = logging.getLogger(__name__)


class GlueFormatError(FileFormatError):
    """A GLUE file does not have the expected layout: a `FileFormatError` naming the file and the line.

    Built as `GlueFormatError(path, line, column, problem)` (line and column
    may be None), with the same `.path`, `.line`, `.column`, `.problem`.

    Example:
    >>> error = GlueFormatError("RTE/dev.tsv", 3, None, "3 fields (a missing field); expected 4 tab-separated fields.")
    >>> str(error), error.line, isinstance(error, FileFormatError)
    ('RTE/dev.tsv, line 3: 3 fields (a missing field); expected 4 tab-separated fields.', 3, True)
    """


class GlueEncodingError(GlueFormatError):
    """A byte of a GLUE file that is not UTF-8 (`keras_bert_impl.file_errors.decode_utf8`: file, line, column, byte).

    Example:
    >>> try:
    ...     decode_utf8(b"a\\tb\\xe4", "dev.tsv", GlueEncodingError, first_line=2, first_offset=10)
    ... except GlueFormatError as error:
    ...     print(error.path, error.line, error.column)
    dev.tsv 2 4
    """


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """How one GLUE task is stored and scored.

    Attributes:
        name: short name (`"cola"`).
        folder: folder under the GLUE root (`"CoLA"`).
        files: split -> file name.
        text_columns: header names of the one or two text columns.
        label_column: header name of the label column (None for header-less CoLA).
        id_column: header name of the example id in test files.
        label_names: label strings in class-id order; None for regression (STS-B).
        submission_files: test split -> leaderboard file name.
        headerless_layout: for CoLA train/dev: (number of columns, text index, label index).
        skip_malformed_rows: skip rows with a wrong field count (QQP) instead of raising.
    """

    name: str
    folder: str
    files: dict
    text_columns: tuple
    label_column: str | None
    id_column: str
    label_names: tuple | None
    submission_files: dict
    headerless_layout: tuple | None = None
    skip_malformed_rows: bool = False

    @property
    def num_classes(self):
        """Number of outputs of the head: 1 for regression."""
        return 1 if self.label_names is None else len(self.label_names)

    @property
    def is_regression(self):
        return self.label_names is None

    @property
    def splits(self):
        return tuple(self.files)

    @property
    def dev_splits(self):
        return tuple(s for s in self.files if s.startswith("dev"))

    @property
    def test_splits(self):
        return tuple(s for s in self.files if s.startswith("test"))


_STANDARD_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}

TASKS = {
    "cola": GlueTask(
        "cola", "CoLA", _STANDARD_FILES, ("sentence",), None, "index", ("0", "1"), {"test": "CoLA.tsv"},
        headerless_layout=(4, 3, 1),
    ),
    "sst2": GlueTask("sst2", "SST-2", _STANDARD_FILES, ("sentence",), "label", "index", ("0", "1"), {"test": "SST-2.tsv"}),
    "mrpc": GlueTask(
        "mrpc", "MRPC", _STANDARD_FILES, ("#1 String", "#2 String"), "Quality", "index", ("0", "1"), {"test": "MRPC.tsv"}
    ),
    "stsb": GlueTask("stsb", "STS-B", _STANDARD_FILES, ("sentence1", "sentence2"), "score", "index", None, {"test": "STS-B.tsv"}),
    "qqp": GlueTask(
        "qqp", "QQP", _STANDARD_FILES, ("question1", "question2"), "is_duplicate", "id", ("0", "1"), {"test": "QQP.tsv"},
        skip_malformed_rows=True,
    ),
    "mnli": GlueTask(
        "mnli",
        "MNLI",
        {
            "train": "train.tsv",
            "dev_matched": "dev_matched.tsv",
            "dev_mismatched": "dev_mismatched.tsv",
            "test_matched": "test_matched.tsv",
            "test_mismatched": "test_mismatched.tsv",
        },
        ("sentence1", "sentence2"),
        "gold_label",
        "index",
        ("contradiction", "entailment", "neutral"),
        {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
    ),
    "qnli": GlueTask(
        "qnli", "QNLI", _STANDARD_FILES, ("question", "sentence"), "label", "index", ("entailment", "not_entailment"),
        {"test": "QNLI.tsv"},
    ),
    "rte": GlueTask(
        "rte", "RTE", _STANDARD_FILES, ("sentence1", "sentence2"), "label", "index", ("entailment", "not_entailment"),
        {"test": "RTE.tsv"},
    ),
    "wnli": GlueTask(
        "wnli", "WNLI", _STANDARD_FILES, ("sentence1", "sentence2"), "label", "index", ("0", "1"), {"test": "WNLI.tsv"}
    ),
}

STSB_SCORE_RANGE = (0.0, 5.0)


def task_names():
    """The nine task names, in GLUE's order of the paper's table.

    Example:
    >>> task_names()
    ['mnli', 'qqp', 'qnli', 'sst2', 'cola', 'stsb', 'mrpc', 'rte', 'wnli']
    """
    return ["mnli", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte", "wnli"]


def get_task(name):
    """The `GlueTask` called `name` (case-insensitive; "sst-2", "sts-b" accepted).

    Example:
    >>> get_task("STS-B").num_classes
    1
    """
    key = str(name).lower().replace("-", "").replace("_", "")
    if key not in TASKS:
        raise ValueError(f"Unknown GLUE task {name!r}: valid tasks are {', '.join(task_names())}.")
    return TASKS[key]


@dataclasses.dataclass
class GlueSplit:
    """One split of one task, column-wise.

    Attributes:
        task: the `GlueTask`.
        split: split name (`"train"`, `"dev_matched"`, ...).
        path: the file read.
        ids: example ids (the `index`/`id` column; for header-less CoLA the row number from 0).
        text_a: first segments.
        text_b: second segments, or None for single-sentence tasks.
        labels: None (test), int32 class ids, or float32 scores (STS-B).
        line_numbers: 1-based line of each example in `path`.
        skipped_rows: rows skipped as malformed (QQP only).
    """

    task: GlueTask
    split: str
    path: str
    ids: list
    text_a: list
    text_b: list | None
    labels: np.ndarray | None
    line_numbers: list
    skipped_rows: int = 0

    def __len__(self):
        return len(self.text_a)

    @property
    def label_names(self):
        return self.task.label_names

    def take(self, count):
        """The first `count` examples as a new `GlueSplit` (for subsets and quick runs)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"`count` must be a non-negative int, got {count!r}.")
        return dataclasses.replace(
            self,
            ids=self.ids[:count],
            text_a=self.text_a[:count],
            text_b=None if self.text_b is None else self.text_b[:count],
            labels=None if self.labels is None else self.labels[:count],
            line_numbers=self.line_numbers[:count],
        )


def resolve_task_dir(task, data_dir):
    """`data_dir/<task folder>` if it exists, else `data_dir` (the task's own folder)."""
    task = get_task(task) if isinstance(task, str) else task
    data_dir = os.fspath(data_dir)
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"--data_dir {data_dir} does not exist or is not a directory.")
    nested = os.path.join(data_dir, task.folder)
    return nested if os.path.isdir(nested) else data_dir


def split_path(task, data_dir, split):
    """Path of `split`'s file; FileNotFoundError naming the missing file and the expected ones (IsADirectoryError
    where that name is a directory)."""
    task = get_task(task) if isinstance(task, str) else task
    if split not in task.files:
        raise ValueError(f"{task.name} has no split {split!r}: expected one of {list(task.files)}.")
    directory = resolve_task_dir(task, data_dir)
    path = os.path.join(directory, task.files[split])
    if os.path.isdir(path):  # (was "missing file")
        raise IsADirectoryError(
            f"{task.name}: {path} (the {split} split) is a directory; expected a file: a GLUE {task.name} folder "
            f"holds the tab-separated files {', '.join(task.files.values())}")
    if not os.path.isfile(path):
        expected = ", ".join(task.files.values())
        raise FileNotFoundError(
            f"{task.name}: missing file {path} (the {split} split). A GLUE {task.name} folder holds "
            f"{expected}; pass --data_dir as the GLUE root (with {task.folder}/) or the {task.folder} folder itself."
        )
    if not os.access(path, os.R_OK):  # (was "[Errno 13] Permission denied: '...'")
        raise PermissionError(f"{task.name}: {path} (the {split} split) cannot be read (permission denied)")
    return path


def read_tsv_lines(path):
    """Yields `(line_number, fields)` of a TSV file with quoting off.

    Handles a UTF-8 byte-order mark, LF/CRLF line ends, a missing final
    newline and empty last lines; a byte that is not UTF-8 raises `GlueEncodingError` (a
    `GlueFormatError`) naming the file, the line, the column and the byte.

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tsv")
    >>> _ = open(path, "wb").write(b'\\xef\\xbb\\xbfa\\tb\\r\\n"x\\ty')
    >>> list(read_tsv_lines(path))
    [(1, ['a', 'b']), (2, ['"x', 'y'])]
    """
    with open(path, "rb") as f:
        data = f.read()
    offset = 3 if data.startswith(UTF8_BOM) else 0
    lines = data[offset:].split(b"\n")
    while lines and lines[-1] in (b"", b"\r"):  # the final newline, and empty last lines (was "1 fields")
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        line = decode_utf8(raw, path, GlueEncodingError, first_line=number, first_offset=offset)
        offset += len(raw) + 1
        yield number, line.removesuffix("\r").split("\t")


def _header_layout(task, split, path, header_fields):
    """Column indices for text, label and id from a header row; GlueFormatError if columns are missing."""
    is_test = split.startswith("test")
    required = list(task.text_columns) + ([task.id_column] if is_test else [task.label_column])
    missing = [c for c in required if c not in header_fields]
    if missing:
        raise GlueFormatError(
            path, 1, None,
            f"header {header_fields!r} lacks column(s) {missing}; a {task.name} {split} "
            f"file has a tab-separated header with {required}.",
        )
    duplicated = sorted({c for c in header_fields if header_fields.count(c) > 1})
    if duplicated:
        raise GlueFormatError(path, 1, None, f"header repeats column(s) {duplicated}.")
    text = [header_fields.index(c) for c in task.text_columns]
    label = None if is_test else header_fields.index(task.label_column)
    ident = header_fields.index(task.id_column) if task.id_column in header_fields else None
    return len(header_fields), text, label, ident


def read_split(task, data_dir, split):
    """Reads one split of one GLUE task into a `GlueSplit`.

    Args:
        task: task name or `GlueTask`.
        data_dir: the GLUE root (with the task folder inside) or the task folder.
        split: a name from `task.splits` (`train`, `dev`, `test`; MNLI
            `dev_matched`, `dev_mismatched`, `test_matched`, `test_mismatched`).

    Returns:
        A `GlueSplit`; `labels` is None for test splits.

    Raises:
        FileNotFoundError: the split's file is missing (named, with the expected files).
        GlueFormatError: bad layout, naming file, line and what was expected.
    """
    task = get_task(task) if isinstance(task, str) else task
    path = split_path(task, data_dir, split)
    is_test = split.startswith("test")
    lines = read_tsv_lines(path)
    ids, text_a, text_b, labels, line_numbers = [], [], [], [], []
    skipped = 0

    if task.headerless_layout is not None and not is_test:
        num_columns, text_index, label_index = task.headerless_layout
        text, label, ident = [text_index], label_index, None
        expected_layout = (
            f"{num_columns} tab-separated fields (source, label, author's mark, sentence) and no header"
        )
    else:
        try:
            _, header = next(lines)
        except StopIteration:
            raise GlueFormatError(path, 1, None, "the file is empty; expected a header line.") from None
        num_columns, text, label, ident = _header_layout(task, split, path, header)
        expected_layout = f"{num_columns} tab-separated fields, as the header"

    label_to_id = None if task.label_names is None else {name: i for i, name in enumerate(task.label_names)}
    for number, fields in lines:
        if len(fields) != num_columns:
            if task.skip_malformed_rows:
                skipped += 1
                continue
            problem = "a missing field" if len(fields) < num_columns else "an extra tab"
            raise GlueFormatError(
                path, number, None, f"{len(fields)} fields ({problem}); expected {expected_layout}."
            )
        texts = [fields[i].strip() for i in text]
        for column, value in zip(text, texts):
            if not value:
                raise GlueFormatError(
                    path, number, None,
                    f"empty sentence in column {column + 1}; every {task.name} example needs non-empty text.",
                )
        if label is not None:
            labels.append(_parse_label(task, path, number, fields[label].strip(), label_to_id))
        ids.append(fields[ident].strip() if ident is not None else str(len(ids)))
        text_a.append(texts[0])
        if len(texts) > 1:
            text_b.append(texts[1])
        line_numbers.append(number)

    if skipped:
        logger.warning("%s: skipped %d malformed row(s) with a wrong number of fields.", path, skipped)
    if label is None:
        label_array = None
    elif task.is_regression:
        label_array = np.asarray(labels, dtype="float32")
    else:
        label_array = np.asarray(labels, dtype="int32")
    return GlueSplit(
        task=task,
        split=split,
        path=path,
        ids=ids,
        text_a=text_a,
        text_b=text_b if len(task.text_columns) > 1 else None,
        labels=label_array,
        line_numbers=line_numbers,
        skipped_rows=skipped,
    )


def _parse_label(task, path, number, value, label_to_id):
    if label_to_id is None:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        low, high = STSB_SCORE_RANGE
        if not low <= score <= high:  # also rejects nan
            raise GlueFormatError(
                path, number, None,
                f"score {value!r} is not a number in [{low:g}, {high:g}] (the {task.name} similarity score).",
            )
        return score
    if value not in label_to_id:
        raise GlueFormatError(
            path, number, None, f"label {value!r} is not one of {list(label_to_id)} (the {task.name} labels)."
        )
    return label_to_id[value]


# Step 1's name in every task (`classification.read_examples`, `tagging.read_examples`, `span_qa.read_examples`; docs/architecture.md).
read_examples = read_split
