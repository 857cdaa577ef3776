"""The rows of a table file's text: CSV and TSV (`delimited_rows`) and JSON Lines or one JSON array (`json_rows`).

Both give `(line, {column: value})` for each row, after checking that the header (or each object) has the columns
asked for; what a cell must hold is `table_files.read_table`'s to check. A `.csv` separated by semicolons, tabs or
bars is read that way when its header names the columns only so (`csv_delimiter`).

Example:
>>> delimited_rows("reviews.csv", 'text,label\\n"a fine, moving film",positive\\n', "csv", ["text", "label"])
[(2, {'text': 'a fine, moving film', 'label': 'positive'})]
>>> json_rows("reviews.jsonl", '{"text": "dull", "label": "negative"}\\n', ["text"])
[(1, {'text': 'dull'})]
"""

import csv
import io
import json

from keras_bert_impl.tasks.classification.table_errors import (
    EmptyTableError,
    JsonLineError,
    MissingColumnError,
    RaggedRowError,
    TableFormatError,
)

_FIELD_SIZE_LIMIT = 2**31 - 1  # the largest a C long holds on every platform (Windows: 32 bits)


def delimited_rows(path, text, fmt, columns):
    """Yields `(line, {column: value})` for each non-blank row, after checking the header and the row's width."""
    if not text.strip():
        raise EmptyTableError(path, 1, None, "the file is empty: expected a header line naming the columns")
    # A text may be a whole document: the csv module refuses a field over 131,072 characters by default ("field
    # larger than field limit"); the model reads its first tokens anyway. (Raised for the process, never lowered.)
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_SIZE_LIMIT))
    if fmt == "tsv":
        delimiter = "\t"
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=True)
    else:
        delimiter = csv_delimiter(text, columns)
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header, header_line = None, 1
    previous = 0
    rows = []
    try:
        for row in reader:
            line = previous + 1
            previous = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if header is None:
                header, header_line = [name.strip() for name in row], line
                _check_header(path, header_line, header, columns)
                index = {name: header.index(name) for name in columns}
                continue
            if len(row) != len(header):
                # The first column without a field, or the position of the first field beyond the header.
                column = header[len(row)] if len(row) < len(header) else len(header) + 1
                raise RaggedRowError(
                    path, line, column,
                    f"{len(row)} fields where the header (line {header_line}) has {len(header)} "
                    f"({', '.join(header)})" + _ragged_hint(fmt, len(row), len(header), delimiter),
                )
            rows.append((line, {name: row[i] for name, i in index.items()}))
    except csv.Error as error:
        raise TableFormatError(path, previous + 1, None, f"malformed {fmt.upper()}: {error}") from None
    if header is None:
        raise EmptyTableError(path, 1, None, "the file is empty: expected a header line naming the columns")
    if not rows:
        raise EmptyTableError(path, header_line, None, "no data rows: the file has a header but no examples")
    return rows


# What a ".csv" may be separated by besides commas: semicolons (Excel where the decimal mark is a comma: most of
# Europe), tabs and bars (other tools' exports under a .csv name).
OTHER_CSV_DELIMITERS = (";", "\t", "|")


def csv_delimiter(text, columns):
    """The delimiter of a `.csv` file's `text`: a comma, unless the header names the `columns` only when split on
    another of `OTHER_CSV_DELIMITERS` (a file that reads with commas reads as it always did).

    >>> csv_delimiter("text;label\\nbon film;positif\\n", ["text", "label"])
    ';'
    >>> csv_delimiter("text,label\\ngood;fine,positive\\n", ["text", "label"]), csv_delimiter("a;b\\n", ["text"])
    (',', ',')
    """
    header = _header_line(text)
    if all(name in _split_header(header, ",") for name in columns):
        return ","
    for delimiter in OTHER_CSV_DELIMITERS:
        if all(name in _split_header(header, delimiter) for name in columns):
            return delimiter
    return ","


