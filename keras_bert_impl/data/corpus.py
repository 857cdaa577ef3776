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
import glob as glob_lib
import os
import pathlib
import re
import tempfile

INPUT_FORMATS = ("auto", "gutenberg", "wrapped", "lines")

_START_MARKERS = re.compile(
    r"^\s*\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*$"
    r"|^\s*\*END\*\s*THE SMALL PRINT![^\n]*$",
    re.MULTILINE | re.IGNORECASE,
)
_END_MARKERS = re.compile(
    r"^\s*\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*$"
    r"|^\s*End of (?:the )?Project Gutenberg(?:'s|’s)?\b[^\n]*$",
    re.MULTILINE | re.IGNORECASE,
)
_ILLUSTRATION = re.compile(r"\[Illustration[^\]]*\]", re.IGNORECASE)
_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")

_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    "fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|first|second|"
    "third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|last|final"
)
_ROMAN = r"[IVXLCDM]+"
_HEADING = re.compile(
    r"^\s*(?:"
    # CHAPTER IV. / Chapter 4 / BOOK ONE: 1805 / Book the First--Recalled / Letter 1
    r"(?:chapter|chap\.?|book|part|volume|vol\.|letter|stave|episode|section|canto)\s+"
    rf"(?:{_ROMAN}\b|\d+\b|(?:the\s+)?(?:{_NUMBER_WORDS})\b)[^\n]*"
    # IV. / IV. The Period / 12.
    rf"|{_ROMAN}\.?|\d+\.?|{_ROMAN}\.\s+[^\n]{{1,60}}"
    # Ulysses: [ 7 ] ..., — II —
    rf"|\[\s*\d+\s*\][^\n]*|[—–-]+\s*{_ROMAN}\s*[—–-]+"
    r"|(?:the\s+)?(?:contents|table of contents|preface|introduction|epilogue|prologue|the end|finis)\.?"
    r")\s*$",
    re.IGNORECASE,
)
# Transcribers' credits right after the Project Gutenberg header.
_CREDITS = re.compile(r"^(?:produced by|e-?text prepared by|transcribed by|transcriber['’]s note)", re.I)

