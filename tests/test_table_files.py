"""keras_bert_impl.tasks.classification.table_files on real GLUE and bad-input files, and every error case.

Each error test checks that the message is one line naming the file, the line and the column.
"""

import csv
import json

import numpy as np
import pytest

from keras_bert_impl.tasks.classification import table_files as tf_
from keras_bert_impl.tasks.classification.evaluation import classification_scores, regression_scores, score_outputs
from keras_bert_impl.tasks.classification.table_files import (
    EmptyTableError,
    EmptyTextError,
    JsonLineError,
    LabelValueError,
    MissingColumnError,
    RaggedRowError,
    TableEncodingError,
    TableFormatError,
    UnknownLabelError,
    encode_labels,
    label_vocabulary,
    read_table,
)


def _glue_rows(path, limit=None):
    """Rows of a real GLUE TSV file as dicts (GLUE's files are unquoted)."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [row for _, row in zip(range(limit or 10**9), reader)]


def _write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def sst2_csv(shared_data, tmp_path):
    """The first 20 rows of the real SST-2 training file as CSV with columns text,label."""
    rows = _glue_rows(shared_data / "glue" / "SST-2" / "train.tsv", 20)
    return _write_csv(tmp_path / "train.csv", ["text", "label"], [[r["sentence"], r["label"]] for r in rows]), rows


def _raises(error_class, call, path, line, column):
    """Runs `call`, checks the error's class and that its one-line message names file, line and column."""
    with pytest.raises(error_class) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TableFormatError)
    assert "\n" not in message and "\r" not in message
    assert str(path) in message, message
    assert f"line {line}," in message or f"line {line}:" in message, message
    column_text = f"column {column!r}" if isinstance(column, str) else f"column {column}"
    assert column_text in message, message
    assert (info.value.line, info.value.column) == (line, column)
    return message


# === Reading real files ===


def test_sst2_csv_keeps_texts_labels_and_lines(sst2_csv):
    path, rows = sst2_csv
    table = read_table(path, text_column="text", label_column="label")
    assert table.texts == [r["sentence"] for r in rows]  # GLUE's trailing spaces kept
    assert table.texts[0] == "hide new secretions from the parental units "
    assert table.labels == [r["label"] for r in rows] and table.text_pairs is None
    assert table.line_numbers == list(range(2, 22)) and len(table) == 20
    assert label_vocabulary(table) == ["0", "1"]
    assert encode_labels(table, ["0", "1"]).tolist() == [int(r["label"]) for r in rows]
    assert table.inputs is table.texts and table.head(5).texts == table.texts[:5]
    assert table.head(5).line_numbers == [2, 3, 4, 5, 6] and table.head(None) is table


def test_reads_glue_tsv_files_directly(shared_data):
    dev = read_table(shared_data / "glue" / "SST-2" / "dev.tsv", "sentence", "label")
    assert len(dev) == 872 and label_vocabulary(dev) == ["0", "1"]
    sts = read_table(shared_data / "glue" / "STS-B" / "train.tsv", "sentence1", "score",
                     text_pair_column="sentence2", regression=True)
    reference = _glue_rows(shared_data / "glue" / "STS-B" / "train.tsv")
    assert len(sts) == 5749 == len(reference)
    assert sts.labels[:2] == [5.0, 3.8] and all(0.0 <= s <= 5.0 for s in sts.labels)
    assert sts.text_pairs == [r["sentence2"] for r in reference]  # quotes inside TSV texts are text
    assert sts.inputs == (sts.texts, sts.text_pairs)
    with pytest.raises(ValueError, match="regression scores"):
        label_vocabulary(sts)


