"""BertSpanExtractorPreprocessor: (question, context[, answer]) -> sliding windows for BertSpanExtractor, and batches."""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.batching.boundaries import (
    SPAN_QA_BUCKETS,
    default_boundaries,
    merge_sparse_buckets,
)
from keras_bert_impl.batching.tf_batches import batches_by_length
from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer
from keras_bert_impl.text.span_windows import (
    byte_to_char_offsets,
    max_context_windows,
    token_span_of_chars,
    window_labels,
    window_spans,
)
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
        lengths: int array `(windows,)`: each window's tokens, padding excluded.
        labels: with answers, `{"start_logits", "end_logits"}`: int32 `(windows,)`
            positions of the answer's first and last token in each window, 0
            ([CLS]) where the window does not hold the whole answer or there is
            none; None without answers.
    """

    features: dict
    example: np.ndarray
    context_start: np.ndarray
    token_index: list
    max_context: list
    char_starts: list
    char_ends: list
    lengths: np.ndarray = None
    labels: dict = None


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertSpanExtractorPreprocessor(PreprocessingLayer):
    """Packs `[CLS] question [SEP] context window [SEP]`, sliding over contexts longer than one window.

    The question is cut to `max_question_length` pieces; the context is cut
    into windows of the remaining room that start every `doc_stride` tokens
    (google-research/bert's `run_squad.py` and Hugging Face's QA pipeline do
    the same). Every context token keeps its character offsets in the
    original string (exact for any Unicode), so an answer span maps back to
    the text. `BertSpanExtractor.answer` uses it, and `fit` / `evaluate` on
    raw `(questions, contexts)` with answers train through `make_dataset`:
    each window is labelled with the answer's first and last token, or with
    [CLS] where it does not hold the whole answer (google-research/bert).

    Answers, one per question, in any of these forms: the answer text
    (`"Denver Broncos"`: its first occurrence in the context), a dict
    `{"text": ..., "start": character offset}`, a `(text, start)` pair, a
    question's `answers` as the SQuAD JSON file gives them, a list of
    `{"text": ..., "answer_start": ...}` dicts, or as Hugging Face
    `datasets` gives them, `{"text": [...], "answer_start": [...]}` (of
    several answers, the first), or `""` / `None` / `[]` for "no answer"
    (SQuAD v2.0: every window is labelled [CLS]).

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
    >>> batches = preprocessor.make_dataset((["Who?"], ["Ada Lovelace wrote the first program."]), ["Ada Lovelace"],
    ...                                     batch_size=2)
    >>> features, labels, weights = next(iter(batches))
    >>> labels["start_logits"].numpy().tolist(), labels["end_logits"].numpy().tolist()  # [CLS] Who ? [SEP] ada love ##lace
    ([4, -1], [6, -1])
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
        """A `(question, context)` pair of strings or of lists of strings, or a list of `(question, context)`
        tuples."""
        return _is_list_of_pairs(x) or (
            isinstance(x, tuple)
            and len(x) == 2
            and all(isinstance(v, str) or (isinstance(v, (list, tuple)) and v and isinstance(v[0], str)) for v in x)
        )

    @staticmethod
    def as_columns(x):
        """Raw text in any of its forms -> `(questions, contexts)`, two lists (`as_columns` below)."""
        return as_columns(x)

    @staticmethod
    def count_examples(x):
        """The number of questions in raw `(questions, contexts)`."""
        return len(as_columns(x)[0])

    def _example_columns(self, x):
        return as_columns(x)  # (questions, contexts)

    def windows(self, questions, contexts, answers=None):
        """Windows of every (question, context) pair: a `SpanWindows`; with `answers` (one per question), labelled."""
        if len(questions) != len(contexts):
            raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts.")
        if not questions:
            raise ValueError("No examples: the lists of questions and contexts are empty.")
        for name, values in (("question", questions), ("context", contexts)):
            for index, value in enumerate(values):
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f"{name} {index} must be a non-empty string, got {value!r}.")
        answer_chars = None if answers is None else answer_character_spans(answers, contexts, questions)
        question_ids = self.tokenizer(tf.constant(list(questions), tf.string)).to_list()
        ids, byte_starts, byte_ends = self.tokenizer.tokenize_with_offsets(tf.constant(list(contexts), tf.string))
        ids, byte_starts, byte_ends = ids.to_list(), byte_starts.to_list(), byte_ends.to_list()
        cls_id, sep_id = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        rows, segments, example, context_start, token_index, max_context = [], [], [], [], [], []
        char_starts, char_ends, start_labels, end_labels = [], [], [], []
        for i, (question, context) in enumerate(zip(question_ids, contexts)):
            # Keep at least one context token per window.
            question = question[: min(self.max_question_length, self.sequence_length - 4)]
            starts, ends = byte_to_char_offsets(context, byte_starts[i], byte_ends[i])
            char_starts.append(starts)
            char_ends.append(ends)
            spans = window_spans(len(ids[i]), self.sequence_length - len(question) - 3, self.doc_stride)
            best = max_context_windows(spans, len(ids[i]))
            prefix = [cls_id, *question, sep_id]
            if answer_chars is not None:
                token_span = _answer_token_span(answer_chars[i], starts, ends, i, context)
                window_starts, window_ends = window_labels(spans, token_span, len(prefix))
                start_labels += window_starts
                end_labels += window_ends
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
        labels = None
        if answer_chars is not None:
            labels = {"start_logits": np.asarray(start_labels, "int32"), "end_logits": np.asarray(end_labels, "int32")}
        return SpanWindows(features, np.asarray(example), np.asarray(context_start), token_index, max_context,
                           char_starts, char_ends, np.asarray([len(row) for row in rows], "int32"), labels)

    def call(self, x):
        """`(questions, contexts)` -> the padded features of their windows (several rows for a long context)."""
        questions, contexts = as_columns(x)
        features = self.windows(questions, contexts).features
        return {key: tf.constant(value) for key, value in features.items()}

    def default_boundaries(self):
        """Length buckets for this `sequence_length`: 32, 64, 128, 256, ... and `sequence_length` (SQuAD's)."""
        return default_boundaries(self.sequence_length, **SPAN_QA_BUCKETS)

    # === Batches ===

    def make_dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None, boundaries=None,
                     fixed_batch_size=True):
        """Raw `(questions, contexts)` (and answers) -> a `tf.data.Dataset` of length-bucketed window batches.

        Every question gives one window or more (`windows`); a batch holds
        `batch_size` windows. With `shuffle`, the windows are shuffled each
        epoch and grouped by length bucket (32/64/128/256/384 tokens by
        default), as the SQuAD recipe trains; without it their order is kept
        and each batch is padded to the smallest boundary that holds its
        longest window. Every batch has exactly `batch_size` rows, so an
        XLA-compiled step sees one shape per boundary: the missing rows are
        copies labelled -1, which `SpanLoss` ignores (the loss stays the mean
        over the real windows).

        Args:
            x: `(questions, contexts)`: two lists of strings (or two strings).
            y: answers, one per question (the forms in the class docstring), or None.
            sample_weight: one weight per question (each of its windows gets it), or None.
            batch_size: int, windows per batch.
            shuffle: shuffle and bucket by length (training), or keep the order.
            seed: shuffle seed.
            boundaries: bucket boundaries, kept as given; default `default_boundaries()`, sparse buckets merged
                (`merge_sparse_buckets`: fewer step shapes for a small dataset).
            fixed_batch_size: fill each last, partial batch to `batch_size` rows (weight 0) for one step
                shape per bucket; False: a short last batch (what losses and metrics that count every
                row need: `Task` asks for it when compiled with other than the default loss and metrics).

        Returns:
            Batches of `(features, labels, weights)` with `labels = {"start_logits", "end_logits"}`,
            or `features` alone without `y`.
        """
        if isinstance(x, tf.data.Dataset):
            raise ValueError(
                "BertSpanExtractor reads raw text as a tuple (questions, contexts) of two lists of strings, with the "
                "answers as `y`; a tf.data.Dataset must already hold its windows' features (token_ids, segment_ids, "
                "padding_mask) and labels (start_logits, end_logits)."
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        given = boundaries is not None
        boundaries = list(boundaries) if given else self.default_boundaries()
        if boundaries[-1] < self.sequence_length:
            boundaries.append(self.sequence_length)
        questions, contexts = as_columns(x)
        if not questions:
            raise ValueError("No examples: the list of questions is empty.")
        if y is not None:
            y = answers_per_question(y, len(questions), single_question=isinstance(x[0], str))
            if len(y) != len(questions):
                raise ValueError(f"{len(questions)} questions but {len(y)} answers: give one answer per question.")
        windows = self.windows(questions, contexts, y)
        lengths = windows.lengths
        if not given:  # (a small dataset: fewer step shapes)
            boundaries = merge_sparse_buckets(boundaries, lengths, batch_size)
        elements = {key: value for key, value in windows.features.items()}
        if y is not None:
            if sample_weight is None:
                weights = np.ones(len(lengths), "float32")
            else:
                weights = np.asarray(sample_weight, "float32").reshape(-1)
                if len(weights) != len(questions):
                    raise ValueError(
                        f"`sample_weight` must hold one value per question ({len(questions)}), got {len(weights)}."
                    )
                weights = weights[windows.example]
            elements = (elements, windows.labels, weights)
        elif sample_weight is not None:
            raise ValueError("`sample_weight` needs answers (`y`).")

        def trim(element, *rest):
            length = tf.reduce_sum(element["padding_mask"])
            return ({key: value[:length] for key, value in element.items()}, *rest) if rest else {
                key: value[:length] for key, value in element.items()}

        dataset = tf.data.Dataset.from_tensor_slices(elements)
        if shuffle:
            dataset = dataset.shuffle(len(lengths), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        return batches_by_length(dataset, lengths, batch_size, boundaries, grouped=bool(shuffle), label_fill_value=-1,
                                 fill=fixed_batch_size)

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "doc_stride": self.doc_stride,
            "max_question_length": self.max_question_length,
        }


def _is_list_of_pairs(x):
    """A list of `(question, context)` tuples of strings (as `list(zip(questions, contexts))` gives)."""
    return isinstance(x, list) and len(x) > 0 and all(
        isinstance(item, tuple) and len(item) == 2 and all(isinstance(v, str) for v in item) for item in x)


def as_columns(x):
    """`(question, context)` strings, `(questions, contexts)` lists or a list of `(question, context)` tuples ->
    `(questions, contexts)`, two lists.

    Example:
    >>> as_columns([("Who?", "Ada wrote it."), ("When?", "In 1843.")])
    (['Who?', 'When?'], ['Ada wrote it.', 'In 1843.'])
    >>> as_columns(("Who?", "Ada wrote it."))
    (['Who?'], ['Ada wrote it.'])
    >>> as_columns(["Who?", "When?"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: Span extraction reads (questions, contexts), got a list of a string and a str: one question and its
    context are a tuple (question, context); several are a tuple of two lists (questions, contexts) or a list of
    (question, context) tuples.
    """
    if _is_list_of_pairs(x):
        return [question for question, _ in x], [context for _, context in x]
    if isinstance(x, list) and len(x) == 2 and all(
            isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item) for item in x):
        raise ValueError(  # (two questions and two contexts, or two (question, context) pairs?)
            "Span extraction got a list of two lists of two strings, which reads two ways: give two questions and "
            "their contexts as a tuple (questions, contexts), or two pairs as a list of (question, context) tuples."
        )
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise ValueError(
            f"Span extraction reads (questions, contexts): a tuple of two lists of strings, or a list of (question, "
            f"context) tuples, got {type(x).__name__}."
        )
    questions, contexts = x
    if isinstance(questions, str):
        if isinstance(x, list) or not isinstance(contexts, str):  # two questions, or a question and its context?
            raise ValueError(
                f"Span extraction reads (questions, contexts), got a {type(x).__name__} of a string and a "
                f"{type(contexts).__name__}: one question and its context are a tuple (question, context); several "
                "are a tuple of two lists (questions, contexts) or a list of (question, context) tuples."
            )
        return [questions], [contexts]
    questions, contexts = list(questions), list(contexts)
    if len(questions) != len(contexts):  # (before the answers are counted: the contexts are what is short)
        raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts: give one context per question.")
    return questions, contexts