# Words that end with a period without ending a sentence (lower-cased, no period).
ABBREVIATIONS = frozenset(
    """mr mrs ms messrs mme mmes mlle mlles mm dr drs st ste mt ft jr sr capt col gen
    lt sgt maj cmdr adm rev revd prof hon esq gov sen rep pres supt insp serg sergt
    vol vols ch chap no nos fig figs pp ed eds vs viz cf al approx dept est inst ult
    prox e.g i.e a.m p.m b.c a.d u.s u.k bros co inc ltd ave blvd rd jan feb mar apr
    jun jul aug sep sept oct nov dec""".split()
)
_BOUNDARY = re.compile(r"([.!?…]+)([\"'”’»)\]]*)(\s+)")
_OPENERS = "\"'“‘«([—–-_"
_CLOSERS = "\"'”’»)]_"


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
        ValueError: the file is not valid UTF-8 (with `errors="strict"`): the
            message names the file, the line and the byte offset.

    Example:

    >>> text = read_text("../shared/data/corpus/gutenberg/pg84.txt")  # doctest: +SKIP
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    data = pathlib.Path(path).read_bytes()
    try:
        text = data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ValueError(
            f"{path}:{line}: invalid UTF-8 (byte 0x{data[error.start]:02x} at byte offset "
            f"{error.start}, line {line}, column {column}); the file must be UTF-8 encoded: "
            f"convert it (e.g. `iconv -f cp1252 -t utf-8`) or pass errors='replace'"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_gutenberg_boilerplate(text, source="<text>"):
    """Returns the book text between the Project Gutenberg header and footer.

    Args:
        text: the whole e-book.
        source: a name for error messages (the file path).

    Raises:
        ValueError: no Project Gutenberg start marker was found.

    Example:

    >>> strip_gutenberg_boilerplate(
    ...     "header\\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\\nBody.\\n"
    ...     "*** END OF THE PROJECT GUTENBERG EBOOK X ***\\nlicense\\n").strip()
    'Body.'
    """
    starts = list(_START_MARKERS.finditer(text))
    if not starts:
        raise ValueError(
            f"{source}: no Project Gutenberg start marker ('*** START OF THE PROJECT "
            "GUTENBERG EBOOK ...' or '*END*THE SMALL PRINT!') found; pass "
            "input_format='wrapped' for hard-wrapped text without the boilerplate"
        )
    begin = starts[-1].end()  # the old "SMALL PRINT" header may precede a START line
    end_match = _END_MARKERS.search(text, begin)
    end = end_match.start() if end_match else len(text)
    return text[begin:end]


def split_sentences(paragraph, max_sentence_words=128):
    """Splits one paragraph into sentences with rules for English prose.

    A sentence ends at `.`, `!`, `?` or an ellipsis, followed by optional
    closing quotes or brackets, white space and a capital letter or digit
    (possibly after opening quotes or a dash). A period after a known
    abbreviation (`ABBREVIATIONS`: Mr., Mrs., Dr., St., ...) or after a single
    letter (an initial: E. M. Forster) does not end a sentence.

    Args:
        paragraph: the text of one paragraph (line breaks are treated as spaces).
        max_sentence_words: sentences longer than this many words are cut into
            pieces of at most this many words; `None` keeps them whole.

    Returns:
        A list of sentences, white space collapsed.

    Example:

    >>> split_sentences("Mr. Darcy looked at E. M. Forster. “Is he ill?” she asked. No...  He was not.")
    ['Mr. Darcy looked at E. M. Forster.', '“Is he ill?” she asked.', 'No...', 'He was not.']
    """
    text = " ".join(paragraph.split())
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        following = match.end()
        while following < len(text) and text[following] in _OPENERS:
            following += 1
        if following >= len(text):
            continue
        if not (text[following].isupper() or text[following].isdigit()):
            continue
        if match.group(1) == "." and not match.group(2):
            word = text[start : match.start()].rsplit(" ", 1)[-1].lstrip(_OPENERS)
            if len(word) == 1 and word.isalpha():
                continue  # an initial
            if word.lower() in ABBREVIATIONS:
                continue
        sentences.append(text[start : match.start(3)])
        start = match.end()
    if start < len(text):
        sentences.append(text[start:])
    sentences = [sentence.strip() for sentence in sentences if sentence.strip()]
    if max_sentence_words:
        pieces = []
        for sentence in sentences:
            words = sentence.split(" ")
            for i in range(0, len(words), max_sentence_words):
                pieces.append(" ".join(words[i : i + max_sentence_words]))
        sentences = pieces
    return sentences


def _is_heading(line):
    return len(line.strip()) <= 100 and bool(_HEADING.match(line))


def _illustration_heading(match):
    """An illustration is dropped, but a chapter heading inside it is kept (Pride and Prejudice)."""
    for line in match.group(0)[1:-1].split("\n"):
        line = re.sub(r"^\s*illustration:?", "", line, flags=re.IGNORECASE)
        if line.strip() and _is_heading(line):
            return f"\n\n{line.strip()}\n\n"
    return ""


def _is_title_line(paragraph):
    """Short paragraphs without lower-case letters: titles, 'THE END', printers' lines."""
    return not any(c.islower() for c in paragraph) and len(paragraph.split()) <= 12


def _clean(paragraph):
    return " ".join(paragraph.replace("_", " ").split())


def _join_wrapped_lines(lines):
    """Joins the hard-wrapped lines of one paragraph (hyphen or dash at a line end: no space)."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if out and not (out.endswith("-") or out.endswith("—")):
            out += " "
        out += line
    return out


def book_documents(text, *, min_document_words=20, fallback_document_words=2000, max_sentence_words=128):
    """Splits the body of a hard-wrapped book into documents (chapters) of sentences.

    Args:
        text: the book text, boilerplate already removed
            (`strip_gutenberg_boilerplate`).
        min_document_words: documents with fewer words are dropped (title pages,
            credits, the text between a table of contents and chapter 1).
        fallback_document_words: when the book has fewer than two chapter
            headings, paragraphs are grouped into documents of about this many
            words instead.
        max_sentence_words: see `split_sentences`.

    Returns:
        A list of documents, each a list of sentences.

    Example:

    >>> book_documents("CHAPTER I\\n\\nIt was a dark\\nnight. Rain fell.\\n\\nCHAPTER II\\n\\nDawn came.",
    ...                min_document_words=1)
    [['It was a dark night.', 'Rain fell.'], ['Dawn came.']]
    """
    text = _ILLUSTRATION.sub(_illustration_heading, text)
    blocks = _BLANK_LINES.split(text)
    chapters = [[]]  # lists of paragraphs
    headings = 0
    for block in blocks:
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        heading_lines = 0
        while heading_lines < len(lines) and _is_heading(lines[heading_lines]):
            heading_lines += 1
        if heading_lines:
            headings += 1
            if chapters[-1]:
                chapters.append([])
            lines = lines[heading_lines:]
            if not lines:
                continue
        paragraph = _clean(_join_wrapped_lines(lines))
        if not paragraph or _is_title_line(paragraph) or _CREDITS.match(paragraph):
            continue
        chapters[-1].append(paragraph)
    if headings < 2:  # no chapter structure: fixed-size documents
        paragraphs = [p for chapter in chapters for p in chapter]
        chapters, words = [[]], 0
        for paragraph in paragraphs:
            if words >= fallback_document_words:
                chapters.append([])
                words = 0
            chapters[-1].append(paragraph)
            words += len(paragraph.split())
    documents = []
    for chapter in chapters:
        sentences = [s for p in chapter for s in split_sentences(p, max_sentence_words)]
        if sum(len(s.split()) for s in sentences) >= min_document_words:
            documents.append(sentences)
    return documents


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
    for block in _BLANK_LINES.split(text):
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
        input_format = "gutenberg" if _START_MARKERS.search(text) else "lines"
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


def expand_inputs(patterns):
    """Expands file names and glob patterns into a sorted list of files.

    Args:
        patterns: a string or a list of strings (paths or glob patterns).

    Raises:
        ValueError: a pattern matches no file (the pattern is named).

    Example:

    >>> expand_inputs("../shared/data/corpus/gutenberg/pg*.txt")  # doctest: +SKIP
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    files = []
    for pattern in patterns:
        matches = sorted(glob_lib.glob(os.fspath(pattern)))
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise ValueError(f"input pattern {os.fspath(pattern)!r} matches no file")
        files.extend(matches)
    return files


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
                   max_sentence_words=128):
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

    Returns:
        A dict `{"train": CorpusStats, "valid": CorpusStats or None}`.

    Example:

    >>> prepare_corpus("../shared/data/corpus/gutenberg/pg84.txt", "/tmp/train.txt",
    ...                valid_output="/tmp/valid.txt", valid_every=10)  # doctest: +SKIP
    """
    if valid_output is not None and (not isinstance(valid_every, int) or valid_every < 2):
        raise ValueError(f"valid_every must be an integer >= 2 with valid_output, got {valid_every!r}")
    documents = []
    for path in expand_inputs(inputs):
        documents.extend(
            file_documents(
                path,
                input_format=input_format,
                errors=errors,
                min_document_words=min_document_words,
                fallback_document_words=fallback_document_words,
                max_sentence_words=max_sentence_words,
            )
        )
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
