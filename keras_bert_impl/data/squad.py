"""SQuAD v1.1 / v2.0: reading the JSON files and turning questions into BERT windows.

The steps, each usable on its own:

- `load_squad_json(path)`: the parsed file (`.json` or `.json.gz`), with a
  clear error for a file that is not JSON.
- `read_squad_examples(path_or_dict)`: validates the official layout and
  returns `SquadExample`s. A malformed element raises `SquadFormatError`
  naming the file and the JSON path of the element (e.g.
  `data[3].paragraphs[0].qas[2].answers[0].answer_start`) and what was
  expected; empty contexts and questions are errors too. An answer whose
  `answer_start` does not point at its `text` in the context is dropped with
  a counted warning (`ReadStats.mismatched_answers`); never a wrong label.
- `tokenize_texts(tokenizer, texts)`: WordPiece ids with *character* offsets
  into the original strings (the tokenizer reports UTF-8 byte offsets; they are
  converted here, so non-ASCII contexts are cut correctly).
- `char_span_to_token_span(tokens, start_char, end_char)`: the first and last
  token overlapping a character span.
- `convert_examples_to_features(examples, tokenizer, ...)`: the sliding
  windows of google-research/bert `run_squad.py`: `[CLS] question [SEP]
  context window [SEP]`, question truncated to `max_query_length` tokens,
  windows of at most `max_seq_length - len(question) - 3` context tokens,
  the next window starting `doc_stride` tokens later. Each window records
  its example, the character span of every context token in the original
  context, and whether the window is the one with maximal context for that
  token (so post-processing reads each token's logits where the token has the
  most left and right context). Training labels are the answer's first and
  last token; windows that do not contain the whole answer, and unanswerable
  (v2.0) questions, point at [CLS] (position 0).

Example:
>>> from keras_bert_impl.text.tokenizer import BertTokenizer  # doctest: +SKIP
>>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")  # doctest: +SKIP
>>> examples, stats = read_squad_examples("dev-v1.1.json.gz")  # doctest: +SKIP
>>> features = convert_examples_to_features(examples, tokenizer)  # doctest: +SKIP
>>> dataset = features.to_dataset(batch_size=32, training=True)  # doctest: +SKIP
"""

import dataclasses
import gzip
import json
import logging
import os

import numpy as np

logger = logging.getLogger(__name__)


class SquadFormatError(ValueError):
    """A SQuAD file that does not follow the official layout (message names file and JSON path)."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    Attributes:
        qas_id: the question id of the file.
        title: the article title.
        question: question text.
        context: the paragraph, unchanged.
        answers: tuple of `(text, answer_start)` whose `answer_start` was
            verified against the context (character offsets).
        is_impossible: True for SQuAD v2.0 questions without an answer.
    """

    qas_id: str
    title: str
    question: str
    context: str
    answers: tuple
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    """Counts of what `read_squad_examples` dropped.

    Attributes:
        questions: questions in the file.
        mismatched_answers: answers dropped because `answer_start` does not
            point at `text` in the context.
        unlabelled_questions: answerable questions left without any verified
            answer (they cannot be trained on; skipped when `is_training`).
        skipped_questions: questions not returned.
    """

    questions: int = 0
    mismatched_answers: int = 0
    unlabelled_questions: int = 0
    skipped_questions: int = 0


def load_squad_json(path):
    """Reads a SQuAD `.json` or `.json.gz` file into a dict.

    Raises:
        SquadFormatError: the file is not valid UTF-8 JSON (line and column given).

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> _ = open(path, "w").write('{"data": [], "version": "1.1"}')
    >>> load_squad_json(path)["version"]
    '1.1'
    """
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise SquadFormatError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}."
        ) from error
    except UnicodeDecodeError as error:
        raise SquadFormatError(f"{path}: not UTF-8 text ({error}).") from error
    except (gzip.BadGzipFile, EOFError) as error:
        raise SquadFormatError(f"{path}: not a valid gzip file ({error}).") from error


