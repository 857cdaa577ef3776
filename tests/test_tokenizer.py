"""BertTokenizer API: offsets, words, special ids, detokenize, tf.data / tf.function, config, presets, errors."""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl
from keras_bert_impl.text.tokenizer import BertTokenizer, load_vocabulary_file


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return BertTokenizer(minilm_dir / "vocab.txt", lowercase=True)


@pytest.fixture(scope="module")
def hf_uncased(minilm_dir):
    from tokenizers import Tokenizer

    reference = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()
    return reference


def test_special_token_ids_and_vocabulary(tokenizer, minilm_dir):
    assert tokenizer.vocabulary_size() == 30522
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id) == (0, 100, 101)
    assert (tokenizer.sep_token_id, tokenizer.mask_token_id) == (102, 103)
    assert tokenizer.id_to_token(7592) == "hello"
    assert tokenizer.token_to_id("##able") == 3085
    assert tokenizer.get_vocabulary() == load_vocabulary_file(minilm_dir / "vocab.txt")
    assert tokenizer.lowercase is True


def test_output_types_and_ranks(tokenizer):
    batch = tokenizer(["Hello, world!", ""])
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.to_list() == [[7592, 1010, 2088, 999], []]
    single = tokenizer.tokenize("Hello, world!")
    assert single.shape.rank == 1 and single.numpy().tolist() == [7592, 1010, 2088, 999]
    words = tokenizer.tokenize_with_words(["Unaffable people, unaffable!"])
    assert words.shape.rank == 3
    assert words.to_list() == [[[14477, 20961, 3468], [2111], [1010], [14477, 20961, 3468], [999]]]


def test_works_in_tf_function_and_tf_data(tokenizer):
    lines = ["The quick brown fox.", "Jumps over the lazy dog!", "Déjà vu"]
    eager = tokenizer(lines).to_list()
    assert tf.function(tokenizer.tokenize)(tf.constant(lines)).to_list() == eager
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(2).map(tokenizer)
    assert [row for batch in dataset for row in batch.to_list()] == eager
    unbatched = tf.data.Dataset.from_tensor_slices(lines).map(tokenizer.tokenize)
    assert [t.numpy().tolist() for t in unbatched] == eager
    words = tf.data.Dataset.from_tensor_slices(lines).batch(3).map(tokenizer.tokenize_with_words)
    assert next(iter(words)).merge_dims(-2, -1).to_list() == eager


def _hf_offsets_in_bytes(text, encoding):
    """HF char offsets -> byte offsets in the UTF-8 original."""
    char_to_byte = np.cumsum([0] + [len(c.encode("utf-8")) for c in text])
    return [(int(char_to_byte[s]), int(char_to_byte[e])) for s, e in encoding.offsets]


def test_offsets_match_hf_offsets(tokenizer, hf_uncased, shared_data):
    lines = (shared_data / "glue" / "MRPC" / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:300]
    lines += ["Café  déjà-vu: ﬁne ½ Ｈello… 北京 x\u200by e\u0301!", "  leading and trailing  ", "Straße ΟΔΟΣ 😀👍🏽"]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(lines))
    for text, encoding, i, s, e in zip(lines, hf_uncased.encode_batch(lines, add_special_tokens=False),
                                      ids.to_list(), starts.to_list(), ends.to_list()):
        assert i == encoding.ids
        assert list(zip(s, e)) == _hf_offsets_in_bytes(text, encoding), text


def test_offsets_slice_original_text(tokenizer):
    text = "Hello, unaffable World! Naïve café."
    ids, starts, ends = tokenizer.tokenize_with_offsets(text)
    raw = text.encode("utf-8")
    pieces = [raw[s:e].decode("utf-8") for s, e in zip(starts.numpy(), ends.numpy())]
    assert pieces == ["Hello", ",", "una", "ffa", "ble", "World", "!", "Naïve", "café", "."]
    tokens = [tokenizer.id_to_token(i).removeprefix("##") for i in ids.numpy()]
    assert [p.lower().replace("ï", "i").replace("é", "e") for p in pieces] == tokens


def test_long_words_become_unk_with_whole_word_offsets(tokenizer):
    text = "short " + "a" * 101 + " " + "b" * 100
    ids, starts, ends = tokenizer.tokenize_with_offsets(text)
    assert ids.numpy().tolist()[:2] == [2460, tokenizer.unk_token_id]
    assert (starts.numpy()[1], ends.numpy()[1]) == (6, 107)
    assert tokenizer.unk_token_id not in ids.numpy().tolist()[2:]


def test_detokenize(tokenizer):
    ids = tokenizer(["Unaffable café, déjà vu!", "hello"])
    assert tokenizer.detokenize(ids).numpy().tolist() == [b"unaffable cafe , deja vu !", b"hello"]
    assert tokenizer.detokenize(tf.constant([14477, 20961, 3468])).numpy() == b"unaffable"