def _header_line(text):
    """The first non-blank line of `text`, found without splitting the whole file into lines."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end].rstrip("\r")
        start = end + 1
    return ""


def _split_header(line, delimiter):
    try:
        return [name.strip() for name in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        return []


def _ragged_hint(fmt, got, expected, delimiter=","):
    if fmt == "csv" and got > expected:
        held = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "bars"}[delimiter]
        return f'; quote a text that holds {held}, e.g. "a fine{delimiter} moving film"'
    if fmt == "tsv" and got > expected:
        return "; a TSV field cannot hold a tab"
    if fmt == "tsv":  # (a quoted text with a line break, as a CSV holds it, read as two short rows)
        return "; a TSV field cannot hold a line break either: a text that spans lines needs a .csv, quoted"
    return ""


def _check_header(path, line, header, columns):
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise TableFormatError(path, line, duplicates[0], f"the header names the column {duplicates[0]!r} twice")
    for name in columns:
        if name not in header:
            raise MissingColumnError(path, line, name, "no such column in the header; " + _columns_phrase(header))


def _columns_phrase(header):
    """`the columns are 'a', 'b'`, or for a header of one field that another delimiter splits (a file separated
    by semicolons, say), the columns it names that way: `the header is one field, 'a;b'; split on ';' it names ...`.
    """
    if len(header) == 1:
        for delimiter in (",", *OTHER_CSV_DELIMITERS):  # (a .tsv file of commas too)
            names = _split_header(header[0], delimiter)
            if len(names) > 1:
                shown = {"\t": "tabs"}.get(delimiter, repr(delimiter))
                return (f"the header is one field, {header[0]!r}; split on {shown} it names "
                        f"{', '.join(map(repr, names))}")
    return f"the columns are {', '.join(map(repr, header))}"


def json_rows(path, text, columns):
    """`(line, {column: value})` of each object: of each line (JSON Lines), or of each element of a file that is one
    JSON array of objects (pandas' `to_json(orient="records")`, what Hugging Face `datasets` reads as JSON too)."""
    in_array = text.lstrip().startswith("[")
    records = _json_array_records(path, text) if in_array else _json_line_records(path, text)
    where = "in the array" if in_array else "per line"
    rows = []
    for line, column, record in records:
        if not isinstance(record, dict):
            raise JsonLineError(path, line, column, f"expected a JSON object {where}, got a JSON "
                                                    f"{type(record).__name__}")
        for name in columns:
            if name not in record:
                owner = "this object of the array" if in_array else "this line's object"
                raise MissingColumnError(path, line, name,
                                         f"no such key in {owner}; its keys are {', '.join(map(repr, record))}")
        rows.append((line, {name: record[name] for name in columns}))
    if not rows:
        problem = ("an empty JSON array: expected one JSON object per example" if in_array
                   else "the file is empty: expected one JSON object per line")
        raise EmptyTableError(path, 1, None, problem)
    return rows


def _json_line_records(path, text):
    """Yields `(line, column, value)` of each non-blank line of a JSON Lines file."""
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as error:
            raise JsonLineError(path, line, error.colno, f"invalid JSON: {error.msg}") from None
        yield line, len(raw) - len(raw.lstrip()) + 1, record


def _json_array_records(path, text):
    """Yields `(line, column, value)` of each element of a file that holds one JSON array, where each starts."""
    decoder, position = json.JSONDecoder(), text.index("[") + 1

    def skip_space(at):
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        return at

    counted = {"offset": 0, "lines": 0}  # newlines before `offset`: each element's line counts on from the last

    def place(at):  # (line, column) of a character offset at or after the last one asked
        counted["lines"] += text.count("\n", counted["offset"], at)
        counted["offset"] = at
        return counted["lines"] + 1, at - (text.rfind("\n", 0, at) + 1) + 1

    position = skip_space(position)
    if text.startswith("]", position):
        position = skip_space(position + 1)
    else:
        while True:
            try:
                record, end = decoder.raw_decode(text, position)
            except json.JSONDecodeError as error:
                raise JsonLineError(path, error.lineno, error.colno, f"invalid JSON: {error.msg}") from None
            yield (*place(position), record)
            position = skip_space(end)
            if text.startswith(",", position):
                position = skip_space(position + 1)
            elif text.startswith("]", position):
                position = skip_space(position + 1)
                break
            else:
                line, column = place(position)
                raise JsonLineError(path, line, column, "invalid JSON: expected ',' or ']' after an element of the "
                                                        "array")
    if position < len(text):
        line, column = place(position)
        raise JsonLineError(path, line, column, "invalid JSON: more after the array's closing ']' (a file holds one "
                                                "array, or one object per line)")
