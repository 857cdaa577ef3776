"""Labelled text tables (CSV, TSV, JSON Lines) for text classification (one label or several a row) and regression.

`read_table` reads a user's own file into a `LabelledTable` (texts, optional
second texts, labels, and the line each row came from), checking every row.
`label_vocabulary` gives the sorted training labels and `encode_labels` maps
labels to class ids (a table's scores are step 4's, `evaluation.score_outputs`). With
`label_separator`, each row holds any number of labels (multi-label): a cell
``"ORG,MISC"`` (or a JSON list ``["ORG", "MISC"]``; empty: none).

Every problem in a file raises a `TableFormatError` (a `ValueError`, `table_errors`) whose
message is one line naming the file, the line and the column, e.g.
``train.csv, line 7, column 'label': label 'neutral' is not among the
training labels ['negative', 'positive']``.

Formats (from the extension, or `file_format`):

- ``.csv``: comma-separated with a header row, quoted as Python's `csv`
  module (and Excel, pandas) write it; a quoted field may span lines. A
  header that names the columns only when split on semicolons (Excel where
  the decimal mark is a comma), tabs or bars reads the file that way
  (`table_rows.csv_delimiter`; `table_rows` splits every format into rows).
- ``.tsv``: tab-separated with a header row, *unquoted* as GLUE's files are
  (a ``"`` is an ordinary character; a field cannot hold a tab).
- ``.jsonl`` / ``.json``: JSON Lines, one object per line, or one JSON
  array of objects (pandas' ``to_json(orient="records")``).

Files must be UTF-8 (a leading byte-order mark is allowed). Blank lines are
skipped.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "reviews.csv")
>>> with open(path, "w", encoding="utf-8") as f:
...     _ = f.write('text,label\\n"a fine, moving film",positive\\ndull and far too long,negative\\n')
>>> table = read_table(path, text_column="text", label_column="label")
>>> table.texts
['a fine, moving film', 'dull and far too long']
>>> label_vocabulary(table)
['negative', 'positive']
>>> encode_labels(table, label_vocabulary(table)).tolist()
[1, 0]
>>> table.line_numbers
[2, 3]
"""

import dataclasses
import math
import os
from typing import List, Optional, Union

import numpy as np

from keras_bert_impl.file_errors import decode_utf8
from keras_bert_impl.tasks.classification.table_errors import (  # (re-exported: `from table_files import ...Error`)
    EmptyTableError,
    EmptyTextError,
    JsonLineError,
    LabelValueError,
    MissingColumnError,
    RaggedRowError,
    TableEncodingError,
    TableFormatError,
    UnknownLabelError,
)
from keras_bert_impl.tasks.classification.table_rows import delimited_rows, json_rows

FORMATS = ("csv", "tsv", "jsonl")
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}


# === The table ===


@dataclasses.dataclass
class LabelledTable:
    """Rows of a table file: `texts`, `text_pairs` (or None), `labels` (or None) and each row's `line_numbers`.

    Labels are strings for classification, tuples of strings for multi-label
    classification (`multi_label`), and floats for regression.
    `line_numbers` are 1-based lines of the file where each row starts (the
    header is line 1 in CSV/TSV). `skipped_lines` are the lines of the rows
    left out for having no text (`read_table(..., empty_texts="skip")`; else
    empty).
    """

    path: str
    texts: List[str]
    text_pairs: Optional[List[str]]
    labels: Optional[List[Union[str, float]]]
    line_numbers: List[int]
    label_column: Optional[str] = None
    regression: bool = False
    multi_label: bool = False
    skipped_lines: List[int] = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.texts)

    @property
    def inputs(self):
        """What a `BertClassifier`'s `fit`/`predict` takes: the list of texts, or `(texts, text_pairs)`."""
        return self.texts if self.text_pairs is None else (self.texts, self.text_pairs)

    def head(self, count):
        """The first `count` rows (all of them when `count` is None)."""
        if count is None:
            return self
        cut = slice(0, int(count))
        return dataclasses.replace(
            self,
            texts=self.texts[cut],
            text_pairs=None if self.text_pairs is None else self.text_pairs[cut],
            labels=None if self.labels is None else self.labels[cut],
            line_numbers=self.line_numbers[cut],
        )


# === Reading ===


