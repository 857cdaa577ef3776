"""BertTokenClassifierPreprocessor: words (or raw sentences) -> BertTokenClassifier inputs, one label per word."""

import re

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.batching.boundaries import (
    TAGGING_BUCKETS,
    default_boundaries,
    merge_sparse_buckets,
)
from keras_bert_impl.batching.tf_batches import batches_by_length
from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer
from keras_bert_impl.text.tokenizer import BertTokenizer
from keras_bert_impl.text.word_windows import IGNORE_LABEL, first_piece_windows, pad_windows, window_labels
# Words as CoNLL-2003 writes them (Reuters text, Penn Treebank style): a run of non-space characters is a word,
# less the symbols at its edges (each a word: `(`, `,`, `"`, `...`, `--`) and a clitic at its end (`Germany 's`,
# `do n't`); an abbreviation keeps its period (`U.S.`, `Inc.`, `M.`), a number its sign (`+301`).
_ABBREVIATION = re.compile(
    r"(?:[A-Za-z]\.){2,}|[A-Z]\.|(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|Inc|Corp|Co|Ltd|Bros|vs|Gen|Sen|Rep|Gov|Lt|Col|Capt|Sgt|"
    r"Rev|Prof|No|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Calif|Fla|Mass|Conn|Ariz|Colo|Mich|Minn|Wis)\."
)
_CLITIC = re.compile(r"(?i)n['’]t|['’](?:s|re|ve|ll|d|m)")
_LEADING_SYMBOL = re.compile(r"\.\.\.|--+|(?![+.-]\d)\W")  # a sign or point stays: +301, -12.5, .576
_TRAILING_SYMBOL = re.compile(r"(?:\.\.\.|--+|[^\w+$])$")  # a rating's + and a currency's $ stay: AA+, C$


def split_words(text):
    """Splits raw text into words with their character offsets (`end` exclusive), as CoNLL-2003 tokenises.

    Penn Treebank style, as CoNLL-2003's own words: clitics apart (`Germany 's`, `do n't`), abbreviations
    (`U.S.`, `Inc.`, `M. Smith`), numbers (`1,000`, `+3.5`) and hyphenated words whole, symbols at a word's
    edges apart. 94.2% of CoNLL-2003's 14,041 training sentences, joined with spaces, split back into their own
    words (66.3% with the regex used before, which split `'s`, `1,000` and `U.S.`; the rest are mostly score
    tables and list numbers such as `1.`). Offsets index the Python string (code points), so they hold for any
    Unicode text: accents, CJK, emoji.

    Example:
    >>> split_words("Zoë met 东京's mayor 🙂.")
    [('Zoë', 0, 3), ('met', 4, 7), ('东京', 8, 10), ("'s", 10, 12), ('mayor', 13, 18), ('🙂', 19, 20), ('.', 20, 21)]
    >>> [word for word, _, _ in split_words("The U.S. didn't pay Germany's 1,000 euros to Acme Inc. yet.")]
    ['The', 'U.S.', 'did', "n't", 'pay', 'Germany', "'s", '1,000', 'euros', 'to', 'Acme', 'Inc.', 'yet', '.']
    """
    words = []
    for chunk in re.finditer(r"\S+", text):
        start, end = chunk.span()
        head, tail = [], []
        while start < end and not _whole(text[start:end]):
            symbol = _LEADING_SYMBOL.match(text, start, end)
            if symbol is None:
                break
            head.append((symbol.group(), start, symbol.end()))
            start = symbol.end()
        while start < end and not _whole(text[start:end]):
            symbol = _TRAILING_SYMBOL.search(text, start, end)
            if symbol is None:
                break
            tail.insert(0, (symbol.group(), symbol.start(), end))
            end = symbol.start()
        core = []
        if start < end:
            clitic = _CLITIC.search(text, start, end)
            cut = clitic.start() if clitic and clitic.end() == end and clitic.start() > start else end
            core = [(text[start:cut], start, cut)] + ([(text[cut:end], cut, end)] if cut < end else [])
        words += head + core + tail
    return words


# A raw sentence of more words than this is shown in a label-count error by the chunks between its spaces that split.
_SHOWN_WORDS = 20
_SHOWN_CHUNKS = 5


