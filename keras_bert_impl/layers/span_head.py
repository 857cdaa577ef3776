"""Span head: start/end logits of an answer span over the encoder's token outputs."""

import keras
from keras import ops

# Added to the logits of positions that cannot hold an answer: exp(-10000) is 0 in float32.
MASKED_LOGIT = -10000.0


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SpanHead(keras.layers.Layer):
    """Start and end logits for extractive question answering (SQuAD).

    A dense layer maps each token's hidden state to two numbers, the start and
    end logits (as google-research/bert `run_squad.py` and Hugging Face
    `BertForQuestionAnswering`). Positions that cannot hold an answer get
    `MASKED_LOGIT` added, so they drop out of the softmax, the loss and the
    argmax: padding, the question (segment 0) and the [SEP] tokens. [CLS]
    (position 0) stays allowed: it is the target of windows without the
    answer and, in SQuAD v2.0, of unanswerable questions.

    Inputs are packed as `[CLS] question [SEP] context [SEP] [PAD]...`: context
    tokens are the segment-1 tokens except the last non-padding token.

    Args:
        kernel_initializer: initializer of the dense kernel (BERT: truncated
            normal, stddev 0.02).
        **kwargs: `keras.layers.Layer` arguments.

    Call args:
        sequence_output: float tensor `(batch, length, hidden_dim)`.
        segment_ids: int tensor `(batch, length)`.
        padding_mask: int/bool tensor `(batch, length)`, 1 for real tokens.

    Returns:
        `(start_logits, end_logits)`, float32 tensors `(batch, length)`.

    Example:
    >>> import numpy as np
    >>> head = SpanHead()
    >>> x = np.random.rand(1, 6, 8).astype("float32")
    >>> segments = np.array([[0, 0, 0, 1, 1, 0]])  # [CLS] q [SEP] c [SEP] [PAD]
    >>> mask = np.array([[1, 1, 1, 1, 1, 0]])
    >>> start, end = head(x, segment_ids=segments, padding_mask=mask)
    >>> [bool(v > MASKED_LOGIT / 2) for v in np.asarray(start)[0]]
    [True, False, False, True, False, False]
    """

    def __init__(self, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, sequence_output_shape, segment_ids_shape=None, padding_mask_shape=None):
        self.dense = keras.layers.Dense(
            2, kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy, name="span_logits"
        )
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output, segment_ids, padding_mask):
        logits = ops.cast(self.dense(sequence_output), "float32")
        allowed = answer_candidate_mask(segment_ids, padding_mask)
        penalty = (1.0 - ops.cast(allowed, "float32")) * MASKED_LOGIT
        return logits[..., 0] + penalty, logits[..., 1] + penalty

    def compute_output_spec(self, sequence_output, segment_ids=None, padding_mask=None):
        shape = tuple(sequence_output.shape[:-1])
        return (keras.KerasTensor(shape, dtype="float32"), keras.KerasTensor(shape, dtype="float32"))

    def get_config(self):
        config = super().get_config()
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        return config


def answer_candidate_mask(segment_ids, padding_mask):
    """Bool `(batch, length)`: True at [CLS] and at context tokens (segment 1, not the final [SEP]).

    `padding_mask` may number the examples of packed rows (1, 2, ... for
    each window of a row, 0 for padding; `keras_bert_impl.layers.packed_examples`):
    each window's own [CLS] (its first token) stays allowed and its own final
    [SEP] (its last token) is masked, so every window of a packed row gets the
    candidates it gets alone in a row. Position 0 is always allowed.

    Example:
    >>> import numpy as np
    >>> np.asarray(answer_candidate_mask(np.array([[0, 0, 0, 1, 1, 1, 0]]),
    ...                                  np.array([[1, 1, 1, 1, 1, 1, 0]]))).astype(int).tolist()
    [[1, 0, 0, 1, 1, 0, 0]]
    >>> np.asarray(answer_candidate_mask(np.array([[0, 0, 1, 1, 0, 0, 1, 1, 0]]),   # two packed windows
    ...                                  np.array([[1, 1, 1, 1, 2, 2, 2, 2, 0]]))).astype(int).tolist()
    [[1, 0, 1, 0, 1, 0, 1, 0, 0]]
    """
    example_ids = ops.cast(padding_mask, "int32")
    length = ops.shape(example_ids)[1]
    positions = ops.expand_dims(ops.arange(length, dtype="int32"), 0)
    edge = ops.zeros_like(example_ids[:, :1])
    before = ops.concatenate([edge, example_ids[:, :-1]], axis=1)
    after = ops.concatenate([example_ids[:, 1:], edge], axis=1)
    real = ops.greater(example_ids, 0)
    first = ops.logical_and(real, ops.not_equal(example_ids, before))  # each window's [CLS]
    last = ops.logical_and(real, ops.not_equal(example_ids, after))  # each window's final [SEP]
    is_context = ops.logical_and(ops.equal(ops.cast(segment_ids, "int32"), 1), real)
    is_context = ops.logical_and(is_context, ops.logical_not(last))
    return ops.logical_or(is_context, ops.logical_or(first, ops.equal(positions, 0)))
