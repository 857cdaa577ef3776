"""SegmentPacker: one or two token segments -> `[CLS] A [SEP] (B [SEP])` model inputs."""

import tensorflow as tf

TRUNCATION_STRATEGIES = ("round_robin", "waterfall", "longest_first")


def truncated_lengths(lengths_a, lengths_b, budget, truncate):
    """Per-example lengths of two segments after truncation to `budget` tokens in all.

    Args:
        lengths_a, lengths_b: int64 tensors [batch], segment lengths.
        budget: int, tokens available for both segments together.
        truncate: "round_robin" (take a token from A, then B, in turn: the
            shorter segment is kept whole if it fits in half the budget, A
            gets the odd token), "waterfall" (A first, B gets what is left),
            "longest_first" (the original BERT `_truncate_seq_pair`: drop
            the last token of the longer segment, of B on ties).

    Returns:
        `(new_lengths_a, new_lengths_b)`.

    Example:
    >>> [t.numpy().tolist() for t in truncated_lengths(tf.constant([10, 2]), tf.constant([10, 9]), 5, "round_robin")]
    [[3, 2], [2, 3]]
    """
    if truncate not in TRUNCATION_STRATEGIES:
        raise ValueError(f"`truncate` must be one of {', '.join(TRUNCATION_STRATEGIES)}; got {truncate!r}")
    budget = tf.constant(budget, lengths_a.dtype)
    half_up = (budget + 1) // 2
    half_down = budget // 2
    if truncate == "waterfall":
        new_a = tf.minimum(lengths_a, budget)
        return new_a, tf.minimum(lengths_b, budget - new_a)
    if truncate == "round_robin":
        new_a = tf.minimum(lengths_a, tf.maximum(half_up, budget - lengths_b))
        new_b = tf.minimum(lengths_b, tf.maximum(half_down, budget - lengths_a))
        return new_a, new_b
    # longest_first: the longer segment shrinks to the shorter one's length,
    # then both shrink in turn (B first), ending at (ceil, floor) of budget/2.
    fits = lengths_a + lengths_b <= budget
    shorter = tf.minimum(lengths_a, lengths_b)
    shorter_kept = shorter <= budget - shorter
    new_a = tf.where(shorter_kept, tf.where(lengths_a <= lengths_b, lengths_a, budget - lengths_b), half_up)
    new_b = tf.where(shorter_kept, tf.where(lengths_a <= lengths_b, budget - lengths_a, lengths_b), half_down)
    return tf.where(fits, lengths_a, new_a), tf.where(fits, lengths_b, new_b)