def test_stsb_as_json_lines(shared_data, tmp_path):
    rows = _glue_rows(shared_data / "glue" / "STS-B" / "dev.tsv", 10)
    path = tmp_path / "dev.jsonl"
    path.write_text("".join(json.dumps({"a": r["sentence1"], "b": r["sentence2"], "score": float(r["score"])}) + "\n"
                            for r in rows) + "\n", encoding="utf-8")
    table = read_table(path, "a", "score", text_pair_column="b", regression=True)
    assert table.texts == [r["sentence1"] for r in rows] and table.text_pairs == [r["sentence2"] for r in rows]
    assert table.labels == [float(r["score"]) for r in rows] and table.line_numbers == list(range(1, 11))
    # A test file: no label column needed.
    assert read_table(path, "a", text_pair_column="b", file_format="json").labels is None


def test_csv_quoted_multiline_field_and_bom(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes('\ufefftext,label\n"two\nlines, with a comma",pos\n\nnext one,neg\n'.encode("utf-8"))
    table = read_table(path, "text", "label")
    assert table.texts == ["two\nlines, with a comma", "next one"]
    assert table.line_numbers == [2, 5]


def test_json_labels_become_strings_and_vocabulary_sorts_numbers(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"t": "a", "y": 10}\n{"t": "b", "y": 2}\n{"t": "c", "y": "2"}\n{"t": "d", "y": true}\n')
    table = read_table(path, "t", "y")
    assert table.labels == ["10", "2", "2", "true"]
    assert label_vocabulary(table) == ["10", "2", "true"]
    assert label_vocabulary(table.head(3)) == ["2", "10"]


def test_table_format():
    assert tf_.table_format("a.CSV") == "csv" and tf_.table_format("a.ndjson") == "jsonl"
    assert tf_.table_format("a.data", "TSV") == "tsv"
    with pytest.raises(ValueError, match="Unknown file_format"):
        tf_.table_format("a.csv", "xlsx")
    with pytest.raises(TableFormatError, match=r"a\.txt: cannot tell the format from the extension '\.txt'"):
        tf_.table_format("a.txt")


# === Errors ===


def test_missing_column_names_the_existing_columns(sst2_csv):
    path, _ = sst2_csv
    message = _raises(MissingColumnError, lambda: read_table(path, "sentence", "label"), path, 1, "sentence")
    assert "the columns are 'text', 'label'" in message
    _raises(MissingColumnError, lambda: read_table(path, "text", "label", text_pair_column="hypothesis"),
            path, 1, "hypothesis")


def test_a_csv_separated_by_semicolons_or_tabs_reads_as_excel_wrote_it(sst2_csv, tmp_path):
    """Excel where the decimal mark is a comma (most of Europe) saves "CSV" separated by semicolons, quoting the
    fields that hold one; other tools save tabs under a .csv name. Their header names the columns only when split
    on that delimiter: the file reads that way, row for row as the comma-separated one."""
    path, _ = sst2_csv
    commas = read_table(path, "text", "label")
    for name, delimiter in (("excel_fr.csv", ";"), ("tabs.csv", "\t")):
        other = tmp_path / name
        with open(path, encoding="utf-8", newline="") as f, open(other, "w", encoding="utf-8", newline="") as out:
            rows = list(csv.reader(f))
            rows[3][0] = f"a text{delimiter} quoted as Excel quotes it"
            csv.writer(out, delimiter=delimiter).writerows(rows)
        table = read_table(other, "text", "label")
        assert table.labels == commas.labels and table.texts[:2] == commas.texts[:2]
        assert table.texts[2] == f"a text{delimiter} quoted as Excel quotes it" and table.line_numbers[-1] == 21


def test_a_whole_book_in_one_field_reads(shared_data, tmp_path):
    """A text of a whole document (here a public-domain novel of ../shared/data, far over the csv module's default
    131,072-character field limit, which refused it as 'malformed CSV: field larger than field limit') reads whole,
    quoted in a CSV and unquoted in a TSV."""
    book = sorted((shared_data / "corpus" / "gutenberg").glob("*.txt"))[0].read_text(encoding="utf-8")
    assert len(book) > 131_072
    path = _write_csv(tmp_path / "books.csv", ["text", "label"], [[book, "novel"], ["a short note", "note"]])
    assert read_table(path, "text", "label").texts == [book, "a short note"]
    flat = " ".join(book.split())  # a TSV field holds no tab or line break
    tsv = tmp_path / "books.tsv"
    tsv.write_text(f"text\tlabel\n{flat}\tnovel\n", encoding="utf-8")
    assert read_table(tsv, "text", "label").texts == [flat]


def test_a_semicolon_csv_without_the_columns_names_the_columns_it_has(tmp_path):
    path = tmp_path / "excel_fr.csv"
    path.write_text("texte;étiquette\nun film superbe;positif\n", encoding="utf-8")
    assert _raises(MissingColumnError, lambda: read_table(path, "text", "label"), path, 1, "text") == (
        f"{path}, line 1, column 'text': no such column in the header; the header is one field, 'texte;étiquette'; "
        "split on ';' it names 'texte', 'étiquette'")
    path.write_text("text;label\nun film; superbe;positif\n", encoding="utf-8")  # a semicolon left unquoted
    assert _raises(RaggedRowError, lambda: read_table(path, "text", "label"), path, 2, 3) == (
        f"{path}, line 2, column 3: 3 fields where the header (line 1) has 2 (text, label); quote a text that holds "
        'semicolons, e.g. "a fine; moving film"')


def test_missing_key_on_a_json_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "fine", "label": "a"}\n{"text": "no label here"}\n')
    message = _raises(MissingColumnError, lambda: read_table(path, "text", "label"), path, 2, "label")
    assert "its keys are 'text'" in message


