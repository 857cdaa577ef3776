"""Dynamic masked-LM masking of a batch, seeded and vectorised.

Built on tensorflow-text's `mask_language_model`, with its two random parts
replaced by stateless, seeded equivalents so that a tf.data pipeline with
parallel calls gives the same masks for the same seed, and new masks each
time the seed changes (every batch of every epoch gets its own seed):

- `SeededItemSelector`, a `tensorflow_text.RandomItemSelector` that selects,
  in one vectorised step (no per-row `map_fn`), `floor(n * selection_rate + u)`
  of the `n` selectable items of each row (u uniform in [0, 1): exactly
  `selection_rate` of the eligible items in expectation, where tensorflow-text
  rounds up), at most `max_selections_per_batch` items -- or, for whole words,
  at most that many word pieces -- per row.
- `SeededMaskValuesChooser`, a `tensorflow_text.MaskValuesChooser`: 80% of the
  selected pieces become `[MASK]`, 10% a random id in `[0, vocab_size)`, 10%
  stay unchanged.

`mask_batch` applies both to a padded batch and returns the static-shape
model inputs.

Example:

```python
import tensorflow as tf
from keras_bert_impl.text.masking import mask_batch

token_ids = tf.constant([[101, 7592, 2088, 102, 0, 0]])
outputs = mask_batch(
    token_ids, lengths=tf.constant([4]), seed=tf.constant([1, 2], tf.int64),
    max_predictions_per_seq=2, masking_rate=0.5, vocab_size=30522,
    mask_token_id=103, special_token_ids=[0, 101, 102], pad_token_id=0,
)
print(outputs["mask_positions"], outputs["mask_weights"])
```
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)


def _split_seed(seed, n):
    return tf.unstack(tf.random.experimental.stateless_split(seed, n))


class SeededItemSelector(tf_text.RandomItemSelector):
    """Selects `selection_rate` of the selectable items of each row, seeded.

    Args:
        max_selections_per_batch: the most word pieces selected in one row
            (the `max_predictions_per_seq` of BERT).
        selection_rate: the expected fraction of selectable items selected.
        unselectable_ids: ids never selected (special tokens, padding); an item
            (a word, for rank-3 input) holding any of them is never selected.
        seed: a `[2]` int tensor, the stateless seed.

    Example:

    >>> import tensorflow as tf
    >>> selector = SeededItemSelector(2, 0.5, [0], seed=tf.constant([1, 2], tf.int64))
    >>> ids = tf.ragged.constant([[5, 6, 7, 8], [0, 9]])
    >>> [int(n) for n in tf.reduce_sum(tf.cast(selector.get_selection_mask(ids, 1), tf.int32), 1)]
    [2, 1]
    """

    def __init__(self, max_selections_per_batch, selection_rate, unselectable_ids, seed):
        super().__init__(max_selections_per_batch, selection_rate, unselectable_ids)
        self._seed = seed

    def get_selection_mask(self, input_ids, axis=1):
        if axis != 1:
            raise ValueError(f"SeededItemSelector selects along axis 1, got axis={axis}")
        selectable = self.get_selectable(input_ids, axis)  # [rows, (items)] bool
        key_seed, count_seed = _split_seed(self._seed, 2)
        n_items = tf.shape(selectable.flat_values, out_type=tf.int64)[0]
        rows = selectable.value_rowids()
        # Random order of the selectable items within each row: sort by (row, key)
        # with unselectable items last in their row.
        keys = tf.random.stateless_uniform([n_items], key_seed, dtype=tf.float32)
        keys = tf.where(selectable.flat_values, keys, 2.0)
        order = tf.argsort(tf.cast(rows, tf.float64) * 4.0 + tf.cast(keys, tf.float64), stable=True)
        rank = tf.scatter_nd(
            order[:, None],
            tf.range(n_items) - tf.gather(selectable.row_starts(), tf.gather(rows, order)),
            [n_items],
        )
        num_selectable = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)
        num_rows = tf.shape(num_selectable)[0]
        u = tf.random.stateless_uniform([num_rows], count_seed, dtype=tf.float32)
        num_to_select = tf.floor(num_selectable * self.selection_rate + u)
        num_to_select = tf.minimum(num_to_select, float(self.max_selections_per_batch))
        chosen = tf.logical_and(
            selectable.flat_values, rank < tf.gather(tf.cast(num_to_select, tf.int64), rows)
        )
        if input_ids.ragged_rank == 2:
            # Whole items (words): keep the word-piece count within the budget,
            # taking the chosen items in their random order.
            pieces = tf.cast(input_ids.values.row_lengths(), tf.int64)
            ordered = tf.gather(tf.where(chosen, pieces, 0), order)  # rows stay grouped
            cumulative = tf.cumsum(ordered)
            row_offset = tf.gather(tf.concat([[0], cumulative], 0), selectable.row_starts())
            cumulative = cumulative - tf.gather(row_offset, rows)
            cumulative = tf.scatter_nd(order[:, None], cumulative, [n_items])
            chosen = tf.logical_and(chosen, cumulative <= self.max_selections_per_batch)
        elif input_ids.ragged_rank > 2:
            raise ValueError("SeededItemSelector takes [batch, (pieces)] or [batch, (words), (pieces)]")
        return selectable.with_flat_values(chosen)


class SeededMaskValuesChooser(tf_text.MaskValuesChooser):
    """Chooses [MASK] / random id / unchanged for the selected pieces, seeded.

    Args:
        vocab_size: random ids are drawn from `[0, vocab_size)`.
        mask_token: the `[MASK]` id.
        seed: a `[2]` int tensor, the stateless seed.
        mask_token_rate: fraction replaced by `[MASK]` (0.8).
        random_token_rate: fraction replaced by a random id (0.1).

    Example:

    >>> import tensorflow as tf
    >>> chooser = SeededMaskValuesChooser(100, 3, seed=tf.constant([1, 2], tf.int64))
    >>> chooser.get_mask_values(tf.ragged.constant([[10, 11], [12]])).shape.rank
    2
    """

    def __init__(self, vocab_size, mask_token, seed, mask_token_rate=0.8, random_token_rate=0.1):
        super().__init__(vocab_size, mask_token, mask_token_rate, random_token_rate)
        self._seed = seed

    def get_mask_values(self, masked_lm_ids):
        if masked_lm_ids.ragged_rank > 1:
            masked_lm_ids = masked_lm_ids.merge_dims(1, -1)
        choice_seed, random_seed = _split_seed(self._seed, 2)
        flat = masked_lm_ids.flat_values
        shape = tf.shape(flat)
        u = tf.random.stateless_uniform(shape, choice_seed, dtype=tf.float32)
        random_ids = tf.random.stateless_uniform(
            shape, random_seed, minval=0, maxval=self.vocab_size, dtype=tf.int32
        )
        values = tf.where(
            u < self._mask_token_rate,
            tf.cast(self.mask_token, flat.dtype),
            tf.where(u < self._mask_token_rate + self._random_token_rate, tf.cast(random_ids, flat.dtype), flat),
        )
        return masked_lm_ids.with_flat_values(values)


def mask_batch(token_ids, lengths, seed, *, max_predictions_per_seq, masking_rate, vocab_size,
               mask_token_id, special_token_ids, pad_token_id, word_starts=None, mask_token_rate=0.8,
               random_token_rate=0.1):
    """Masks a padded batch of token ids and returns static-shape model inputs.

    Args:
        token_ids: `[batch, sequence_length]` int32, padded.
        lengths: `[batch]` int, the unpadded lengths.
        seed: `[2]` int stateless seed.
        max_predictions_per_seq: the number of `mask_*` slots.
        masking_rate: the expected fraction of eligible (non-special) pieces masked.
        vocab_size: random replacement ids come from `[0, vocab_size)`.
        mask_token_id: the `[MASK]` id.
        special_token_ids: ids never masked ([CLS], [SEP], [PAD]).
        pad_token_id: the padding id.
        word_starts: optional `[batch, sequence_length]` bool, True on the first piece
            of every word (and on every special token): whole-word masking.
        mask_token_rate, random_token_rate: the fractions of the chosen pieces replaced by
            `[MASK]` (0.8) and by a random id (0.1); the rest are kept.

    Returns:
        A dict of int32 tensors: `token_ids` and `padding_mask` `[batch,
        sequence_length]`, `mask_positions`, `mask_ids`, `mask_weights` `[batch,
        max_predictions_per_seq]` (unused slots are 0 everywhere).
    """
    sequence_length = token_ids.shape[1]
    if sequence_length is None:  # a batch padded to its length bucket, inside tf.data
        sequence_length = tf.shape(token_ids)[1]
    ragged = tf.RaggedTensor.from_tensor(token_ids, lengths=lengths)
    items = ragged
    if word_starts is not None:
        starts = tf.RaggedTensor.from_tensor(word_starts, lengths=lengths).flat_values
        words = tf.RaggedTensor.from_row_starts(
            ragged.flat_values, tf.where(starts)[:, 0], validate=False
        )
        words_per_row = tf.reduce_sum(
            tf.cast(tf.logical_and(word_starts, tf.sequence_mask(lengths, sequence_length)), tf.int64), axis=1
        )
        items = tf.RaggedTensor.from_row_lengths(words, words_per_row, validate=False)
    select_seed, values_seed = _split_seed(seed, 2)
    selector = SeededItemSelector(max_predictions_per_seq, masking_rate, list(special_token_ids), select_seed)
    chooser = SeededMaskValuesChooser(vocab_size, mask_token_id, values_seed, mask_token_rate, random_token_rate)
    masked, positions, ids = tf_text.mask_language_model(items, selector, chooser, axis=1)
    if masked.ragged_rank > 1:
        masked = masked.merge_dims(1, -1)
    masked_ids, padding_mask = tf_text.pad_model_inputs(masked, sequence_length, pad_value=pad_token_id)
    mask_positions, mask_weights = tf_text.pad_model_inputs(
        tf.cast(positions, tf.int32), max_predictions_per_seq
    )
    mask_ids, _ = tf_text.pad_model_inputs(tf.cast(ids, tf.int32), max_predictions_per_seq)
    return {
        "token_ids": tf.cast(masked_ids, tf.int32),
        "padding_mask": tf.cast(padding_mask, tf.int32),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": tf.cast(mask_weights, tf.int32),
    }
