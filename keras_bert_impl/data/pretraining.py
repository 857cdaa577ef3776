"""The tf.data pipeline of BERT pretraining: raw text in, masked static-shape batches out.

Input files hold one sentence (or paragraph) a line and a blank line between
documents, the format of the original BERT data (write it from raw books with
`keras_bert_impl.data.corpus` / `recipes/prepare_corpus.py`), or are TFRecord
shards of tokenised documents (`*.tfrecord`, `keras_bert_impl.data.document_records`,
`recipes/prepare_pretraining_data.py`), which skip the tokenisation. The pipeline:

```
files (globs, local or gs://) -> [shard by file] -> interleave: read a file, check UTF-8,
split into documents -> [shard by document] -> shuffle documents -> repeat
-> batches of `documents_per_batch` documents -> tokenize (ragged, in-graph)
-> sentence pairs + NSP labels (`sentence_pairs.documents_to_examples`)
-> unbatch -> shuffle examples -> batch(drop_remainder=True)
-> dynamic masking (`masking.mask_batch`: tensorflow-text mask_language_model) -> prefetch
```

Tokenisation, pair building and masking run in `map` with parallel calls;
every random choice uses stateless ops fed by `tf.data.Dataset.random`
streams that are re-drawn on every iteration, so the same `seed` gives the
same batches and every epoch (every pass over the data, with or without
`repeat`) gets new pairs and new masks. Held-out data passes
`redraw_each_iteration=False`: every iteration (every `model.evaluate`, the
unigram floor) then reads the same pairs and masks.

Example:

```python
from keras_bert_impl.data import corpus, pretraining_dataset
from keras_bert_impl.text.tokenizer import BertTokenizer

paths = corpus.bundled_corpus()
dataset = pretraining_dataset(paths["train"], BertTokenizer(paths["vocab"]),
                              sequence_length=128, batch_size=32, seed=1)
batch = next(iter(dataset))
print({name: tuple(t.shape) for name, t in batch.items()})
```
"""

import warnings

import tensorflow as tf

from keras_bert_impl.data import document_records, sentence_pairs
from keras_bert_impl.data.book_text import GUTENBERG_START_MARKERS
from keras_bert_impl.data.pipeline_arguments import check_pipeline_arguments
from keras_bert_impl.data.text_documents import check_text_file, expand_files, read_documents
from keras_bert_impl.text import masking

OUTPUT_KEYS = (
    "token_ids",
    "segment_ids",
    "padding_mask",
    "mask_positions",
    "mask_ids",
    "mask_weights",
    "next_sentence_labels",
)


@tf.autograph.experimental.do_not_convert
def _read_records(path, file_index):
    """A TFRecord shard -> dataset of (token ids, sentence lengths, document id)."""
    records = tf.data.TFRecordDataset(path).map(document_records.parse_document_record)
    base = tf.cast(file_index, tf.int64) * (1 << 32)
    return records.enumerate().map(lambda i, record: (record[0], record[1], base + i))


def _seed_stream(seed, salt, redraw_each_iteration=True):
    """Infinite dataset of [2] int64 stateless seeds: new on every iteration, or the same ones every time."""
    stream_seed = None if seed is None else seed * 7919 + salt
    return tf.data.Dataset.random(seed=stream_seed, rerandomize_each_iteration=redraw_each_iteration).batch(2)


def _check_tokenizer(tokenizer):
    ids = {}
    for name in ("cls", "sep", "mask", "pad"):
        value = getattr(tokenizer, f"{name}_token_id", None)
        if value is None or int(value) < 0:
            raise ValueError(f"the tokenizer has no [{name.upper()}] token id (tokenizer.{name}_token_id)")
        ids[name] = int(value)
    return ids


def check_pretraining_files(files):
    """Expands `files` and reads every one once, before any training: the start-up check of a run.

    Text files are checked with `text_documents.check_text_file` (UTF-8,
    no NUL byte, at least one non-blank line; errors name file, line and
    byte); `.tfrecord` shards by parsing their first record. Mixing the two
    kinds is refused, as `pretraining_dataset` refuses it.

    Args:
        files: names or glob patterns (local or `gs://`).

    Returns:
        The expanded, sorted list of files.

    Raises:
        ValueError: naming the pattern or the file (and line) that is wrong.

    Example:

    >>> from keras_bert_impl.data import corpus
    >>> len(check_pretraining_files(corpus.bundled_corpus()["valid"]))
    1
    """
    expanded = expand_files(files)
    records = [document_records.is_record_file(f) for f in expanded]
    if any(records) and not all(records):
        raise ValueError(
            "files mixes TFRecord shards of tokenised documents (*.tfrecord) and text files: "
            f"pass one kind ({sum(records)} of {len(expanded)} are .tfrecord)"
        )
    for path, is_record in zip(expanded, records):
        if is_record:
            document_records.check_record_file(path)
        else:
            check_text_file(path)
            _warn_of_raw_book(path)
    return expanded


