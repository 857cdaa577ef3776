"""WordPiece vocabulary building from text files or a `tf.data.Dataset`.

Words are counted after exactly the normalisation and splitting that
`BertTokenizer` applies (`keras_bert_impl.text.normalization.bert_normalize`),
then tensorflow-text's WordPiece learner
(`tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`,
the algorithm behind `bert_vocab_from_dataset`) picks the pieces. Using our
normalisation rather than `bert_vocab_from_dataset`'s own `BasicTokenizer`
keeps the vocabulary consistent with the tokenizer (tensorflow-text's
lower-casing folds compatibility characters that BERT keeps).
"""

import collections
import sys
import time

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_bert_impl.file_errors import FileFormatError, blocks_of_lines, decode_utf8
from keras_bert_impl.file_patterns import expand_patterns
from keras_bert_impl.text.normalization import bert_normalize
from keras_bert_impl.text.tokenizer import SPECIAL_TOKENS

DEFAULT_RESERVED_TOKENS = list(SPECIAL_TOKENS)
_BATCH_LINES = 4096
_DECODE_ERRORS = ("strict", "replace", "ignore")
_BLOCK_BYTES = 1 << 22
# What the UTF-8 error of a strict count adds to `decode_utf8`'s iconv command (`recipes/build_vocab.py`'s flag).
_STRICT_ADVICE = ", or pass errors='replace' or 'ignore' (--errors replace, --errors ignore)"


def expand_input_patterns(patterns):
    """Expands file names / glob patterns (a str or a list; local or `gs://`) into a file list
    (`file_patterns.expand_patterns`).

    Raises:
        ValueError: a pattern matches no file (the pattern is named).
    """
    return expand_patterns(patterns, tf.io.gfile.glob,
                           lambda path: tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path))


def check_input_files(files, errors="strict", max_lines=None):
    """Reads the text files once, before any counting, and raises at the first problem, naming the file.

    Bytes that are not UTF-8 (with `errors="strict"`):
    `keras_bert_impl.file_errors.decode_utf8`'s `FileFormatError`, naming the
    file, line, column and byte, with the `iconv` command that re-encodes it;
    input without any text (empty files, blank lines only); a file that
    cannot be read. Only the first `max_lines` lines (all files together) are
    read, as `count_words` reads them. Reads in blocks: memory stays bounded
    by the longest line.

    Raises:
        FileFormatError (a ValueError), ValueError.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.txt")
    >>> with open(path, "wb") as f:
    ...     _ = f.write("Caf\\u00e9 open.\\n".encode("utf-8") + b"It\\x92s late.\\n")
    >>> try:
    ...     check_input_files([path])
    ... except FileFormatError as error:
    ...     print(error.line, error.column, error.problem.split(";")[0])
    2 3 byte 0x92 at byte offset 14 of the file is not valid UTF-8
    >>> check_input_files([path], errors="replace")
    """
    left = max_lines
    has_text = False
    for path in files:
        if left is not None and left <= 0:
            break
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                for piece, line, offset in blocks_of_lines(f, _BLOCK_BYTES):
                    if left is not None and piece.count(b"\n") >= left:  # (the lines max_lines leaves unread)
                        end = 0
                        for _ in range(left):
                            end = piece.index(b"\n", end) + 1
                        piece = piece[:end]
                    if errors == "strict":
                        decode_utf8(piece, path, advice=_STRICT_ADVICE, first_line=line, first_offset=offset)
                    has_text = has_text or bool(piece.strip())
                    if left is not None:
                        left -= piece.count(b"\n") + (0 if piece.endswith(b"\n") else 1)
                        if left <= 0:
                            break
        except tf.errors.OpError as error:
            raise ValueError(f"{path}: cannot be read ({error.message})") from None
    if not has_text:
        what = f"{files[0]} holds" if len(files) == 1 else f"the {len(files)} files ({files[0]}, ...) hold"
        raise ValueError(f"the input holds no words: {what} only blank lines or nothing (expected text, one "
                         "sentence or paragraph a line)")