def _expect(condition, source, json_path, expected, value):
    if not condition:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise SquadFormatError(f"{source}: {json_path}: expected {expected}, got {shown}.")


def squad_version(dataset):
    """`"2.0"` if the file says so (`"version": "v2.0"`) or any question has `is_impossible`, else `"1.1"`."""
    version = str(dataset.get("version", "")).lstrip("v") if isinstance(dataset, dict) else ""
    if version.startswith("2"):
        return "2.0"
    for article in dataset.get("data", []) if isinstance(dataset, dict) else []:
        for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else []:
            for qa in paragraph.get("qas", []) if isinstance(paragraph, dict) else []:
                if isinstance(qa, dict) and "is_impossible" in qa:
                    return "2.0"
    return "1.1"


def read_squad_examples(path_or_dataset, is_training=False, source=None):
    """Validates a SQuAD v1.1/v2.0 file and returns its questions.

    Args:
        path_or_dataset: path of a `.json`/`.json.gz` file, or the parsed dict.
        is_training: skip answerable questions without a verified answer (they
            would have no label); otherwise they are kept (for prediction).
        source: name used in error messages for a dict input.

    Returns:
        `(examples, stats)`: a list of `SquadExample` in file order and a `ReadStats`.

    Raises:
        SquadFormatError: naming the file, the JSON path of the bad element and
            what was expected.

    Example:
    >>> data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat.",
    ...     "qas": [{"id": "q1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]}]}]}]}
    >>> examples, stats = read_squad_examples(data)
    >>> examples[0].answers, stats.mismatched_answers
    ((('cat', 4),), 0)
    """
    if isinstance(path_or_dataset, dict):
        dataset = path_or_dataset
        source = source or "<dict>"
    else:
        source = source or os.fspath(path_or_dataset)
        dataset = load_squad_json(path_or_dataset)
    _expect(isinstance(dataset, dict), source, "$", 'a JSON object {"data": [...], "version": ...}', dataset)
    _expect(isinstance(dataset.get("data"), list), source, "data", "a list of articles", dataset.get("data"))
    stats = ReadStats()
    examples = []
    mismatched_ids = []
    for i, article in enumerate(dataset["data"]):
        article_path = f"data[{i}]"
        _expect(isinstance(article, dict), source, article_path, "an object with 'paragraphs'", article)
        title = article.get("title", "")
        _expect(isinstance(title, str), source, f"{article_path}.title", "a string", title)
        paragraphs = article.get("paragraphs")
        _expect(isinstance(paragraphs, list), source, f"{article_path}.paragraphs", "a list of paragraphs", paragraphs)
        for j, paragraph in enumerate(paragraphs):
            paragraph_path = f"{article_path}.paragraphs[{j}]"
            _expect(isinstance(paragraph, dict), source, paragraph_path, "an object with 'context' and 'qas'", paragraph)
            context = paragraph.get("context")
            _expect(isinstance(context, str), source, f"{paragraph_path}.context", "a string", context)
            _expect(bool(context.strip()), source, f"{paragraph_path}.context", "a non-empty context", context)
            qas = paragraph.get("qas")
            _expect(isinstance(qas, list), source, f"{paragraph_path}.qas", "a list of questions", qas)
            for k, qa in enumerate(qas):
                qa_path = f"{paragraph_path}.qas[{k}]"
                _expect(isinstance(qa, dict), source, qa_path, "an object with 'id', 'question', 'answers'", qa)
                qas_id = qa.get("id")
                _expect(isinstance(qas_id, str) and qas_id, source, f"{qa_path}.id", "a non-empty string", qas_id)
                question = qa.get("question")
                _expect(isinstance(question, str), source, f"{qa_path}.question", "a string", question)
                _expect(bool(question.strip()), source, f"{qa_path}.question", "a non-empty question", question)
                is_impossible = qa.get("is_impossible", False)
                _expect(isinstance(is_impossible, bool), source, f"{qa_path}.is_impossible", "true or false", is_impossible)
                answers = qa.get("answers", [])
                _expect(isinstance(answers, list), source, f"{qa_path}.answers", "a list of answers", answers)
                stats.questions += 1
                verified = []
                for m, answer in enumerate(answers):
                    answer_path = f"{qa_path}.answers[{m}]"
                    _expect(isinstance(answer, dict), source, answer_path, "an object with 'text' and 'answer_start'", answer)
                    text = answer.get("text")
                    _expect(isinstance(text, str), source, f"{answer_path}.text", "a string", text)
                    start = answer.get("answer_start")
                    _expect(
                        isinstance(start, int) and not isinstance(start, bool) and start >= 0,
                        source,
                        f"{answer_path}.answer_start",
                        "a non-negative int (character offset into the context)",
                        start,
                    )
                    if context[start : start + len(text)] != text or not text:
                        stats.mismatched_answers += 1
                        mismatched_ids.append(f"{qas_id} ({answer_path})")
                        continue
                    verified.append((text, start))
                if not is_impossible and not verified and answers:
                    stats.unlabelled_questions += 1
                    if is_training:
                        stats.skipped_questions += 1
                        continue
                if is_training and not is_impossible and not answers:
                    stats.unlabelled_questions += 1
                    stats.skipped_questions += 1
                    continue
                examples.append(
                    SquadExample(
                        qas_id=qas_id,
                        title=title,
                        question=question,
                        context=context,
                        answers=tuple(verified),
                        is_impossible=is_impossible,
                    )
                )
    if stats.mismatched_answers:
        logger.warning(
            "%s: %d answer(s) dropped because answer_start does not point at the answer text "
            "in the context (%d question(s) skipped); first: %s",
            source,
            stats.mismatched_answers,
            stats.skipped_questions,
            ", ".join(mismatched_ids[:5]),
        )
    return examples, stats