def table_format(path, file_format=None):
    """`file_format` checked, or the format named by `path`'s extension: "csv", "tsv" or "jsonl".

    Example:
    >>> table_format("data/train.TSV"), table_format("x.json"), table_format("x.txt", "csv")
    ('tsv', 'jsonl', 'csv')
    """
    if file_format is not None:
        name = str(file_format).lower().lstrip(".")
        name = {"json": "jsonl", "ndjson": "jsonl", "jsonlines": "jsonl"}.get(name, name)
        if name not in FORMATS:
            raise ValueError(f"Unknown file_format {file_format!r}; use one of {', '.join(FORMATS)}.")
        return name
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in _EXTENSIONS:
        raise TableFormatError(path, None, None, _unknown_extension_problem(path, extension))
    return _EXTENSIONS[extension]


_SPREADSHEETS = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")


def _unknown_extension_problem(path, extension):
    """What to do with a table file whose extension names no format we read (the recipe has no format flag).

    Example:
    >>> _unknown_extension_problem("data/train.csv.gz", ".gz")
    "it is gzip-compressed ('.gz'), and tables are read as plain .csv, .tsv or .jsonl files: decompress it first, \
e.g. gunzip -c train.csv.gz > train.csv"
    >>> _unknown_extension_problem("a.txt", ".txt")
    "cannot tell the format from the extension '.txt': name the file .csv, .tsv or .jsonl after the format it holds"
    """
    name = os.path.basename(os.fspath(path))
    if extension == ".gz":
        plain = name[:-3]
        plain = plain if os.path.splitext(plain)[1].lower() in _EXTENSIONS else f"{plain or 'table'}.csv"
        return (f"it is gzip-compressed ('.gz'), and tables are read as plain .csv, .tsv or .jsonl files: "
                f"decompress it first, e.g. gunzip -c {name} > {plain}")
    if extension in _SPREADSHEETS:
        return (f"it is a spreadsheet ({extension!r}), and tables are read as .csv, .tsv or .jsonl text files: "
                f"save the sheet as CSV UTF-8 (File > Save As) and pass that file")
    return (f"cannot tell the format from the extension {extension or '(none)'!r}: name the file .csv, .tsv or "
            f".jsonl after the format it holds")