def check_vocabulary_file(path, flag="--vocab"):
    """Refuses, in one line naming `flag` and the file, a vocabulary that is missing, a directory, or not UTF-8
    (with the `iconv` command that re-encodes it): `recipes/pretrain.py`'s and the data recipes' `--vocab` check.
    Returns the file's bytes.

    Example:
    >>> import tempfile
    >>> check_vocabulary_file(tempfile.mkdtemp(prefix="run-"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --vocab /.../run-... is a directory: pass its vocab.txt (a WordPiece vocabulary, one token a line)
    """
    if not tf.io.gfile.exists(path):
        raise ValueError(f"{flag} {path}: no such file (a WordPiece vocab.txt)")
    if tf.io.gfile.isdir(path):
        raise ValueError(f"{flag} {path} is a directory: pass its vocab.txt (a WordPiece vocabulary, one token a "
                         "line)")
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.OpError as error:  # (was a TensorFlow PermissionDeniedError traceback)
        raise ValueError(f"{flag} {path}: cannot be read ({error.message})") from None
    try:
        decode_utf8(data, path)
    except FileFormatError as error:
        raise ValueError(f"{flag}: {error}") from None
    return data


def count_words(
    files_or_dataset,
    lowercase=True,
    strip_accents=None,
    split_on_cjk=True,
    errors="strict",
    max_lines=None,
    progress=None,
):
    """Counts BERT words (after BERT normalisation and splitting).

    Args:
        files_or_dataset: a path, a glob pattern, a list of them, or a
            `tf.data.Dataset` of strings (lines or documents).
        lowercase, strip_accents, split_on_cjk: as for `BertTokenizer`.
        errors: what to do with invalid UTF-8 in files: "strict" (raise,
            naming file and line; `check_input_files` beforehand names the
            column and byte too, before any counting), "replace" (U+FFFD, which BERT then drops)
            or "ignore" (skip the line).
        max_lines: stop after this many lines (all files together).
        progress: callable receiving progress messages (str), or None.

    Returns:
        `(collections.Counter of word -> count, number of lines read)`.
    """
    if errors not in _DECODE_ERRORS:
        raise ValueError(f"`errors` must be one of {', '.join(_DECODE_ERRORS)}; got {errors!r}")
    say = progress or (lambda message: None)

    @tf.function
    def split(lines):
        # Valid UTF-8 survives a UTF-8 -> UTF-8 transcoding byte for byte.
        repaired = tf.strings.unicode_transcode(lines, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        invalid = tf.not_equal(repaired, lines)
        if errors == "replace":
            lines = repaired
        normalized = bert_normalize(lines, lowercase=lowercase, strip_accents=strip_accents, split_on_cjk=split_on_cjk)
        if errors == "ignore":
            normalized = tf.where(invalid, tf.constant(""), normalized)
        words = tf.strings.split(normalized, sep=" ").flat_values
        return tf.boolean_mask(words, tf.strings.length(words) > 0), invalid

    if isinstance(files_or_dataset, tf.data.Dataset):
        sources = [("dataset", files_or_dataset)]
    else:
        sources = [(path, tf.data.TextLineDataset(path)) for path in expand_input_patterns(files_or_dataset)]

    counts = collections.Counter()
    lines_read, words_read = 0, 0
    started = last_report = time.time()
    for index, (name, lines_dataset) in enumerate(sources):
        if max_lines is not None and lines_read >= max_lines:
            break
        if max_lines is not None:
            lines_dataset = lines_dataset.take(max_lines - lines_read)
        batches = lines_dataset.batch(_BATCH_LINES).map(split, num_parallel_calls=tf.data.AUTOTUNE)
        file_lines = 0
        for words, invalid in batches.prefetch(tf.data.AUTOTUNE):
            if errors == "strict" and bool(tf.reduce_any(invalid)):
                first_bad = int(tf.where(invalid)[0, 0])
                raise ValueError(
                    f"{name}, line {file_lines + first_bad + 1}: not valid UTF-8 "
                    "(convert the file to UTF-8, or pass errors='replace' or errors='ignore')"
                )
            file_lines += int(tf.shape(invalid)[0])
            counts.update(words.numpy().tolist())
            words_read += int(tf.shape(words)[0])
            if time.time() - last_report > 5:
                last_report = time.time()
                say(f"counting words: file {index + 1}/{len(sources)} {name}: "
                    f"{lines_read + file_lines:,} lines, {words_read:,} words, {len(counts):,} distinct")
        lines_read += file_lines
    say(f"counted {words_read:,} words ({len(counts):,} distinct) in {lines_read:,} lines "
        f"from {len(sources)} source(s) in {time.time() - started:.1f}s")
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()}), lines_read