def test_cased_keeps_case_and_accents(minilm_dir):
    cased = BertTokenizer(minilm_dir / "vocab.txt", lowercase=False)
    assert cased.strip_accents is False
    assert cased.normalize(["Ab Café"]).numpy()[0].decode() == "Ab Café"
    stripped = BertTokenizer(minilm_dir / "vocab.txt", lowercase=False, strip_accents=True)
    assert stripped.normalize(["Ab Café"]).numpy()[0].decode() == "Ab Cafe"


def test_get_config_round_trip(tokenizer, minilm_dir):
    config = tokenizer.get_config()
    # The tokens themselves travel in the config, so a saved model needs no vocab.txt beside it.
    assert config["vocabulary"] == tokenizer.get_vocabulary() and config["lowercase"] is True
    assert tokenizer.vocabulary_path == os.fspath(minilm_dir / "vocab.txt")
    clone = BertTokenizer.from_config(config)
    text = ["Round trip, déjà vu."]
    assert clone(text).to_list() == tokenizer(text).to_list()
    from_list = BertTokenizer(tokenizer.get_vocabulary()[:1000] + ["[unused-x]"], lowercase=True)
    assert BertTokenizer.from_config(from_list.get_config()).vocabulary_size() == 1001


def test_from_preset_and_lazy_namespace(minilm_dir):
    tokenizer = keras_bert_impl.BertTokenizer.from_preset("all_minilm_l6_v2_en")
    assert tokenizer.lowercase is True and tokenizer.vocabulary_size() == 30522
    assert tokenizer(["some text"]).to_list() == [[2070, 3793]]
    from_dir = BertTokenizer.from_preset(str(minilm_dir))
    assert from_dir.get_vocabulary() == tokenizer.get_vocabulary()
    assert BertTokenizer.from_preset(str(minilm_dir), lowercase=False).lowercase is False


def _write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_vocabulary_errors(tmp_path, minilm_dir):
    with pytest.raises(FileNotFoundError, match="Vocabulary file not found: .*missing.txt"):
        BertTokenizer(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match=r"empty.txt: the vocabulary file is empty"):
        BertTokenizer(_write(tmp_path / "empty.txt", ""))
    with pytest.raises(ValueError, match=r"lacks the special token\(s\) \[CLS\], \[MASK\]"):
        BertTokenizer(_write(tmp_path / "v1.txt", "[PAD]\n[UNK]\n[SEP]\nhello\n"))
    with pytest.raises(ValueError, match=r"v2.txt, line 3: duplicate token 'hello' \(first seen on line 2\)"):
        BertTokenizer(_write(tmp_path / "v2.txt", "[PAD]\nhello\nhello\n"))
    with pytest.raises(ValueError, match=r"v3.txt, line 2: not valid UTF-8"):
        BertTokenizer(_write(tmp_path / "v3.txt", b"[PAD]\ncaf\xe9\n"))
    with pytest.raises(ValueError, match=r"v4.txt, line 2: token '' is empty or contains white space"):
        BertTokenizer(_write(tmp_path / "v4.txt", "[PAD]\n\n[UNK]\n"))
    with pytest.raises(ValueError, match="must be a path to a vocab.txt file or a list of str tokens; got int"):
        BertTokenizer(3)
    with pytest.raises(ValueError, match="`max_chars_per_word` must be a positive int"):
        BertTokenizer(minilm_dir / "vocab.txt", max_chars_per_word=0)


def test_lookup_and_shape_errors(tokenizer):
    with pytest.raises(ValueError, match="id 30522 is out of range: the vocabulary has 30522 tokens"):
        tokenizer.id_to_token(30522)
    with pytest.raises(ValueError, match="token 'not-a-token' is not in the vocabulary"):
        tokenizer.token_to_id("not-a-token")
    with pytest.raises(ValueError, match="expects a scalar or a 1-D batch of strings; got shape"):
        tokenizer.tokenize_with_offsets(tf.constant([["a"]]))


def test_invalid_utf8_is_read_as_replacement_characters(tokenizer, hf_uncased, real_data):
    raw_lines = (real_data / "bad_input" / "pg2641_cp1252_excerpt.txt").read_bytes().split(b"\n")
    invalid = [line for line in raw_lines if line.decode("utf-8", errors="replace") != line.decode("latin-1")]
    assert invalid  # real Windows-1252 bytes
    expected = [e.ids for e in hf_uncased.encode_batch(
        [line.decode("utf-8", errors="replace") for line in raw_lines], add_special_tokens=False)]
    assert tokenizer(tf.constant(raw_lines)).to_list() == expected
    assert tokenizer.tokenize_with_offsets(tf.constant(raw_lines))[0].to_list() == expected


