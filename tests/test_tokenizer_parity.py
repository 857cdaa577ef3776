"""BertTokenizer ids vs Hugging Face `tokenizers` on real text and on non-ASCII input.

The reference is the `tokenizer.json` shipped with all-MiniLM-L6-v2 (uncased)
and, for `lowercase=False`, `tokenizers.BertWordPieceTokenizer(lowercase=False,
strip_accents=False)` on the same vocabulary. Every line the tests read must
give identical ids; the counts are printed (`pytest -s`).
"""

import csv
import itertools

import pytest
import tensorflow as tf

from keras_bert_impl.text.tokenizer import BertTokenizer

GLUE_TEXT_COLUMNS = {
    # file: columns holding text (header names, or indices for header-less files)
    "SST-2/dev.tsv": ["sentence"],
    "SST-2/test.tsv": ["sentence"],
    "MRPC/dev.tsv": ["#1 String", "#2 String"],
    "MRPC/test.tsv": ["#1 String", "#2 String"],
    "CoLA/dev.tsv": [3],
    "CoLA/test.tsv": ["sentence"],
    "STS-B/dev.tsv": ["sentence1", "sentence2"],
    "STS-B/test.tsv": ["sentence1", "sentence2"],
    "RTE/dev.tsv": ["sentence1", "sentence2"],
    "RTE/test.tsv": ["sentence1", "sentence2"],
    "QNLI/dev.tsv": ["question", "sentence"],
    "QNLI/test.tsv": ["question", "sentence"],
}
GUTENBERG_LINES_PER_BOOK = 2000

# Targeted non-ASCII text: accents, CJK, full-width forms, ligatures, sharp s,
# vulgar fractions, superscripts, trade mark, mathematical letters, half-width
# kana, ellipsis, combining marks, control and zero-width characters, emoji,
# right-to-left scripts, Greek final sigma, dotted capital I.
NON_ASCII_TEXTS = [
    "Café déjà vu, naïve façade, Ångström, São Paulo, Kraków, İstanbul, Ærø",
    "北京是中国的首都。東京タワー、서울특별시",
    "ＦＵＬＬ－ＷＩＤＴＨ ｌｅｔｔｅｒｓ １２３ ！？",
    "ﬁnancial ﬂow ﬀ ﬃ ﬄ ĳ Ǆ ǆ",
    "Straße STRASSE ß ẞ",
    "½ cup, 2² = 4, 10³, Brand™ ©2024 ®",
    "𝐁𝐨𝐥𝐝 𝕯𝖔𝖚𝖇𝖑𝖊 𝒮𝒸𝓇𝒾𝓅𝓉 ℌ ℕ ℝ",
    "ﾊﾝｶｸ ｶﾀｶﾅ ｧｨｩ",
    "Wait… what‽ “quoted” ‘single’ — dash – en ‐ hyphen",
    "e\u0301 a\u0300 n\u0303 o\u0308 combining: Z\u0351\u0308\u0301a\u0300lgo",
    "tab\there\nnew line\r\nvertical\x0btab form\x0cfeed\x00nul \ufffd replacement",
    "zero\u200bwidth\u200cjoiner\u200dx soft\u00adhyphen \ufeffbom \u2060wj \u202eRTL override",
    "emoji 😀🎉👍🏽 👨\u200d👩\u200d👧 ❤️ 🇫🇷",
    "العربية لغة جميلة، أليس كذلك؟",
    "עברית היא שפה. שלום!",
    "ΟΔΟΣ Σίσυφος ΣΑΣ σοφός",
    "Привет, МИР! Ёлка",
    "हिन्दी भाषा। தமிழ் ไทย ภาษา",
    "\u2028line separator\u2029paragraph\u0085next line\u00a0nbsp\u3000ideographic space",
    "x" * 101 + " " + "é" * 60 + " " + "y" * 100,
    "",
    "   ",
]


def _reference_uncased(minilm_dir):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    return reference


def _reference_cased(minilm_dir):
    from tokenizers import BertWordPieceTokenizer

    return BertWordPieceTokenizer(str(minilm_dir / "vocab.txt"), lowercase=False, strip_accents=False)