def answers_per_question(y, num_questions, single_question=False):
    """The answers `y` as a list of one answer per question: a list as it is; one answer of a single question in a
    list; a dict of columns, Hugging Face's `{"text": [...], "answer_start": [...]}` with one entry per question,
    as one dict per question. Token positions (`start_positions`, `end_positions`) are refused: raw text is
    labelled by its answers' text, whose tokens the preprocessor finds.

    Example:
    >>> answers_per_question({"text": ["Paris", "1889"], "answer_start": [9, 21]}, 2)
    [{'text': 'Paris', 'answer_start': 9}, {'text': '1889', 'answer_start': 21}]
    >>> answers_per_question({"start_positions": [3, 7], "end_positions": [4, 9]}, 2)
    Traceback (most recent call last):
    ...
    ValueError: `y` holds token positions (end_positions, start_positions): raw text is labelled by its answers' text (e.g. {'text': [...], 'answer_start': [...]}, one entry per question), whose tokens the preprocessor finds; token positions label preprocessed features, as {'start_logits': ..., 'end_logits': ...}.
    """
    if isinstance(y, dict):
        positions = sorted(key for key in y if key in ("start_positions", "end_positions", "start_logits",
                                                         "end_logits"))
        if positions:
            raise ValueError(
                f"`y` holds token positions ({', '.join(positions)}): raw text is labelled by its answers' text "
                "(e.g. {'text': [...], 'answer_start': [...]}, one entry per question), whose tokens the "
                "preprocessor finds; token positions label preprocessed features, as "
                "{'start_logits': ..., 'end_logits': ...}."
            )
        if single_question:
            return [y]
        if "text" not in y:
            raise ValueError(f"`y` is a dict with keys {sorted(map(str, y))}: give one answer per question (a list), "
                             "or the columns {'text': [...], 'answer_start': [...]}.")
        columns = {key: list(values) if isinstance(values, (list, tuple, np.ndarray)) else values
                   for key, values in y.items()}
        lengths = {key: len(values) if isinstance(values, list) else None for key, values in columns.items()}
        if any(length != num_questions for length in lengths.values()):
            raise ValueError(f"`y` is a dict of columns: each must hold one entry per question ({num_questions}), "
                             f"got {', '.join(f'{key}: {length}' for key, length in lengths.items())}.")
        return [{key: values[index] for key, values in columns.items()} for index in range(num_questions)]
    if single_question and not isinstance(y, list):
        return [y]
    return list(y)


