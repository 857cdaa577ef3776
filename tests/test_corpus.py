"""Tests of corpus preparation on real Project Gutenberg books (../shared/data/corpus/gutenberg)."""

import json
import os
import pathlib
import re
import runpy
import shutil
import sys

import pytest

from keras_bert_impl.data import corpus
from keras_bert_impl.file_patterns import expand_patterns

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def books(real_data):
    return real_data / "corpus" / "gutenberg"


@pytest.fixture(scope="module")
def frankenstein(books):
    return corpus.file_documents(books / "pg84.txt")


def test_frankenstein_letters_and_chapters_become_documents(frankenstein):
    # 4 letters + 24 chapters
    assert len(frankenstein) == 28
    assert frankenstein[0][:2] == ["To Mrs. Saville, England.", "St. Petersburgh, Dec. 11th, 17—."]
    assert frankenstein[0][2] == (
        "You will rejoice to hear that no disaster has accompanied the commencement of an enterprise "
        "which you have regarded with such evil forebodings."
    )  # three hard-wrapped lines joined
    assert frankenstein[-1][-1] == "He was soon borne away by the waves and lost in darkness and distance."


def test_boilerplate_headings_and_contents_are_dropped(frankenstein, books):
    sentences = [s for d in frankenstein for s in d]
    assert not any("gutenberg" in s.lower() for s in sentences)
    assert not any(re.fullmatch(r"(Letter|Chapter) \d+", s) for s in sentences)
    assert "CONTENTS" not in sentences
    tale = corpus.file_documents(books / "98-0.txt")
    assert len(tale) == 45  # 6 + 24 + 15 chapters; table of contents and book titles dropped
    assert tale[0][0].startswith("It was the best of times, it was the worst of times")
    assert tale[-1][-1].startswith("“It is a far, far better thing that I do")


def test_chapter_heading_inside_illustration(books):
    # Pride and Prejudice's "Chapter I." is the last line of an [Illustration: ...] block
    documents = corpus.file_documents(books / "pg1342.txt")
    assert len(documents) == 62  # the preface + 61 chapters
    assert documents[1][0] == (
        "It is a truth universally acknowledged, that a single man in possession of a good fortune "
        "must be in want of a wife."
    )
    assert documents[2][0] == "Mr. Bennet was among the earliest of those who waited on Mr. Bingley."


@pytest.mark.parametrize(
    "book, count",
    [("158-0.txt", 55), ("1400-0.txt", 59), ("2554-0.txt", 42), ("4300-0.txt", 18)],
    ids=["emma", "great_expectations", "crime_and_punishment", "ulysses"],
)
def test_other_heading_styles(books, book, count):
    documents = corpus.file_documents(books / book)
    assert count <= len(documents) <= count + 2  # a front-matter or closing document may remain
    words = sum(len(s.split()) for d in documents for s in d)
    raw_words = len((books / book).read_text(encoding="utf-8-sig").split())
    assert 0.9 * raw_words < words < raw_words  # the book is kept, the boilerplate is not


def test_sentence_splitter_on_real_prose():
    paragraph = (
        "“My dear Mr. Bennet,” said his lady to him one day, “have you heard that\n"
        "Netherfield Park is let at last?”"
    )
    assert corpus.split_sentences(paragraph) == [
        "“My dear Mr. Bennet,” said his lady to him one day, “have you heard that Netherfield Park is let at last?”"
    ]
    assert corpus.split_sentences(
        "“Tell us your name!” said the man. “Quick!” “Pip, sir.” Dr. Manette and St. Antoine. "
        "A Room with a View, by E. M. Forster. Wait... I see."
    ) == [
        "“Tell us your name!” said the man.",
        "“Quick!”",
        "“Pip, sir.”",
        "Dr. Manette and St. Antoine.",
        "A Room with a View, by E. M. Forster.",
        "Wait...",
        "I see.",
    ]
    assert corpus.split_sentences("—Introibo ad altare Dei. —Come up, Kinch! Come up, you fearful jesuit!") == [
        "—Introibo ad altare Dei.",
        "—Come up, Kinch!",
        "Come up, you fearful jesuit!",
    ]


