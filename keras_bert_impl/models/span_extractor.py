"""BertSpanExtractor: BERT with a span head for extractive question answering (SQuAD)."""

import keras
import numpy as np

from keras_bert_impl.layers.per_example_logits import PerExampleLogits
from keras_bert_impl.layers.span_head import SpanHead
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.span_decoding import (
    NULL_POSITION, best_spans_in_window, is_no_answer, null_odds, window_null_score,
)
from keras_bert_impl.table_columns import table_as_labels, table_as_texts
from keras_bert_impl.models.head_building import backbone_inputs, check_packable, freeze_unused_pooler
from keras_bert_impl.models.prediction_dicts import AnswerDict
from keras_bert_impl.models.task import Task
from keras_bert_impl.models.user_inputs import numpy_text_as_lists


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SpanLoss(keras.losses.Loss):
    """Half the sparse softmax cross-entropy of one span boundary, from logits.

    Used for both the start and the end output, so the total loss is the mean
    of the start and end cross-entropies, as in google-research/bert. Rows
    whose label is negative (e.g. the filler rows of a fixed-size last batch)
    are ignored: the loss is the mean over the rows with a label >= 0. Labels
    of shape `(rows, k)` with logits `(rows, k, length)` (packed rows,
    `BertSpanExtractor.packed_training_model`) count as `rows * k` rows.

    Example:
    >>> import numpy as np
    >>> loss = SpanLoss()
    >>> round(float(loss(np.array([0]), np.array([[0.0, 0.0]]))), 4)  # 0.5 * ln 2
    0.3466
    """

    def __init__(self, name="span_loss", reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)

    def call(self, y_true, y_pred):
        # One label per row of logits; packed rows give `(rows, examples_per_row)` labels (`PerExampleLogits`).
        y_pred = keras.ops.reshape(y_pred, (-1, keras.ops.shape(y_pred)[-1]))
        y_true = keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32")
        valid = keras.ops.cast(y_true >= 0, y_pred.dtype)
        per_row = keras.losses.sparse_categorical_crossentropy(
            keras.ops.maximum(y_true, 0), y_pred, from_logits=True
        )
        # "sum_over_batch_size" divides by all rows; rescale so it is the mean over the labelled ones.
        scale = keras.ops.cast(keras.ops.shape(valid)[0], y_pred.dtype) / keras.ops.maximum(keras.ops.sum(valid), 1.0)
        return 0.5 * per_row * valid * scale


