"""Books -> documents: Project Gutenberg boilerplate, chapter headings, hard-wrapped paragraphs.

`strip_gutenberg_boilerplate` keeps the text between a Project Gutenberg
header and footer; `book_documents` turns a book into documents (one per
chapter, headings and title lines dropped, wrapped lines joined, sentences
split by `keras_bert_impl.data.sentence_splitting.split_sentences`).
"""

import re

from keras_bert_impl.data.sentence_splitting import split_sentences

GUTENBERG_START_MARKERS = re.compile(
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
BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*(?:\n[ \t\r\f\v]*)+")

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
    starts = list(GUTENBERG_START_MARKERS.finditer(text))
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
    blocks = BLANK_LINES.split(text)
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