def test_empty_text(sst2_csv, tmp_path):
    path, rows = sst2_csv
    rows = [[r["sentence"], r["label"]] for r in rows]
    rows[6][0] = "   "
    bad = _write_csv(tmp_path / "blank.csv", ["text", "label"], rows)
    assert "the text is empty" in _raises(EmptyTextError, lambda: read_table(bad, "text", "label"), bad, 8, "text")
    null = tmp_path / "null.jsonl"
    null.write_text('{"a": "x", "b": "y", "y": 1}\n{"a": "x", "b": null, "y": 1}\n')
    _raises(EmptyTextError, lambda: read_table(null, "a", "y", text_pair_column="b"), null, 2, "b")
    number = tmp_path / "number.jsonl"
    number.write_text('{"a": 3, "y": 1}\n')
    assert "expected a text" in _raises(TableFormatError, lambda: read_table(number, "a", "y"), number, 1, "a")


def test_validation_label_not_in_training_labels(shared_data, sst2_csv, tmp_path):
    train_path, _ = sst2_csv
    vocabulary = label_vocabulary(read_table(train_path, "text", "label"))
    rows = [[r["sentence"], r["label"]] for r in _glue_rows(shared_data / "glue" / "SST-2" / "dev.tsv", 10)]
    rows[3][1] = "neutral"
    dev = _write_csv(tmp_path / "dev.csv", ["text", "label"], rows)
    message = _raises(UnknownLabelError, lambda: read_table(dev, "text", "label", known_labels=vocabulary),
                      dev, 5, "label")
    assert "label 'neutral' is not among the training labels ['0', '1']" in message
    # encode_labels gives the same error for a table read without known_labels.
    table = read_table(dev, "text", "label")
    _raises(UnknownLabelError, lambda: encode_labels(table, vocabulary), dev, 5, "label")


def test_non_numeric_and_non_finite_regression_labels(shared_data, tmp_path):
    lines = (shared_data / "glue" / "STS-B" / "train.tsv").read_text(encoding="utf-8").splitlines()[:12]
    fields = lines[9].split("\t")
    fields[-1] = "n/a"
    lines[9] = "\t".join(fields)
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    call = lambda: read_table(path, "sentence1", "score", text_pair_column="sentence2", regression=True)  # noqa: E731
    assert "regression label 'n/a' is not a number" in _raises(LabelValueError, call, path, 10, "score")
    fields[-1] = "nan"
    lines[9] = "\t".join(fields)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "not a finite number" in _raises(LabelValueError, call, path, 10, "score")
    # As classification the same column is fine: labels are names.
    assert "nan" in read_table(path, "sentence1", "score", text_pair_column="sentence2").labels