def _span_logits(backbone, span_head, inputs):
    """`(start_logits, end_logits)` of the backbone's token outputs for `inputs` (one window or packed rows)."""
    sequence_output = backbone(inputs)["sequence_output"]
    return span_head(sequence_output, segment_ids=inputs["segment_ids"], padding_mask=inputs["padding_mask"])


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertSpanExtractor(Task):
    """BERT span extractor: start and end logits of the answer, for SQuAD v1.1 and v2.0.

    A `SpanHead` (dense layer to two logits per token) on the backbone's
    `sequence_output`. Inputs are the backbone's dict `{"token_ids",
    "segment_ids", "padding_mask"}` packed as `[CLS] question [SEP] context
    [SEP]` (segment 0 for the question part, 1 for the context part); outputs
    are `{"start_logits", "end_logits"}`, float32 `(batch, length)`. Positions
    that cannot hold an answer (the question, [SEP], padding) are masked to a
    very negative logit, so they take no part in the loss or the prediction.
    [CLS] is the answer of windows that do not contain the answer and, for
    SQuAD v2.0, of unanswerable questions (the "null" score is
    `start_logits[:, 0] + end_logits[:, 0]`).

    The model is compiled with the BERT loss (mean of the start and end
    cross-entropies, labels `{"start_logits": start_position,
    "end_logits": end_position}`). It round-trips through `.keras` files.
    `BertSpanExtractor.from_preset(preset)` adds a
    `BertSpanExtractorPreprocessor`: then `fit(x=(questions, contexts),
    y=answers)` and `evaluate` train and score on raw text (answers as text,
    `{"text", "start"}`, the SQuAD JSON's `[{"text", "answer_start"}, ...]` or
    Hugging Face `datasets`' `{"text": [...], "answer_start": [...]}`; see the
    preprocessor), and `answer(question, context)` reads raw text of
    any length (sliding windows). `predict` on raw `(questions, contexts)`
    gives one row of logits per window, not per question (a long context
    has several): `preprocessor.windows(questions, contexts).example` says
    which question each row belongs to, and `answer` reads them back into
    answers. The pooler is unused and frozen.

    Args:
        backbone: a `BertBackbone`.
        preprocessor: a `BertSpanExtractorPreprocessor` or None.
        max_answer_length: int, the longest answer `answer` returns, in tokens.
        compile_defaults: compile now with the span loss (AdamW 5e-5).
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    >>> model = BertSpanExtractor(backbone)
    >>> x = {"token_ids": np.array([[2, 5, 3, 7, 8, 3, 0]]),
    ...      "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 0]]),
    ...      "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0]])}
    >>> out = model.predict(x, verbose=0)
    >>> sorted(out), out["start_logits"].shape
    (['end_logits', 'start_logits'], (1, 7))
    """

    def __init__(self, backbone, preprocessor=None, max_answer_length=30, compile_defaults=True, **kwargs):
        if not isinstance(backbone, BertBackbone):
            raise TypeError(f"`backbone` must be a BertBackbone, got {type(backbone).__name__}.")
        if isinstance(max_answer_length, bool) or not isinstance(max_answer_length, int) or max_answer_length < 1:
            raise ValueError(f"`max_answer_length` must be a positive int, got {max_answer_length!r}.")
        # === Layers ===
        freeze_unused_pooler(backbone)
        self.span_head = SpanHead(dtype=backbone.dtype_policy, name="span_head")

        # === Functional Model ===
        inputs = backbone_inputs()
        start_logits, end_logits = _span_logits(backbone, self.span_head, inputs)
        outputs = {
            "start_logits": keras.layers.Identity(name="start_logits", dtype="float32")(start_logits),
            "end_logits": keras.layers.Identity(name="end_logits", dtype="float32")(end_logits),
        }
        self.max_answer_length = max_answer_length
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            backbone=backbone,
            preprocessor=preprocessor,
            compile_defaults=compile_defaults,
            **kwargs,
        )

    hugging_face_architectures = ("BertForQuestionAnswering",)
    hugging_face_head_prefix = "qa_outputs"
    raw_labels = ("answers", "(questions, contexts), answers")
    raw_text_columns = (("question", "context"),)
    # `export`'s `serve(question, context)`: `answer` in the graph, sliding windows included.
    serving_text_inputs = {"serve": ("question", "context")}
    serving_text_graph = "answer"

    def hugging_face_head_dense(self):
        return self.span_head.dense

    def head_config(self):
        return {"max_answer_length": self.max_answer_length}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.span_extractor_preprocessor import BertSpanExtractorPreprocessor

        return BertSpanExtractorPreprocessor

    def default_loss(self):
        """Half the cross-entropy of the start and of the end position (their mean, as in google-research/bert)."""
        return {"start_logits": SpanLoss(), "end_logits": SpanLoss()}

    def loss_weight(self, x, y, sample_weight):
        """The batch's labelled windows (a start label >= 0; filler rows have -1), what `SpanLoss` averages over."""
        start = y["start_logits"] if isinstance(y, dict) else keras.tree.flatten(y)[0]
        return keras.ops.sum(keras.ops.cast(keras.ops.convert_to_tensor(start) >= 0, "float32"))

    def check_metrics(self, metrics):
        """A list of metrics is refused in one line (Keras would apply it to each output, logits over the tokens, and
        stop on its structure): SQuAD scores whole answers, `evaluate_answers`. A dict per output is Keras's."""
        if isinstance(metrics, (list, tuple)) and len(metrics):
            names = [m if isinstance(m, str) else type(m).__name__ for m in metrics]
            raise ValueError(
                f"metrics={names}: BertSpanExtractor's outputs are start and end logits over the tokens, and SQuAD "
                "scores whole answers: compile without metrics and call evaluate_answers((questions, contexts), "
                "answers) for the exact match and F1, or give metrics per output, {'start_logits': [...], "
                "'end_logits': [...]}."
            )

    def packed_training_model(self, examples_per_row):
        """A model that shares this extractor's weights and scores every window of packed rows.

        Packed rows hold several windows each, numbered in `padding_mask`
        (1, 2, ...; `keras_bert_impl.layers.packed_examples`): the backbone
        keeps them apart and the span head masks each one's question and
        [SEP]s. This model returns `{"start_logits", "end_logits"}`, float32
        `(rows, examples_per_row, sequence_length)`: slice `k` holds window
        `k + 1`'s logits on its own tokens and `MASKED_LOGIT` elsewhere
        (`PerExampleLogits`). Train it on targets `(rows, examples_per_row)`,
        each window's answer position in the row (-1 for a slice without a
        window; `tasks.span_qa.batches.make_packed_dataset`): it is compiled
        with this extractor's `SpanLoss`, so the loss is the mean over the
        windows, as on unpacked rows. Training it trains this extractor;
        predict and save with the extractor itself.

        Example:
        >>> import numpy as np
        >>> from keras_bert_impl import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
        ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
        >>> extractor = BertSpanExtractor(backbone)
        >>> packed = extractor.packed_training_model(examples_per_row=2)
        >>> row = {"token_ids": np.array([[2, 5, 3, 7, 3, 2, 6, 3, 8, 3, 0]], "int32"),   # two windows
        ...        "segment_ids": np.array([[0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0]], "int32"),
        ...        "padding_mask": np.array([[1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 0]], "int32")}
        >>> second = {"token_ids": np.array([[2, 6, 3, 8, 3]], "int32"),
        ...           "segment_ids": np.array([[0, 0, 0, 1, 1]], "int32"), "padding_mask": np.ones((1, 5), "int32")}
        >>> out, alone = packed.predict(row, verbose=0), extractor.predict(second, verbose=0)
        >>> out["start_logits"].shape
        (1, 2, 11)
        >>> bool(np.allclose(out["start_logits"][0, 1, 5:10], alone["start_logits"][0], atol=1e-5))
        True
        """
        check_packable(self.backbone, "packed_training_model()")
        inputs = backbone_inputs()
        start_logits, end_logits = _span_logits(self.backbone, self.span_head, inputs)
        split = PerExampleLogits(examples_per_row, name="per_example_logits")
        outputs = {
            "start_logits": keras.layers.Identity(name="start_logits", dtype="float32")(
                split(start_logits, padding_mask=inputs["padding_mask"])),
            "end_logits": keras.layers.Identity(name="end_logits", dtype="float32")(
                split(end_logits, padding_mask=inputs["padding_mask"])),
        }
        model = keras.Model(inputs, outputs, name=f"{self.name}_packed")
        model.compile(optimizer=keras.optimizers.AdamW(5e-5), loss=self.default_loss())
        return model

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict` on window features; raw `(questions, contexts)` give one row per window.

        A question whose context is longer than one window has several rows, so
        on raw text the result is `{"start_logits", "end_logits"}` for every
        window of `preprocessor.windows(questions, contexts)`, in order.
        `answer(questions, contexts)` turns them into answer strings.
        """
        x = self._read_tables(x)[0]  # (tables, arrays and string tensors: lists)
        if self._is_raw(x):
            self._check_preprocessor()
            questions, contexts = self.preprocessor.as_columns(x)
            windows = self.preprocessor.windows(questions, contexts)
            return super().predict(windows.features, batch_size=batch_size or 32, verbose=verbose, steps=steps,
                                   callbacks=callbacks)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def evaluate_answers(self, x, answers, batch_size=32, null_score_diff_threshold=None):
        """SQuAD's exact match and F1 of `answer(x)` against `answers`, in percent, as the official scripts and
        Hugging Face's `evaluate` give them: `{"exact_match": ..., "f1": ...}`.

        `x` holds the examples as `answer` and `fit` take them (`(questions, contexts)`, pairs, a DataFrame's two
        columns), `answers` one per question as `fit` takes them; a SQuAD JSON's `[{"text", "answer_start"}, ...]`
        or `datasets`' `{"text": [...], "answer_start": [...]}` gives every reference answer, and a prediction
        scores its best match (`keras_bert_impl.metrics.squad.answer_scores`). Where some questions have no answer
        ("", None, []: SQuAD v2.0) the v2.0 rules score them; pass `null_score_diff_threshold` so that `answer`
        may say "".

        Example:
        >>> qa = BertSpanExtractor.from_preset("all_minilm_l6_v2_en")
        >>> qa.fit((questions, contexts), answers, epochs=2)  # doctest: +SKIP
        >>> qa.evaluate_answers((dev_questions, dev_contexts), dev_answers)  # doctest: +SKIP
        {'exact_match': 71.2, 'f1': 80.4}
        """
        from keras_bert_impl.metrics.squad import answer_scores
        from keras_bert_impl.text.span_extractor_preprocessor import reference_answer_texts

        self._check_preprocessor()
        questions, contexts = self.preprocessor.as_columns(self._read_tables(x)[0])
        if answers is None or isinstance(answers, (str, dict)):  # one question's answer
            answers = [answers]
        references = reference_answer_texts(list(table_as_labels(answers)))
        if len(references) != len(questions):
            raise ValueError(f"{len(questions)} questions but {len(references)} answers: give one answer per "
                             "question.")
        predicted = self.answer(questions, contexts, batch_size=batch_size,
                                null_score_diff_threshold=null_score_diff_threshold)
        predicted = [predicted] if isinstance(predicted, dict) else predicted
        return answer_scores([p["text"] for p in predicted], references)

    def answer(self, question, context=None, batch_size=32, null_score_diff_threshold=None, top_k=1,
               handle_impossible_answer=False, max_answer_length=None, max_answer_len=None):
        """The answer span of `question` in `context`: `{"text", "start", "end", "score"}`.

        `question` and `context` are strings or lists of them (one question
        over a list of contexts asks it of each, as Hugging Face's pipeline
        does); without `context`, `question` is the examples in any form
        `fit` and `predict` take: `(questions, contexts)`, a list of
        `(question, context)` pairs, or `df[["question", "context"]]`.

        Contexts longer than one window are cut into overlapping windows
        (`doc_stride` apart); the answer is the span with the highest
        `start_logit + end_logit` over all windows (start in its max-context
        window, end >= start, at most `max_answer_length` tokens), as in
        google-research/bert. `start`/`end` are character offsets into
        `context` (`end` exclusive), exact for any Unicode; `score` is the
        span's probability, `p(start) * p(end)` under the softmax of its
        window. Lists of questions and contexts give a list of answers.

        `top_k > 1` gives, for each question, a list of its `top_k` best
        spans (fewer where the context has fewer), best first, as Hugging
        Face's question-answering pipeline's `top_k`; the first is the
        `top_k=1` answer.

        SQuAD v2.0 ("no answer"): with `null_score_diff_threshold` set, the
        answer is "" (`start == end == 0`, `score` the [CLS] span's
        probability) where `null_odds > null_score_diff_threshold`, the rule
        of `keras_bert_impl.models.span_decoding` that
        `tasks.span_qa.prediction.answer_questions` applies too; every answer
        then has `null_odds`. None (default): always the best span (v1.1).
        `handle_impossible_answer=True` (Hugging Face's pipeline's name) is
        `null_score_diff_threshold=0.0`: "" when the [CLS] span beats the best one.

        `max_answer_length` (or the pipeline's `max_answer_len`) sets the longest answer, in tokens, for this call;
        default the model's `max_answer_length` (30, as google-research/bert; the pipeline's is 15).

        Example:
        >>> qa = BertSpanExtractor.from_preset("all_minilm_l6_v2_en")
        >>> qa.answer("Who wrote it?", "It was written by Ada Lovelace in 1843.")["text"]  # doctest: +SKIP
        'Ada Lovelace'
        """
        self._check_preprocessor()
        if handle_impossible_answer:
            if null_score_diff_threshold is not None:
                raise ValueError("Give `null_score_diff_threshold` or `handle_impossible_answer=True` (which is "
                                 "null_score_diff_threshold=0.0), not both.")
            null_score_diff_threshold = 0.0
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"`top_k` must be a positive int, got {top_k!r}.")
        if max_answer_len is not None:
            if max_answer_length is not None and max_answer_length != max_answer_len:
                raise ValueError("`max_answer_len` is Hugging Face's name of `max_answer_length`: give one of them.")
            max_answer_length = max_answer_len
        max_answer_length = self.max_answer_length if max_answer_length is None else max_answer_length
        if isinstance(max_answer_length, bool) or not isinstance(max_answer_length, int) or max_answer_length < 1:
            raise ValueError(f"`max_answer_length` must be a positive int (tokens), got {max_answer_length!r}.")
        if context is None:  # the examples as `predict` takes them
            examples = self._read_tables(question)[0]
            if isinstance(examples, str):
                raise ValueError("answer(question, context) got a question and no context (None): give the context "
                                 "as the second argument, or the examples as answer((questions, contexts)).")
            single = isinstance(examples, tuple) and len(examples) == 2 and all(isinstance(v, str) for v in examples)
            questions, contexts = self.preprocessor.as_columns(examples)
        else:
            # A Series or dataset column, or a NumPy array (a 0-d one is its string): a list.
            question = table_as_texts(numpy_text_as_lists(question), [("question",)], type(self).__name__)
            context = table_as_texts(numpy_text_as_lists(context), [("context",)], type(self).__name__)
            single = isinstance(question, str) and isinstance(context, str)
            for name, value in (("question", question), ("context", context)):
                if not isinstance(value, (str, list, tuple)):  # (else "'int' object is not iterable")
                    raise TypeError(f"answer(): `{name}` must be a string or a list of strings, got "
                                    f"{type(value).__name__} {value!r:.60}.")
            questions = [question] if isinstance(question, str) else list(question)
            contexts = [context] if isinstance(context, str) else list(context)
            if len(questions) == 1 and len(contexts) > 1:  # one question of each context
                questions = questions * len(contexts)
            elif len(contexts) == 1 and len(questions) > 1:  # several questions of one context
                contexts = contexts * len(questions)
        _refuse_swapped(questions, contexts)
        windows = self.preprocessor.windows(questions, contexts)
        outputs = self.predict(windows.features, batch_size=batch_size, verbose=0)
        start_logits = np.asarray(outputs["start_logits"], "float64")
        end_logits = np.asarray(outputs["end_logits"], "float64")
        candidates = [[] for _ in questions]  # (score, start token, end token, probability), the best of each window
        null = [None] * len(questions)  # (null score, its probability): the lowest over the windows
        for w, i in enumerate(windows.example):
            log_z_start, log_z_end = _logsumexp(start_logits[w]), _logsumexp(end_logits[w])
            window_null = window_null_score(start_logits[w], end_logits[w])
            if null[i] is None or window_null < null[i][0]:
                cls_log_p = start_logits[w, NULL_POSITION] - log_z_start + end_logits[w, NULL_POSITION] - log_z_end
                null[i] = (window_null, float(np.exp(cls_log_p)))
            first = int(windows.context_start[w])
            count = len(windows.token_index[w])
            if count == 0:
                continue
            starts = start_logits[w, first : first + count]
            ends = end_logits[w, first : first + count]
            log_p_start = starts - log_z_start
            log_p_end = ends - log_z_end
            # The best spans start <= end < start + max_answer_length with a max-context start, scored
            # start_logit + end_logit (only the band of the score matrix is computed).
            scores, best_starts, best_ends = best_spans_in_window(starts, ends, windows.max_context[w],
                                                                  max_answer_length, top_k)
            for score, s, e in zip(scores.tolist(), best_starts.tolist(), best_ends.tolist()):
                candidates[i].append((score, windows.token_index[w][s], windows.token_index[w][e],
                                      float(np.exp(log_p_start[s] + log_p_end[e]))))
        answers = []
        for i, found in enumerate(candidates):
            # A start belongs to one window (its max context), so no span is found twice; best first, the earlier
            # window first among equal scores (as the single best span was chosen).
            found = sorted(found, key=lambda candidate: -candidate[0])[:top_k]
            odds = None
            if null_score_diff_threshold is not None and null[i] is not None:
                odds = null_odds(null[i][0], found[0][0] if found else None)
                if is_no_answer(odds, null_score_diff_threshold):
                    no_answer = AnswerDict(text="", start=0, end=0, score=null[i][1], null_odds=odds)
                    answers.append(no_answer if top_k == 1 else [no_answer])
                    continue
            spans = []
            for _, token_s, token_e, probability in found:
                start = int(windows.char_starts[i][token_s])
                end = int(windows.char_ends[i][token_e])
                spans.append(AnswerDict(text=contexts[i][start:end], start=start, end=end, score=probability))
                if odds is not None:
                    spans[-1]["null_odds"] = odds
            if not spans:
                spans.append(AnswerDict(text="", start=0, end=0, score=0.0))
            answers.append(spans[0] if top_k == 1 else spans)
        return answers[0] if single else answers


def _logsumexp(values):
    peak = np.max(values)
    return peak + np.log(np.sum(np.exp(values - peak)))


def _refuse_swapped(questions, contexts):
    """One line where a question and its context look the other way round: the "question" longer than the
    "context", which alone ends in "?" (before: an answer cut from the question, silently).

    Example:
    >>> _refuse_swapped(["Who wrote it?"], ["It was written by Ada Lovelace in 1843."])
    >>> _refuse_swapped(["It was written by Ada Lovelace in 1843."], ["Who wrote it?"])
    Traceback (most recent call last):
    ...
    ValueError: answer(question, context): question 0 'It was written by Ada Lovelace in 1843.' is longer than its context 'Who wrote it?', which ends in '?': are they the other way round? The question comes first.
    """
    for index, (question, context) in enumerate(zip(questions, contexts)):
        if not (isinstance(question, str) and isinstance(context, str)):
            continue
        if (len(question) > len(context) and context.rstrip().endswith("?")
                and not question.rstrip().endswith("?")):
            shown = repr(question) if len(question) <= 60 else repr(question[:57]) + "..."
            raise ValueError(f"answer(question, context): question {index} {shown} is longer than its context "
                             f"{context!r:.80}, which ends in '?': are they the other way round? The question comes "
                             "first.")
