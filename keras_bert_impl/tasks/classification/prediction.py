"""Step 6, prediction: class ids (or STS-B scores) over a split's batches, and on raw text.

On raw strings, a fine-tuned `BertClassifier` with its preprocessor predicts
label names directly: `model.predict_labels(["a sentence"])`.

Example: an untrained 1-layer classifier on six pairs of the STS-B dev slice (tests/data/slices/glue), in two batches
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


def predict_split(model, dataset, count=None):
    """Class ids (argmax) or regression scores of `model` on a batched features/labels dataset, in order.

    `count`: number of real examples; the filler rows of a fixed-size last
    batch (`make_dataset(fixed_batch_size=True)`) after them are dropped.
    """
    outputs = model.predict(dataset.map(lambda features, *rest: features), verbose=0)
    outputs = np.asarray(outputs)[:count]
    return outputs[:, 0] if outputs.shape[-1] == 1 else outputs.argmax(axis=-1)


# Step 6's name in every task (`classification.predict`, `tagging.predict`, `span_qa.predict`; docs/architecture.md).
predict = predict_split
