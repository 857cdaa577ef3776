"""BertClassifierPreprocessor: raw strings (one or two segments) -> BertClassifier inputs and batches."""

import os
import sys
import warnings

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.batching.boundaries import (
    CLASSIFICATION_BUCKETS,
    default_boundaries,
    merge_sparse_buckets,
)
from keras_bert_impl.batching.tf_batches import batches_by_length
from keras_bert_impl.table_columns import table_as_labels
from keras_bert_impl.text.packer import SegmentPacker
from keras_bert_impl.raw_text import not_text_error
from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer
from keras_bert_impl.text.tokenizer import BertTokenizer

# Tokenize this many strings per TensorFlow call (one string at a time is much slower).
_TOKENIZE_CHUNK = 4096


class TruncationWarning(UserWarning):
    """Labelled examples longer than the preprocessor's `sequence_length` were cut to it (`make_dataset` with `y`).

    `warnings.filterwarnings("ignore", category=TruncationWarning)` silences it.
    """


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertClassifierPreprocessor(PreprocessingLayer):
    """WordPiece-tokenizes one or two batches of strings and packs them as `[CLS] A [SEP] (B [SEP])`.

    A Keras layer that works under every backend (TensorFlow string ops),
    eagerly and inside `tf.data.Dataset.map`; it is what `BertClassifier`
    calls on raw strings, and it is saved with the classifier (vocabulary
    included). Calling it pads to `sequence_length` (static shapes);
    `unpadded` returns ragged rows for length buckets; `make_dataset` turns
    raw strings (and labels) into length-bucketed batches, the way
    `BertClassifier.fit` consumes them.

    Raw text forms (everywhere in this class): `"text"`, `["a", "b"]` (one
    segment each), a tuple of two lists `(["a1", ...], ["b1", ...])` or a
    list of pairs `[("a1", "b1"), ...]` (two segments each).

    Args:
        tokenizer: a `keras_bert_impl.text.tokenizer.BertTokenizer`.
        sequence_length: int >= 3, the maximum packed length (special tokens included).
        truncate: how a pair is cut to fit: `"longest_first"` (original BERT
            `run_classifier.py` and Hugging Face's default), `"round_robin"`
            or `"waterfall"` (see `keras_bert_impl.text.packer`).

    Example:
    >>> preprocessor = BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=8)
    >>> out = preprocessor((["The cat sat."], ["A cat sat down."]))
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[101, 1996, 4937, 2938, 102, 1037, 4937, 102]], [[0, 0, 0, 0, 0, 1, 1, 1]])
    >>> preprocessor.unpadded(["short"])["token_ids"].to_list()
    [[101, 2460, 102]]
    >>> batches = preprocessor.make_dataset(["a fine film", "dull"], [1, 0], batch_size=2)
    >>> features, labels, weights = next(iter(batches))
    >>> features["token_ids"].shape.as_list(), labels.numpy().tolist()
    ([2, 8], [1, 0])
    """


    raw_text_columns = (("text",), ("text_a", "text_b"))
    reads_string_datasets = True  # `make_dataset` maps a tf.data.Dataset of texts (or of pairs of them)

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first", **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            # A serialised tokenizer (`keras.saving.serialize_keras_object`) or its bare config.
            tokenizer = (
                keras.saving.deserialize_keras_object(tokenizer)
                if "class_name" in tokenizer
                else BertTokenizer.from_config(tokenizer)
            )
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.truncate = truncate
        self.sequence_length = sequence_length

    @property
    def sequence_length(self):
        """The packed length; set it to pack (and bucket) every later call and `make_dataset` to another length."""
        return self._sequence_length

    @sequence_length.setter
    def sequence_length(self, sequence_length):
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"`sequence_length` must be an int >= 3 ([CLS] text [SEP]), got {sequence_length!r}.")
        self._sequence_length = sequence_length
        self.packer = SegmentPacker.from_tokenizer(self.tokenizer, sequence_length, truncate=self.truncate, pad=True)
        self.unpadded_packer = SegmentPacker.from_tokenizer(
            self.tokenizer, sequence_length, truncate=self.truncate, pad=False
        )

    @classmethod
    def from_preset(cls, preset, sequence_length=128, truncate="longest_first", **kwargs):
        """Preprocessor with the tokenizer of a preset name or checkpoint directory."""
        return cls(BertTokenizer.from_preset(preset), sequence_length=sequence_length, truncate=truncate, **kwargs)

    # === Raw text ===

    @staticmethod
    def is_raw_text(x):
        """Whether `x` is raw text in one of the forms above (or a `tf.data.Dataset` of strings)."""
        return is_raw_text(x)

    @staticmethod
    def count_examples(x):
        """The number of examples in raw text `x`."""
        return len(as_segments(x)[0])

    def _example_columns(self, x):
        if isinstance(x, tuple) and len(x) == 2 and not _is_text(x[0]):
            return x  # (texts_a, texts_b)
        return None

    def _segments(self, texts):
        if isinstance(texts, (tf.Tensor, tf.RaggedTensor, str, bytes)):
            segments = [texts]  # a batch, or a single example (scalar string: unbatched output)
        elif isinstance(texts, (tuple, list)) and texts and isinstance(texts[0], (tf.Tensor, tf.RaggedTensor)):
            segments = list(texts)  # (texts_a, texts_b) tensors, e.g. inside tf.data.Dataset.map
            if len(segments) > 2:
                raise ValueError(f"A classifier takes one or two text segments, got {len(segments)}.")
        else:
            segments = as_segments(texts)
        return [self.tokenizer(tf.convert_to_tensor(s, dtype=tf.string)) for s in segments]

    def call(self, x, y=None, sample_weight=None):
        """Packs raw text to int32 `[batch, sequence_length]` features; with `y`, returns `(features, y, sample_weight)`."""
        features = self.packer(self._segments(x))
        if y is None and sample_weight is None:
            return features
        return features, y, sample_weight

    def unpadded(self, texts):
        """As calling the layer, but each row only as long as its packed tokens (ragged `[batch, None]`)."""
        return self.unpadded_packer(self._segments(texts))

    def default_boundaries(self):
        """Length buckets for this `sequence_length`: 16, 32, 48, 64, 96, 128, ..."""
        return default_boundaries(self.sequence_length, **CLASSIFICATION_BUCKETS)

    # === Batches ===

    def make_dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None, boundaries=None,
                     fixed_batch_size=True):
        """Raw text (and labels) -> a `tf.data.Dataset` of length-bucketed batches with a known length.

        All strings are tokenized once, up front. With `shuffle`, examples are
        shuffled each epoch and grouped by length bucket (each batch padded to
        its bucket's boundary, 16/32/48/64/96/128 tokens by default), as the
        GLUE recipe does; without it the order is kept and each batch is
        padded to the smallest boundary that holds its longest row. Every
        batch has exactly `batch_size` rows, so an XLA-compiled step sees one
        shape per boundary: missing rows are weight-0 copies (label 0). By
        default a bucket of fewer than 8 batches joins the next one up
        (`merge_sparse_buckets`): a small dataset compiles one or two shapes.

        A `tf.data.Dataset` of raw strings is mapped instead (its batching and
        order kept): batches of strings, or `(strings, labels)`, each padded
        to its longest row rounded up to a boundary.

        Args:
            x: raw text in one of the forms above, or a `tf.data.Dataset` of them.
            y: labels (one per example, or one row per example: multi-hot labels) or None.
            sample_weight: per-example weights or None.
            batch_size: int.
            shuffle: shuffle and bucket by length (training) or keep the order.
            seed: shuffle seed.
            boundaries: bucket boundaries, kept as given; default `default_boundaries()`, sparse buckets merged.
            fixed_batch_size: fill each last, partial batch to `batch_size` rows (weight 0) for one step
                shape per bucket; False: a short last batch (what losses and metrics that count every
                row need: `Task` asks for it when compiled with other than the default loss and metrics).

        Returns:
            Batches of `(features, y, weight)`, or `features` alone without `y`.
        """
        given = boundaries is not None
        boundaries = list(boundaries) if given else self.default_boundaries()
        if boundaries[-1] < self.sequence_length:
            boundaries.append(self.sequence_length)
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise ValueError("With a tf.data.Dataset `x`, labels come from the dataset: do not pass `y` or `sample_weight`.")
            return self._map_string_dataset(x, batch_size, boundaries)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        x, y, sample_weight = self.read_table(x, y), table_as_labels(y), table_as_labels(sample_weight)
        segments = as_segments(x)
        count = len(segments[0])
        if count == 0:
            raise ValueError("No examples: the raw text list is empty.")
        # One example where the labels are several: a single string (`fit("a text", labels)`), or one pair (a tuple
        # of two strings, `fit(("good", "bad"), [1, 0])`): the message says which, and how to give several texts.
        one_text = "string" if isinstance(x, (str, bytes)) else "pair" if (
            isinstance(x, tuple) and len(x) == 2 and all(map(_is_text, x))) else None
        labels = None if y is None else _as_column(y, count, "y", rows=True, one_text=one_text)
        weights = None if sample_weight is None else _as_column(sample_weight, count, "sample_weight", "float32",
                                                                one_text=one_text)
        features, full_lengths = self._tokenize_all(segments)
        lengths = features["token_ids"].row_lengths().numpy()
        if not given:  # (a small dataset: fewer step shapes)
            boundaries = merge_sparse_buckets(boundaries, lengths, batch_size)
        if y is not None:
            self._warn_of_truncation(full_lengths)

        if labels is None:
            dataset = tf.data.Dataset.from_tensor_slices(features)
        else:
            if weights is None:
                weights = np.ones(count, "float32")
            dataset = tf.data.Dataset.from_tensor_slices((features, labels, weights))
        if shuffle:
            dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        # Filler rows repeat the batch's first features, with label 0 and weight 0.
        return batches_by_length(dataset, lengths, batch_size, boundaries, grouped=bool(shuffle), label_fill_value=0,
                                 fill=fixed_batch_size)

    def _tokenize_all(self, segments):
        """All examples' packed features (ragged, cut to `sequence_length`) and each one's uncut length."""
        parts, full_lengths = [], []
        count = len(segments[0])
        for start in range(0, count, _TOKENIZE_CHUNK):
            chunk = [tf.constant(s[start : start + _TOKENIZE_CHUNK], dtype=tf.string) for s in segments]
            pieces = [self.tokenizer(c) for c in chunk]
            parts.append(self.unpadded_packer(pieces))
            # [CLS] a [SEP] (b [SEP]): one special token per segment, and [CLS].
            full_lengths.append(sum(p.row_lengths().numpy() for p in pieces) + len(pieces) + 1)
        features = {key: tf.concat([p[key] for p in parts], axis=0) for key in parts[0]}
        return features, np.concatenate(full_lengths)

    def _warn_of_truncation(self, full_lengths):
        """Says once per dataset how many labelled examples are cut to `sequence_length` (the model reads only their
        first tokens: Hugging Face's tokenizer warns of it too, keras-hub cuts them without a word)."""
        cut = int(np.sum(full_lengths > self.sequence_length))
        if cut:
            warnings.warn(
                f"{cut} of {len(full_lengths)} examples ({cut / len(full_lengths):.1%}) are longer than "
                f"sequence_length={self.sequence_length} tokens (the longest: {int(full_lengths.max())}) and are cut to "
                "it: raise preprocessor.sequence_length (up to the backbone's max_sequence_length) to keep more.",
                TruncationWarning, stacklevel=_first_caller_outside_the_package(),
            )

    def _map_string_dataset(self, dataset, batch_size, boundaries):
        spec = dataset.element_spec
        texts_spec = spec[0] if isinstance(spec, tuple) else spec
        first = tf.nest.flatten(texts_spec)[0]
        if first.dtype != tf.string:
            raise ValueError(f"The dataset's first component must be strings (raw text), got {first.dtype.name}.")
        if first.shape.rank == 0:
            dataset = dataset.batch(batch_size)
        bounds = tf.constant(boundaries, tf.int32)

        def pad_to_bucket(features):
            longest = tf.cast(tf.reduce_max(features["token_ids"].row_lengths()), tf.int32)
            index = tf.minimum(tf.reduce_sum(tf.cast(bounds < longest, tf.int32)), len(boundaries) - 1)
            target = bounds[index]
            padded = {}
            for key, value in features.items():
                dense = value.to_tensor()
                padded[key] = tf.pad(dense, [[0, 0], [0, target - tf.shape(dense)[1]]])
            return padded

        def preprocess(*element):
            texts = element[0] if isinstance(spec, tuple) else element
            texts = list(texts) if isinstance(texts, tuple) else [texts]
            features = pad_to_bucket(self.unpadded_packer([self.tokenizer(t) for t in texts]))
            return (features, *element[1:]) if isinstance(spec, tuple) else features

        return dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    # === Serialisation ===

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "truncate": self.truncate,
        }


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassifierPreprocessor(BertClassifierPreprocessor):
    """The earlier name of `BertClassifierPreprocessor`, kept so that models saved under it still load."""