def check_labelled_examples(examples, word_lists, label_lists):
    """Refuses, in one line naming the example, labelled examples the tagger cannot learn from as given: a count of
    tag lists that is not the count of sentences, an empty sentence (nothing to tag), an empty or blank word of a
    word list (no tokens to carry its tag), and a sentence whose word count is not its label count (for a raw
    string, with the words it splits into).

    Example:
    >>> check_labelled_examples(["I don't know Paris"], [["I", "do", "n't", "know", "Paris"]], [[0, 0, 0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: Example 0: 5 words but 4 labels; the text splits into ['I', 'do', "n't", 'know', 'Paris'] \
(CoNLL-2003's words: give a list of words to split it yourself).
    """
    if len(label_lists) != len(word_lists):
        raise ValueError(f"{len(word_lists)} sentences but {len(label_lists)} lists of tags: give one list of tags "
                         "(one per word) per sentence.")
    for index, (example, words, labels) in enumerate(zip(examples, word_lists, label_lists)):
        raw = isinstance(example, str)
        if not words:
            what = f"the text {_shown(example)} has no words" if raw else "an empty sentence (no words)"
            raise ValueError(f"Example {index}: {what}, so it has nothing to tag: leave it out of x and y.")
        if not raw:
            for position, word in enumerate(words):
                if isinstance(word, str) and not word.strip():
                    raise ValueError(f"Example {index}: word {position} is {word!r}, which has no tokens, so its "
                                     "tag could not be learned: leave the word and its tag out.")
        if len(labels) != len(words):
            message = f"Example {index}: {len(words)} words but {len(labels)} labels"
            if not raw:
                raise ValueError(f"{message}.")
            raise ValueError(f"{message}; {_how_it_splits(example)} (CoNLL-2003's words: give a list of words to "
                             "split it yourself).")


def _how_it_splits(text):
    """How `split_words` splits `text`: every word, or for a long text the chunks between spaces that it splits."""
    words = split_words(text)
    if len(words) <= _SHOWN_WORDS:
        return f"the text splits into {[word for word, _, _ in words]!r}"
    chunks = list(re.finditer(r"\S+", text))
    split = []
    for chunk in chunks:
        parts = [word for word, start, end in words if chunk.start() <= start and end <= chunk.end()]
        if len(parts) > 1:
            split.append(f"{chunk.group()!r} -> {parts!r}")
    if not split:
        return f"the text splits at its spaces only, into {len(words)} words"
    more = f", and {len(split) - _SHOWN_CHUNKS} more chunks" if len(split) > _SHOWN_CHUNKS else ""
    return (f"the text splits into {len(words)} words, {len(words) - len(chunks)} more than at its spaces: "
            f"{', '.join(split[:_SHOWN_CHUNKS])}{more}")


