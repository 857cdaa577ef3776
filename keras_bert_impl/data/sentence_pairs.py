"""Pretraining examples from a batch of tokenised documents, vectorised in TensorFlow.

`documents_to_examples` builds the examples of BERT pretraining from a batch
of documents (sentences of token ids) in one pass of tensor arithmetic on
token offsets (no Python loop, no per-sentence `tf.while_loop`), so that it
runs inside `tf.data.Dataset.map` with parallel calls.

With `nsp=True` (the paper, google-research/bert `create_pretraining_data.py`):

- every document gets a target length: `sequence_length - 3` tokens, or with
  probability `short_seq_prob` a length uniform in `[2, sequence_length - 3]`;
- the document's sentences are grouped into chunks of contiguous sentences of
  about the target length (a chunk starts at the sentence whose start offset
  crosses a multiple of the target; in documents longer than the target the
  grid is shifted by a random phase, so chunks differ from epoch to epoch);
- segment A is the first 1 .. n-1 sentences of a chunk of n >= 2 sentences (a
  random cut at a sentence boundary); a chunk of a single sentence is cut at a
  random token;
- with probability 1/2 segment B is the rest of the chunk, the text that
  follows A in the document (`next_sentence_labels` 0, IsNext), otherwise B is
  contiguous sentences from a random sentence of another document of the
  batch, up to the target length minus the length of A (label 1, NotNext). A
  is drawn the same way for both labels, so A alone says nothing about the
  label. Documents are told apart by `document_ids`; when the batch holds no
  other document (a corpus of one document), B comes from the same document,
  starting half the document away from A;
- the pair is truncated to `sequence_length - 3` tokens by shortening the longer
  segment (as tensorflow-text's `ShrinkLongestTrimmer` and BERT's
  `truncate_seq_pair` do), A from its front and B from its back, so that an
  IsNext B still starts right after the end of A;
- `[CLS] A [SEP] B [SEP]`, segment ids 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`.

With `nsp=False` (MLM only, as RoBERTa's DOC-SENTENCES): every document's
token stream is cut into windows of the target length (`sequence_length - 2`, or
shorter with `short_seq_prob`), shifted by a random phase in documents longer
than the target, `[CLS] window [SEP]`.

Sentences longer than the segment budget (a 10 MB line, say) are first cut
into pieces of at most `sequence_length - 3` tokens, so no text is dropped and no
tensor grows with the line.

Example: two documents of two sentences each (Frankenstein and A Tale of Two
Cities, from tests/data/slices/corpus/gutenberg), MLM-only windows; both fit
in one window (14 tokens), so each document is one example:

>>> from keras_bert_impl.text.tokenizer import BertTokenizer
>>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
>>> tokens = tokenizer(["But I must finish.", "Heaven bless my beloved sister!",
...                     "It was the best of times,", "it was the worst of times,"])
>>> windows = documents_to_examples(
...     tokens, sentence_documents=tf.constant([0, 0, 1, 1], tf.int64), document_ids=tf.constant([0, 1], tf.int64),
...     seed=tf.constant([1, 2], tf.int64), sequence_length=16, short_seq_prob=0.0, nsp=False,
...     cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id)
>>> for row in tokenizer.detokenize(windows["token_ids"]).numpy():
...     print(row.decode())
[CLS] but i must finish . heaven bless my beloved sister ! [SEP] [PAD] [PAD] [PAD]
[CLS] it was the best of times , it was the worst of times , [SEP]
>>> windows["lengths"].numpy().tolist()  # [CLS] + tokens + [SEP]; the rest is padding
[13, 16]
"""

import tensorflow as tf

from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)


def _exclusive_cumsum(x):
    return tf.cumsum(x, exclusive=True)


