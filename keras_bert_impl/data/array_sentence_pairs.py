"""Pretraining examples from a group of tokenised documents, in NumPy (no TensorFlow).

The NumPy twin of `keras_bert_impl.data.sentence_pairs.documents_to_examples`:
the same algorithm, step for step (the module docstring there describes it:
target lengths, chunks on a randomly shifted grid, a random cut for segment A,
IsNext or a NotNext segment B from another document, truncation of the longer
segment, `[CLS] A [SEP] B [SEP]`). It exists for hosts that cannot install
TensorFlow, such as a GPU machine that runs the JAX or torch backend:
`keras_bert_impl.data.array_pretraining` builds whole batches from it.

Every random number comes from a `draws` object (`GeneratorDraws` wraps a
`numpy.random.Generator`). Given the numbers TensorFlow's stateless ops draw,
the examples are identical to the TensorFlow pipeline's, element for element;
`tests/test_array_pretraining.py` checks exactly that on the bundled corpus.

Example:

>>> import numpy as np
>>> examples = documents_to_examples(
...     np.arange(5, 15), sentence_lengths=np.array([3, 2, 3, 2]), sentence_documents=np.array([0, 0, 1, 1]),
...     document_ids=np.array([0, 1]), draws=GeneratorDraws(np.random.default_rng(0)),
...     sequence_length=16, short_seq_prob=0.0, nsp=True, cls_token_id=2, sep_token_id=3, pad_token_id=0)
>>> sorted(examples)
['lengths', 'next_sentence_labels', 'segment_ids', 'token_ids']
>>> examples["token_ids"].shape[1], examples["token_ids"].dtype
(16, dtype('int32'))
"""

import numpy as np


class GeneratorDraws:
    """The random numbers of the array pipeline, from a `numpy.random.Generator`.

    Each draw is named after what it decides (`"cut"`, `"mask_order"`, ...) so
    that a test can substitute other numbers for one decision; this class
    ignores the names.

    Example:

    >>> draws = GeneratorDraws(np.random.default_rng(0))
    >>> draws.uniform("cut", 3, np.float64).shape, draws.integers("short_length", 2, 9, 3).dtype
    ((3,), dtype('int64'))
    """

    def __init__(self, rng):
        self.rng = rng

    def uniform(self, name, size, dtype):
        """`size` floats uniform in [0, 1) of `dtype` (float32 or float64)."""
        return self.rng.random(size, dtype=dtype)

    def integers(self, name, low, high, size, dtype=np.int64):
        """`size` integers uniform in [low, high)."""
        return self.rng.integers(low, high, size, dtype=dtype)


def exclusive_cumsum(x):
    """`[0, x0, x0 + x1, ...]`: the start offset of each run of lengths `x` (1-D)."""
    out = np.zeros_like(x)
    np.cumsum(x[:-1], out=out[1:])
    return out