def _shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _whole(word):
    """Whether `word` stays one word: an abbreviation, or a clitic standing alone (`'s`)."""
    return _ABBREVIATION.fullmatch(word) is not None or _CLITIC.fullmatch(word) is not None


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenClassifierPreprocessor(PreprocessingLayer):
    """Tokenizes words into WordPieces and packs `[CLS] pieces [SEP]`, with each word's label on its first piece.

    As in the BERT paper (section 4.3) and CoNLL-2003 fine-tuning: a word's
    label sits on its first WordPiece; later pieces, [CLS], [SEP] and padding
    carry -1, which `BertTokenClassifier`'s loss and metric skip. Inputs are
    pre-split words (a list of word lists, as CoNLL files give them) or raw
    sentences (split by `split_words`). A sentence longer than
    `sequence_length - 2` pieces is split over several rows at word
    boundaries where labels are given (`make_dataset(x, y)`: `fit` and
    `evaluate` see every word) and by `word_windows`
    (`BertTokenClassifier.predict_entities` tags every word); a row per
    sentence (`call`, `predict` on raw text) is its first window. The windows
    are built by `text/word_windows.py`, as the CoNLL recipe's are.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int >= 3, the packed length.

    Example:
    >>> preprocessor = BertTokenClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=8)
    >>> x, y = preprocessor.encode_words([["Unaffable", "Zoë"]], [[3, 1]])
    >>> x["token_ids"][0].tolist(), y[0].tolist()
    ([101, 14477, 20961, 3468, 11199, 102, 0, 0], [-1, 3, -1, -1, 1, -1, -1, -1])
    """

    def __init__(self, tokenizer, sequence_length=128, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"`sequence_length` must be an int >= 3, got {sequence_length!r}.")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length

    @classmethod
    def from_preset(cls, preset, sequence_length=128, **kwargs):
        """Preprocessor with the tokenizer of a preset name or checkpoint directory."""
        return cls(BertTokenizer.from_preset(preset), sequence_length=sequence_length, **kwargs)

    # === Raw input forms ===

    @staticmethod
    def is_raw_text(x):
        """A sentence, a list of sentences, or a list of word lists."""
        if isinstance(x, str):
            return True
        if isinstance(x, (list, tuple)) and x:
            first = x[0]
            return isinstance(first, str) or (isinstance(first, (list, tuple)) and (not first or isinstance(first[0], str)))
        return False

    @staticmethod
    def as_word_lists(x):
        """Sentences -> word lists (`split_words`); word lists pass through.

        Example:
        >>> BertTokenClassifierPreprocessor.as_word_lists(["John lives in Paris."])
        [['John', 'lives', 'in', 'Paris', '.']]
        """
        if isinstance(x, str):
            x = [x]
        words = []
        for index, item in enumerate(x):
            if isinstance(item, str):
                words.append([w for w, _, _ in split_words(item)])
            elif isinstance(item, (list, tuple)) and all(isinstance(w, str) for w in item):
                words.append(list(item))
            else:
                raise ValueError(f"Example {index}: expected a sentence (str) or a list of words (str), got {item!r}.")
        return words

    split_words = staticmethod(split_words)

    def count_examples(self, x):
        return len(self.as_word_lists(x))

    # === Encoding ===

    def word_pieces(self, word_lists):
        """WordPiece ids of every word: a list (per sentence) of lists (per word) of ids."""
        flat = [w for words in word_lists for w in words]
        if not flat:
            return [[] for _ in word_lists]
        pieces = self.tokenizer(tf.constant(flat, dtype=tf.string)).to_list()
        out, start = [], 0
        for words in word_lists:
            out.append(pieces[start : start + len(words)])
            start += len(words)
        return out

    def windows(self, word_lists, pieces=None):
        """Every word of every sentence in a window of `sequence_length` (`text/word_windows.py`, the builder the
        CoNLL recipe shares): a long sentence is split at word boundaries, a word of more than
        `sequence_length - 2` pieces keeps its first pieces, a word with none (a control character) is left out."""
        budget = self.sequence_length - 2
        pieces = self.word_pieces(word_lists) if pieces is None else pieces
        return first_piece_windows([[word[:budget] for word in words] for words in pieces], self.sequence_length,
                                   self.tokenizer.cls_token_id, self.tokenizer.sep_token_id)

    def encode_words(self, word_lists, label_ids=None, pad=True, every_word=False):
        """Word lists (and per-word label ids) -> features (and per-token labels), NumPy, padded to `sequence_length`.

        Returns `(features, labels)`; `labels` is None without `label_ids`.
        One row per sentence, which a sentence longer than `sequence_length - 2` pieces is cut to (its first
        window); with `every_word=True` such a sentence takes as many rows as it needs, so that every word is in
        one (what `make_dataset` trains and evaluates on). With `pad=False` the values are lists of unpadded rows.
        """
        pieces = self.word_pieces(word_lists)
        if label_ids is not None:
            for index, pieces_per_word in enumerate(pieces):
                labels = label_ids[index]
                if len(labels) != len(pieces_per_word):
                    raise ValueError(
                        f"Example {index}: {len(pieces_per_word)} words but {len(labels)} labels."
                    )
                silent = next((position for position, word in enumerate(pieces_per_word) if not word), None)
                if silent is not None:  # (a zero-width or control character: its tag was dropped, silently)
                    raise ValueError(f"Example {index}: word {silent} is {word_lists[index][silent]!r}, which has no "
                                     "tokens, so its tag could not be learned: leave the word and its tag out.")
                named = next((label for label in labels if isinstance(label, (str, bytes))), None)
                if named is not None:  # (was "invalid literal for int() with base 10: 'B-ORG'")
                    raise ValueError(
                        f"Example {index}: label {named!r} is a tag name; the preprocessor takes tag ids "
                        "(label_names.index(tag)), and BertTokenClassifier.fit(words, tags) takes the names."
                    )
        windows = self.windows(word_lists, pieces)
        if not every_word:  # the first window of each sentence
            windows = [w for i, w in enumerate(windows) if i == 0 or windows[i - 1].sentence != w.sentence]
        labels = None
        if label_ids is not None:
            labels = window_labels(windows, [[int(label) for label in row] for row in label_ids],
                                   width=self.sequence_length)
        if not pad:
            if labels is not None:
                labels = [row[: len(w.token_ids)].tolist() for row, w in zip(labels, windows)]
            return {"token_ids": [w.token_ids for w in windows]}, labels
        return self._pad(windows), labels

    def _pad(self, windows):
        token_ids, padding_mask, _ = pad_windows(windows, self.sequence_length, self.tokenizer.pad_token_id)
        return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": padding_mask}

    def word_windows(self, word_lists):
        """Every word of every sentence, over as many rows as needed (long sentences are split at word boundaries).

        Returns `(features, rows)`: padded NumPy features of all rows, and for
        each sentence a list of `(row, position)` per word (the row and
        position of its first piece; None for a word with no pieces, e.g. a
        control character).
        """
        windows = self.windows(word_lists)
        placements = [[None] * len(words) for words in word_lists]
        for row, window in enumerate(windows):
            for position, word in enumerate(window.word_index):
                if word >= 0:
                    placements[window.sentence][word] = (row, position)
        return self._pad(windows), placements

    def call(self, x):
        """Raw sentences or word lists -> int32 features padded to `sequence_length`."""
        features, _ = self.encode_words(self.as_word_lists(x))
        return {key: tf.constant(value) for key, value in features.items()}

    def default_boundaries(self):
        return default_boundaries(self.sequence_length, **TAGGING_BUCKETS)

    def make_dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None, boundaries=None,
                     fixed_batch_size=True):
        """Word lists (or sentences) and per-word label ids -> a `tf.data.Dataset` of batches with a known length.

        Training (`shuffle`): shuffled each epoch, grouped by length bucket,
        each batch padded to its bucket. Otherwise: in order, padded to
        `sequence_length`. Every batch has `batch_size` rows (filler rows have
        labels -1), unless `fixed_batch_size=False` (a short last batch).
        With labels, a sentence too long for one row takes several (`encode_words(..., every_word=True)`);
        without, each sentence is one row (its first window), so that predictions line up with the sentences.
        """
        if sample_weight is not None:
            raise ValueError("Token classification takes no `sample_weight`: label -1 marks the tokens to skip.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        word_lists = self.as_word_lists(x)
        if not word_lists:
            raise ValueError("No examples: the list of sentences is empty.")
        if y is not None:
            check_labelled_examples([x] if isinstance(x, str) else list(x), word_lists, y)
        features, labels = self.encode_words(word_lists, y, pad=False, every_word=y is not None)
        rows = features["token_ids"]
        token_ids = tf.ragged.constant(rows, dtype=tf.int32)
        element = {
            "token_ids": token_ids,
            "segment_ids": tf.zeros_like(token_ids),
            "padding_mask": tf.ones_like(token_ids),
        }
        if labels is None:
            dataset = tf.data.Dataset.from_tensor_slices(element)
        else:
            dataset = tf.data.Dataset.from_tensor_slices((element, tf.ragged.constant(labels, dtype=tf.int32)))
        if shuffle:  # (by default, the buckets of a small dataset merged: fewer step shapes)
            boundaries = list(boundaries) if boundaries is not None else merge_sparse_buckets(
                self.default_boundaries(), [len(r) for r in rows], batch_size)
            dataset = dataset.shuffle(len(rows), seed=seed, reshuffle_each_iteration=True)
        else:
            boundaries = list(boundaries) if boundaries is not None else [self.sequence_length]
        return batches_by_length(dataset, [len(r) for r in rows], batch_size, boundaries, grouped=bool(shuffle),
                                 label_fill_value=IGNORE_LABEL, label_padding_value=IGNORE_LABEL,
                                 fill=fixed_batch_size)

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
        }