def _warn_of_raw_book(path):
    """Warns, in one line, of a Project Gutenberg book as downloaded: its licence header and footer would train as
    text, and its lines wrapped at about 70 characters would be read as sentences (was accepted without a word)."""
    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    if GUTENBERG_START_MARKERS.search(head):
        warnings.warn(
            f"{path} is a Project Gutenberg book as downloaded: its licence header and footer would train as text, "
            "and each wrapped line would be read as a sentence; python recipes/prepare_corpus.py --input "
            f"{path} --output <file> writes it as pretraining text (documents, one sentence a line)",
            UserWarning, stacklevel=3)


def pretraining_dataset(files, tokenizer, *, sequence_length=128, max_predictions_per_seq=20, batch_size=32,
                        masking_rate=0.15, short_seq_prob=0.1, whole_word_masking=False, seed=None,
                        shuffle=True, repeat=True, nsp=True, input_context=None, documents_per_batch=16,
                        shuffle_buffer_size=2048, redraw_each_iteration=True):
    """A `tf.data.Dataset` of masked BERT pretraining batches built from raw text.

    Args:
        files: text files or glob patterns (local or `gs://`), one sentence or
            paragraph a line, a blank line between documents, UTF-8; or TFRecord
            shards of tokenised documents (`*.tfrecord`, written by
            `recipes/prepare_pretraining_data.py` with the same vocabulary).
        tokenizer: a `keras_bert_impl.text.BertTokenizer` (or any object with
            the same interface: called on a 1-D string tensor it returns a
            `tf.RaggedTensor` of int32 ids; `tokenize_with_words` for whole-word
            masking; `cls_token_id`, `sep_token_id`, `mask_token_id`,
            `pad_token_id`, `vocabulary_size()`).
        sequence_length: the static sequence length of every example.
        max_predictions_per_seq: the static number of masked-LM slots.
        batch_size: examples per batch of this dataset (under
            `strategy.distribute_datasets_from_function` pass
            `input_context.get_per_replica_batch_size(global_batch_size)`).
        masking_rate: the expected fraction of non-special tokens masked.
        short_seq_prob: the probability of a shorter target length for a
            document (the paper's 0.1).
        whole_word_masking: select whole words and mask all their pieces.
        seed: an int for reproducible batches, or None.
        shuffle: shuffle files, documents and examples.
        repeat: repeat forever (for `model.fit(steps_per_epoch=...)`); with
            False one pass over the data (each new pass draws new pairs and
            masks).
        nsp: build sentence pairs with `next_sentence_labels` (True) or single
            segments of contiguous text for MLM only (False; the dict then has
            no `next_sentence_labels`).
        input_context: a `tf.distribute.InputContext`: this pipeline reads only
            its share, by file when there are at least as many files as input
            pipelines, else by document.
        documents_per_batch: documents tokenised and paired together; NotNext
            segments come from other documents of the same group.
        shuffle_buffer_size: examples in the shuffle buffer.
        redraw_each_iteration: True (training): every new iteration of the
            dataset reshuffles and draws new pairs and masks. False (held-out
            data): every iteration gives the same batches, so two evaluations,
            or an evaluation and `unigram_floor`, read the same masked
            positions. Within one iteration, `repeat` still draws new ones on
            each pass.

    Returns:
        A `tf.data.Dataset` of dicts of int32 tensors: `token_ids`,
        `segment_ids`, `padding_mask` `[batch_size, sequence_length]`,
        `mask_positions`, `mask_ids`, `mask_weights` `[batch_size,
        max_predictions_per_seq]` and `next_sentence_labels` `[batch_size]`
        (0 = IsNext, 1 = NotNext, as google-research/bert and Hugging Face).

    Raises:
        ValueError: a pattern matching no file, an empty file, a tokenizer
            without the special tokens, or an argument out of range (named).
            Invalid UTF-8 is reported while iterating, naming file and line.

    Example:

    >>> from keras_bert_impl.data import corpus
    >>> from keras_bert_impl.text.tokenizer import BertTokenizer
    >>> paths = corpus.bundled_corpus()
    >>> dataset = pretraining_dataset(paths["train"], BertTokenizer(paths["vocab"]),
    ...                               sequence_length=64, batch_size=4, seed=0)
    >>> sorted(next(iter(dataset)))  # doctest: +SKIP
    ['mask_ids', 'mask_positions', 'mask_weights', 'next_sentence_labels', 'padding_mask', 'segment_ids', 'token_ids']
    """
    check_pipeline_arguments(
        sequence_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq, batch_size=batch_size,
        masking_rate=masking_rate, short_seq_prob=short_seq_prob, nsp=nsp, documents_per_batch=documents_per_batch,
        shuffle_buffer_size=shuffle_buffer_size,
    )
    special = _check_tokenizer(tokenizer)
    vocab_size = int(tokenizer.vocabulary_size())
    files = expand_files(files)
    records = [document_records.is_record_file(f) for f in files]
    if any(records) and not all(records):
        raise ValueError(
            "files mixes TFRecord shards of tokenised documents (*.tfrecord) and text files: "
            f"pass one kind ({sum(records)} of {len(files)} are .tfrecord)"
        )
    from_records = all(records)

    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_by_file = num_pipelines > 1 and len(files) >= num_pipelines
    shard_by_document = num_pipelines > 1 and not shard_by_file
    if seed is not None:
        seed = int(seed) * 1009 + pipeline_id  # distinct random streams per pipeline
    deterministic = seed is not None or shard_by_document

    def salted(salt):
        return None if seed is None else seed * 7919 + salt

    file_ds = tf.data.Dataset.from_tensor_slices((files, tf.range(len(files), dtype=tf.int64)))
    if shard_by_file:
        file_ds = file_ds.shard(num_pipelines, pipeline_id)
    if shuffle and not shard_by_document:
        file_ds = file_ds.shuffle(len(files), seed=salted(1), reshuffle_each_iteration=redraw_each_iteration)
    documents = file_ds.interleave(
        _read_records if from_records else read_documents,
        cycle_length=min(len(files), 4),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if shard_by_document:
        documents = documents.shard(num_pipelines, pipeline_id)
    if shuffle:
        documents = documents.shuffle(1000, seed=salted(2), reshuffle_each_iteration=redraw_each_iteration)
    if repeat:
        documents = documents.repeat()
    documents = (documents.ragged_batch if from_records else documents.batch)(documents_per_batch)

    # The map functions have no tensor-dependent Python control flow: skipping
    # AutoGraph conversion saves seconds of tracing per dataset.
    if from_records and whole_word_masking:
        # A piece that does not start with "##" starts a word (as tokenize_with_words splits).
        starts_word = tf.constant([not t.startswith("##") for t in tokenizer.get_vocabulary()])

    @tf.autograph.experimental.do_not_convert
    def make_examples(batch, seed_pair):
        word_starts = None
        if from_records:
            token_ids, sentence_lengths, document_ids = batch
            tokens = tf.RaggedTensor.from_row_lengths(
                token_ids.flat_values, sentence_lengths.flat_values, validate=False
            )
            sentence_documents = sentence_lengths.value_rowids()
            if whole_word_masking:
                word_starts = tf.gather(starts_word, tokens.flat_values)
        else:
            document_text, document_ids = batch
            sentences = tf.strings.split(document_text, "\n")
            sentence_documents = sentences.value_rowids()
            flat = sentences.flat_values
            if whole_word_masking:
                words = tokenizer.tokenize_with_words(flat)
                tokens = words.merge_dims(1, 2)
                word_starts = tf.scatter_nd(
                    words.values.row_starts()[:, None],
                    tf.ones_like(words.values.row_starts(), tf.bool),
                    tf.shape(tokens.flat_values, out_type=tf.int64),
                )
            else:
                tokens = tokenizer(flat)
        tokens = tf.cast(tokens, tf.int32)
        return sentence_pairs.documents_to_examples(
            tokens,
            sentence_documents,
            document_ids,
            seed_pair,
            sequence_length=sequence_length,
            short_seq_prob=short_seq_prob,
            nsp=nsp,
            cls_token_id=special["cls"],
            sep_token_id=special["sep"],
            pad_token_id=special["pad"],
            word_starts=word_starts,
        )

    examples = tf.data.Dataset.zip((documents, _seed_stream(seed, 3, redraw_each_iteration))).map(
        make_examples, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic
    )
    examples = examples.unbatch()
    if shuffle:
        examples = examples.shuffle(shuffle_buffer_size, seed=salted(4), reshuffle_each_iteration=redraw_each_iteration)
    batches = examples.batch(batch_size, drop_remainder=True)

    @tf.autograph.experimental.do_not_convert
    def mask(batch, seed_pair):
        outputs = masking.mask_batch(
            batch["token_ids"],
            batch["lengths"],
            seed_pair,
            max_predictions_per_seq=max_predictions_per_seq,
            masking_rate=masking_rate,
            vocab_size=vocab_size,
            mask_token_id=special["mask"],
            special_token_ids=[special["cls"], special["sep"], special["pad"]],
            pad_token_id=special["pad"],
            word_starts=batch.get("word_starts"),
        )
        outputs["segment_ids"] = batch["segment_ids"]
        if nsp:
            outputs["next_sentence_labels"] = batch["next_sentence_labels"]
        for key, value in outputs.items():
            value.set_shape([batch_size] + list(value.shape[1:]))
        return {key: outputs[key] for key in OUTPUT_KEYS if key in outputs}

    batches = tf.data.Dataset.zip((batches, _seed_stream(seed, 5, redraw_each_iteration))).map(
        mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic
    )
    options = tf.data.Options()
    options.deterministic = deterministic
    return batches.prefetch(tf.data.AUTOTUNE).with_options(options)