def documents_to_examples(token_ids, sentence_lengths, sentence_documents, document_ids, draws, *,
                          sequence_length, short_seq_prob, nsp, cls_token_id, sep_token_id, pad_token_id):
    """Builds padded (unmasked) pretraining examples from a group of documents.

    Args:
        token_ids: `[total pieces]` ints, the sentences of all documents of the
            group concatenated, in document order.
        sentence_lengths: `[num_sentences]` ints, the pieces of each sentence.
        sentence_documents: `[num_sentences]` ints, the index (0 .. k-1) of
            each sentence's document in the group, non-decreasing.
        document_ids: `[k]` ints; equal ids mean the same document (one
            document may come twice when the stream wraps into a new epoch).
        draws: the random numbers (`GeneratorDraws`).
        sequence_length: the padded length of an example.
        short_seq_prob: probability of a shorter target length for a document.
        nsp: sentence pairs with next-sentence labels (True) or single
            segments of contiguous text (False).
        cls_token_id, sep_token_id, pad_token_id: the special ids.

    Returns:
        A dict of NumPy arrays: `token_ids`, `segment_ids` `[n,
        sequence_length]` int32, `lengths` `[n]` int32 and, with `nsp=True`,
        `next_sentence_labels` `[n]` int32 (0 IsNext, 1 NotNext).
    """
    max_tokens = sequence_length - 3 if nsp else sequence_length - 2
    values = np.asarray(token_ids)
    lengths = np.asarray(sentence_lengths, np.int64)
    sentence_documents = np.asarray(sentence_documents, np.int64)
    document_ids = np.asarray(document_ids, np.int64)
    num_docs = len(document_ids)

    # Drop empty sentences; cut long sentences into pieces of at most max_tokens.
    keep = lengths > 0
    lengths, sent_doc = lengths[keep], sentence_documents[keep]
    n_pieces = (lengths + max_tokens - 1) // max_tokens
    piece_sent = np.repeat(np.arange(len(lengths)), n_pieces)
    piece_index = np.arange(int(n_pieces.sum())) - exclusive_cumsum(n_pieces)[piece_sent]
    lengths = np.minimum(max_tokens, lengths[piece_sent] - piece_index * max_tokens)
    sent_doc = sent_doc[piece_sent]
    starts = exclusive_cumsum(lengths)
    ends = starts + lengths
    num_sent = len(lengths)
    total = int(lengths.sum())

    # Per-document sentence ranges (an empty document points at the last sentence, as in TensorFlow).
    doc_num_sent = np.bincount(sent_doc, minlength=num_docs).astype(np.int64)
    doc_first_sent = np.full(num_docs, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(doc_first_sent, sent_doc, np.arange(num_sent, dtype=np.int64))
    doc_first_sent = np.minimum(doc_first_sent, max(num_sent - 1, 0))
    doc_start_tok = np.concatenate([starts, [0]])[doc_first_sent]

    # Target length per document, and a random shift of the chunk grid of the longer ones.
    u = draws.uniform("document_short", num_docs, np.float32)
    short_length = draws.integers("short_length", 2, max_tokens + 1, num_docs)
    target = np.where(u < np.float32(short_seq_prob), np.minimum(short_length, max_tokens), max_tokens)
    doc_length = np.zeros(num_docs, np.int64)
    np.add.at(doc_length, sent_doc, lengths)
    phase_u = draws.uniform("phase", num_docs, np.float32)
    phase = np.floor(phase_u * target.astype(np.float32)).astype(np.int64)
    phase = np.where(doc_length > target, phase, 0)

    if not nsp:
        tok_doc = np.repeat(sent_doc, lengths)
        position = np.arange(total) - doc_start_tok[tok_doc]
        is_start = (position == 0) | ((position + phase[tok_doc]) % target[tok_doc] == 0)
        a_start = np.flatnonzero(is_start).astype(np.int64)
        a_length = np.concatenate([a_start[1:], [total]]).astype(np.int64) - a_start
        b_start = b_length = np.zeros_like(a_start)
        labels = None
    else:
        start_in_doc = starts - doc_start_tok[sent_doc]
        grid = (start_in_doc + phase[sent_doc]) // target[sent_doc]
        new_chunk = np.concatenate([np.ones(min(num_sent, 1), bool),
                                    (sent_doc[1:] != sent_doc[:-1]) | (grid[1:] != grid[:-1])])
        chunk_first = np.flatnonzero(new_chunk).astype(np.int64)
        chunk_last = np.concatenate([chunk_first[1:], [num_sent]]).astype(np.int64) - 1
        num_chunks = len(chunk_first)
        n_s = chunk_last - chunk_first + 1
        chunk_start, chunk_end, chunk_doc = starts[chunk_first], ends[chunk_last], sent_doc[chunk_first]

        # Where A ends: a sentence boundary, or a random token of a lone sentence.
        u_cut = draws.uniform("cut", num_chunks, np.float64)
        cut_sent = chunk_first + 1 + np.floor(u_cut * (n_s - 1).astype(np.float64)).astype(np.int64)
        cut_tok = chunk_start + 1 + np.floor(u_cut * (chunk_end - chunk_start - 1).astype(np.float64)).astype(np.int64)
        split = np.where(n_s >= 2, starts[np.minimum(cut_sent, max(num_sent - 1, 0))], cut_tok)
        a_length = split - chunk_start
        is_random = draws.uniform("is_random", num_chunks, np.float32) < np.float32(0.5)

        # NotNext: a random other document of the group, a random sentence in it.
        own_id = document_ids[chunk_doc]
        eligible = (doc_num_sent > 0)[None, :] & (document_ids[None, :] != own_id[:, None])
        n_eligible = eligible.sum(axis=1)
        pick = np.floor(draws.uniform("other_document", num_chunks, np.float64)
                        * n_eligible.astype(np.float64)).astype(np.int64)
        hit = eligible & (np.cumsum(eligible, axis=1) == pick[:, None] + 1)
        other_doc = np.argmax(hit, axis=1) if num_docs else np.zeros(num_chunks, np.int64)
        has_other = n_eligible > 0
        u_start = draws.uniform("other_sentence", num_chunks, np.float64)
        other_sent = doc_first_sent[other_doc] + np.floor(
            u_start * doc_num_sent[other_doc].astype(np.float64)).astype(np.int64)
        own_num = np.maximum(doc_num_sent[chunk_doc], 1)
        own_first = doc_first_sent[chunk_doc]
        far_sent = own_first + (chunk_first - own_first + own_num // 2) % own_num
        b_doc = np.where(has_other, other_doc, chunk_doc)
        random_sent = np.where(has_other, other_sent, far_sent)
        target_b = np.maximum(target[chunk_doc] - a_length, 1)
        random_start = starts[random_sent]
        end_sent = np.searchsorted(ends, random_start + target_b, side="left")
        b_last = (doc_first_sent + doc_num_sent - 1)[b_doc]
        random_end = ends[np.minimum(end_sent, b_last)]
        b_start = np.where(is_random, random_start, split)
        b_length = np.where(is_random, random_end, chunk_end) - b_start

        # Truncate: shorten the longer segment, A from its front, B from its back.
        a_kept = np.minimum(a_length, np.maximum(max_tokens - b_length, max_tokens - max_tokens // 2))
        b_kept = np.minimum(b_length, max_tokens - a_kept)
        valid = chunk_end - chunk_start >= 2
        a_start, a_length = (split - a_kept)[valid], a_kept[valid]
        b_start, b_length = b_start[valid], b_kept[valid]
        labels = is_random[valid].astype(np.int32)

    # Assemble [CLS] A [SEP] (B [SEP]) with index arithmetic, padded to sequence_length.
    j = np.arange(sequence_length, dtype=np.int64)[None, :]
    la, lb = a_length[:, None], b_length[:, None]
    in_a = (j >= 1) & (j <= la)
    in_b = (j >= la + 2) & (j <= la + lb + 1)
    is_sep = j == la + 1
    if nsp:
        is_sep = is_sep | (j == la + lb + 2)
    source = np.where(in_a, a_start[:, None] + j - 1, np.where(in_b, b_start[:, None] + j - la - 2, 0))
    source = np.minimum(source, total)  # index `total` is the padding appended below
    in_text = in_a | in_b
    gathered = np.concatenate([values[:total], np.array([pad_token_id], values.dtype)])[source]
    specials = np.where(j == 0, cls_token_id, np.where(is_sep, sep_token_id, pad_token_id))
    examples = {
        "token_ids": np.where(in_text, gathered, specials).astype(np.int32),
        "segment_ids": (in_b | (is_sep & (j > la + 1))).astype(np.int32),
        "lengths": (a_length + b_length + (3 if nsp else 2)).astype(np.int32),
    }
    if labels is not None:
        examples["next_sentence_labels"] = labels
    return examples
