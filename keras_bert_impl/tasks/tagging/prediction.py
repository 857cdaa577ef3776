"""Step 6, prediction with a `BertTokenClassifier`: per-word tags for CoNLL sentences.

- `predict_word_tags(model, features, sentences, label_names)`: runs the model
  over the windows of `keras_bert_impl.tasks.tagging.features.encode_examples` (NumPy
  batches, `batches.make_array_batches`, on any backend) and returns one tag per word
  (the prediction at the word's first WordPiece).

Raw text (entities with character offsets) is the model's own pipeline:
`BertTokenClassifier.predict_entities(texts)`, on its
`BertTokenClassifierPreprocessor` (which splits words as CoNLL-2003 does).
"""

import numpy as np

from keras_bert_impl.tasks.tagging.batches import make_array_batches
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
    # NumPy batches in the windows' order (any backend); one shape, `sequence_length`, unless `boundaries`.
    batches = make_array_batches(features, batch_size, boundaries=boundaries or [features.token_ids.shape[1]],
                                 with_labels=False)
    rows = []
    for index in range(len(batches)):
        (inputs,) = batches[index]
        logits = np.asarray(model.predict_on_batch(inputs))[: len(features.token_ids) - len(rows)]  # no filler rows
        rows.extend(np.argmax(logits, axis=-1))
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
