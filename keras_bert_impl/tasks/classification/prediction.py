"""Step 6, prediction: class ids (or STS-B scores) over a split's batches, and on raw text.

On raw strings, a fine-tuned `BertClassifier` with its preprocessor predicts
label names directly: `model.predict_labels(["a sentence"])`.
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
