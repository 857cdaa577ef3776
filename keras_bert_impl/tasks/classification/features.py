"""Step 2, features: a split's text columns -> unpadded token ids, segment ids and padding mask.

The encoding itself is `keras_bert_impl.BertClassifierPreprocessor`
(WordPiece, then `[CLS] a [SEP] b [SEP]` truncated to `sequence_length`);
this module says which columns of a `GlueSplit` it reads.

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
"""


def split_texts(split):
    """The text columns of a `GlueSplit`: `(text_a,)` or `(text_a, text_b)`."""
    return (split.text_a,) if split.text_b is None else (split.text_a, split.text_b)


def encode_texts(preprocessor, texts):
    """Encodes a tuple of text columns (one or two, batched strings) to unpadded features (ragged)."""
    return preprocessor.unpadded(texts if len(texts) > 1 else texts[0])
