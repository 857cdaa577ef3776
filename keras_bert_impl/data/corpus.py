"""Corpus preparation: raw books and articles -> BERT's pretraining text format.

The pretraining format (the format of the original BERT data, read by
`keras_bert_impl.data.pretraining_dataset`) is UTF-8 text with one sentence a
line and a blank line between documents.

Two kinds of input are understood:

- `"gutenberg"`: a Project Gutenberg plain-text e-book. The license header and
  footer are stripped (`*** START OF ...` / `*** END OF ...` markers and the
  older `*END*THE SMALL PRINT!` / `End of the Project Gutenberg EBook` variants),
  illustrations and italics markers are removed, hard-wrapped lines are joined
  into paragraphs, every chapter becomes one document (headings such as
  `CHAPTER IV.`, `Chapter 4`, `BOOK ONE: 1805`, `Letter 1`, `IV. The Period`,
  a bare roman numeral or `[ 7 ]` start a new document and are dropped, as are
  tables of contents and all-capital title lines), and a book without chapter
  headings is cut into documents of about `fallback_document_words` words.
- `"wrapped"`: the same for hard-wrapped text without the Project Gutenberg
  boilerplate.
- `"lines"`: text that is already one paragraph a line, blank line between
  documents: paragraphs are only split into sentences.

`"auto"` (the default) picks `"gutenberg"` when the Project Gutenberg start
marker is present and `"lines"` otherwise.

Sentences are split by a rule-based splitter (`split_sentences`) that knows
titles and other abbreviations (Mr. Mrs. Dr. St. ...), initials (E. M.
Forster), closing quotes and brackets after the final punctuation, and
ellipses. A "sentence" longer than `max_sentence_words` words (Ulysses has
pages without a full stop) is cut into pieces of at most that many words.

Example:

```python
from keras_bert_impl.data import corpus

stats = corpus.prepare_corpus(
    ["../shared/data/corpus/gutenberg/pg84.txt"], "/tmp/frankenstein.txt"
)
print(stats)  # CorpusStats(documents=..., sentences=..., words=...)
print(corpus.split_sentences("Mr. Darcy smiled. “Is he?” she asked. Yes."))
```
"""

import dataclasses
import os
import pathlib
import tempfile

from keras_bert_impl.data.book_text import (  # noqa: F401 (part of this module's API)
    BLANK_LINES,
    GUTENBERG_START_MARKERS,
    book_documents,
    strip_gutenberg_boilerplate,
)
from keras_bert_impl.data.sentence_splitting import ABBREVIATIONS, split_sentences  # noqa: F401
from keras_bert_impl.file_errors import decode_utf8
from keras_bert_impl.file_patterns import expand_patterns

INPUT_FORMATS = ("auto", "gutenberg", "wrapped", "lines")


@dataclasses.dataclass
class CorpusStats:
    """Counts of what was written: documents, sentences (lines) and words.

    Words are whitespace-separated tokens of the written sentences.
    """

    documents: int = 0
    sentences: int = 0
    words: int = 0

    def add(self, documents):
        for document in documents:
            self.documents += 1
            self.sentences += len(document)
            self.words += sum(len(sentence.split()) for sentence in document)
        return self


def read_text(path, errors="strict"):
    """Reads a UTF-8 text file, with an error naming the file and line on bad bytes.

    A leading byte-order mark is dropped and CRLF / CR line ends become LF.

    Args:
        path: the file to read.
        errors: `"strict"` (raise on bytes that are not UTF-8) or `"replace"`
            (replace them with U+FFFD).

    Returns:
        The decoded text.

    Raises:
        FileFormatError (a ValueError): the file is not valid UTF-8 (with
            `errors="strict"`): `keras_bert_impl.file_errors.decode_utf8`
            names the file, the line, the column and the byte offset.

    Example:

    >>> text = read_text("../shared/data/corpus/gutenberg/pg84.txt")  # doctest: +SKIP
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    data = pathlib.Path(path).read_bytes()
    if errors == "strict":
        text = decode_utf8(data, path, advice=", or pass errors='replace' (--errors replace)")
    else:
        text = data.decode("utf-8", errors=errors)
        if text.startswith("\ufeff"):
            text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def line_documents(text, *, max_sentence_words=128):
    """Sentence-splits text that is one paragraph a line, blank line between documents.

    Args:
        text: the text.
        max_sentence_words: see `split_sentences`.

    Returns:
        A list of documents, each a list of sentences.

    Example:

    >>> line_documents("One. Two.\\nThree.\\n\\nFour.")
    [['One.', 'Two.', 'Three.'], ['Four.']]
    """
    documents = []
    for block in BLANK_LINES.split(text):
        sentences = [
            s for line in block.split("\n") for s in split_sentences(line, max_sentence_words)
        ]
        if sentences:
            documents.append(sentences)
    return documents


def file_documents(path, *, input_format="auto", errors="strict", min_document_words=20,
                   fallback_document_words=2000, max_sentence_words=128):
    """Reads one input file and returns its documents (lists of sentences).

    Args:
        path: the file (UTF-8).
        input_format: `"auto"`, `"gutenberg"`, `"wrapped"` or `"lines"` (see the
            module docstring).
        errors: `"strict"` or `"replace"` for bytes that are not UTF-8.
        min_document_words, fallback_document_words: see `book_documents`.
        max_sentence_words: see `split_sentences`.

    Raises:
        ValueError: unknown format, invalid UTF-8 (file and line named), a
            Gutenberg file without start marker, or a file without any text.

    Example:

    >>> docs = file_documents("../shared/data/corpus/gutenberg/pg84.txt")  # doctest: +SKIP
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    text = read_text(path, errors=errors)
    if input_format == "auto":
        input_format = "gutenberg" if GUTENBERG_START_MARKERS.search(text) else "lines"
    if input_format == "gutenberg":
        text = strip_gutenberg_boilerplate(text, source=path)
    if input_format == "lines":
        documents = line_documents(text, max_sentence_words=max_sentence_words)
    else:
        documents = book_documents(
            text,
            min_document_words=min_document_words,
            fallback_document_words=fallback_document_words,
            max_sentence_words=max_sentence_words,
        )
    if not documents:
        raise ValueError(f"{path}: no text found (empty file, or only headings and boilerplate)")
    return documents