def test_long_unpunctuated_passages_are_cut(books):
    ulysses = corpus.file_documents(books / "4300-0.txt", max_sentence_words=50)
    lengths = [len(s.split()) for d in ulysses for s in d]
    assert max(lengths) == 50
    whole = corpus.file_documents(books / "4300-0.txt", max_sentence_words=None)
    assert max(len(s.split()) for d in whole for s in d) > 1000  # Molly Bloom's soliloquy


def test_paragraph_a_line_input_is_only_sentence_split(frankenstein, books, tmp_path):
    # Frankenstein's first letter, its hard-wrapped paragraphs put one a line
    # (italics underscores dropped, as the Gutenberg reader drops them).
    text = corpus.strip_gutenberg_boilerplate(corpus.read_text(books / "pg84.txt"))
    letter = text[text.index("\nLetter 1\n") + 10 : text.index("\nLetter 2\n")]
    paragraphs = [" ".join(block.replace("_", "").split()) for block in re.split(r"\n\s*\n", letter)]
    path = tmp_path / "lines.txt"
    path.write_text("\n".join(p for p in paragraphs if p) + "\n\nA second document.\n", encoding="utf-8")
    assert corpus.file_documents(path) == [frankenstein[0], ["A second document."]]


def test_fallback_fixed_size_documents(books, tmp_path):
    text = corpus.strip_gutenberg_boilerplate(corpus.read_text(books / "pg84.txt"))
    without_headings = "\n".join(
        line for line in text.split("\n") if not re.fullmatch(r"\s*(Letter|Chapter) \d+\s*", line)
    )
    documents = corpus.book_documents(without_headings, fallback_document_words=5000)
    words = [sum(len(s.split()) for s in d) for d in documents]
    assert len(documents) == pytest.approx(sum(words) / 5000, abs=2)
    assert all(w >= 5000 for w in words[:-1]) and max(words) < 7000


def test_old_gutenberg_markers(books):
    text = corpus.read_text(books / "pg84.txt")
    old = re.sub(r"\*\*\* START OF THE PROJECT GUTENBERG EBOOK[^\n]*", "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*", text)
    old = re.sub(r"\s*\*\*\* END OF THE PROJECT GUTENBERG EBOOK[^\n]*", "\nEnd of the Project Gutenberg EBook of Frankenstein", old)
    assert old != text
    assert corpus.book_documents(corpus.strip_gutenberg_boilerplate(old)) == corpus.book_documents(
        corpus.strip_gutenberg_boilerplate(text)
    )


def test_invalid_utf8_names_file_and_line(real_data):
    path = real_data / "bad_input" / "pg84_cp1252_excerpt.txt"
    line = path.read_bytes().count(b"\n", 0, 1570) + 1  # first invalid byte at 1570 (its README)
    with pytest.raises(ValueError, match=re.escape(
            f"{path}, line {line}, column 17: byte 0x97 at byte offset 1570 of the file is not valid UTF-8; the file "
            "looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
            "pg84_cp1252_excerpt.txt > utf8_pg84_cp1252_excerpt.txt, or pass errors='replace' (--errors replace)")):
        corpus.file_documents(path)
    documents = corpus.file_documents(path, errors="replace", input_format="wrapped", min_document_words=1)
    assert any("\ufffd" in s for d in documents for s in d)


def test_bad_inputs(tmp_path, books):
    with pytest.raises(ValueError, match=r"no file matches '.*no-such-\*\.txt'"):
        corpus.prepare_corpus(str(tmp_path / "no-such-*.txt"), tmp_path / "out.txt")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.txt: no text found"):
        corpus.file_documents(empty)
    with pytest.raises(ValueError, match=r"no Project Gutenberg start marker"):
        corpus.file_documents(empty, input_format="gutenberg")
    with pytest.raises(ValueError, match=r"input_format must be one of"):
        corpus.file_documents(books / "pg84.txt", input_format="pdf")
    with pytest.raises(ValueError, match=r"valid_every must be an integer >= 2"):
        corpus.prepare_corpus(str(books / "pg84.txt"), tmp_path / "t.txt", valid_output=tmp_path / "v.txt")


