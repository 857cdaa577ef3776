"""Step 2, features: SQuAD examples -> BERT windows with character offsets (google-research/bert's sliding windows).

- `tokenize_texts(tokenizer, texts)`: WordPiece ids with *character* offsets
  into the original strings (the tokenizer reports UTF-8 byte offsets; they are
  converted here, so non-ASCII contexts are cut correctly).
- `char_span_to_token_span(tokens, start_char, end_char)`: the first and last
  token overlapping a character span.
- `encode_examples(examples, tokenizer, ...)`: the sliding
  windows of google-research/bert `run_squad.py`: `[CLS] question [SEP]
  context window [SEP]`, question truncated to `max_question_length` tokens,
  windows of at most `sequence_length - len(question) - 3` context tokens,
  the next window starting `doc_stride` tokens later. Each window records
  its example, the character span of every context token in the original
  context, and whether the window is the one with maximal context for that
  token (so post-processing reads each token's logits where the token has the
  most left and right context). Training labels are the answer's first and
  last token; windows that do not contain the whole answer, and unanswerable
  (v2.0) questions, point at [CLS] (position 0).
"""

import dataclasses
import logging

import numpy as np

from keras_bert_impl.tasks.old_keywords import NOT_GIVEN, old_question_length
from keras_bert_impl.text.span_windows import (
    byte_to_char_offsets,
    max_context_windows,
    token_span_of_chars,
    window_labels,
    window_spans,
)

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class TokenizedText:
    """WordPiece ids of one text with each token's character span `[start, end)` in the text."""

    ids: np.ndarray
    char_starts: np.ndarray
    char_ends: np.ndarray


def _to_numpy_rows(ragged):
    import tensorflow as tf

    if isinstance(ragged, tf.RaggedTensor):
        while ragged.ragged_rank > 1:
            ragged = ragged.merge_dims(-2, -1)
        values = ragged.flat_values.numpy()
        splits = ragged.row_splits.numpy()
        return [values[splits[i] : splits[i + 1]] for i in range(len(splits) - 1)]
    array = np.asarray(ragged)
    return [row for row in array]


def tokenize_texts(tokenizer, texts, batch_size=2048):
    """Tokenizes `texts` in batches; offsets are converted from UTF-8 bytes to characters.

    Args:
        tokenizer: an object with `tokenize_with_offsets(list_of_str)` returning
            `(ids, starts, ends)` ragged tensors with byte offsets into the
            original strings (`keras_bert_impl.text.tokenizer.BertTokenizer`).
        texts: list of str.
        batch_size: texts per tokenizer call.

    Returns:
        A list of `TokenizedText`, one per text.
    """
    results = []
    for begin in range(0, len(texts), batch_size):
        chunk = list(texts[begin : begin + batch_size])
        ids, starts, ends = tokenizer.tokenize_with_offsets(chunk)
        for text, row_ids, row_starts, row_ends in zip(
            chunk, _to_numpy_rows(ids), _to_numpy_rows(starts), _to_numpy_rows(ends)
        ):
            char_starts, char_ends = byte_to_char_offsets(text, row_starts, row_ends)
            results.append(TokenizedText(row_ids.astype(np.int32), char_starts, char_ends))
    return results


def char_span_to_token_span(tokens, start_char, end_char):
    """First and last token index overlapping the character span `[start_char, end_char)`.

    Returns `None` when no token overlaps (the span is only white space).

    Example:
    >>> t = TokenizedText(np.array([1, 2, 3]), np.array([0, 4, 8]), np.array([3, 7, 11]))
    >>> char_span_to_token_span(t, 4, 11)
    (1, 2)
    """
    return token_span_of_chars(tokens.char_starts, tokens.char_ends, start_char, end_char)


# === Windows (features) ===