def answer_character_spans(answers, contexts, questions=None):
    """Each answer as `(start, end)` characters in its context, or None for "no answer"; one clear error otherwise.

    The forms: the answer text (found at its first occurrence), `{"text", "start"}`, `(text, start)`, the SQuAD
    JSON's `[{"text", "answer_start"}, ...]` and Hugging Face `datasets`' `{"text": [...], "answer_start": [...]}`
    (both: the first answer), and `""` / `None` / `[]` / `{"text": []}` for no answer. With `questions`, an
    answer found in its question rather than its context says so (the two lists given the other way round).

    Example:
    >>> answer_character_spans(["Paris", {"text": "1889", "start": 21}, None],
    ...                        ["It is in Paris.", "It was finished in   1889.", "No date."])
    [(9, 14), (21, 25), None]
    """
    if len(answers) != len(contexts):
        raise ValueError(f"{len(contexts)} questions but {len(answers)} answers: give one answer per question.")
    spans = []
    for index, (answer, context) in enumerate(zip(answers, contexts)):
        text, start = _answer_text_and_start(answer, index)
        if not text:
            spans.append(None)
            continue
        if start is None:
            start = context.find(text)
            if start < 0:
                raise ValueError(f"answer {index} {_shown(text)} is not in its context: {_shown(context)}"
                                 + (_swapped_hint(text, questions, index) or _case_hint(text, context)))
        if isinstance(start, str) and start.strip().isdigit():  # an offset read from a CSV file
            start = int(start)
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)):
            raise ValueError(f"answer {index}: its start must be a character offset (int), got {start!r}.")
        elif context[start : start + len(text)] != text:
            raise ValueError(
                f"answer {index}: characters {start}-{start + len(text)} of its context are "
                f"{_shown(context[start : start + len(text)])}, not the answer {_shown(text)}."
                + _swapped_hint(text, questions, index)
            )
        spans.append((int(start), int(start) + len(text)))
    return spans