def test_prepare_corpus_writes_atomically_and_counts(books, tmp_path):
    out, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    stats = corpus.prepare_corpus(
        [str(books / "pg84.txt"), str(books / "pg2641.txt")], out, valid_output=valid, valid_every=5
    )
    assert sorted(os.listdir(tmp_path)) == ["train.txt", "valid.txt"]  # no temporary file left
    for path, counts in ((out, stats["train"]), (valid, stats["valid"])):
        text = path.read_text(encoding="utf-8")
        documents = [d.split("\n") for d in text.strip("\n").split("\n\n")]
        assert counts.documents == len(documents)
        assert counts.sentences == sum(len(d) for d in documents)
        assert counts.words == len(text.split())
        assert all(s.strip() == s and s for d in documents for s in d)
    assert stats["valid"].documents == (28 + 22) // 5


def test_an_input_named_with_glob_characters_is_read_as_named(books, tmp_path):
    # `notes[1].txt` as a pattern matches `notes1.txt` only: the file itself was "matches no file".
    named = tmp_path / "pg84[1].txt"
    shutil.copy(books / "pg84.txt", named)
    assert expand_patterns([str(named), str(books / "pg2641*.txt")]) == [str(named), str(books / "pg2641.txt")]
    stats = corpus.prepare_corpus(str(named), tmp_path / "out.txt")
    assert stats["train"].documents == len(corpus.file_documents(books / "pg84.txt"))


def run_recipe(monkeypatch, *args):
    monkeypatch.setattr(sys, "argv", ["prepare_corpus.py", *args])
    monkeypatch.syspath_prepend(str(REPO / "recipes"))  # (as `python recipes/prepare_corpus.py` puts it)
    runpy.run_path(str(REPO / "recipes" / "prepare_corpus.py"), run_name="__main__")


def test_recipe_prints_counts_and_reports_errors(books, tmp_path, real_data, monkeypatch, capsys):
    run_recipe(monkeypatch, "--input", str(books / "pg84.txt"), "--output", str(tmp_path / "out.txt"))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {
        "split": "train", **vars(corpus.CorpusStats().add(corpus.file_documents(books / "pg84.txt")))
    }
    bad = real_data / "bad_input" / "pg2641_cp1252_excerpt.txt"
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(monkeypatch, "--input", str(bad), "--output", str(tmp_path / "bad.txt"))
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"{bad}, line " in error and "is not valid UTF-8" in error
    assert not (tmp_path / "bad.txt").exists()


def test_bundled_corpus():
    paths = corpus.bundled_corpus()
    assert sorted(paths) == ["train", "valid", "vocab"]
    vocab = pathlib.Path(paths["vocab"]).read_text(encoding="utf-8").split("\n")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    readme = (pathlib.Path(paths["train"]).parent / "README.md").read_text(encoding="utf-8")
    for split in ("train", "valid"):
        text = pathlib.Path(paths[split]).read_text(encoding="utf-8")
        documents = text.strip("\n").split("\n\n")
        sentences = text.count("\n") - (len(documents) - 1)
        row = f"| `{split}.txt` | {len(documents)} | {sentences:,} | {len(text.split()):,} |"
        assert row in readme


def test_a_table_becomes_one_document_a_row_of_its_text_column_and_is_refused_as_text(data_slices, tmp_path,
                                                                                    monkeypatch, capsys):
    """Your own texts in a table (the STS-B training slice, 100 rows): read as plain text, its header, tabs, scores
    and file names would be pretrained on. `prepare_corpus.py` asks for `--text_column` and then writes each row's
    text as a document; `pretrain.py` refuses the table itself with that command."""
    from keras_bert_impl.data.pretraining import check_pretraining_files

    table = data_slices / "glue" / "STS-B" / "train.tsv"
    out = tmp_path / "train.txt"
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(monkeypatch, "--input", str(table), "--output", str(out))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (f"error: {table} is a table: pass --text_column, the column "
                                       "of its texts (each row becomes a document)\n")
    assert not out.exists()

    for flags, message in ((("--valid_output", str(tmp_path / "valid.txt")),
                            "--valid_output and --valid_every go together: --valid_output FILE --valid_every N holds "
                            "out every N-th document (N >= 2)"),
                           (("--valid_every", "5"), "--valid_output and --valid_every go together: --valid_output "
                            "FILE --valid_every N holds out every N-th document (N >= 2)"),
                           (("--text_column", "sentence1", "--errors", "replace"),
                            "--errors replace reads text inputs only; a table (--text_column) is read strictly: "
                            "re-encode it as UTF-8 (the error names the first byte that is not)")):
        with pytest.raises(SystemExit) as exit_info:
            run_recipe(monkeypatch, "--input", str(table), "--output", str(out), *flags)
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"error: {message} (see --help)"
    run_recipe(monkeypatch, "--input", str(table), "--text_column", "sentence1", "--output", str(out))
    rows = [line.split("\t")[7] for line in table.read_text(encoding="utf-8").splitlines()[1:]]
    documents = out.read_text(encoding="utf-8").rstrip("\n").split("\n\n")
    assert len(documents) == len(rows) == 100
    assert [" ".join(document.split("\n")) for document in documents] == [" ".join(row.split()) for row in rows]
    assert json.loads(capsys.readouterr().out) == {"split": "train", "documents": 100,
                                                   "sentences": sum(len(d.split("\n")) for d in documents),
                                                   "words": sum(len(row.split()) for row in rows)}
    assert check_pretraining_files(str(out)) == [str(out)]

    with pytest.raises(ValueError) as refused:
        check_pretraining_files(str(table))
    assert str(refused.value) == (
        f"{table}: a table (.tsv), not pretraining text (one sentence a line, a blank line between documents): "
        f"write its text column as such, each row a document, with python recipes/prepare_corpus.py --input {table} "
        "--text_column COLUMN --output train.txt")


