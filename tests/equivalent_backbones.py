"""Helpers for tests that show two settings of one backbone are the same model (`attention_padding`,
`qkv_projection`): right-padded real examples, and the loss and one SGD step of a classifier on each."""

import keras
import numpy as np

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import BertClassifier


def right_padded(examples, sequence_length=48):
    """`minilm_examples` as one batch, each row one example padded on the right to `sequence_length`."""
    n = len(examples["token_ids"])
    batch = {name: np.zeros((n, sequence_length), "int32") for name in ("token_ids", "segment_ids", "padding_mask")}
    for i, (ids, segments) in enumerate(zip(examples["token_ids"], examples["segment_ids"])):
        batch["token_ids"][i, : len(ids)] = ids
        batch["segment_ids"][i, : len(ids)] = segments
        batch["padding_mask"][i, : len(ids)] = 1
    return batch


def loss_and_sgd_step(examples, first, second):
    """MiniLM classifiers on `from_preset(**first)` and `from_preset(**second)` with the same weights: returns
    (|loss difference|, the largest weight change of one SGD step, the largest weight difference after it)."""
    batch = right_padded(examples)
    labels = np.arange(len(examples["token_ids"])) % 3
    models = []
    for settings in (first, second):
        backbone = BertBackbone.from_preset("all_minilm_l6_v2_en", dropout=0.0, **settings)
        keras.utils.set_random_seed(0)
        model = BertClassifier(backbone, num_classes=3, dropout=0.0)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        models.append(model)
    models[1].set_weights(models[0].get_weights())
    start = [np.array(w) for w in models[0].get_weights()]
    losses = [m.evaluate(batch, labels, batch_size=len(labels), verbose=0, return_dict=True)["loss"] for m in models]
    for model in models:
        model.train_on_batch(batch, labels)
    after = [[np.array(w) for w in m.get_weights()] for m in models]
    moved = max(float(np.abs(a - s).max()) for a, s in zip(after[0], start))
    differ = max(float(np.abs(a - b).max()) for a, b in zip(*after))
    return abs(losses[0] - losses[1]), moved, differ


def sequence_output_difference(examples, first, second):
    """The MiniLM backbones `from_preset(**first)` and `from_preset(**second)` on the same right-padded batch:
    returns (the largest |difference| of their sequence outputs, the second backbone)."""
    batch = right_padded(examples)
    backbones = [BertBackbone.from_preset("all_minilm_l6_v2_en", **settings) for settings in (first, second)]
    expected, got = (keras.ops.convert_to_numpy(b(batch)["sequence_output"]) for b in backbones)
    worst = float(np.abs(expected - got).max())
    print(f"max|{second} - {first}| over {expected.size} values: {worst:.3g}")
    return worst, backbones[1]