# The first invalid UTF-8 byte of each real Windows-1252 excerpt, from shared/data/bad_input/README.md.
BAD_INPUT_FIRST_INVALID = {
    "pg1342_cp1252_excerpt.txt": 1306,
    "pg2641_cp1252_excerpt.txt": 975,
    "pg2701_cp1252_excerpt.txt": 2000,
    "pg37106_cp1252_excerpt.txt": 298,
    "pg84_cp1252_excerpt.txt": 1570,
}


@pytest.mark.parametrize("name", sorted(BAD_INPUT_FIRST_INVALID))
def test_undecodable_byte_in_real_windows_1252_file(shared_data, name):
    path = shared_data / "bad_input" / name
    data = path.read_bytes()
    offset = BAD_INPUT_FIRST_INVALID[name]
    line = data[:offset].count(b"\n") + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    message = _raises(TableEncodingError, lambda: read_table(path, "text", "label", file_format="tsv"),
                      path, line, column)
    assert f"byte 0x{data[offset]:02x} at byte offset {offset} of the file is not valid UTF-8" in message
    assert "re-encode it as UTF-8" in message


def test_undecodable_byte_inside_a_csv_row(shared_data, sst2_csv, tmp_path):
    """A CSV whose 6th data row is a real Windows-1252 sentence (curly apostrophe 0x92)."""
    good, _ = sst2_csv
    raw = (shared_data / "bad_input" / "pg1342_cp1252_excerpt.txt").read_bytes()
    bad_line = raw.split(b"\r\n")[42]  # line 43 holds the byte at offset 1306
    assert b"\x92" in bad_line
    lines = good.read_bytes().split(b"\r\n")
    lines.insert(6, b'"' + bad_line.replace(b'"', b'""') + b'",1')
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"\r\n".join(lines))
    column = 1 + 1 + bad_line.index(b"\x92")  # after the opening quote
    offset = sum(len(l) + 2 for l in lines[:6]) + column - 1
    message = _raises(TableEncodingError, lambda: read_table(path, "text", "label"), path, 7, column)
    assert f"byte 0x92 at byte offset {offset}" in message and "Windows-1252" in message


def test_ragged_rows(sst2_csv, tmp_path):
    path, rows = sst2_csv
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[4] = "an unquoted text, with a comma,1"
    extra = tmp_path / "extra.csv"
    extra.write_text("\n".join(lines) + "\n", encoding="utf-8")
    message = _raises(RaggedRowError, lambda: read_table(extra, "text", "label"), extra, 5, 3)
    assert "3 fields where the header (line 1) has 2 (text, label)" in message and "quote a text" in message
    lines[4] = "a text without its label"
    short = tmp_path / "short.csv"
    short.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _raises(RaggedRowError, lambda: read_table(short, "text", "label"), short, 5, "label")
    tsv = tmp_path / "short.tsv"
    tsv.write_text("sentence\tlabel\nfine\t1\ncut short\n", encoding="utf-8")
    assert "1 fields where the header" in _raises(RaggedRowError, lambda: read_table(tsv, "sentence", "label"),
                                                   tsv, 3, "label")
    # A text with a quoted line break, as a CSV holds it: a TSV is unquoted, so that is two short rows.
    tsv.write_text('sentence\tlabel\nfine\t1\n"two\nlines"\t1\n', encoding="utf-8")
    assert _raises(RaggedRowError, lambda: read_table(tsv, "sentence", "label"), tsv, 3, "label") == (
        f"{tsv}, line 3, column 'label': 1 fields where the header (line 1) has 2 (sentence, label); a TSV field "
        "cannot hold a line break either: a text that spans lines needs a .csv, quoted")