def _as_column(values, count, name, dtype=None, rows=False, one_text=None):
    """`values` as an array of one value (or, with `rows`, one value or one row: multi-hot labels) per example."""
    array = np.asarray(values) if dtype is None else np.asarray(values, dtype=dtype)
    if array.ndim not in ((1, 2) if rows else (1,)) or len(array) != count:
        what = "one value (or one row of values)" if rows else "one value"
        hint = {"string": " `x` is one example (a single string): give the texts as a list.",
                "pair": " `x` is one example (a tuple of two strings is one sentence pair): give several texts as a "
                        "list, [text, text], and several pairs as (texts_a, texts_b)."}
        hint = hint[one_text] if one_text and array.ndim >= 1 and len(array) > 1 else ""
        raise ValueError(f"`{name}` must hold {what} per example ({count}), got shape {array.shape}." + hint)
    return array


def _is_text(value):
    return isinstance(value, (str, bytes))


def is_raw_text(x):
    """Whether `x` is raw text: a string, a list / array of strings, two lists, a list of pairs, or a dataset of strings.

    Example:
    >>> is_raw_text(["a"]), is_raw_text((["a"], ["b"])), is_raw_text({"token_ids": [[1]]})
    (True, True, False)
    """
    if _is_text(x):
        return True
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        first = tf.nest.flatten(spec[0] if isinstance(spec, tuple) else spec)[0]
        return getattr(first, "dtype", None) == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in ("U", "S", "O") and x.size > 0 and _is_text(x.flat[0])
    if hasattr(x, "tolist") and not isinstance(x, (dict, tf.Tensor)):  # pandas Series
        x = x.tolist()
    if isinstance(x, (list, tuple)) and x:
        first = x[0]
        if _is_text(first):
            return True
        if hasattr(first, "tolist") and not isinstance(first, dict):
            first = first.tolist()
        if isinstance(first, (list, tuple)) and len(first) and _is_text(first[0]):
            return True
    return False


