"""TFRecord shards of tokenised documents: tokenisation paid once, for pod-scale pretraining.

One `tf.train.Example` per document with two int64 features:

- `token_ids`: the WordPiece ids of all the document's sentences, concatenated;
- `sentence_lengths`: the number of ids of each sentence, in order.

`pretraining_dataset` reads these shards (file names ending in `.tfrecord`)
exactly like text: pairs and masks are still drawn on the fly, every epoch.
Whole-word masking takes word boundaries from the vocabulary (a piece starting
with `##` continues a word), which is what `BertTokenizer.tokenize_with_words`
gives. Write the shards with `write_document_records` or
`recipes/prepare_pretraining_data.py`.

Example:

```python
from keras_bert_impl.data import corpus
from keras_bert_impl.data.document_records import write_document_records
from keras_bert_impl.text.tokenizer import BertTokenizer

paths = corpus.bundled_corpus()
stats = write_document_records(paths["train"], BertTokenizer(paths["vocab"]), "/tmp/records/train", num_shards=2)
print(stats)  # {'files': [...-00000-of-00002.tfrecord, ...], 'documents': 142, 'sentences': ..., 'tokens': ...}
```
"""

import os

import tensorflow as tf

from keras_bert_impl.data.text_documents import check_text_files, expand_files, read_documents

RECORD_SUFFIX = ".tfrecord"

FEATURES = {
    "token_ids": tf.io.RaggedFeature(tf.int64),
    "sentence_lengths": tf.io.RaggedFeature(tf.int64),
}


def is_record_file(path):
    """True for the file names `pretraining_dataset` reads as document records."""
    return str(path).endswith(RECORD_SUFFIX)


def check_record_file(path):
    """Raises `ValueError` naming `path` if its first record is not a tokenised document record."""
    try:
        for serialized in tf.data.TFRecordDataset(path).take(1):
            parse_document_record(serialized)
    except tf.errors.OpError as error:
        raise ValueError(
            f"{path}: not a TFRecord shard of tokenised documents (written by "
            f"recipes/prepare_pretraining_data.py): {error.message.splitlines()[0]}"
        ) from None


def parse_document_record(serialized):
    """A serialised record -> (token_ids [tokens] int32, sentence_lengths [sentences] int64)."""
    features = tf.io.parse_single_example(serialized, FEATURES)
    return tf.cast(features["token_ids"], tf.int32), features["sentence_lengths"]


def _example(token_ids, sentence_lengths):
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "token_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=token_ids)),
                "sentence_lengths": tf.train.Feature(int64_list=tf.train.Int64List(value=sentence_lengths)),
            }
        )
    ).SerializeToString()


def _tokenized_documents(paths, tokenizer):
    """Yields (token ids, sentence lengths) of every document of the text files `paths`, in order."""
    documents = tf.data.Dataset.from_tensor_slices((paths, tf.range(len(paths), dtype=tf.int64)))
    documents = documents.flat_map(read_documents).batch(64)

    @tf.autograph.experimental.do_not_convert
    def tokenize(text, ids):
        sentences = tf.strings.split(text, "\n")
        tokens = tokenizer(sentences.flat_values)
        lengths = tf.RaggedTensor.from_value_rowids(
            tf.cast(tokens.row_lengths(), tf.int64), sentences.value_rowids(), nrows=sentences.nrows()
        )
        per_document = tf.RaggedTensor.from_row_lengths(
            tf.cast(tokens.flat_values, tf.int64), tf.reduce_sum(lengths, axis=1)
        )
        return per_document, lengths

    for token_ids, lengths in documents.map(tokenize, num_parallel_calls=tf.data.AUTOTUNE):
        yield from zip(token_ids.to_list(), lengths.to_list())


def tokenize_documents(files, tokenizer, *, check=True):
    """Yields every document of the text files `files` as a list of sentences, each a list of token ids.

    The documents of the pretraining text format (one sentence a line, a blank
    line between documents, UTF-8), tokenised in-graph in batches: the input of
    `array_pretraining.write_document_arrays`. With `check` (the default) the
    files are read once first (`text_documents.check_text_files`: the error
    names the file, line, column and byte); `check=False` for files a caller
    has checked already.

    Example:

    >>> from keras_bert_impl.data import corpus
    >>> from keras_bert_impl.text.tokenizer import BertTokenizer
    >>> paths = corpus.bundled_corpus()
    >>> first = next(tokenize_documents(paths["valid"], BertTokenizer(paths["vocab"])))
    >>> isinstance(first[0][0], int)
    True
    """
    paths = check_text_files(files) if check else expand_files(files)
    for ids, sentence_lengths in _tokenized_documents(paths, tokenizer):
        offsets = [0]
        for length in sentence_lengths:
            offsets.append(offsets[-1] + length)
        yield [ids[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def write_document_records(files, tokenizer, output_prefix, *, num_shards=1, check=True):
    """Tokenises text files (the pretraining text format) into TFRecord shards of documents.

    Documents are dealt round-robin to the shards, so shards have about the
    same size (one shard per input pipeline or more lets `pretraining_dataset`
    shard by file).

    Args:
        files: text files or globs (local or `gs://`), one sentence a line, a
            blank line between documents, UTF-8 (checked before any work:
            `text_documents.check_text_files`, the error names the file, line,
            column and byte).
        tokenizer: a `BertTokenizer`.
        output_prefix: shards are written as
            `{output_prefix}-00000-of-0000N.tfrecord`, each first to a temporary
            name in the same folder, then renamed.
        num_shards: the number of shards.
        check: read the files once first (`check_text_files`); False for
            files a caller has checked already.

    Returns:
        A dict: `files` (the shards), `documents`, `sentences`, `tokens`.

    Raises:
        ValueError: bad `num_shards`, a pattern matching no file, an empty
            file, bytes that are not UTF-8 (a `FileFormatError`: file, line,
            column, byte), a NUL byte, a table.
    """
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
    paths = check_text_files(files) if check else expand_files(files)
    folder = os.path.dirname(output_prefix)
    if folder:
        tf.io.gfile.makedirs(folder)
    names = [f"{output_prefix}-{i:05d}-of-{num_shards:05d}{RECORD_SUFFIX}" for i in range(num_shards)]
    temporary = [f"{name}.tmp-{os.getpid()}" for name in names]
    writers = [tf.io.TFRecordWriter(name) for name in temporary]

    stats = {"files": names, "documents": 0, "sentences": 0, "tokens": 0}
    try:
        for ids, sentence_lengths in _tokenized_documents(paths, tokenizer):
            writers[stats["documents"] % num_shards].write(_example(ids, sentence_lengths))
            stats["documents"] += 1
            stats["sentences"] += len(sentence_lengths)
            stats["tokens"] += len(ids)
        for writer in writers:
            writer.close()
        for source, target in zip(temporary, names):
            tf.io.gfile.rename(source, target, overwrite=True)
    except BaseException:
        for writer in writers:
            try:
                writer.close()  # (on a full disk, closing fails too: the temporary shards were left, filling it)
            except tf.errors.OpError:
                pass
        for name in temporary:
            if tf.io.gfile.exists(name):
                tf.io.gfile.remove(name)
        raise
    return stats
