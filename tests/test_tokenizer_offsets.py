"""BertTokenizer.tokenize_with_offsets (normalises each distinct code point once) vs a straightforward reference
that normalises every character of the batch, and vs Hugging Face `tokenizers`' offsets, on real text:
all SQuAD v1.1 dev contexts and questions, Gutenberg lines, non-ASCII samples, a code point sample and real
invalid UTF-8.
"""

import gzip
import itertools
import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.text.tokenizer import BertTokenizer
from test_tokenizer_parity import NON_ASCII_TEXTS


def reference_with_offsets(tokenizer, strings):
    """The offsets as first written: split into characters, normalise each, join, map bytes back by search."""
    chars = tf.strings.unicode_split(strings, "UTF-8")  # [batch, chars]
    _, char_starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
    char_ends = char_starts + tf.cast(tf.strings.length(chars), tf.int64)
    normalized_chars = tokenizer.normalize(chars.flat_values)
    normalized = tf.strings.reduce_join(chars.with_flat_values(normalized_chars), axis=-1)
    char_byte_ends = tf.cumsum(tf.cast(tf.strings.length(normalized_chars), tf.int64))
    row_byte_base = tf.concat([[0], tf.cumsum(tf.cast(tf.strings.length(normalized), tf.int64))[:-1]], 0)

    words, word_starts, _ = tf_text.regex_split_with_offsets(normalized, " ")  # [batch, words]
    flat_words = words.flat_values
    too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > tokenizer._max_chars_per_word
    checked_words = tf.where(too_long, tf.constant(tokenizer._unknown_token), flat_words)
    pieces, piece_starts, piece_ends = tokenizer._wordpiece.tokenize_with_offsets(checked_words)
    replaced = tf.gather(tf.not_equal(checked_words, flat_words), pieces.value_rowids())
    word_bytes = tf.gather(tf.cast(tf.strings.length(flat_words), piece_ends.dtype), pieces.value_rowids())
    piece_ends = piece_ends.with_flat_values(tf.where(replaced, word_bytes, piece_ends.flat_values))

    word_base = tf.gather(row_byte_base, words.value_rowids()) + word_starts.flat_values
    piece_base = tf.gather(word_base, pieces.value_rowids())
    first_byte = piece_base + tf.cast(piece_starts.flat_values, tf.int64)
    last_byte = piece_base + tf.cast(piece_ends.flat_values, tf.int64) - 1
    first_char = tf.searchsorted(char_byte_ends, first_byte, side="right")
    last_char = tf.searchsorted(char_byte_ends, last_byte, side="right")
    starts = tf.gather(char_starts.flat_values, first_char)
    ends = tf.gather(char_ends.flat_values, last_char)
    ids = words.with_flat_values(pieces).merge_dims(-2, -1)
    return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)


@pytest.fixture(scope="module")
def squad_dev(shared_data):
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    paragraphs = [p for a in articles for p in a["paragraphs"]]
    return [p["context"] for p in paragraphs], [q["question"] for p in paragraphs for q in p["qas"]]


@pytest.fixture(scope="module")
def texts(squad_dev, shared_data):
    contexts, questions = squad_dev
    gutenberg = []
    for path in sorted((shared_data / "corpus" / "gutenberg").glob("*.txt")):
        with open(path, encoding="utf-8") as f:
            gutenberg += [line.rstrip("\n") for line in itertools.islice(f, 1000, 3000, 4)]
    points = [c for c in range(0, 0x110000, 61) if not 0xD800 <= c < 0xE000]
    code_points = [f"A{chr(c)}b {chr(c)}É{chr(c)}{chr(c)}" for c in points]
    invalid = (shared_data / "bad_input" / "pg2641_cp1252_excerpt.txt").read_bytes().split(b"\n")
    return {
        "squad_contexts": contexts,
        "squad_questions": questions[::3],
        "gutenberg": gutenberg,
        "non_ascii": NON_ASCII_TEXTS + ["", "   ", "x\u200b", "\u0301"],
        "code_points": code_points[::2],
        "invalid_utf8": invalid,
    }


@pytest.mark.parametrize(
    "options",
    [{"lowercase": True}, {"lowercase": False}, {"lowercase": True, "max_chars_per_word": 6},
     {"lowercase": False, "strip_accents": True, "split_on_cjk": False}],
    ids=["uncased", "cased", "short_words", "cased_stripped_no_cjk"],
)
def test_offsets_identical_to_the_per_character_reference(options, texts, minilm_dir):
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", **options)
    reference = tf.function(
        lambda s: reference_with_offsets(tokenizer, s), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    compared = 0
    for source, lines in texts.items():
        assert lines, source
        for begin in range(0, len(lines), 512):
            batch = tf.constant(lines[begin : begin + 512], tf.string)
            expected, actual = reference(batch), tokenizer.tokenize_with_offsets(batch)
            for name, e, a in zip(("ids", "starts", "ends"), expected, actual):
                if not (np.array_equal(e.row_splits.numpy(), a.row_splits.numpy())
                        and np.array_equal(e.flat_values.numpy(), a.flat_values.numpy())):
                    e, a = e.to_list(), a.to_list()
                    row = next(i for i, (x, y) in enumerate(zip(e, a)) if x != y)
                    pytest.fail(f"{source} line {begin + row}: {name} {a[row][:20]} != reference {e[row][:20]}")
            compared += len(lines[begin : begin + 512])
    assert compared > 15000


def test_offsets_identical_to_hf_on_squad_contexts(squad_dev, minilm_dir):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=True)
    contexts = squad_dev[0]
    assert len(contexts) == 2067
    ids, starts, ends = tokenizer.tokenize_with_offsets(contexts)
    for text, encoding, i, s, e in zip(contexts, reference.encode_batch(contexts, add_special_tokens=False),
                                      ids.to_list(), starts.to_list(), ends.to_list()):
        char_to_byte = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
        assert i == encoding.ids
        assert list(zip(s, e)) == [(int(char_to_byte[a]), int(char_to_byte[b])) for a, b in encoding.offsets], text


def test_eager_calls_trace_once_and_agree_with_graphs(squad_dev, minilm_dir):
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt", lowercase=True)
    contexts = squad_dev[0][:40]
    eager = [[t.to_list() for t in tokenizer.tokenize_with_offsets(contexts[:n])] for n in (1, 7, 40)]
    assert tokenizer._offsets_function.function.experimental_get_tracing_count() == 1
    in_graph = tf.function(tokenizer.tokenize_with_offsets)
    assert [t.to_list() for t in in_graph(tf.constant(contexts))] == eager[2]
    assert [row[:7] for row in eager[2]] == eager[1]
    dataset = tf.data.Dataset.from_tensor_slices(contexts[:7]).map(tokenizer.tokenize_with_offsets)
    assert [[t.numpy().tolist() for t in row] for row in dataset] == [list(row) for row in zip(*eager[1])]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([], tf.string))
    assert ids.shape[0] == 0 and starts.to_list() == [] and ends.dtype == tf.int64