def test_unterminated_quote(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('text,label\nok,1\n"never closed,1\nmore,0\n', encoding="utf-8")
    with pytest.raises(TableFormatError, match=r"t\.csv, line 3: malformed CSV"):
        read_table(path, "text", "label")


def test_invalid_json_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "ok", "label": 1}\n\n{"text": "broken" "label": 0}\n', encoding="utf-8")
    message = _raises(JsonLineError, lambda: read_table(path, "text", "label"), path, 3, 19)
    assert "invalid JSON: Expecting ',' delimiter" in message
    path.write_text('{"text": "ok", "label": 1}\n["text", 0]\n', encoding="utf-8")
    assert "expected a JSON object per line, got a JSON list" in _raises(
        JsonLineError, lambda: read_table(path, "text", "label"), path, 2, 1)



def test_a_json_array_of_objects_reads_as_its_json_lines(sst2_csv, tmp_path):
    """pandas' `to_json(orient="records")` (and many an export) writes one JSON array of objects, which Hugging Face
    `datasets` reads as JSON too: it reads row for row as the same rows in JSON Lines, each row's line where its
    object starts (was refused: 'expected JSON Lines ..., this looks like a JSON array')."""
    path, rows = sst2_csv
    records = [{"text": r["sentence"], "label": int(r["label"])} for r in rows]
    lines, array = tmp_path / "train.jsonl", tmp_path / "train.json"
    lines.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    array.write_text(json.dumps(records, indent=2), encoding="utf-8")  # each object over 4 lines, after "[" alone
    from_lines, from_array = read_table(lines, "text", "label"), read_table(array, "text", "label")
    assert (from_array.texts, from_array.labels) == (from_lines.texts, from_lines.labels) and len(from_array) == 20
    assert from_array.line_numbers == [2 + 4 * i for i in range(20)]


@pytest.mark.parametrize("content, line, column, problem", [
    ('[\n {"text": "a", "label": 1},\n {"text": "b" "label": 0}\n]\n', 3, 15, "invalid JSON: Expecting ',' delimiter"),
    ('[\n {"text": "a", "label": 1},\n "b"\n]\n', 3, 2, "expected a JSON object in the array, got a JSON str"),
    ('[\n {"text": "a", "label": 1}\n]\n[]\n', 4, 1,
     "invalid JSON: more after the array's closing ']' (a file holds one array, or one object per line)"),
    ('[\n {"text": "a", "label": 1}\n {"text": "b", "label": 0}\n]', 3, 2,
     "invalid JSON: expected ',' or ']' after an element of the array"),
    ('[\n {"text": "a", "label": 1},\n {"txt": "b", "label": 0}\n]', 3, "text",
     "no such key in this object of the array; its keys are 'txt', 'label'"),
])
def test_a_broken_json_array_names_line_and_column(tmp_path, content, line, column, problem):
    path = tmp_path / "t.json"
    path.write_text(content, encoding="utf-8")
    error = MissingColumnError if column == "text" else JsonLineError
    assert _raises(error, lambda: read_table(path, "text", "label"), path, line, column).endswith(problem)


@pytest.mark.parametrize("name, content, line", [
    ("empty.csv", "", 1),
    ("blank.tsv", "\n  \n", 1),
    ("header_only.csv", "text,label\n", 1),
    ("header_only_late.csv", "\n\ntext,label\n\n", 3),
    ("empty.jsonl", "\n", 1),
    ("empty_array.json", " [ ]\n", 1),
])
def test_empty_file_or_header_only(tmp_path, name, content, line):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EmptyTableError) as info:
        read_table(path, "text", "label")
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}: ") and "\n" not in message
    assert ("header but no examples" in message) == ("header_only" in name)


def test_duplicate_header_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("text,label,text\na,1,b\n", encoding="utf-8")
    _raises(TableFormatError, lambda: read_table(path, "text", "label"), path, 1, "text")


# === Scores ===