def read_table(
    path,
    text_column,
    label_column=None,
    text_pair_column=None,
    regression=False,
    known_labels=None,
    file_format=None,
    label_separator=None,
    empty_texts="refuse",
    known_labels_source="training labels",
):
    """Reads a labelled text table, checking every row.

    Args:
        path: a .csv, .tsv, .jsonl or .json (JSON Lines) file, UTF-8.
        text_column: the column (JSON key) holding the text.
        label_column: the column holding the label, or None (e.g. a test file).
        text_pair_column: optional column holding the second text of a pair.
        regression: labels are numbers (floats) rather than class names.
        known_labels: for a validation/test file of a classifier, the
            training labels (`label_vocabulary(train_table)`): any other
            label is an `UnknownLabelError`.
        known_labels_source: what the error calls `known_labels` ("the
            fine-tuned model's labels" when a saved model's labels bind them).
        file_format: "csv", "tsv" or "jsonl"; default from the extension.
        label_separator: None (one label a row), or the string between the
            labels of a row that has several (multi-label, e.g. ","): each
            label cell becomes a tuple of names, an empty cell none; in JSON
            Lines a list of names is taken as it is.
        empty_texts: "refuse" (the default, as fine-tuning needs): a row
            whose `text_column` is empty, only whitespace or null (JSON
            Lines) is an `EmptyTextError`; "skip": such a row is left out,
            its pair and label unread, and its line recorded in the table's
            `skipped_lines` (pretraining text, where a row without text is
            no document); if every row is, an `EmptyTextError` ("no row has
            text in column ..."). Only `text_column` is skipped on: an empty
            `text_pair_column` is still refused, and so is a text that is not
            a string (a number in JSON Lines).

    Returns:
        A `LabelledTable`.

    Raises:
        TableFormatError (a ValueError), one of its subclasses, with a
        one-line message naming file, line and column.
        FileNotFoundError: `path` does not exist.

    Example, a pair regression file in JSON Lines:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "sts.jsonl")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('{"sentence1": "A plane is taking off.", "sentence2": "An air plane is taking off.", "score": 5.0}\\n')
    ...     _ = f.write('{"sentence1": "A man is playing a flute.", "sentence2": "A man is eating.", "score": "0.5"}\\n')
    >>> table = read_table(path, "sentence1", "score", text_pair_column="sentence2", regression=True)
    >>> table.labels, table.text_pairs[0]
    ([5.0, 0.5], 'An air plane is taking off.')

    Several labels a row (multi-label: the entity types of CoNLL-2003 sentences):
    >>> path = os.path.join(tempfile.mkdtemp(), "types.csv")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('text,types\\nEU rejects German call to boycott British lamb .,"ORG,MISC"\\nThe guitarist died of a drugs overdose in 1970 aged 27 .,\\n')
    >>> read_table(path, "text", "types", label_separator=",").labels
    [('ORG', 'MISC'), ()]

    A label the training file lacks:
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write("sentence\\tlabel\\nit 's a charming journey .\\tneutral\\n")
    >>> read_table(path, "sentence", "label", known_labels=["0", "1"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.tasks.classification.table_errors.UnknownLabelError: .../dev.tsv, line 2, column 'label': label 'neutral' is not among the training labels ['0', '1']

    Rows without text left out (refused by default):
    >>> path = os.path.join(tempfile.mkdtemp(), "reviews.jsonl")
    >>> with open(path, "w", encoding="utf-8") as f:
    ...     _ = f.write('{"text": "it \\'s a charming and often affecting journey . "}\\n{"text": null}\\n{"text": " "}\\n')
    >>> table = read_table(path, "text", empty_texts="skip")
    >>> table.texts, table.line_numbers, table.skipped_lines
    (["it 's a charming and often affecting journey . "], [1], [2, 3])
    >>> read_table(path, "text")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_bert_impl.tasks.classification.table_errors.EmptyTextError: .../reviews.jsonl, line 2, column 'text': the text is missing (null)
    """
    path = os.fspath(path)
    fmt = table_format(path, file_format)
    text = _decode(path)
    columns = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    if len(set(columns)) != len(columns):
        raise ValueError(f"The text, pair and label columns must differ, got {columns}.")
    if empty_texts not in ("refuse", "skip"):
        raise ValueError(f"`empty_texts` is 'refuse' or 'skip', got {empty_texts!r}.")
    if label_separator is not None and (regression or not isinstance(label_separator, str) or not label_separator):
        raise ValueError("`label_separator` splits the labels of a multi-label row: a non-empty string, and not "
                         f"with regression scores; got {label_separator!r}" + (" with regression=True." if regression
                                                                                else "."))
    rows = json_rows(path, text, columns) if fmt == "jsonl" else delimited_rows(path, text, fmt, columns)
    known = None if known_labels is None else [str(label) for label in known_labels]
    known_set = None if known is None else set(known)

    texts, pairs, labels, lines = [], [] if text_pair_column else None, [] if label_column else None, []
    skipped = []
    for line, row in rows:
        if empty_texts == "skip" and _is_empty(row[text_column]):
            skipped.append(line)
            continue
        texts.append(_text(path, line, text_column, row[text_column]))
        if text_pair_column is not None:
            pairs.append(_text(path, line, text_pair_column, row[text_pair_column]))
        if label_column is not None:
            value = row[label_column]
            if regression:
                labels.append(_score(path, line, label_column, value))
                lines.append(line)
                continue
            if label_separator is None:
                row_labels = (_label(path, line, label_column, value),)
            else:
                row_labels = _label_set(path, line, label_column, value, label_separator)
            for label in row_labels:
                if known_set is not None and label not in known_set:
                    raise UnknownLabelError(
                        path, line, label_column,
                        f"label {label!r} is not among the {known_labels_source} {_preview(known)}",
                    )
            labels.append(row_labels[0] if label_separator is None else row_labels)
        lines.append(line)
    if not texts and skipped:
        raise EmptyTextError(path, None, None, f"no row has text in column {text_column!r} (all {len(skipped)} rows "
                                               "are empty)")
    if not texts:
        raise EmptyTableError(path, 1, None, "no data rows: the file has a header but no examples")
    return LabelledTable(path, texts, pairs, labels, lines, label_column=label_column, regression=bool(regression),
                         multi_label=label_separator is not None, skipped_lines=skipped)


def _preview(labels, limit=20):
    shown = list(labels[:limit])
    return f"{shown}" + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def _decode(path):
    with open(path, "rb") as f:
        return decode_utf8(f.read(), path, TableEncodingError)


def _is_empty(value):
    """Whether a text cell holds no text (null, empty or only whitespace); other values are `_text`'s to judge."""
    return value is None or (isinstance(value, str) and not value.strip())


def _text(path, line, column, value):
    if value is None:
        raise EmptyTextError(path, line, column, "the text is missing (null)")
    if not isinstance(value, str):
        raise TableFormatError(path, line, column, f"expected a text (a string), got {value!r}")
    if not value.strip():
        raise EmptyTextError(path, line, column, "the text is empty")
    return value


