"""Rule-based English sentence splitting for pretraining text (one sentence a line, as BERT's data).

Knows titles and other abbreviations (Mr. Mrs. Dr. St. ...), initials (E. M.
Forster), closing quotes and brackets after the final punctuation, and
ellipses; an over-long "sentence" is cut into pieces of at most
`max_sentence_words` words.
"""

import re

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