def check_output_file(path, name="output", example="train.txt"):
    """Refuses, in one line naming `name` (a flag, say `--output`) and the path, an output file that cannot be
    written, before any work: an existing directory, a path inside a file, a folder that is read-only or not ours
    (nothing is created). Remote paths (`gs://...`) are not checked. `example`: the file name the message suggests
    in a directory given.

    Example:

    >>> check_output_file("/proc/corpus/train.txt", "--output")
    Traceback (most recent call last):
    ...
    ValueError: --output /proc/corpus/train.txt cannot be written (/proc is read-only or not ours): pass a file in a writable directory
    """
    if "://" in str(path):
        return
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"{name} {path} is a directory: pass a file name (e.g. {os.path.join(path, example)})")
    existing = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{name} {path} is inside a file ({existing}), not a directory: pass a file in a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-test-")
    except OSError:
        raise ValueError(f"{name} {path} cannot be written ({existing} is read-only or not ours): pass a file in a "
                         "writable directory") from None
    os.close(fd)
    os.remove(probe)


def write_documents(documents, path):
    """Writes documents atomically: one sentence a line, a blank line between documents.

    Args:
        documents: an iterable of lists of sentences.
        path: the output file; written to a temporary file in the same folder,
            then renamed over `path`.

    Returns:
        `CorpusStats` of what was written.

    Example:

    >>> write_documents([["One.", "Two."], ["Three."]], "/tmp/corpus.txt")
    CorpusStats(documents=2, sentences=3, words=3)
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    stats = CorpusStats()
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for document in documents:
                if stats.documents:
                    f.write("\n")
                for sentence in document:
                    if "\n" in sentence or not sentence.strip():
                        raise ValueError(f"sentence must be one non-empty line, got {sentence!r}")
                    f.write(sentence + "\n")
                stats.add([document])
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual file mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return stats


def prepare_corpus(inputs, output, *, valid_output=None, valid_every=0, input_format="auto",
                   errors="strict", min_document_words=20, fallback_document_words=2000,
                   max_sentence_words=128, read_documents=None):
    """Converts raw text files into the pretraining format.

    Args:
        inputs: file names or glob patterns (a string or a list).
        output: the training output file.
        valid_output: optional held-out output file.
        valid_every: with `valid_output`, every `valid_every`-th document (the
            `valid_every - 1`-th, `2 * valid_every - 1`-th, ... over all inputs
            in order) goes to `valid_output` instead of `output`.
        input_format, errors, min_document_words, fallback_document_words,
            max_sentence_words: see `file_documents`.
        read_documents: a function of an input file's path that returns its documents (lists of sentences),
            instead of `file_documents` with the arguments above: e.g. one document a row of a table's text
            column (`recipes/prepare_corpus.py --text_column`).

    Returns:
        A dict `{"train": CorpusStats, "valid": CorpusStats or None}`.

    Raises:
        ValueError: an output that cannot be written (`check_output_file`, before any input is read), an input
            pattern matching no file, an input that `file_documents` refuses.

    Example:

    >>> prepare_corpus("../shared/data/corpus/gutenberg/pg84.txt", "/tmp/train.txt",
    ...                valid_output="/tmp/valid.txt", valid_every=10)  # doctest: +SKIP
    """
    if valid_output is not None and (not isinstance(valid_every, int) or valid_every < 2):
        raise ValueError(f"valid_every must be an integer >= 2 with valid_output, got {valid_every!r}")
    check_output_file(output, "output")  # before any work: not after reading and splitting every input
    if valid_output is not None:
        check_output_file(valid_output, "valid_output")
    if read_documents is None:
        def read_documents(path):
            return file_documents(path, input_format=input_format, errors=errors,
                                  min_document_words=min_document_words,
                                  fallback_document_words=fallback_document_words,
                                  max_sentence_words=max_sentence_words)
    documents = []
    for path in expand_patterns(inputs):
        documents.extend(read_documents(path))
    if valid_output is None:
        return {"train": write_documents(documents, output), "valid": None}
    held_out = [d for i, d in enumerate(documents) if i % valid_every == valid_every - 1]
    train = [d for i, d in enumerate(documents) if i % valid_every != valid_every - 1]
    return {"train": write_documents(train, output), "valid": write_documents(held_out, valid_output)}


def bundled_corpus():
    """Paths of the small corpus shipped with the package (see its README.md).

    Returns:
        `dict(train=path, valid=path, vocab=path)`: the training and held-out
        text in the pretraining format and the lower-cased WordPiece vocabulary
        built on the training text.

    Example:

    >>> paths = bundled_corpus()
    >>> sorted(paths)
    ['train', 'valid', 'vocab']
    """
    folder = pathlib.Path(__file__).resolve().parents[1] / "assets" / "corpus"
    return {
        "train": str(folder / "train.txt"),
        "valid": str(folder / "valid.txt"),
        "vocab": str(folder / "vocab.txt"),
    }