# === Tokenization with character offsets ===


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


def _byte_to_char_offsets(text, byte_starts, byte_ends):
    encoded_lengths = np.fromiter((len(ch.encode("utf-8")) for ch in text), dtype=np.int64, count=len(text))
    if int(encoded_lengths.sum()) == len(text):  # ASCII: bytes are characters
        return byte_starts.astype(np.int64), byte_ends.astype(np.int64)
    char_of_byte = np.repeat(np.arange(len(text), dtype=np.int64), encoded_lengths)
    char_of_byte = np.append(char_of_byte, len(text))
    starts = char_of_byte[byte_starts]
    ends = char_of_byte[np.maximum(byte_ends - 1, 0)] + 1
    return starts, np.maximum(ends, starts)


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
            char_starts, char_ends = _byte_to_char_offsets(text, row_starts, row_ends)
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
    first = int(np.searchsorted(tokens.char_ends, start_char, side="right"))
    last = int(np.searchsorted(tokens.char_starts, end_char, side="left")) - 1
    if first >= len(tokens.ids) or last < first:
        return None
    return first, last


# === Windows (features) ===


@dataclasses.dataclass
class SquadFeatures:
    """The model windows of a list of examples, plus what post-processing needs.

    Attributes (N windows, L = max_seq_length):
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
        truncated_questions: questions cut to `max_query_length` tokens.
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

    def to_dataset(self, batch_size, training=False, shuffle_seed=None, boundaries=None, fixed_batch_size=True):
        """A batched `tf.data.Dataset` of `(inputs, labels)` (training) or `inputs` (prediction).

        Windows are padded only to the smallest of `boundaries` (default
        `default_boundaries(max_seq_length)`) holding the longest window of
        the batch. For training they are shuffled and grouped into length
        buckets (`bucket_by_length`), so short contexts do not pay for 384
        tokens; for prediction the order of the windows is kept.

        With `fixed_batch_size` (default) every batch has exactly `batch_size`
        rows, so a compiled (XLA) step sees at most `len(boundaries)` shapes
        instead of recompiling for each bucket's last, partial batch. The
        partial batches are filled up with copies of their first window: in
        training their labels are -1, which `SpanLoss` ignores (the loss stays
        the mean over the real windows); in prediction the extra rows come
        last, and `predict_logits` drops them.
        """
        import tensorflow as tf

        from keras_bert_impl.batching.boundaries import default_boundaries
        from keras_bert_impl.batching.tf_batches import bucket_by_length, fill_batches, pad_to_boundaries

        max_seq_length = self.token_ids.shape[1]
        boundaries = list(boundaries or default_boundaries(max_seq_length))
        tensors = dict(self.inputs(), length=self.lengths)
        if training:
            tensors.update(start_positions=self.start_positions, end_positions=self.end_positions)
        dataset = tf.data.Dataset.from_tensor_slices(tensors)
        if training:
            dataset = dataset.shuffle(len(self), seed=shuffle_seed, reshuffle_each_iteration=True)

        def trim(element):
            length = element["length"]
            features = {k: element[k][:length] for k in ("token_ids", "segment_ids", "padding_mask")}
            if training:
                return features, {"start_logits": element["start_positions"], "end_logits": element["end_positions"]}
            return features

        dataset = dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE)
        if training:
            dataset = bucket_by_length(dataset, boundaries, batch_size)
        else:
            dataset = pad_to_boundaries(dataset, boundaries, batch_size)
        if fixed_batch_size:  # prediction batches have no labels: only features are filled
            dataset = fill_batches(dataset, batch_size, label_fill_value=-1)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def to_array_batches(self, batch_size, training=False, shuffle_seed=0, boundaries=None, fixed_batch_size=True):
        """`to_dataset` without TensorFlow: a `LengthBucketedBatches` (`keras.utils.PyDataset`) for JAX/PyTorch.

        The same batches as `to_dataset`: in training shuffled (a new seeded
        order each epoch) and grouped by length bucket, labels
        `{"start_logits", "end_logits"}` with -1 on filler rows; in
        prediction the windows in order, `(inputs,)` per batch. Not for the
        TensorFlow backend (see `LengthBucketedBatches`).
        """
        from keras_bert_impl.batching.array_batches import LengthBucketedBatches
        from keras_bert_impl.batching.boundaries import default_boundaries

        max_seq_length = self.token_ids.shape[1]
        boundaries = list(boundaries or default_boundaries(max_seq_length))
        inputs = {k: [v[i, : self.lengths[i]] for i in range(len(self))] for k, v in self.inputs().items()}
        return LengthBucketedBatches(
            inputs,
            self.labels() if training else None,
            batch_size=batch_size,
            boundaries=boundaries,
            shuffle=training,
            seed=shuffle_seed,
            fixed_batch_size=fixed_batch_size,
            label_fill_value=-1 if training else None,
        )


def _window_starts(num_tokens, max_window, doc_stride):
    spans = []
    start = 0
    while True:
        length = min(num_tokens - start, max_window)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, doc_stride)


def _max_context_windows(spans, num_tokens):
    """For each context token, the index of the window where it has maximal context (run_squad.py)."""
    scores = np.full((len(spans), num_tokens), -np.inf)
    for w, (start, length) in enumerate(spans):
        positions = np.arange(start, start + length)
        left = positions - start
        right = start + length - 1 - positions
        scores[w, start : start + length] = np.minimum(left, right) + 0.01 * length
    return np.argmax(scores, axis=0)


def convert_examples_to_features(
    examples,
    tokenizer,
    max_seq_length=384,
    doc_stride=128,
    max_query_length=64,
    is_training=False,
    tokenized_contexts=None,
):
    """Sliding-window features of `examples` (see the module docstring).

    Args:
        examples: list of `SquadExample`.
        tokenizer: see `tokenize_texts`; also `cls_token_id`, `sep_token_id`
            and `pad_token_id` attributes.
        max_seq_length: tokens per window, special tokens included.
        doc_stride: context tokens between the starts of consecutive windows.
        max_query_length: questions are cut to this many tokens (None: no
            cut; then a question that leaves no room for context is an error).
        is_training: compute start/end labels from each example's first answer.
        tokenized_contexts: optional dict context -> `TokenizedText` to reuse.

    Returns:
        `SquadFeatures`.

    Raises:
        ValueError: bad lengths, or a question too long for `max_seq_length`
            (naming the question id and its length).
    """
    for name, value in (("max_seq_length", max_seq_length), ("doc_stride", doc_stride)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
    if max_query_length is not None:
        if isinstance(max_query_length, bool) or not isinstance(max_query_length, int) or max_query_length < 1:
            raise ValueError(f"`max_query_length` must be a positive int or None, got {max_query_length!r}.")
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
        if max_query_length is not None and len(query_ids) > max_query_length:
            query_ids = query_ids[:max_query_length]
            truncated += 1
        max_window = max_seq_length - len(query_ids) - 3
        if max_window < 1:
            raise ValueError(
                f"Question {example.qas_id!r} has {len(query_ids)} tokens: with [CLS] and two [SEP] "
                f"it leaves no room for context in max_seq_length={max_seq_length}; raise "
                f"max_seq_length or set max_query_length to at most max_seq_length - 4 = {max_seq_length - 4} "
                f"(now {max_query_length})."
            )
        answer_span = None
        if is_training and not example.is_impossible:
            text, start_char = example.answers[0]
            answer_span = char_span_to_token_span(context, start_char, start_char + len(text))
            if answer_span is None:
                unmappable += 1
                continue
        spans = _window_starts(len(context.ids), max_window, doc_stride)
        best_window = _max_context_windows(spans, len(context.ids))
        prefix = len(query_ids) + 2
        for w, (start, length) in enumerate(spans):
            ids = np.concatenate([[cls_id], query_ids, [sep_id], context.ids[start : start + length], [sep_id]])
            segments = np.concatenate([np.zeros(prefix, np.int32), np.ones(length + 1, np.int32)])
            char_starts = np.full(len(ids), -1, np.int64)
            char_ends = np.full(len(ids), -1, np.int64)
            char_starts[prefix : prefix + length] = context.char_starts[start : start + length]
            char_ends[prefix : prefix + length] = context.char_ends[start : start + length]
            max_ctx = np.zeros(len(ids), bool)
            max_ctx[prefix : prefix + length] = best_window[start : start + length] == w
            start_pos = end_pos = 0
            if answer_span is not None and start <= answer_span[0] and answer_span[1] < start + length:
                start_pos = answer_span[0] - start + prefix
                end_pos = answer_span[1] - start + prefix
            for key, value in (
                ("ids", ids),
                ("segments", segments),
                ("starts", char_starts),
                ("ends", char_ends),
                ("max_ctx", max_ctx),
                ("start_pos", start_pos),
                ("end_pos", end_pos),
                ("example", example_index),
            ):
                rows[key].append(value)

    if unmappable:
        logger.warning("%d training answer(s) cover no token and were skipped.", unmappable)
    if truncated:
        logger.info("%d question(s) were cut to max_query_length=%s tokens.", truncated, max_query_length)
    n = len(rows["ids"])
    lengths = np.array([len(r) for r in rows["ids"]], np.int32)

    def pad(key, value, dtype):
        out = np.full((n, max_seq_length), value, dtype)
        for i, row in enumerate(rows[key]):
            out[i, : len(row)] = row
        return out

    token_ids = pad("ids", pad_id, np.int32)
    return SquadFeatures(
        token_ids=token_ids,
        segment_ids=pad("segments", 0, np.int32),
        padding_mask=(np.arange(max_seq_length)[None, :] < lengths[:, None]).astype(np.int32),
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
