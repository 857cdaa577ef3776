"""Vocabulary building: a small vocab from Gutenberg books, [UNK] rate on a held-out book, bad input."""

import sys

import numpy as np
import pytest
import tensorflow as tf
from repo_scripts import load_script

from keras_bert_impl.text.tokenizer import SPECIAL_TOKENS, BertTokenizer
from keras_bert_impl.text.vocabulary import build_vocabulary, count_words, expand_input_patterns

TRAIN_BOOKS = ["1400-0.txt", "98-0.txt"]  # Great Expectations, A Tale of Two Cities
HELD_OUT_BOOK = "76-0.txt"  # Huckleberry Finn (dialect-heavy: a hard held-out text)
FAST_LEARNING = {"max_token_length": 16, "num_iterations": 2}
MAX_UNK_RATE = 0.01


@pytest.fixture(scope="module")
def gutenberg(data_slices):
    return data_slices / "corpus" / "gutenberg"


def test_small_vocabulary_has_low_unk_rate_on_held_out_book(gutenberg, tmp_path):
    output = tmp_path / "vocab" / "vocab.txt"
    messages = []
    vocab = build_vocabulary(
        [str(gutenberg / name) for name in TRAIN_BOOKS],
        vocab_size=2000,
        max_lines=6000,
        output=str(output),
        learn_params=FAST_LEARNING,
        progress=messages.append,
    )
    assert vocab[:5] == list(SPECIAL_TOKENS)
    assert 500 <= len(vocab) <= 2000
    assert output.read_text(encoding="utf-8").splitlines() == vocab
    assert any("counted" in m for m in messages) and any("learned" in m for m in messages)
    assert not list(output.parent.glob(".*.tmp"))  # atomic write left no temporary file

    tokenizer = BertTokenizer(str(output), lowercase=True)
    with open(gutenberg / HELD_OUT_BOOK, encoding="utf-8") as f:
        held_out = [line for line in f.read().splitlines()[1000:3000] if line.strip()]
    ids = tokenizer(tf.constant(held_out)).flat_values.numpy()
    words = int(tokenizer.tokenize_with_words(tf.constant(held_out)).values.nrows())
    unk_rate = float(np.mean(ids == tokenizer.unk_token_id))
    print(f"\nheld-out {HELD_OUT_BOOK}: {len(held_out)} lines, {len(ids)} pieces, "
          f"[UNK] rate {100 * unk_rate:.3f}%, {len(ids) / words:.3f} pieces per word, vocab {len(vocab)}")
    assert unk_rate < MAX_UNK_RATE


def test_words_are_counted_with_the_tokenizer_normalisation(minilm_dir):
    lines = ["Ｆｕｌｌ ﬁne Café, déjà-vu… 北京", "ΟΔΟΣ x\u200by"]
    counts, lines_read = count_words(tf.data.Dataset.from_tensor_slices(lines))
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt")
    expected = [w for line in tokenizer.normalize(lines).numpy() for w in line.decode().split()]
    assert lines_read == 2 and sorted(counts.elements()) == sorted(expected)
    assert "ｆｕｌｌ" in counts and "ﬁne" in counts and "xy" in counts and "οδοσ" in counts


def test_invalid_utf8_names_file_and_line(real_data):
    bad = str(real_data / "bad_input" / "pg84_cp1252_excerpt.txt")
    with pytest.raises(ValueError, match=r"pg84_cp1252_excerpt.txt, line 25: not valid UTF-8"):
        count_words(bad)
    replaced, lines = count_words(bad, errors="replace")
    ignored, _ = count_words(bad, errors="ignore")
    assert lines > 25 and "steady" in replaced
    assert sum(replaced.values()) > sum(ignored.values())


def test_bad_arguments(tmp_path, gutenberg):
    with pytest.raises(ValueError, match=r"no file matches '.*nothing-here/\*.txt'"):
        expand_input_patterns(str(tmp_path / "nothing-here" / "*.txt"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match="the input holds no words"):
        build_vocabulary(str(empty), 100)
    with pytest.raises(ValueError, match=r"`reserved_tokens` lacks the special token\(s\) \[MASK\]"):
        build_vocabulary(str(empty), 100, reserved_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    with pytest.raises(ValueError, match="`vocab_size`=5 leaves no room after 5 reserved tokens"):
        build_vocabulary(str(empty), 5)
    with pytest.raises(ValueError, match="`errors` must be one of strict, replace, ignore; got 'skip'"):
        count_words(str(empty), errors="skip")


def test_recipe_command_line(tmp_path, gutenberg, monkeypatch, capsys):
    module = load_script("recipes/build_vocab.py")
    output = tmp_path / "vocab.txt"
    monkeypatch.setattr(sys, "argv", [
        "build_vocab.py", "--input", str(gutenberg / "pg84.txt"), "--vocab_size", "300",
        "--output", str(output), "--max_lines", "600", "--no_lowercase",
    ])
    module.main()
    captured = capsys.readouterr()
    tokens = output.read_text(encoding="utf-8").splitlines()
    assert tokens[:5] == list(SPECIAL_TOKENS) and f"{len(tokens)} tokens written" in captured.out
    assert any(t[:1].isupper() for t in tokens)  # cased vocabulary
    assert "counted" in captured.err and "learned" in captured.err
