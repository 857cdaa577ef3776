"""Dynamic masked-LM masking of a batch, in NumPy (no TensorFlow).

The NumPy twin of `keras_bert_impl.text.masking.mask_batch`, the same steps:

- each row's selectable pieces (not `[CLS]`, `[SEP]` or padding) get random
  keys; the row selects `floor(n * masking_rate + u)` of its `n` selectable
  pieces, those with the smallest keys, at most `max_predictions_per_seq`;
- 80% of the selected pieces become `[MASK]`, 10% a random id in
  `[0, vocab_size)`, 10% stay unchanged;
- the selected positions (ascending), their original ids and weights fill the
  static-shape `mask_*` slots; unused slots are 0 everywhere.

Given the numbers TensorFlow's stateless ops draw, the outputs are identical to
`masking.mask_batch`'s (`tests/test_array_pretraining.py`). Whole-word masking
is not offered here.

Example:

>>> import numpy as np
>>> from keras_bert_impl.data.array_sentence_pairs import GeneratorDraws
>>> outputs = mask_batch(np.array([[101, 7592, 2088, 102, 0, 0]]), lengths=np.array([4]),
...                      draws=GeneratorDraws(np.random.default_rng(0)), max_predictions_per_seq=2,
...                      masking_rate=0.5, vocab_size=30522, mask_token_id=103,
...                      special_token_ids=[0, 101, 102], pad_token_id=0)
>>> int(outputs["mask_weights"].sum()) in (1, 2), outputs["padding_mask"].tolist()
(True, [[1, 1, 1, 1, 0, 0]])
"""

import numpy as np

from keras_bert_impl.data.array_sentence_pairs import exclusive_cumsum

MASK_TOKEN_RATE = 0.8
RANDOM_TOKEN_RATE = 0.1


def mask_batch(token_ids, lengths, draws, *, max_predictions_per_seq, masking_rate, vocab_size,
               mask_token_id, special_token_ids, pad_token_id):
    """Masks a padded batch of token ids and returns the static-shape model inputs.

    Args:
        token_ids: `[batch, sequence_length]` ints, padded.
        lengths: `[batch]` ints, the unpadded lengths.
        draws: the random numbers (`array_sentence_pairs.GeneratorDraws`).
        max_predictions_per_seq: the number of `mask_*` slots.
        masking_rate: the expected fraction of selectable pieces masked.
        vocab_size: random replacement ids come from `[0, vocab_size)`.
        mask_token_id: the `[MASK]` id.
        special_token_ids: ids never masked ([CLS], [SEP], [PAD]).
        pad_token_id: the padding id.

    Returns:
        A dict of int32 arrays: `token_ids` and `padding_mask` `[batch,
        sequence_length]`, `mask_positions`, `mask_ids`, `mask_weights`
        `[batch, max_predictions_per_seq]`.
    """
    token_ids = np.asarray(token_ids)
    batch, sequence_length = token_ids.shape
    lengths = np.asarray(lengths, np.int64)
    valid = np.arange(sequence_length)[None, :] < lengths[:, None]
    rows, columns = np.nonzero(valid)  # row-major: the order of the flat items
    flat_ids = token_ids[rows, columns]
    n_items = len(flat_ids)
    selectable = ~np.isin(flat_ids, np.asarray(list(special_token_ids)))

    # A random order of each row's selectable items (the others last), and each item's rank in it.
    keys = draws.uniform("mask_order", n_items, np.float32)
    keys = np.where(selectable, keys, np.float32(2.0))
    order = np.lexsort((keys, rows))  # by row, then key; stable
    row_starts = exclusive_cumsum(valid.sum(axis=1))
    rank = np.empty(n_items, np.int64)
    rank[order] = np.arange(n_items) - row_starts[rows[order]]
    num_selectable = np.bincount(rows[selectable], minlength=batch).astype(np.float32)
    u = draws.uniform("mask_count", batch, np.float32)
    num_to_select = np.floor(num_selectable * np.float32(masking_rate) + u)
    num_to_select = np.minimum(num_to_select, np.float32(max_predictions_per_seq)).astype(np.int64)
    chosen = selectable & (rank < num_to_select[rows])

    # What each chosen piece becomes: [MASK], a random id, or itself.
    original = flat_ids[chosen]
    n_chosen = len(original)
    choice = draws.uniform("mask_value", n_chosen, np.float32)
    random_ids = draws.integers("random_token", 0, vocab_size, n_chosen, dtype=np.int32)
    new_values = np.where(choice < np.float32(MASK_TOKEN_RATE), mask_token_id,
                          np.where(choice < np.float32(MASK_TOKEN_RATE + RANDOM_TOKEN_RATE), random_ids, original))
    masked = np.where(valid, token_ids, pad_token_id).astype(np.int32)
    masked[rows[chosen], columns[chosen]] = new_values

    # The chosen positions of each row, in ascending order, in the first slots.
    chosen_rows, chosen_columns = rows[chosen], columns[chosen]
    slot = np.arange(n_chosen) - exclusive_cumsum(np.bincount(chosen_rows, minlength=batch))[chosen_rows]
    mask_positions = np.zeros((batch, max_predictions_per_seq), np.int32)
    mask_ids = np.zeros((batch, max_predictions_per_seq), np.int32)
    mask_weights = np.zeros((batch, max_predictions_per_seq), np.int32)
    mask_positions[chosen_rows, slot] = chosen_columns
    mask_ids[chosen_rows, slot] = original
    mask_weights[chosen_rows, slot] = 1
    return {
        "token_ids": masked,
        "padding_mask": valid.astype(np.int32),
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": mask_weights,
    }

