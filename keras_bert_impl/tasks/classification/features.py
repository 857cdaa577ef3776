"""Step 2, features: a split's text columns -> unpadded token ids, segment ids and padding mask.

The encoding itself is `keras_bert_impl.text.classifier_preprocessor.ClassifierPreprocessor`
(WordPiece, then `[CLS] a [SEP] b [SEP]` truncated to `sequence_length`);
this module says which columns of a `GlueSplit` it reads.
"""


def split_texts(split):
    """The text columns of a `GlueSplit`: `(text_a,)` or `(text_a, text_b)`."""
    return (split.text_a,) if split.text_b is None else (split.text_a, split.text_b)


def encode_texts(preprocessor, texts):
    """Encodes a tuple of text columns (one or two, batched strings) to unpadded features (ragged)."""
    return preprocessor.unpadded(texts if len(texts) > 1 else texts[0])
