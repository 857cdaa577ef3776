"""Step 2, features: a split's text columns -> unpadded token ids, segment ids and padding mask.

The encoding itself is `keras_bert_impl.BertClassifierPreprocessor`
(WordPiece, then `[CLS] a [SEP] b [SEP]` truncated to `sequence_length`);
this module says which columns of a `GlueSplit` it reads.

- `encode_examples(split, preprocessor)`: every example of a split encoded, as NumPy arrays (the step's name in
  every task: `tagging.encode_examples`, `span_qa.encode_examples`); what packed batches are built from.
- `encode_texts(preprocessor, texts)`: a batch of text columns encoded in the graph (ragged), what
  `batches.make_dataset` maps over the split on the fly.
- `example_lengths(split, preprocessor)`: each example's length, what the length buckets count.

Example: the second pair of the STS-B dev slice (tests/data/slices/glue), encoded as `make_dataset` encodes it:

>>> import pathlib, keras_bert_impl
>>> from keras_bert_impl import BertClassifierPreprocessor
>>> from keras_bert_impl.tasks.classification.reading import read_split
>>> split = read_split("stsb", pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue", "dev")
>>> texts = split_texts(split.take(2))  # STS-B: two text columns
>>> [column[1] for column in texts]
['The lamb is looking at the camera.', 'A small bird standing on a log at the waters edge.']
>>> preprocessor = BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=32)
>>> features = encode_texts(preprocessor, texts)
>>> preprocessor.tokenizer.detokenize(features["token_ids"][1]).numpy().decode()
'[CLS] the lamb is looking at the camera . [SEP] a small bird standing on a log at the waters edge . [SEP]'
>>> features["token_ids"].row_lengths().numpy().tolist()  # unpadded: each row as long as its tokens
[22, 23]
>>> features["segment_ids"][1].numpy().tolist()
[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
>>> examples = encode_examples(split.take(2), preprocessor)  # the same, as NumPy arrays
>>> [len(ids) for ids in examples["token_ids"]], examples["segment_ids"][1][-3:].tolist()
([22, 23], [1, 1, 1])
>>> example_lengths(split.take(2), preprocessor).tolist()
[22, 23]
"""

import numpy as np

_CHUNK = 4096  # examples tokenized at once


def split_texts(split):
    """The text columns of a `GlueSplit`: `(text_a,)` or `(text_a, text_b)`."""
    return (split.text_a,) if split.text_b is None else (split.text_a, split.text_b)


def encode_texts(preprocessor, texts):
    """Encodes a tuple of text columns (one or two, batched strings) to unpadded features (ragged)."""
    return preprocessor.unpadded(texts if len(texts) > 1 else texts[0])


def _encoded_chunks(split, preprocessor):
    """`split` tokenized `_CHUNK` examples at a time: ragged features per chunk."""
    import tensorflow as tf

    texts = split_texts(split)
    for start in range(0, len(texts[0]), _CHUNK):
        chunk = tuple(tf.constant(list(t[start : start + _CHUNK]), dtype=tf.string) for t in texts)
        yield encode_texts(preprocessor, chunk)


def encode_examples(split, preprocessor):
    """Every example of `split` encoded: dict `token_ids`, `segment_ids` -> list of 1-D int32 arrays, unpadded."""
    examples = {"token_ids": [], "segment_ids": []}
    for encoded in _encoded_chunks(split, preprocessor):
        for name in examples:
            examples[name].extend(np.asarray(row, "int32") for row in encoded[name].to_list())
    return examples


def example_lengths(split, preprocessor):
    """Packed length (special tokens included) of every example of `split`, tokenized in chunks."""
    lengths = [encoded["token_ids"].row_lengths().numpy() for encoded in _encoded_chunks(split, preprocessor)]
    return np.concatenate(lengths) if lengths else np.zeros(0, "int64")