def as_segments(x):
    """Raw text -> a list of one or two lists of strings of equal length.

    A tuple `(texts_a, texts_b)` holds two segment lists (a tuple of two
    strings is one pair, as keras-hub's preprocessors read it); a list holds
    examples, each a string or an `(a, b)` pair.

    Example:
    >>> as_segments("hi"), as_segments((["a"], ["b"])), as_segments([("a", "b")]), as_segments(("a", "b"))
    ([['hi']], [['a'], ['b']], [['a'], ['b']], [['a'], ['b']])
    """
    if _is_text(x):
        return [[x]]
    if isinstance(x, np.ndarray) or (hasattr(x, "tolist") and not isinstance(x, (list, tuple))):
        x = x.tolist()
    if isinstance(x, tuple) and len(x) == 2 and not _is_text(x[0]):
        texts_a = x[0].tolist() if hasattr(x[0], "tolist") else list(x[0])
        texts_b = x[1].tolist() if hasattr(x[1], "tolist") else list(x[1])
        if len(texts_a) != len(texts_b):
            raise ValueError(f"The two segment lists (texts_a, texts_b) of the sentence pairs differ in length: "
                             f"{len(texts_a)} vs {len(texts_b)}.")
        for texts in (texts_a, texts_b):
            _check_texts(texts)
        return [texts_a, texts_b]
    if isinstance(x, tuple) and len(x) == 2 and all(map(_is_text, x)):  # one pair, as keras-hub's preprocessors
        return [[x[0]], [x[1]]]  # read it (was two single texts, silently)
    x = list(x)
    if all(_is_text(item) for item in x):
        return [x]
    if len(x) == 2 and all(isinstance(item, list) and len(item) == 2 and all(map(_is_text, item)) for item in x):
        raise ValueError(  # (read as two pairs, silently, where two columns of two texts were meant)
            "Raw text is a list of two lists of two texts, which reads two ways: give two pairs as a list of "
            "tuples [(text_a, text_b), (text_a, text_b)], or two columns as a tuple (texts_a, texts_b)."
        )
    if all(isinstance(item, (list, tuple)) and len(item) == 2 and all(map(_is_text, item)) for item in x):
        return [[item[0] for item in x], [item[1] for item in x]]
    if len(x) == 2 and all(isinstance(item, list) and item and all(map(_is_text, item)) for item in x):
        raise ValueError(
            f"Raw text is a list of two lists ({len(x[0])} and {len(x[1])} texts): sentence pairs are a tuple "
            "(texts_a, texts_b) of two lists, or a list of [text_a, text_b] pairs."
        )
    _check_texts(x)
    raise ValueError(
        "Raw text must be a string, a list of strings, a tuple (texts_a, texts_b) of two lists, "
        "or a list of (text_a, text_b) pairs."
    )


def _check_texts(texts):
    for index, text in enumerate(texts):
        if not _is_text(text):
            raise not_text_error(index, text)


def _first_caller_outside_the_package():
    """The `stacklevel` of `warnings.warn` called here that names the user's line (their `fit`), not the package's."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1  # noqa: SLF001  (the frame calling warnings.warn)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level