class SegmentPacker:
    """Packs one or two segments of token ids into BERT inputs, vectorised.

    `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, truncated to `sequence_length`
    and padded to it. Works on a batch (ragged `[batch, tokens]` segments) or
    on a single example (1-D segments), eagerly, in `tf.function` and in
    `tf.data.Dataset.map`.

    Args:
        sequence_length: int, length of the packed sequence including the
            special tokens; `None` packs without truncation or padding
            (ragged output for a batch).
        start_value: id put first ([CLS]).
        end_value: id put after each segment ([SEP]).
        pad_value: id of padding ([PAD]).
        truncate: "round_robin", "waterfall" or "longest_first" (see
            `truncated_lengths`).
        pad: pad to `sequence_length` (static shape). If False, segments are
            truncated but the output stays ragged (for length bucketing).

    Returns (when called):
        dict of int32 `token_ids`, `segment_ids` (0 for [CLS] A [SEP], 1 for
        B [SEP]), `padding_mask` (1 on tokens, 0 on padding), each
        `[batch, sequence_length]` (or `[sequence_length]`).

    Example:
    >>> packer = SegmentPacker(8, start_value=101, end_value=102, pad_value=0)
    >>> out = packer((tf.ragged.constant([[1, 2, 3, 4, 5]]), tf.ragged.constant([[6, 7, 8]])))
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[101, 1, 2, 3, 102, 6, 7, 102]], [[0, 0, 0, 0, 0, 1, 1, 1]])
    """

    def __init__(self, sequence_length, start_value, end_value, pad_value=0, truncate="round_robin", pad=True):
        if sequence_length is not None and (not isinstance(sequence_length, int) or sequence_length < 3):
            raise ValueError(
                f"`sequence_length` must be an int >= 3 (room for [CLS] A [SEP]) or None; got {sequence_length!r}"
            )
        if truncate not in TRUNCATION_STRATEGIES:
            raise ValueError(f"`truncate` must be one of {', '.join(TRUNCATION_STRATEGIES)}; got {truncate!r}")
        for name, value in (("start_value", start_value), ("end_value", end_value), ("pad_value", pad_value)):
            if not isinstance(value, int):
                raise ValueError(f"`{name}` must be an int token id; got {value!r}")
        self.sequence_length = sequence_length
        self.start_value = start_value
        self.end_value = end_value
        self.pad_value = pad_value
        self.truncate = truncate
        self.pad = bool(pad)

    @classmethod
    def from_tokenizer(cls, tokenizer, sequence_length, truncate="round_robin", pad=True):
        """Packer using a `BertTokenizer`'s [CLS], [SEP] and [PAD] ids."""
        return cls(
            sequence_length,
            start_value=int(tokenizer.cls_token_id),
            end_value=int(tokenizer.sep_token_id),
            pad_value=int(tokenizer.pad_token_id),
            truncate=truncate,
            pad=pad,
        )

    def get_config(self):
        return {
            "sequence_length": self.sequence_length,
            "start_value": self.start_value,
            "end_value": self.end_value,
            "pad_value": self.pad_value,
            "truncate": self.truncate,
            "pad": self.pad,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __call__(self, segments):
        """Packs `segments`: a tensor, or a tuple/list of one or two tensors."""
        if isinstance(segments, (tuple, list)):
            segments = list(segments)
        else:
            segments = [segments]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"SegmentPacker packs one or two segments; got {len(segments)}")
        segments = [_as_ragged_int(s) for s in segments]
        ranks = {s.shape.rank for s in segments}
        if len(ranks) != 1 or ranks.pop() not in (1, 2):
            raise ValueError(
                "each segment must be a batch [batch, tokens] or a single example [tokens], all the same; "
                f"got shapes {[s.shape for s in segments]}"
            )
        unbatched = segments[0].shape.rank == 1
        if unbatched:
            segments = [_to_batch(s) for s in segments]
        else:
            segments = [s if isinstance(s, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(s) for s in segments]
        segments = self._truncate(segments)
        batch = segments[0].nrows()
        start = tf.fill([batch, 1], tf.constant(self.start_value, tf.int32))
        end = tf.fill([batch, 1], tf.constant(self.end_value, tf.int32))
        pieces, segment_pieces = [start], [tf.zeros_like(start)]
        for index, segment in enumerate(segments):
            pieces += [segment, end]
            segment_pieces += [tf.zeros_like(segment) + index, tf.zeros_like(end) + index]
        token_ids = tf.concat(pieces, axis=1)
        segment_ids = tf.concat(segment_pieces, axis=1)
        padding_mask = tf.ones_like(token_ids)
        if self.sequence_length is not None and self.pad:
            shape = [None, self.sequence_length]
            token_ids = token_ids.to_tensor(default_value=self.pad_value, shape=shape)
            segment_ids = segment_ids.to_tensor(default_value=0, shape=shape)
            padding_mask = padding_mask.to_tensor(default_value=0, shape=shape)
        outputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _truncate(self, segments):
        if self.sequence_length is None:
            return segments
        budget = self.sequence_length - 1 - len(segments)
        if budget < len(segments):
            raise ValueError(
                f"sequence_length={self.sequence_length} leaves no room for {len(segments)} segment(s) "
                f"after [CLS] and {len(segments)} [SEP]; need at least {1 + 2 * len(segments)}"
            )
        lengths = [s.row_lengths() for s in segments]
        if len(segments) == 1:
            new_lengths = [tf.minimum(lengths[0], budget)]
        else:
            new_lengths = list(truncated_lengths(lengths[0], lengths[1], budget, self.truncate))
        return [_keep_first(s, n) for s, n in zip(segments, new_lengths)]


def _as_ragged_int(segment):
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.convert_to_tensor(segment)
    if not segment.dtype.is_integer:
        raise ValueError(f"segments must hold integer token ids; got dtype {segment.dtype.name}")
    return tf.cast(segment, tf.int32)


def _to_batch(segment):
    """A single example [tokens] -> ragged batch of one [1, tokens]."""
    if isinstance(segment, tf.RaggedTensor):
        segment = segment.flat_values
    return tf.RaggedTensor.from_row_lengths(segment, tf.shape(segment, out_type=tf.int64)[:1])


def _keep_first(segment, lengths):
    """Keeps the first `lengths[i]` tokens of row i of a ragged [batch, tokens]."""
    positions = tf.ragged.range(segment.row_lengths())
    return tf.ragged.boolean_mask(segment, positions < tf.expand_dims(lengths, 1))
