"""Evaluation text never appears in pretraining text (issue 17's rule).

The pretraining corpora (the bundled corpus the main job reads, and the
Gutenberg books of benchmarks/pretrain_then_finetune.py) share no 8-word
n-gram with the dev/test text that the fine-tuning scores are measured on:
SST-2 and STS-B dev and test, CoNLL-2003 testa/testb, SQuAD v1.1 dev
(contexts and questions). Measured on the full files: no shared 8-, 10- or
13-gram.
"""

import pytest

from keras_bert_impl.data.contamination import shared_ngrams, words
from keras_bert_impl.data.corpus import bundled_corpus
from keras_bert_impl.tasks.span_qa.reading import load_squad_json
from keras_bert_impl.tasks.tagging.reading import read_conll


def _tsv_columns(path, columns):
    lines = path.read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    indices = [header.index(c) for c in columns]
    return [parts[i] for parts in (line.split("\t") for line in lines[1:] if line) for i in indices if i < len(parts)]


def _squad_texts(path):
    data = load_squad_json(path)["data"]
    return [t for a in data for p in a["paragraphs"] for t in [p["context"], *(q["question"] for q in p["qas"])]]


def evaluation_texts(root):
    """{name: texts} of every evaluation file under `root` (a shared/data layout); absent files are left out."""
    sources = {
        "SST-2 dev": (root / "glue/SST-2/dev.tsv", lambda p: _tsv_columns(p, ["sentence"])),
        "SST-2 test": (root / "glue/SST-2/test.tsv", lambda p: _tsv_columns(p, ["sentence"])),
        "STS-B dev": (root / "glue/STS-B/dev.tsv", lambda p: _tsv_columns(p, ["sentence1", "sentence2"])),
        "STS-B test": (root / "glue/STS-B/test.tsv", lambda p: _tsv_columns(p, ["sentence1", "sentence2"])),
        "CoNLL-2003 testa": (root / "conll2003/eng.testa", lambda p: [" ".join(s.words) for s in read_conll(p)]),
        "CoNLL-2003 testb": (root / "conll2003/eng.testb", lambda p: [" ".join(s.words) for s in read_conll(p)]),
        "SQuAD v1.1 dev": (root / "squad/dev-v1.1.json.gz", _squad_texts),
    }
    return {name: read(path) for name, (path, read) in sources.items() if path.is_file()}


@pytest.fixture(scope="module")
def evaluation(request):
    from conftest import SHARED_DATA, TEST_DATA

    texts = evaluation_texts(TEST_DATA / "slices")  # vendored: STS-B rows, the first SQuAD articles
    if SHARED_DATA.is_dir():
        texts.update(evaluation_texts(SHARED_DATA))  # the whole files where they exist
    assert texts, "no evaluation text found"
    return texts


def test_shared_ngrams_finds_planted_evaluation_text_in_a_real_book(data_slices):
    book = (data_slices / "corpus/gutenberg/pg84.txt").read_text(encoding="utf-8")
    sentence = "A man with a hard hat is dancing on the deck of the ship tonight."  # STS-B dev, extended
    assert shared_ngrams([book], [sentence]) == set()
    planted = book + "\nThen a man with a hard hat is dancing on the deck.\n"
    assert shared_ngrams([planted], [sentence]) == {
        "a man with a hard hat is dancing", "man with a hard hat is dancing on",
        "with a hard hat is dancing on the", "a hard hat is dancing on the deck"}
    assert words("it 's") == words("it's") == ["it", "s"]


def test_bundled_corpus_shares_no_8_gram_with_evaluation_text(evaluation):
    corpus = bundled_corpus()
    texts = [open(corpus[split], encoding="utf-8").read() for split in ("train", "valid")]
    leaks = {name: sorted(shared_ngrams(texts, eval_texts))[:5] for name, eval_texts in evaluation.items()}
    assert not any(leaks.values()), f"evaluation text in the bundled corpus: {leaks}"
    assert sum(len(words(t)) for t in texts) > 300_000


@pytest.mark.slow
def test_gutenberg_pretraining_corpus_shares_no_8_gram_with_evaluation_text(shared_data, evaluation):
    books = sorted(p for p in (shared_data / "corpus/gutenberg").glob("*.txt"))
    assert len(books) >= 10
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in books]
    leaks = {name: sorted(shared_ngrams(texts, eval_texts))[:5] for name, eval_texts in evaluation.items()}
    assert not any(leaks.values()), f"evaluation text in the Gutenberg books: {leaks}"
    assert set(evaluation) >= {"SST-2 dev", "STS-B dev", "CoNLL-2003 testa", "CoNLL-2003 testb", "SQuAD v1.1 dev"}
