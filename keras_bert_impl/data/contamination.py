"""Evaluation text leaking into a pretraining corpus: the word n-grams they share.

A model pretrained on the sentences it is later scored on learns the test. The
check here is the usual decontamination test (GPT-3 used 13-grams; 8 is
stricter): lower-case both sides, split into runs of letters and digits, and
report every n-gram of an evaluation text that also occurs in the corpus.
`benchmarks/pretrain_then_finetune.py` records the result for its corpus, and
tests/test_corpus_leakage.py checks the bundled corpus and the Gutenberg books
against GLUE, CoNLL-2003 and SQuAD evaluation text.
"""

import re

_WORD = re.compile(r"[^\W_]+")


def words(text):
    """Lower-cased runs of letters and digits: `"It's 1 p.m."` -> `["it", "s", "1", "p", "m"]`.

    Tokenised text (SST-2's `it 's`) and plain text (`it's`) give the same words.
    """
    return _WORD.findall(text.lower())


def shared_ngrams(corpus_texts, evaluation_texts, n=8):
    """The word n-grams of `evaluation_texts` that also occur in `corpus_texts`.

    Args:
        corpus_texts: iterable of strings (files' contents, lines, documents);
            n-grams do not cross from one string to the next.
        evaluation_texts: iterable of strings (sentences, paragraphs).
        n: n-gram length in words.

    Returns:
        A set of n-gram strings (words joined by spaces); empty when clean.

    Example:
    >>> corpus = ["It was the best of times, it was the worst of times."]
    >>> sorted(shared_ngrams(corpus, ["He said: it was the worst of times!", "A new sentence."], n=5))
    ['it was the worst of', 'was the worst of times']
    >>> shared_ngrams(corpus, ["The times were hard."], n=5)
    set()
    >>> shared_ngrams(corpus, ["x"], n=0)
    Traceback (most recent call last):
    ...
    ValueError: n must be an integer >= 1, got 0
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    wanted = set()
    for text in evaluation_texts:
        w = words(text)
        wanted.update(zip(*(w[i:] for i in range(n))))
    found = set()
    for text in corpus_texts:
        w = words(text)
        found.update(wanted.intersection(zip(*(w[i:] for i in range(n)))))  # the scan runs in C
    return {" ".join(gram) for gram in found}
