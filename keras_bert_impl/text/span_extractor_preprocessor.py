"""BertSpanExtractorPreprocessor: (question, context) -> sliding windows for BertSpanExtractor, with character offsets."""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer
from keras_bert_impl.text.tokenizer import BertTokenizer


@dataclasses.dataclass
class SpanWindows:
    """The windows of a batch of (question, context) pairs.

    Attributes:
        features: padded NumPy `token_ids`, `segment_ids`, `padding_mask` `(windows, sequence_length)`.
        example: int array `(windows,)`: the pair each window belongs to.
        context_start: int array `(windows,)`: position of the window's first context token.
        token_index: list (per window) of int arrays: context token index at
            each position from `context_start` on.
        max_context: list (per window) of bool arrays: whether this window is
            the token's "max context" window (the one where it has the most
            context on both sides), as in google-research/bert.
        char_starts, char_ends: list (per pair) of int arrays: character
            offsets of each context token in the context string.
    """

    features: dict
    example: np.ndarray
    context_start: np.ndarray
    token_index: list
    max_context: list
    char_starts: list
    char_ends: list


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertSpanExtractorPreprocessor(PreprocessingLayer):
    """Packs `[CLS] question [SEP] context window [SEP]`, sliding over contexts longer than one window.

    The question is cut to `max_question_length` pieces; the context is cut
    into windows of the remaining room that start every `doc_stride` tokens
    (google-research/bert's `run_squad.py` and Hugging Face's QA pipeline do
    the same). Every context token keeps its character offsets in the
    original string (exact for any Unicode), so an answer span maps back to
    the text. `BertSpanExtractor.answer` uses it.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int, the packed length (384 as in BERT's SQuAD runs).
        doc_stride: int, tokens between the starts of two windows.
        max_question_length: int, question pieces kept.

    Example:
    >>> preprocessor = BertSpanExtractorPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=16, doc_stride=4)
    >>> windows = preprocessor.windows(["Who?"], ["Ada Lovelace wrote the first program for Babbage's engine."])
    >>> len(windows.example), windows.features["token_ids"].shape
    (2, (2, 16))
    >>> s, e = windows.char_starts[0][1], windows.char_ends[0][1]  # the second context token
    >>> "Ada Lovelace wrote"[s:e]
    'Love'
    """

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_question_length=64, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        for name, value in (("sequence_length", sequence_length), ("doc_stride", doc_stride),
                            ("max_question_length", max_question_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if sequence_length < 5:
            raise ValueError(
                f"sequence_length={sequence_length} leaves no room for [CLS] question [SEP] context [SEP]: use >= 5."
            )
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.doc_stride = doc_stride
        self.max_question_length = max_question_length

    @classmethod
    def from_preset(cls, preset, sequence_length=384, doc_stride=128, max_question_length=64, **kwargs):
        """Preprocessor with the tokenizer of a preset name or checkpoint directory."""
        return cls(BertTokenizer.from_preset(preset), sequence_length=sequence_length, doc_stride=doc_stride,
                   max_question_length=max_question_length, **kwargs)

    @staticmethod
    def is_raw_text(x):
        """A `(question, context)` pair of strings or of lists of strings."""
        return (
            isinstance(x, tuple)
            and len(x) == 2
            and all(isinstance(v, str) or (isinstance(v, (list, tuple)) and v and isinstance(v[0], str)) for v in x)
        )

    def windows(self, questions, contexts):
        """Windows of every (question, context) pair: a `SpanWindows`."""
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts.")
        for name, values in (("question", questions), ("context", contexts)):
            for index, value in enumerate(values):
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f"{name} {index} must be a non-empty string, got {value!r}.")
        question_ids = self.tokenizer(tf.constant(list(questions), tf.string)).to_list()
        ids, byte_starts, byte_ends = self.tokenizer.tokenize_with_offsets(tf.constant(list(contexts), tf.string))
        ids, byte_starts, byte_ends = ids.to_list(), byte_starts.to_list(), byte_ends.to_list()
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        rows, segments, example, context_start, token_index, max_context = [], [], [], [], [], []
        char_starts, char_ends = [], []
        for i, (question, context) in enumerate(zip(question_ids, contexts)):
            # Keep at least one context token per window.
            question = question[: min(self.max_question_length, self.sequence_length - 4)]
            byte_to_char = _byte_to_char(context)
            char_starts.append(byte_to_char[np.asarray(byte_starts[i], "int64")] if ids[i] else np.zeros(0, "int64"))
            char_ends.append(byte_to_char[np.asarray(byte_ends[i], "int64")] if ids[i] else np.zeros(0, "int64"))
            room = self.sequence_length - len(question) - 3
            spans = _window_spans(len(ids[i]), room, self.doc_stride)
            best = _max_context_windows(spans, len(ids[i]))
            prefix = [cls_id, *question, sep_id]
            for window, (start, length) in enumerate(spans):
                rows.append(prefix + ids[i][start : start + length] + [sep_id])
                segments.append([0] * len(prefix) + [1] * (length + 1))
                example.append(i)
                context_start.append(len(prefix))
                token_index.append(np.arange(start, start + length))
                max_context.append(best[start : start + length] == window)
        token_ids = np.full((len(rows), self.sequence_length), self.tokenizer.pad_token_id, "int32")
        segment_ids = np.zeros_like(token_ids)
        padding_mask = np.zeros_like(token_ids)
        for r, (row, segment) in enumerate(zip(rows, segments)):
            token_ids[r, : len(row)] = row
            segment_ids[r, : len(row)] = segment
            padding_mask[r, : len(row)] = 1
        features = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return SpanWindows(features, np.asarray(example), np.asarray(context_start), token_index, max_context,
                           char_starts, char_ends)

    def call(self, x):
        """`(questions, contexts)` -> the padded features of their windows (several rows for a long context)."""
        questions, contexts = x
        if isinstance(questions, str):
            questions, contexts = [questions], [contexts]
        features = self.windows(list(questions), list(contexts)).features
        return {key: tf.constant(value) for key, value in features.items()}

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "doc_stride": self.doc_stride,
            "max_question_length": self.max_question_length,
        }


def _byte_to_char(text):
    """Array mapping each UTF-8 byte offset of `text` (and its end) to a character offset."""
    lengths = [len(c.encode("utf-8")) for c in text]
    return np.repeat(np.arange(len(text) + 1), lengths + [1])


def _window_spans(num_tokens, room, stride):
    """`(start, length)` of each window over `num_tokens` context tokens (at least one window)."""
    spans, start = [], 0
    while True:
        length = min(room, num_tokens - start)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def _max_context_windows(spans, num_tokens):
    """For each token, the window where it has the most context (min of left and right, plus 0.01 x length)."""
    best = np.zeros(num_tokens, "int64")
    best_score = np.full(num_tokens, -1.0)
    for window, (start, length) in enumerate(spans):
        positions = np.arange(start, start + length)
        score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
        better = score > best_score[positions]
        best[positions[better]] = window
        best_score[positions[better]] = score[better]
    return best