@dataclasses.dataclass
class SquadFeatures:
    """The model windows of a list of examples, plus what post-processing needs.

    Attributes (N windows, L = sequence_length):
        token_ids, segment_ids, padding_mask: int32 `(N, L)` model inputs.
        start_positions, end_positions: int32 `(N,)` labels (0 = [CLS]).
        example_index: int32 `(N,)` index into `examples`.
        token_char_start, token_char_end: int32 `(N, L)` character span of each
            context token in its example's context; -1 outside the context.
        token_is_max_context: bool `(N, L)`: this window gives the token its
            maximal context.
        lengths: int32 `(N,)` number of non-padding tokens.
        examples: the `SquadExample`s.
        unmappable_answers: training answers that cover no token (skipped).
        truncated_questions: questions cut to `max_question_length` tokens.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    start_positions: np.ndarray
    end_positions: np.ndarray
    example_index: np.ndarray
    token_char_start: np.ndarray
    token_char_end: np.ndarray
    token_is_max_context: np.ndarray
    lengths: np.ndarray
    examples: list
    unmappable_answers: int = 0
    truncated_questions: int = 0

    def __len__(self):
        return len(self.example_index)

    def inputs(self):
        """The model inputs as a dict of NumPy arrays."""
        return {"token_ids": self.token_ids, "segment_ids": self.segment_ids, "padding_mask": self.padding_mask}

    def labels(self):
        """The labels as `{"start_logits": start_positions, "end_logits": end_positions}`."""
        return {"start_logits": self.start_positions, "end_logits": self.end_positions}

    def to_dataset(self, batch_size, training=False, seed=None, **options):
        """`keras_bert_impl.tasks.span_qa.batches.make_dataset(self, ...)`: a batched `tf.data.Dataset`."""
        from keras_bert_impl.tasks.span_qa.batches import make_dataset

        return make_dataset(self, batch_size, training, seed, **options)

    def to_array_batches(self, batch_size, training=False, seed=0, **options):
        """`keras_bert_impl.tasks.span_qa.batches.make_array_batches(self, ...)`: the NumPy twin (no TensorFlow)."""
        from keras_bert_impl.tasks.span_qa.batches import make_array_batches

        return make_array_batches(self, batch_size, training, seed, **options)



def encode_examples(
    examples,
    tokenizer,
    sequence_length=384,
    doc_stride=128,
    max_question_length=64,
    is_training=False,
    tokenized_contexts=None,
    *,
    max_query_length=NOT_GIVEN,
):
    """Sliding-window features of `examples` (see the module docstring).

    Args:
        examples: list of `SquadExample`.
        tokenizer: see `tokenize_texts`; also `cls_token_id`, `sep_token_id`
            and `pad_token_id` attributes.
        sequence_length: tokens per window, special tokens included.
        doc_stride: context tokens between the starts of consecutive windows.
        max_question_length: questions are cut to this many tokens (None: no
            cut; then a question that leaves no room for context is an error).
            (`max_query_length`, BERT's `run_squad.py` name, is still taken.)
        is_training: compute start/end labels from each example's first answer.
        tokenized_contexts: optional dict context -> `TokenizedText` to reuse.

    Returns:
        `SquadFeatures`.

    Raises:
        ValueError: bad lengths, or a question too long for `sequence_length`
            (naming the question id and its length).
    """
    max_question_length = old_question_length("encode_examples", max_query_length, max_question_length)
    for name, value in (("sequence_length", sequence_length), ("doc_stride", doc_stride)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
    if max_question_length is not None:
        if isinstance(max_question_length, bool) or not isinstance(max_question_length, int) or max_question_length < 1:
            raise ValueError(f"`max_question_length` must be a positive int or None, got {max_question_length!r}.")
    if not examples:
        raise ValueError("No examples to convert.")
    cls_id, sep_id, pad_id = int(tokenizer.cls_token_id), int(tokenizer.sep_token_id), int(tokenizer.pad_token_id)

    contexts = tokenized_contexts if tokenized_contexts is not None else {}
    new_contexts = list(dict.fromkeys(e.context for e in examples if e.context not in contexts))
    contexts.update(zip(new_contexts, tokenize_texts(tokenizer, new_contexts)))
    questions = tokenize_texts(tokenizer, [e.question for e in examples])

    rows = {k: [] for k in ("ids", "segments", "starts", "ends", "max_ctx", "start_pos", "end_pos", "example")}
    unmappable = truncated = 0
    for example_index, (example, question) in enumerate(zip(examples, questions)):
        context = contexts[example.context]
        if len(context.ids) == 0:
            raise ValueError(f"Question {example.qas_id!r}: the context has no tokens.")
        query_ids = question.ids
        if len(query_ids) == 0:
            raise ValueError(f"Question {example.qas_id!r}: the question has no tokens ({example.question!r}).")
        if max_question_length is not None and len(query_ids) > max_question_length:
            query_ids = query_ids[:max_question_length]
            truncated += 1
        max_window = sequence_length - len(query_ids) - 3
        if max_window < 1:
            raise ValueError(
                f"Question {example.qas_id!r} has {len(query_ids)} tokens: with [CLS] and two [SEP] "
                f"it leaves no room for context in sequence_length={sequence_length}; raise "
                f"sequence_length or set max_question_length to at most sequence_length - 4 = {sequence_length - 4} "
                f"(now {max_question_length})."
            )
        answer_span = None
        if is_training and not example.is_impossible:
            text, start_char = example.answers[0]
            answer_span = char_span_to_token_span(context, start_char, start_char + len(text))
            if answer_span is None:
                unmappable += 1
                continue
        spans = window_spans(len(context.ids), max_window, doc_stride)
        best_window = max_context_windows(spans, len(context.ids))
        prefix = len(query_ids) + 2
        label_starts, label_ends = window_labels(spans, answer_span, prefix)
        for w, (start, length) in enumerate(spans):
            ids = np.concatenate([[cls_id], query_ids, [sep_id], context.ids[start : start + length], [sep_id]])
            segments = np.concatenate([np.zeros(prefix, np.int32), np.ones(length + 1, np.int32)])
            char_starts = np.full(len(ids), -1, np.int64)
            char_ends = np.full(len(ids), -1, np.int64)
            char_starts[prefix : prefix + length] = context.char_starts[start : start + length]
            char_ends[prefix : prefix + length] = context.char_ends[start : start + length]
            max_ctx = np.zeros(len(ids), bool)
            max_ctx[prefix : prefix + length] = best_window[start : start + length] == w
            for key, value in (
                ("ids", ids),
                ("segments", segments),
                ("starts", char_starts),
                ("ends", char_ends),
                ("max_ctx", max_ctx),
                ("start_pos", label_starts[w]),
                ("end_pos", label_ends[w]),
                ("example", example_index),
            ):
                rows[key].append(value)

    if unmappable:
        logger.warning("%d training answer(s) cover no token and were skipped.", unmappable)
    if truncated:
        logger.info("%d question(s) were cut to max_question_length=%s tokens.", truncated, max_question_length)
    n = len(rows["ids"])
    lengths = np.array([len(r) for r in rows["ids"]], np.int32)

    def pad(key, value, dtype):
        out = np.full((n, sequence_length), value, dtype)
        for i, row in enumerate(rows[key]):
            out[i, : len(row)] = row
        return out

    token_ids = pad("ids", pad_id, np.int32)
    return SquadFeatures(
        token_ids=token_ids,
        segment_ids=pad("segments", 0, np.int32),
        padding_mask=(np.arange(sequence_length)[None, :] < lengths[:, None]).astype(np.int32),
        start_positions=np.array(rows["start_pos"], np.int32),
        end_positions=np.array(rows["end_pos"], np.int32),
        example_index=np.array(rows["example"], np.int32),
        token_char_start=pad("starts", -1, np.int32),
        token_char_end=pad("ends", -1, np.int32),
        token_is_max_context=pad("max_ctx", False, bool),
        lengths=lengths,
        examples=list(examples),
        unmappable_answers=unmappable,
        truncated_questions=truncated,
    )


convert_examples_to_features = encode_examples  # the step's earlier name, still taken (tasks/old_keywords.py)