def test_table_rows_without_text_are_skipped_and_counted_other_bad_rows_refused(data_slices, tmp_path, monkeypatch,
                                                                                capsys):
    """Scraped tables have rows without text: for pretraining such a row is no document, skipped and counted (before,
    one stopped the whole preparation), while a text that is not a string is still the reader's one-line error, and
    the fine-tuning reader still refuses an empty text."""
    import csv

    from keras_bert_impl.tasks.classification.table_files import EmptyTextError, read_table

    sts = (data_slices / "glue" / "STS-B" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:6]
    texts = [row.split("\t")[7] for row in sts]
    scores = [row.split("\t")[9] for row in sts]
    table = tmp_path / "reviews.csv"
    with open(table, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerows([["text", "score"], [texts[0], scores[0]], ["", scores[1]], [texts[1], scores[1]],
                          ["   ", scores[2]], [texts[2], scores[2]]])  # lines 1-6; no text on lines 3 and 5
    lines = tmp_path / "reviews.jsonl"
    lines.write_text("".join(json.dumps(record) + "\n" for record in (
        {"text": texts[3]}, {"text": None}, {"text": texts[4]})), encoding="utf-8")  # no text on line 2
    out = tmp_path / "train.txt"

    run_recipe(monkeypatch, "--input", str(table), str(lines), "--text_column", "text", "--output", str(out))
    documents = out.read_text(encoding="utf-8").rstrip("\n").split("\n\n")
    assert [" ".join(document.split("\n")) for document in documents] == [" ".join(text.split()) for text in texts]
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == [f"{table}: skipped 2 rows without text in column 'text' (the first: line 3)",
                           f"{lines}: skipped 1 row without text in column 'text' (the first: line 2)"]
    assert json.loads(printed[2])["documents"] == 5 and len(printed) == 3

    with pytest.raises(EmptyTextError) as refused:  # fine-tuning (the default) still refuses a row without text
        read_table(table, "text", "score", regression=True)
    assert str(refused.value) == f"{table}, line 3, column 'text': the text is empty"

    number = tmp_path / "numbers.jsonl"
    number.write_text(json.dumps({"text": texts[0]}) + "\n" + json.dumps({"text": 42}) + "\n", encoding="utf-8")
    empty = tmp_path / "empty.csv"
    empty.write_text("text,score\n," + scores[0] + "\n  ," + scores[1] + "\n", encoding="utf-8")
    for path, message in ((number, f"{number}, line 2, column 'text': expected a text (a string), got 42"),
                          (empty, f"{empty}: no row has text in column 'text' (all 2 rows are empty)"),
                          (table, f"{table}, line 1, column 'review': no such column in the header; the columns are "
                                  "'text', 'score'")):
        with pytest.raises(SystemExit) as exit_info:
            run_recipe(monkeypatch, "--input", str(path), "--text_column", "review" if path == table else "text",
                       "--output", str(tmp_path / "refused.txt"))
        assert exit_info.value.code == 2
        assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "refused.txt").exists()