def test_classification_scores_macro_f1():
    labels, predictions = [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]
    scores = classification_scores(labels, predictions)
    # per class F1: 0 -> 0.5, 1 -> 0.8, 2 -> 2/3
    assert scores["accuracy"] == pytest.approx(4 / 6)
    assert scores["macro_f1"] == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)


def test_regression_and_output_scores():
    scores = regression_scores([0.0, 1.0, 2.0, 3.0], [0.1, 0.9, 2.5, 2.4])
    assert scores["pearson"] == pytest.approx(np.corrcoef([0, 1, 2, 3], [0.1, 0.9, 2.5, 2.4])[0, 1])
    assert scores["spearman"] == pytest.approx(0.8)
    table = tf_.LabelledTable("dev.tsv", ["a", "b", "c"], None, [1.0, 2.0, 3.0], [2, 3, 4], "score", regression=True)
    assert score_outputs(table, np.array([[1.0], [2.0], [4.0]]))["spearman"] == 1.0
    assert tf_.label_targets(table).dtype == np.float32


# The classifier recipe has no format flag: the advice for an unknown extension names none.
@pytest.mark.parametrize("name, problem", [
    ("train.csv.gz", "it is gzip-compressed ('.gz'), and tables are read as plain .csv, .tsv or .jsonl files: "
                     "decompress it first, e.g. gunzip -c train.csv.gz > train.csv"),
    ("fake.xlsx", "it is a spreadsheet ('.xlsx'), and tables are read as .csv, .tsv or .jsonl text files: save the "
                  "sheet as CSV UTF-8 (File > Save As) and pass that file"),
    ("a.txt", "cannot tell the format from the extension '.txt': name the file .csv, .tsv or .jsonl after the "
              "format it holds"),
])
def test_unknown_extension_advice_names_no_format_flag(tmp_path, name, problem):
    path = tmp_path / name
    path.write_bytes(b"text,label\nhi,a\n")
    with pytest.raises(TableFormatError) as raised:
        read_table(path, "text", "label")
    assert str(raised.value) == f"{path}: {problem}"


# UTF-16 and gzip were diagnosed as Windows-1252, with an iconv command that made garbage of them.
@pytest.mark.parametrize("encoding, marks", [("utf-16-le", "0xff 0xfe"), ("utf-16-be", "0xfe 0xff")])
def test_utf16_table_is_named_with_the_iconv_that_reads_it(tmp_path, encoding, marks):
    path = tmp_path / "utf16.tsv"
    path.write_bytes("\ufefftext\tlabel\nhi\ta\n".encode(encoding))
    with pytest.raises(TableFormatError) as raised:
        read_table(path, "text", "label")
    assert str(raised.value) == (f"{path}: the file is UTF-16 (it starts with the byte-order mark {marks}), not "
                                 "UTF-8: re-encode it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8 utf16.tsv > "
                                 "utf8_utf16.tsv")


def test_gzip_file_under_a_table_name_is_named_as_gzip(tmp_path):
    import gzip

    from keras_bert_impl.file_errors import decode_utf8

    path = tmp_path / "train.csv"
    path.write_bytes(gzip.compress(b"text,label\nhi,a\n"))
    with pytest.raises(TableFormatError) as raised:
        read_table(path, "text", "label")
    assert str(raised.value) == (f"{path}: the file is gzip-compressed (it starts with the bytes 0x1f 0x8b), not "
                                 "text: decompress it first, e.g. gunzip -c train.csv > unzipped_train.csv")
    with pytest.raises(ValueError) as raised:  # a reader that decompresses .gz files says so
        decode_utf8(path.read_bytes(), "train.json", reads_gz=True, advice=", or prepare it with ...")
    assert str(raised.value) == ("train.json: the file is gzip-compressed (it starts with the bytes 0x1f 0x8b), not "
                                 "text: decompress it first, e.g. gunzip -c train.json > unzipped_train.json, or "
                                 "name it train.json.gz (this reader decompresses .gz files itself)")