def documents_to_examples(tokens, sentence_documents, document_ids, seed, *, sequence_length,
                          short_seq_prob, nsp, cls_token_id, sep_token_id, pad_token_id,
                          word_starts=None):
    """Builds padded (unmasked) pretraining examples from a batch of documents.

    Args:
        tokens: `tf.RaggedTensor` `[num_sentences, (pieces)]` of int32 token ids,
            the sentences of all documents of the batch, in document order.
        sentence_documents: `[num_sentences]` int64, the index (0 .. k-1) of
            each sentence's document in the batch, non-decreasing.
        document_ids: `[k]` int64 ids of the batch's documents; equal ids mean
            the same document (a document may repeat across epochs).
        seed: `[2]` int64 stateless seed.
        sequence_length: the padded length of an example.
        short_seq_prob: probability of a shorter target length for a document.
        nsp: sentence pairs with next-sentence labels (True) or single segments.
        cls_token_id, sep_token_id, pad_token_id: special ids.
        word_starts: optional flat bool `[total pieces]`, True on the first
            piece of each word (whole-word masking needs it).

    Returns:
        A dict with `token_ids`, `segment_ids` `[n, sequence_length]` int32,
        `lengths` `[n]` int32, `next_sentence_labels` `[n]` int32 (with
        `nsp=True`) and `word_starts` `[n, sequence_length]` bool (with
        `word_starts`).

    Example: sentence pairs of the same two documents (as in the module's example).
    A is each document's first sentence; B is its second (`next_sentence_labels`
    0, IsNext) or text of the other document (1, NotNext), as the seed draws:

    >>> from keras_bert_impl.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
    >>> tokens = tokenizer(["But I must finish.", "Heaven bless my beloved sister!",
    ...                     "It was the best of times,", "it was the worst of times,"])
    >>> pairs = documents_to_examples(
    ...     tokens, tf.constant([0, 0, 1, 1], tf.int64), tf.constant([0, 1], tf.int64), tf.constant([1, 2], tf.int64),
    ...     sequence_length=32, short_seq_prob=0.0, nsp=True, cls_token_id=101, sep_token_id=102, pad_token_id=0)
    >>> rows = [text.decode().split(" [SEP] ")[:2] for text in tokenizer.detokenize(pairs["token_ids"]).numpy()]
    >>> [a for a, b in rows]
    ['[CLS] but i must finish .', '[CLS] it was the best of times ,']
    >>> is_next = [b.startswith(second) for (a, b), second in zip(rows, ["heaven bless", "it was the worst"])]
    >>> is_next == (pairs["next_sentence_labels"].numpy() == 0).tolist()
    True
    """
    max_tokens = tf.constant(sequence_length - 3 if nsp else sequence_length - 2, tf.int64)
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 8))
    values = tokens.flat_values
    lengths = tf.cast(tokens.row_lengths(), tf.int64)
    sentence_documents = tf.cast(sentence_documents, tf.int64)
    num_docs = tf.shape(document_ids, out_type=tf.int64)[0]

    # Drop empty sentences; cut long sentences into pieces of at most max_tokens.
    keep = lengths > 0
    lengths = tf.boolean_mask(lengths, keep)
    sent_doc = tf.boolean_mask(sentence_documents, keep)
    n_pieces = (lengths + max_tokens - 1) // max_tokens
    piece_sent = tf.repeat(tf.range(tf.size(lengths, out_type=tf.int64)), n_pieces)
    piece_index = tf.range(tf.reduce_sum(n_pieces)) - tf.gather(_exclusive_cumsum(n_pieces), piece_sent)
    lengths = tf.minimum(max_tokens, tf.gather(lengths, piece_sent) - piece_index * max_tokens)
    sent_doc = tf.gather(sent_doc, piece_sent)
    starts = _exclusive_cumsum(lengths)
    ends = starts + lengths
    num_sent = tf.size(lengths, out_type=tf.int64)
    total = tf.reduce_sum(lengths)
    if word_starts is not None:
        word_starts = tf.tensor_scatter_nd_update(
            word_starts, starts[:, None], tf.ones_like(starts, tf.bool)
        )

    # Per-document sentence ranges.
    doc_num_sent = tf.math.unsorted_segment_sum(tf.ones_like(sent_doc), sent_doc, num_docs)
    doc_first_sent = tf.minimum(
        tf.math.unsorted_segment_min(tf.range(num_sent), sent_doc, num_docs), tf.maximum(num_sent - 1, 0)
    )
    doc_start_tok = tf.gather(tf.concat([starts, [0]], 0), doc_first_sent)

    # Target length per document.
    u = tf.random.stateless_uniform([num_docs], seeds[0], dtype=tf.float32)
    short_length = tf.random.stateless_uniform(
        [num_docs], seeds[1], minval=2, maxval=max_tokens + 1, dtype=tf.int64
    )
    target = tf.where(u < short_seq_prob, tf.minimum(short_length, max_tokens), tf.fill([num_docs], max_tokens))
    # A random shift of the chunk grid of documents longer than their target
    # (shorter ones stay whole).
    doc_length = tf.math.unsorted_segment_sum(lengths, sent_doc, num_docs)
    phase = tf.cast(
        tf.floor(tf.random.stateless_uniform([num_docs], seeds[2]) * tf.cast(target, tf.float32)), tf.int64
    )
    phase = tf.where(doc_length > target, phase, 0)

    if not nsp:
        tok_doc = tf.repeat(sent_doc, lengths)
        position = tf.range(total) - tf.gather(doc_start_tok, tok_doc)
        is_start = tf.logical_or(
            tf.equal(position, 0),
            tf.equal((position + tf.gather(phase, tok_doc)) % tf.gather(target, tok_doc), 0),
        )
        a_start = tf.where(is_start)[:, 0]
        a_length = tf.concat([a_start[1:], [total]], 0) - a_start
        b_start = tf.zeros_like(a_start)
        b_length = tf.zeros_like(a_start)
        labels = None
    else:
        start_in_doc = starts - tf.gather(doc_start_tok, sent_doc)
        grid = (start_in_doc + tf.gather(phase, sent_doc)) // tf.gather(target, sent_doc)
        new_chunk = tf.concat(
            [
                tf.ones([tf.minimum(num_sent, 1)], tf.bool),
                tf.logical_or(sent_doc[1:] != sent_doc[:-1], grid[1:] != grid[:-1]),
            ],
            0,
        )
        chunk_first = tf.where(new_chunk)[:, 0]
        chunk_last = tf.concat([chunk_first[1:], [num_sent]], 0) - 1
        num_chunks = tf.size(chunk_first, out_type=tf.int64)
        n_s = chunk_last - chunk_first + 1
        chunk_start = tf.gather(starts, chunk_first)
        chunk_end = tf.gather(ends, chunk_last)
        chunk_doc = tf.gather(sent_doc, chunk_first)

        # Where A ends: a sentence boundary, or a random token of a lone sentence.
        u_cut = tf.random.stateless_uniform([num_chunks], seeds[3], dtype=tf.float64)
        cut_sent = chunk_first + 1 + tf.cast(tf.floor(u_cut * tf.cast(n_s - 1, tf.float64)), tf.int64)
        cut_tok = chunk_start + 1 + tf.cast(
            tf.floor(u_cut * tf.cast(chunk_end - chunk_start - 1, tf.float64)), tf.int64
        )
        split = tf.where(
            n_s >= 2, tf.gather(starts, tf.minimum(cut_sent, tf.maximum(num_sent - 1, 0))), cut_tok
        )
        a_length = split - chunk_start
        is_random = tf.random.stateless_uniform([num_chunks], seeds[4]) < 0.5

        # NotNext: a random other document of the batch, a random sentence in it.
        own_id = tf.gather(document_ids, chunk_doc)
        eligible = tf.logical_and((doc_num_sent > 0)[None, :], document_ids[None, :] != own_id[:, None])
        eligible_int = tf.cast(eligible, tf.int64)
        n_eligible = tf.reduce_sum(eligible_int, axis=1)
        pick = tf.cast(
            tf.floor(tf.random.stateless_uniform([num_chunks], seeds[5], dtype=tf.float64)
                     * tf.cast(n_eligible, tf.float64)),
            tf.int64,
        )
        hit = tf.logical_and(eligible, tf.equal(tf.cumsum(eligible_int, axis=1), pick[:, None] + 1))
        other_doc = tf.argmax(tf.cast(hit, tf.int32), axis=1, output_type=tf.int64)
        has_other = n_eligible > 0
        u_start = tf.random.stateless_uniform([num_chunks], seeds[6], dtype=tf.float64)
        other_sent = tf.gather(doc_first_sent, other_doc) + tf.cast(
            tf.floor(u_start * tf.cast(tf.gather(doc_num_sent, other_doc), tf.float64)), tf.int64
        )
        own_num = tf.maximum(tf.gather(doc_num_sent, chunk_doc), 1)
        own_first = tf.gather(doc_first_sent, chunk_doc)
        far_sent = own_first + (chunk_first - own_first + own_num // 2) % own_num
        b_doc = tf.where(has_other, other_doc, chunk_doc)
        random_sent = tf.where(has_other, other_sent, far_sent)
        target_b = tf.maximum(tf.gather(target, chunk_doc) - a_length, 1)
        random_start = tf.gather(starts, random_sent)
        end_sent = tf.searchsorted(ends, random_start + target_b, side="left", out_type=tf.int64)
        b_last = tf.gather(doc_first_sent + doc_num_sent - 1, b_doc)
        random_end = tf.gather(ends, tf.minimum(end_sent, b_last))

        b_start = tf.where(is_random, random_start, split)
        b_length = tf.where(is_random, random_end, chunk_end) - b_start

        # Truncate: shorten the longer segment, A from its front, B from its back.
        a_kept = tf.minimum(a_length, tf.maximum(max_tokens - b_length, max_tokens - max_tokens // 2))
        b_kept = tf.minimum(b_length, max_tokens - a_kept)
        valid = chunk_end - chunk_start >= 2
        a_start = tf.boolean_mask(split - a_kept, valid)
        a_length = tf.boolean_mask(a_kept, valid)
        b_start = tf.boolean_mask(b_start, valid)
        b_length = tf.boolean_mask(b_kept, valid)
        labels = tf.cast(tf.boolean_mask(is_random, valid), tf.int32)

    # Assemble [CLS] A [SEP] (B [SEP]) with index arithmetic, padded to sequence_length.
    j = tf.range(sequence_length, dtype=tf.int64)[None, :]
    la = a_length[:, None]
    lb = b_length[:, None]
    in_a = tf.logical_and(j >= 1, j <= la)
    in_b = tf.logical_and(j >= la + 2, j <= la + lb + 1)
    is_sep = tf.equal(j, la + 1)
    if nsp:
        is_sep = tf.logical_or(is_sep, tf.equal(j, la + lb + 2))
    source = tf.where(in_a, a_start[:, None] + j - 1, tf.where(in_b, b_start[:, None] + j - la - 2, 0))
    source = tf.minimum(source, total)  # index `total` is the padding appended below
    in_text = tf.logical_or(in_a, in_b)
    gathered = tf.gather(tf.concat([values, tf.cast([pad_token_id], values.dtype)], 0), source)
    token_ids = tf.where(
        in_text,
        tf.cast(gathered, tf.int32),
        tf.where(tf.equal(j, 0), cls_token_id, tf.where(is_sep, sep_token_id, pad_token_id)),
    )
    segment_ids = tf.cast(tf.logical_or(in_b, tf.logical_and(is_sep, j > la + 1)), tf.int32)
    length = a_length + b_length + (3 if nsp else 2)
    examples = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "lengths": tf.cast(length, tf.int32),
    }
    if labels is not None:
        examples["next_sentence_labels"] = labels
    if word_starts is not None:
        starts_here = tf.logical_or(tf.equal(j, 1), tf.equal(j, la + 2))  # a cut may split a word
        examples["word_starts"] = tf.logical_and(
            tf.where(
                in_text,
                tf.logical_or(tf.gather(tf.concat([word_starts, [True]], 0), source), starts_here),
                True,
            ),
            j < length[:, None],
        )
    return examples