def _label(path, line, column, value):
    if value is None:
        raise LabelValueError(path, line, column, "the label is missing (null)")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise LabelValueError(path, line, column, f"expected a label (a string or a number), got {value!r}")
    label = str(value).strip()
    if not label:
        raise LabelValueError(path, line, column, "the label is empty")
    return label


def _label_set(path, line, column, value, separator):
    """A multi-label cell -> a tuple of label names (in the order given, each once; empty: none)."""
    if value is None:
        raise LabelValueError(path, line, column, "the labels are missing (null); an empty cell or [] means none")
    if isinstance(value, list):
        labels = [_label(path, line, column, item) for item in value]
    elif isinstance(value, dict):
        raise LabelValueError(path, line, column, f"expected labels (a list, or names joined by {separator!r}), "
                                                  f"got {value!r}")
    else:
        labels = [_label(path, line, column, piece) for piece in str(value).split(separator) if piece.strip()]
    return tuple(dict.fromkeys(labels))


def _score(path, line, column, value):
    try:
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
            raise ValueError
        score = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise LabelValueError(
            path, line, column, f"regression label {value!r} is not a number"
        ) from None
    if not math.isfinite(score):
        raise LabelValueError(path, line, column, f"regression label {value!r} is not a finite number")
    return score


# === Labels ===


def label_vocabulary(table):
    """The sorted unique labels of a (training) table, as strings: numerically if all are integers.

    Example:
    >>> table = LabelledTable("train.csv", ["a", "b", "c"], None, ["10", "2", "2"], [2, 3, 4])
    >>> label_vocabulary(table)
    ['2', '10']
    >>> label_vocabulary(LabelledTable("t.csv", ["a", "b"], None, ["pos", "neg"], [2, 3]))
    ['neg', 'pos']
    """
    if table.labels is None:
        raise ValueError(f"{table.path} was read without a label column: it has no labels.")
    if table.regression:
        raise ValueError(f"{table.path} holds regression scores, which have no label vocabulary.")
    unique = {label for labels in table.labels for label in labels} if table.multi_label else set(table.labels)
    try:
        return sorted(unique, key=lambda label: (int(label), label))
    except ValueError:
        return sorted(unique)


def label_to_id(label_names):
    """`{label: class id}` for the class names in id order.

    Example:
    >>> label_to_id(["negative", "positive"])
    {'negative': 0, 'positive': 1}
    """
    return {label: index for index, label in enumerate(label_names)}


def encode_labels(table, label_names):
    """The table's labels as int32 class ids under `label_names` (the class names in id order) (an `UnknownLabelError` for any other label);
    multi-label: int32 multi-hot rows `(examples, len(label_names))`.

    Example:
    >>> encode_labels(LabelledTable("t.csv", ["a", "b"], None, ["pos", "neg"], [2, 3]), ["neg", "pos"]).tolist()
    [1, 0]
    >>> topics = LabelledTable("t.csv", ["a", "b"], None, [("x", "z"), ()], [2, 3], multi_label=True)
    >>> encode_labels(topics, ["x", "y", "z"]).tolist()
    [[1, 0, 1], [0, 0, 0]]
    """
    ids = label_to_id(label_names)
    encoded = np.zeros((len(table.labels), len(ids)) if table.multi_label else len(table.labels), dtype="int32")
    for i, (labels, line) in enumerate(zip(table.labels, table.line_numbers)):
        for label in labels if table.multi_label else (labels,):
            if label not in ids:
                raise UnknownLabelError(
                    table.path, line, table.label_column,
                    f"label {label!r} is not among the training labels {_preview(list(label_names))}",
                )
            if table.multi_label:
                encoded[i, ids[label]] = 1
            else:
                encoded[i] = ids[label]
    return encoded


def label_targets(table, label_names=None):
    """What `fit` takes as `y`: float32 scores for regression, int32 class ids (under `label_names`; default:
    `label_vocabulary(table)`) otherwise (multi-hot rows for multi-label)."""
    if table.regression:
        return np.asarray(table.labels, dtype="float32")
    return encode_labels(table, label_names if label_names is not None else label_vocabulary(table))


__all__ = [
    "FORMATS",
    "EmptyTableError",
    "EmptyTextError",
    "JsonLineError",
    "LabelValueError",
    "LabelledTable",
    "MissingColumnError",
    "RaggedRowError",
    "TableEncodingError",
    "TableFormatError",
    "UnknownLabelError",
    "encode_labels",
    "label_targets",
    "label_to_id",
    "label_vocabulary",
    "read_table",
    "table_format",
]