def _case_hint(text, context):
    """Where the answer is in the context in other letter case: where, and that answers are cut from the context."""
    where = context.lower().find(text.lower())
    if where < 0:
        return ""
    found = _shown(context[where : where + len(text)])
    return (f" The context has it in other letter case at character {where}, {found}: answers are cut from the "
            "context exactly as it is written.")


def _swapped_hint(text, questions, index):
    if questions is not None and text in questions[index]:
        return (f" It is in question {index}: are the questions and the contexts the other way round? x is "
                "(questions, contexts).")
    return ""


def reference_answer_texts(answers):
    """Every reference answer text of each question, in the forms `answer_character_spans` reads: a SQuAD JSON's
    `[{"text", "answer_start"}, ...]` and `datasets`' `{"text": [...], ...}` give all of theirs, the other forms one;
    "no answer" gives `[]`.

    Example:
    >>> reference_answer_texts(["Paris", [{"text": "1889", "answer_start": 3}, {"text": "in 1889", "answer_start": 0}],
    ...                         {"text": ["x", "an x"], "answer_start": [0, 0]}, None])
    [['Paris'], ['1889', 'in 1889'], ['x', 'an x'], []]
    """
    references = []
    for index, answer in enumerate(answers):
        first, _ = _answer_text_and_start(answer, index)  # (a form it does not read: its one line)
        if not first:
            references.append([])
        elif isinstance(answer, (list, tuple)) and all(isinstance(each, dict) for each in answer):
            references.append([_answer_text_and_start(each, index)[0] for each in answer])
        elif isinstance(answer, dict) and isinstance(answer["text"], (list, tuple, np.ndarray)):
            references.append([str(text) for text in answer["text"]])
        else:
            references.append([first])
    return references


