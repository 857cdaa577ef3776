"""Several examples packed into one row: the padding mask numbers them.

A row of `sequence_length` tokens may hold several short examples one after
another, so that fewer tokens are padding (sequence packing; Krell et al.,
2021, "Efficient sequence packing without cross-contamination"). The row's
`padding_mask` then holds example ids: 1 on the first example's tokens, 2 on
the second's, and so on, and 0 on padding. An ordinary 0/1 padding mask is the
case of one example per row, so every layer takes both.

Two things keep the examples of a row apart, so that each one's outputs equal
its outputs alone in a row of its own:

- `attention_mask_from_example_ids`: a token attends only to the real tokens
  of its own example (block-diagonal attention). A padding token attends to
  every real token, as it does in an unpacked row, so its softmax stays
  defined; nothing reads its output.
- `positions_from_example_ids`: position ids restart at 0 on each example's
  first token. A padding token keeps its row index, as in an unpacked row, so
  a 0/1 mask gives exactly the positions `0, 1, ..., sequence_length - 1`.

Example:
>>> import numpy as np
>>> ids = np.array([[1, 1, 1, 2, 2, 0]])
>>> np.asarray(positions_from_example_ids(ids)).tolist()
[[0, 1, 2, 0, 1, 5]]
>>> np.asarray(attention_mask_from_example_ids(ids))[0].astype(int).tolist()
[[1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 0], [1, 1, 1, 1, 1, 0]]
"""

from keras import ops


def attention_mask_from_example_ids(padding_mask):
    """`(batch, length, length)` bool: True where query token `q` may attend key token `k`.

    `padding_mask` is `(batch, length)`: 0 for padding, else the token's
    example id within its row (1 for every real token of an unpacked row).
    Key `k` is attended when it is real and belongs to the query's example;
    a padding query attends to every real key.
    """
    ids = ops.cast(padding_mask, "int32")
    query = ids[:, :, None]
    key = ids[:, None, :]
    same_example = ops.logical_or(ops.equal(query, key), ops.equal(query, 0))
    return ops.logical_and(ops.greater(key, 0), same_example)


def positions_from_example_ids(padding_mask):
    """`(batch, length)` int32: each token's position inside its own example.

    A real token's position is the number of earlier tokens of its row with
    the same example id; a padding token (id 0) keeps its index in the row.
    """
    ids = ops.cast(padding_mask, "int32")
    length = ops.shape(ids)[1]
    index = ops.arange(length, dtype="int32")
    earlier = ops.less(index[None, :], index[:, None])  # [q, k]: k comes before q
    same_earlier = ops.logical_and(ops.equal(ids[:, :, None], ids[:, None, :]), earlier[None])
    count = ops.sum(ops.cast(same_earlier, "int32"), axis=-1)
    return ops.where(ops.equal(ids, 0), index[None, :], count)


def has_real_tokens(padding_mask):
    """`padding_mask > 0` as bool: real tokens, whatever example they belong to."""
    return ops.greater(ops.cast(padding_mask, "int32"), 0)