def _glue_texts(glue_dir):
    texts = []
    for name, columns in GLUE_TEXT_COLUMNS.items():
        with open(glue_dir / name, encoding="utf-8-sig", newline="") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        if all(isinstance(c, int) for c in columns):
            indices = columns
        else:
            header, rows = rows[0], rows[1:]
            indices = [header.index(c) for c in columns]
        texts += [row[i] for row in rows for i in indices if i < len(row)]
    return texts


def _conll_sentences(path):
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("-DOCSTART-"):
                if words:
                    sentences.append(" ".join(words))
                words = []
            else:
                words.append(line.split(" ")[0])
    if words:
        sentences.append(" ".join(words))
    return sentences


def _gutenberg_lines(corpus_dir):
    lines = []
    for path in sorted(corpus_dir.glob("*.txt")):
        with open(path, encoding="utf-8") as f:
            lines += [line.rstrip("\n") for line in itertools.islice(f, GUTENBERG_LINES_PER_BOOK)]
    return lines


@pytest.fixture(scope="module")
def real_texts(shared_data):
    return {
        "glue": _glue_texts(shared_data / "glue"),
        "conll": _conll_sentences(shared_data / "conll2003" / "eng.testa")
        + _conll_sentences(shared_data / "conll2003" / "eng.testb"),
        "gutenberg": _gutenberg_lines(shared_data / "corpus" / "gutenberg"),
    }


def _compare(tokenizer, reference, texts):
    expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
    actual = tf.function(tokenizer.tokenize)(tf.constant(texts)).to_list()
    mismatches = [(t, e, a) for t, e, a in zip(texts, expected, actual) if e != a]
    return len(texts) - len(mismatches), mismatches


@pytest.mark.parametrize("source", ["glue", "conll", "gutenberg"])
def test_ids_identical_to_hf_on_real_text(source, real_texts, minilm_dir):
    texts = real_texts[source]
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=True)
    identical, mismatches = _compare(tokenizer, _reference_uncased(minilm_dir), texts)
    non_ascii = sum(1 for t in texts if not t.isascii())
    print(f"\n{source}: {identical}/{len(texts)} lines identical ({100.0 * identical / len(texts):.2f}%), "
          f"{non_ascii} with non-ASCII characters")
    assert len(texts) > 1000
    assert not mismatches, mismatches[:3]


def test_cased_ids_identical_to_hf_on_real_text(real_texts, minilm_dir):
    texts = real_texts["glue"][:5000] + real_texts["gutenberg"][::4]
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=False)
    identical, mismatches = _compare(tokenizer, _reference_cased(minilm_dir), texts)
    print(f"\ncased: {identical}/{len(texts)} lines identical")
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_ids_identical_to_hf_on_non_ascii(lowercase, minilm_dir):
    reference = _reference_uncased(minilm_dir) if lowercase else _reference_cased(minilm_dir)
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=lowercase)
    identical, mismatches = _compare(tokenizer, reference, NON_ASCII_TEXTS)
    assert not mismatches, mismatches


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_ids_identical_to_hf_on_code_point_sample(lowercase, minilm_dir):
    """Every 61st code point of all planes (~18k), each inside and around a word.

    `benchmarks/tokenizer_unicode_parity.py` runs all 1,112,064 code points.
    """
    reference = _reference_uncased(minilm_dir) if lowercase else _reference_cased(minilm_dir)
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=lowercase)
    points = [c for c in range(0, 0x110000, 61) if not 0xD800 <= c < 0xE000]
    texts = [f"A{chr(c)}b {chr(c)}É{chr(c)}{chr(c)}" for c in points]
    identical, mismatches = _compare(tokenizer, reference, texts)
    assert not mismatches, [(hex(ord(t[1])), e, a) for t, e, a in mismatches[:5]]


def test_offsets_path_gives_the_same_ids(real_texts, minilm_dir):
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=True)
    texts = real_texts["glue"][:3000] + real_texts["gutenberg"][::10] + NON_ASCII_TEXTS
    ids = tokenizer.tokenize(tf.constant(texts))
    offset_ids, _, _ = tokenizer.tokenize_with_offsets(tf.constant(texts))
    assert ids.to_list() == offset_ids.to_list()