def _answer_text_and_start(answer, index):
    if answer is None:
        return "", None
    if isinstance(answer, str):
        return answer, None
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str):
        return answer
    if isinstance(answer, (list, tuple)) and all(isinstance(each, dict) for each in answer):
        # The SQuAD JSON file's `answers`: every reference answer, a dict each ([] for none, SQuAD v2.0).
        return _answer_text_and_start(answer[0], index) if answer else ("", None)
    if isinstance(answer, dict) and "text" in answer:
        text = answer["text"]
        start = answer.get("start", answer.get("answer_start"))
        if isinstance(text, (list, tuple, np.ndarray)):  # Hugging Face datasets: every reference answer
            if len(text) == 0:
                return "", None
            text = text[0]
            start = start[0] if isinstance(start, (list, tuple, np.ndarray)) and len(start) else start
        if isinstance(text, str):
            return text, start
    raise ValueError(
        f"answer {index} is {_shown(answer)}: give the answer text, {{'text': ..., 'start': character offset}}, "
        "a (text, start) pair, [{'text': ..., 'answer_start': ...}, ...] (a SQuAD JSON file's answers), "
        "{'text': [...], 'answer_start': [...]} (Hugging Face datasets' answers), or '' / None for no answer."
    )


def _answer_token_span(chars, token_starts, token_ends, index, context):
    if chars is None:
        return None
    span = token_span_of_chars(token_starts, token_ends, *chars)
    if span is None:
        raise ValueError(
            f"answer {index} {_shown(context[chars[0] : chars[1]])} (characters {chars[0]}-{chars[1]}) covers no "
            "token of its context: it is only white space or characters the tokenizer drops."
        )
    return span


def _shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
