"""Step 6, prediction with a `BertTokenClassifier`: per-word tags for CoNLL sentences.

- `predict_word_tags(model, features, sentences, label_names)`: runs the model
  over the windows of `keras_bert_impl.tasks.tagging.features.encode_examples` and
  returns one tag per word (the prediction at the word's first WordPiece).

Raw text (entities with character offsets) is the model's own pipeline:
`BertTokenClassifier.predict_entities(texts)`, on its
`BertTokenClassifierPreprocessor` (which splits words as CoNLL-2003 does).
"""

import numpy as np

from keras_bert_impl.tasks.tagging.batches import make_dataset
from keras_bert_impl.tasks.tagging.features import word_label_ids



def predict_token_label_ids(model, features, batch_size=64, boundaries=None):
    """Argmax label id at every position of every window: a list of int arrays, one per window.

    Args:
        model: a `BertTokenClassifier` (or any model mapping the input dict to
            logits `(batch, length, num_labels)`).
        features: `ConllFeatures`.
        batch_size: int.
        boundaries: None (windows padded to `sequence_length`) or length buckets
            (e.g. `[32, 64, 128]`): batches are padded only to the bucket of
            their longest window, which is faster for short sentences.
    """
    dataset = make_dataset(features, batch_size, boundaries=boundaries, with_labels=False)
    rows = []
    for batch in dataset:
        inputs = {k: v.numpy() for k, v in batch.items()}
        logits = model.predict_on_batch(inputs)
        real = min(len(logits), len(features.token_ids) - len(rows))  # drop filler rows of the last batch
        rows.extend(np.argmax(np.asarray(logits)[:real], axis=-1))
    return rows


def predict_word_tags(model, features, sentences, label_names, batch_size=64, boundaries=None):
    """Predicted tag of every word of `sentences` (lists of str), from the windows in `features`.

    Example:
    >>> tags = predict_word_tags(model, features, sentences, labels)  # doctest: +SKIP
    """
    token_ids = predict_token_label_ids(model, features, batch_size=batch_size, boundaries=boundaries)
    return [[label_names[i] for i in word_ids] for word_ids in word_label_ids(features, token_ids, sentences)]


# Step 6's name in every task (`classification.predict`, `tagging.predict`, `span_qa.predict`; docs/architecture.md).
predict = predict_word_tags
