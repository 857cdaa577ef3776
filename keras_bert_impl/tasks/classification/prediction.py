"""Step 6, prediction: class ids (or STS-B scores) of encoded examples, of a split's batches, and on raw text.

- `predict(model, features, batch_size)`: every example of step 2's `encode_examples` (NumPy batches, any backend,
  no TensorFlow), as `tagging.predict` and `span_qa.predict` take their step 2's features.
- `predict_split(model, dataset, count)`: the batches of step 3's `make_dataset` (what `evaluate` and the story use).

On raw strings, a fine-tuned `BertClassifier` with its preprocessor predicts
label names directly: `model.predict_labels(["a sentence"])`.

Example of `predict_split`: an untrained 1-layer classifier on six pairs of the STS-B dev slice (tests/data/slices/glue), in two batches
of four rows (the last filled with two weight-0 copies, which `count` drops):

>>> import pathlib, keras_bert_impl
>>> from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor
>>> from keras_bert_impl.tasks.classification.batches import make_dataset
>>> from keras_bert_impl.tasks.classification.reading import read_split
>>> glue = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue"
>>> split = read_split("stsb", glue, "dev").take(6)
>>> dataset = make_dataset(split, BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=32), 4)
>>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
>>> regressor = BertClassifier(backbone, num_classes=1)  # STS-B: one score per pair
>>> scores = predict_split(regressor, dataset, len(split))
>>> scores.shape, scores.dtype.name, predict_split(regressor, dataset).shape  # without `count`: all 8 rows
((6,), 'float32', (8,))
>>> classes = predict_split(BertClassifier(backbone, num_classes=3), dataset, len(split))  # argmax of 3 logits
>>> classes.shape, set(classes.tolist()) <= {0, 1, 2}
((6,), True)
"""

import numpy as np

from keras_bert_impl.batching.boundaries import CLASSIFICATION_BUCKETS, default_boundaries


def predict_split(model, dataset, count=None):
    """Class ids (argmax) or regression scores of `model` on a batched features/labels dataset, in order.

    `count`: number of real examples; the filler rows of a fixed-size last
    batch (`make_dataset(fixed_batch_size=True)`) after them are dropped.
    """
    outputs = model.predict(dataset.map(lambda features, *rest: features), verbose=0)
    outputs = np.asarray(outputs)[:count]
    return outputs[:, 0] if outputs.shape[-1] == 1 else outputs.argmax(axis=-1)


def predict(model, features, batch_size=32, *, boundaries=None):
    """Step 6 of every task for classification: the class id (argmax) or score of every example of `features`.

    Args:
        model: a `BertClassifier` (or any model mapping the input dict to logits `(batch, num_classes)`).
        features: step 2's `encode_examples(split, preprocessor)`: `token_ids` and `segment_ids`, one unpadded 1-D
            array per example (a `padding_mask` is made when absent).
        batch_size: rows per batch; the last batch is filled to it (one shape per bucket for a compiled step) and
            the filler rows' outputs dropped.
        boundaries: length buckets; default `default_boundaries(L, **CLASSIFICATION_BUCKETS)` with `L` the model
            preprocessor's `sequence_length` (else the longest example). Batches keep the examples' order, each
            padded to the bucket of its longest example.

    Returns:
        A 1-D array, one entry per example in order: class ids (int) or, for a one-output regressor, scores (float).

    Example: an untrained 1-layer classifier on three pairs of the STS-B dev slice, encoded by step 2:

    >>> import pathlib, keras_bert_impl
    >>> from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor
    >>> from keras_bert_impl.tasks.classification.features import encode_examples
    >>> from keras_bert_impl.tasks.classification.reading import read_split
    >>> glue = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue"
    >>> split = read_split("stsb", glue, "dev").take(3)
    >>> features = encode_examples(split, BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=32))
    >>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> classes = predict(BertClassifier(backbone, num_classes=3), features, batch_size=2)
    >>> classes.shape, set(classes.tolist()) <= {0, 1, 2}
    ((3,), True)
    >>> predict(BertClassifier(backbone, num_classes=1), features).dtype.name  # a regressor: one score each
    'float32'
    """
    from keras_bert_impl.tasks.classification.batches import make_array_batches

    token_ids = list(features["token_ids"])
    if not token_ids:
        raise ValueError("`features` has no examples: `token_ids` is empty.")
    inputs = {"token_ids": token_ids, "segment_ids": list(features["segment_ids"])}
    masks = features.get("padding_mask")
    inputs["padding_mask"] = list(masks) if masks is not None else [np.ones(len(ids), "int32") for ids in token_ids]
    if boundaries is None:
        preprocessor = getattr(model, "preprocessor", None)
        sequence_length = getattr(preprocessor, "sequence_length", None) or max(len(ids) for ids in token_ids)
        boundaries = default_boundaries(sequence_length, **CLASSIFICATION_BUCKETS)
    batches = make_array_batches(inputs, None, batch_size, boundaries=boundaries)
    outputs, left = [], len(token_ids)
    for index in range(len(batches)):
        (batch,) = batches[index]
        logits = np.asarray(model.predict_on_batch(batch))[:left]  # the filler rows of the last batch come last
        outputs.append(logits)
        left -= len(logits)
    outputs = np.concatenate(outputs)
    return outputs[:, 0] if outputs.shape[-1] == 1 else outputs.argmax(axis=-1)