@pytest.mark.parametrize(
    "bad, message",
    [
        (None, "BertTokenizer input is None; expected a string"),
        (3, "BertTokenizer input is int 3; expected a string"),
        ({"text": "a"}, "BertTokenizer input is dict"),
        (["fine", None], r"BertTokenizer input item \[1\] is None"),
        (["ok", "x\ud800y"], r"item \[1\] holds a lone surrogate U\+D800 at character 1"),
        ([[1, 2]], r"item \[0\]\[0\] is int 1"),
    ],
)
def test_bad_input_is_one_clear_line(tokenizer, bad, message):
    with pytest.raises(ValueError, match=message) as error:
        tokenizer(bad)
    assert "\n" not in str(error.value)


def test_detokenize_out_of_range_id_is_named(tokenizer):
    with pytest.raises(ValueError, match="id 99999 is out of range: the vocabulary has 30522 tokens"):
        tokenizer.detokenize([[1, 99999]])


def test_invalid_utf8_bytes_are_dropped_as_documented(tokenizer):
    # Windows-1252 "café": the lone 0xE9 byte is not UTF-8; it is removed, as HF does on errors="replace" text.
    assert tokenizer([b"caf\xe9 ok"]).to_list() == tokenizer(["caf ok"]).to_list()


@pytest.mark.multibackend
def test_hugging_face_tokenizer_habits_are_one_line_naming_ours(tokenizer, minilm_dir, shared_data):
    # A transformers user calls decode, convert_ids_to_tokens, vocab_size, tokenizer(texts, padding=True). Before:
    # Python's bare AttributeError, or "call() got an unexpected keyword argument 'padding'".
    import re

    import transformers

    from keras_bert_impl.text.tokenizer_habits import HUGGING_FACE_TOKENIZER_NAMES

    reference = transformers.AutoTokenizer.from_pretrained(str(minilm_dir))
    for name, ours in HUGGING_FACE_TOKENIZER_NAMES.items():
        # transformers' own name (encode_plus and batch_encode_plus: transformers 4's, in many tutorials)
        assert hasattr(reference, name) or name in ("encode_plus", "batch_encode_plus"), name
        assert not hasattr(tokenizer, name)
        with pytest.raises(AttributeError) as error:
            getattr(tokenizer, name)
        assert str(error.value) == f"'BertTokenizer' object has no attribute '{name}' (Hugging Face's name): use {ours}."
        named = re.match(r"(\w+)", ours).group(1)  # what it names is ours
        assert named in ("tokenizer", "the", "model") or hasattr(tokenizer, named), (name, named)
    with pytest.raises(AttributeError) as error:
        tokenizer.no_such_thing
    assert str(error.value) == "'BertTokenizer' object has no attribute 'no_such_thing'"
    # What the replacements give is what transformers gives.
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        texts = [line.split("\t")[0] for line in f.read().splitlines()[1:9]]
    ids = reference(texts[0], add_special_tokens=False)["input_ids"]
    # (transformers' decode is its WordPiece decoder, which by default also glues punctuation back, "journey ." ->
    # "journey."; detokenize, as keras-hub's, does not)
    from tokenizers.decoders import WordPiece

    assert tokenizer.detokenize(ids).numpy().decode() == WordPiece(cleanup=False).decode(
        reference.convert_ids_to_tokens(ids))
    assert [tokenizer.id_to_token(i) for i in ids] == reference.convert_ids_to_tokens(ids)
    assert tokenizer.vocabulary_size() == reference.vocab_size
    assert tokenizer.get_vocabulary() == sorted(reference.get_vocab(), key=reference.get_vocab().get)
    for arguments, given in (({"padding": True, "return_tensors": "np"}, "padding=, return_tensors="),
                             ({"truncation": True, "max_length": 16}, "truncation=, max_length=")):
        with pytest.raises(TypeError) as error:
            tokenizer(texts, **arguments)
        assert str(error.value) == (
            f"BertTokenizer(texts) gives each text's WordPiece ids, without [CLS], [SEP] or padding (keras-hub's "
            f"tokenizer), and takes no {given}: the model's padded features (token_ids, segment_ids, padding_mask) "
            "are its preprocessor's: model.preprocessor(texts), or BertClassifierPreprocessor(tokenizer, "
            "sequence_length=128)(texts) (a pair: (texts_a, texts_b)).")
    with pytest.raises(TypeError, match="takes no second text: "):
        tokenizer(texts[:4], texts[4:])
    # The preprocessor it names packs what transformers' tokenizer(texts, padding="max_length", ...) gives.
    packed = keras_bert_impl.BertClassifierPreprocessor(tokenizer, sequence_length=128)((texts[:4], texts[4:]))
    expected = reference(texts[:4], texts[4:], padding="max_length", truncation=True, max_length=128, return_tensors="np")
    np.testing.assert_array_equal(np.asarray(packed["token_ids"]), expected["input_ids"])
    np.testing.assert_array_equal(np.asarray(packed["segment_ids"]), expected["token_type_ids"])
    np.testing.assert_array_equal(np.asarray(packed["padding_mask"]), expected["attention_mask"])