def build_vocabulary(
    files_or_dataset,
    vocab_size,
    lowercase=True,
    reserved_tokens=None,
    strip_accents=None,
    split_on_cjk=True,
    output=None,
    errors="strict",
    max_lines=None,
    learn_params=None,
    progress=None,
):
    """Learns a WordPiece vocabulary for `BertTokenizer`.

    Args:
        files_or_dataset: text file path(s) / glob pattern(s) (one sentence or
            paragraph a line) or a `tf.data.Dataset` of strings.
        vocab_size: maximum vocabulary size, reserved tokens included (the
            learner aims at 95-100% of it).
        lowercase: lower-case and strip accents (uncased vocabulary).
        reserved_tokens: tokens put first; default
            `[PAD], [UNK], [CLS], [SEP], [MASK]` (they must all be present).
        strip_accents, split_on_cjk: as for `BertTokenizer`.
        output: if given, the vocabulary is written there (one token a line,
            atomically: a temporary file in the same folder, then renamed).
        errors: invalid UTF-8 handling, see `count_words`.
        max_lines: read at most this many lines.
        learn_params: extra arguments of tensorflow-text's
            `wordpiece_tokenizer_learner_lib.learn` (e.g. `max_unique_chars`).
        progress: callable receiving progress messages, e.g. `print`.

    Returns:
        The vocabulary, a list of tokens.

    Example:
    >>> import tensorflow as tf
    >>> lines = tf.data.Dataset.from_tensor_slices(["The cat sat on the mat.", "Cats like mats."] * 50)
    >>> vocab = build_vocabulary(lines, vocab_size=100, learn_params={"lower_thresh": 1})
    >>> vocab[:5], "cat" in vocab
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    """
    if not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"`vocab_size` must be a positive int; got {vocab_size!r}")
    reserved_tokens = list(DEFAULT_RESERVED_TOKENS if reserved_tokens is None else reserved_tokens)
    missing = [t for t in SPECIAL_TOKENS if t not in reserved_tokens]
    if missing:
        raise ValueError(f"`reserved_tokens` lacks the special token(s) {', '.join(missing)}")
    if vocab_size <= len(reserved_tokens):
        raise ValueError(f"`vocab_size`={vocab_size} leaves no room after {len(reserved_tokens)} reserved tokens")
    say = progress or (lambda message: None)
    counts, _ = count_words(
        files_or_dataset,
        lowercase=lowercase,
        strip_accents=strip_accents,
        split_on_cjk=split_on_cjk,
        errors=errors,
        max_lines=max_lines,
        progress=progress,
    )
    if not counts:
        raise ValueError("the input holds no words: nothing to learn a vocabulary from")
    say(f"learning a WordPiece vocabulary of at most {vocab_size:,} tokens from {len(counts):,} distinct words")
    started = time.time()
    vocab = learner.learn(counts, vocab_size, reserved_tokens, **(learn_params or {}))
    say(f"learned {len(vocab):,} tokens in {time.time() - started:.1f}s")
    if output is not None:
        write_vocabulary(vocab, output)
        say(f"wrote {output}")
    return vocab


def write_vocabulary(tokens, path):
    """Writes tokens one a line (UTF-8) to `path`, atomically."""
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_text

    for index, token in enumerate(tokens):
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"token {index} ({token!r}) is empty or holds white space; cannot write a vocab.txt")
    atomic_write_text(path, "".join(t + "\n" for t in tokens))


def print_progress(message):
    """Progress printer for command-line use (stderr, flushed)."""
    print(message, file=sys.stderr, flush=True)
