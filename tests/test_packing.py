"""Sequence packing: several examples in one row give each example exactly its unpacked outputs.

The model tests run on TensorFlow, JAX and PyTorch (`multibackend`), with the
real all-MiniLM-L6-v2 weights and real text (the bundled corpus's held-out
lines, tokenised by the checkpoint's own Hugging Face tokenizer.json): the
packed sequence outputs, the token-classification loss and one SGD step must
equal the unpacked ones within 1e-5 in float32.
"""

import pathlib

import keras
import numpy as np
import pytest

from keras_bert_impl.batching.packing import pack_rows, packed_arrays, padding_fraction
from keras_bert_impl.layers.packed_examples import attention_mask_from_example_ids, positions_from_example_ids
from keras_bert_impl.layers.position_embedding import PositionEmbedding
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.token_classifier import BertTokenClassifier

TOLERANCE = 1e-5
SEQUENCE_LENGTH = 64
CORPUS = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"


@pytest.fixture(scope="module")
def examples(minilm_examples):
    return minilm_examples


def unpacked_batch(examples):
    """One example per row, padded to SEQUENCE_LENGTH (the ordinary 0/1 padding mask)."""
    n = len(examples["token_ids"])
    batch = {name: np.zeros((n, SEQUENCE_LENGTH), "int32") for name in ("token_ids", "segment_ids", "padding_mask")}
    for i in range(n):
        length = len(examples["token_ids"][i])
        batch["token_ids"][i, :length] = examples["token_ids"][i]
        batch["segment_ids"][i, :length] = examples["segment_ids"][i]
        batch["padding_mask"][i, :length] = 1
    return batch


def packed_batch(examples, extra=None, padding_values=None):
    lengths = [len(ids) for ids in examples["token_ids"]]
    rows = pack_rows(lengths, SEQUENCE_LENGTH, seed=0)
    arrays = packed_arrays({**examples, **(extra or {})}, rows, SEQUENCE_LENGTH, padding_values)
    return arrays, rows


def token_locations(rows, lengths):
    """(example, token) -> (row, column) in the packed batch."""
    locations = {}
    for r, row in enumerate(rows):
        start = 0
        for i in row:
            for t in range(lengths[i]):
                locations[i, t] = (r, start + t)
            start += lengths[i]
    return locations


@pytest.fixture(scope="module")
def backbone():
    return BertBackbone.from_preset("all_minilm_l6_v2_en")


@pytest.mark.multibackend
def test_packed_rows_give_every_token_its_unpacked_output(backbone, examples):
    packed, rows = packed_batch(examples)
    assert len(rows) < len(examples["token_ids"]) and max(len(r) for r in rows) >= 3, rows
    assert packed["padding_mask"].max() >= 3
    unpacked = unpacked_batch(examples)
    alone = keras.ops.convert_to_numpy(backbone(unpacked)["sequence_output"])
    together = keras.ops.convert_to_numpy(backbone(packed)["sequence_output"])
    lengths = [len(ids) for ids in examples["token_ids"]]
    worst = 0.0
    for (i, t), (r, c) in token_locations(rows, lengths).items():
        worst = max(worst, float(np.abs(alone[i, t] - together[r, c]).max()))
    print(f"max|packed - unpacked| over {sum(lengths)} tokens: {worst:.3g}")
    assert worst <= TOLERANCE
    # Without the example ids (all real tokens 1) the examples would see each other: the test can fail.
    mixed = dict(packed, padding_mask=(packed["padding_mask"] > 0).astype("int32"))
    leaked = keras.ops.convert_to_numpy(backbone(mixed)["sequence_output"])
    second = next(row for row in rows if len(row) >= 2)[1]  # an example after another in its row
    r, c = token_locations(rows, lengths)[second, 0]
    assert np.abs(leaked[r, c] - alone[second, 0]).max() > 1e-2


@pytest.mark.slow
@pytest.mark.multibackend
def test_packed_token_classification_loss_and_sgd_step_equal_unpacked(examples):
    backbone = BertBackbone.from_preset("all_minilm_l6_v2_en", dropout=0.0)
    model = BertTokenClassifier(backbone, num_classes=5, dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1),
    )
    rng = np.random.default_rng(0)
    labels = []
    for ids in examples["token_ids"]:
        label = np.full(len(ids), -1, "int32")
        inner = np.arange(1, len(ids) - 1)  # not [CLS] or the last [SEP]
        chosen = rng.choice(inner, size=len(inner) // 2, replace=False)
        label[chosen] = rng.integers(0, 5, size=len(chosen))
        labels.append(label)
    unpacked = unpacked_batch(examples)
    unpacked_labels = np.full((len(labels), SEQUENCE_LENGTH), -1, "int32")
    for i, label in enumerate(labels):
        unpacked_labels[i, : len(label)] = label
    packed, _ = packed_batch(examples, {"labels": labels}, {"labels": -1})
    packed_labels = packed.pop("labels")
    assert (packed_labels >= 0).sum() == (unpacked_labels >= 0).sum() > 50

    loss_alone = model.evaluate(unpacked, unpacked_labels, batch_size=len(labels), verbose=0, return_dict=True)
    loss_together = model.evaluate(packed, packed_labels, batch_size=len(labels), verbose=0, return_dict=True)
    assert abs(loss_alone["loss"] - loss_together["loss"]) <= TOLERANCE, (loss_alone, loss_together)

    start = [np.array(w) for w in model.get_weights()]
    model.train_on_batch(unpacked, unpacked_labels)
    after_alone = [np.array(w) for w in model.get_weights()]
    model.set_weights(start)
    model.train_on_batch(packed, packed_labels)
    after_together = model.get_weights()
    moved = max(float(np.abs(a - s).max()) for a, s in zip(after_alone, start))
    differ = max(float(np.abs(a - b).max()) for a, b in zip(after_alone, after_together))
    print(f"one SGD step: largest weight change {moved:.3g}, packed vs unpacked {differ:.3g}")
    assert moved > 1e-3 and differ <= TOLERANCE


@pytest.mark.multibackend
def test_example_ids_give_block_diagonal_attention_and_restarting_positions():
    ids = np.array([[1, 1, 2, 2, 2, 0], [1, 1, 1, 1, 0, 0]], "int32")
    positions = keras.ops.convert_to_numpy(positions_from_example_ids(ids))
    assert positions.tolist() == [[0, 1, 0, 1, 2, 5], [0, 1, 2, 3, 4, 5]]
    mask = keras.ops.convert_to_numpy(attention_mask_from_example_ids(ids)).astype(int)
    assert mask[0].tolist() == [
        [1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 0],
    ]
    # A 0/1 mask: every query sees the real keys, positions count 0..length-1 (the unpacked model).
    assert (mask[1] == np.array([1, 1, 1, 1, 0, 0])[None, :]).all()
    layer = PositionEmbedding(max_sequence_length=8)
    x = np.zeros((2, 6, 4), "float32")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(layer(x, padding_mask=(ids[1:] > 0).repeat(2, 0).astype("int32"))),
        keras.ops.convert_to_numpy(layer(x)),
    )


def test_pack_rows_places_every_example_once_within_the_row_length():
    lengths = [len(line.split()) + 2 for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    lengths = [min(n, 128) for n in lengths]
    rows = pack_rows(lengths, 128, seed=3)
    placed = sorted(i for row in rows for i in row)
    assert placed == list(range(len(lengths)))
    assert max(sum(lengths[i] for i in row) for row in rows) <= 128
    fraction = padding_fraction(lengths, rows, 128)
    lower_bound_rows = -(-sum(lengths) // 128)
    print(f"{len(lengths)} lines in {len(rows)} rows (at least {lower_bound_rows}): padding {fraction:.3f}")
    assert len(rows) <= lower_bound_rows + 2
    assert pack_rows(lengths, 128, seed=4) != rows  # the seed changes which examples share a row


def test_pack_rows_errors_name_the_example():
    with pytest.raises(ValueError, match=r"example 2 has 9 tokens: every example to pack needs 1 to sequence_length=8"):
        pack_rows([3, 4, 9, 0], 8)
    with pytest.raises(ValueError, match="`sequence_length` must be a positive int"):
        pack_rows([3], 0)
    with pytest.raises(ValueError, match=r"example 1: `segment_ids` has 2 values, `token_ids` has 3"):
        packed_arrays({"token_ids": [[1], [1, 2, 3]], "segment_ids": [[0], [0, 0]]}, [[0, 1]], 8)


@pytest.mark.slow
@pytest.mark.multibackend
@pytest.mark.parametrize("num_classes", [3, 1], ids=["classification", "regression"])
def test_packed_classifier_loss_and_sgd_step_equal_unpacked(examples, num_classes):
    from keras_bert_impl.batching.packing import first_token_targets
    from keras_bert_impl.models.classifier import BertClassifier

    backbone = BertBackbone.from_preset("all_minilm_l6_v2_en", dropout=0.0)
    classifier = BertClassifier(backbone, num_classes=num_classes, dropout=0.0)
    packed_model = classifier.packed_training_model()
    n = len(examples["token_ids"])
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, size=n).astype("int32") if num_classes > 1 else rng.uniform(0, 5, n).astype("float32")
    packed, rows = packed_batch(examples)
    lengths = [len(ids) for ids in examples["token_ids"]]
    targets, weights = first_token_targets(rows, lengths, labels, SEQUENCE_LENGTH)
    assert weights.sum() == n
    if num_classes == 1:
        targets = targets[..., None]  # one score per position, as the regression output
    unpacked = unpacked_batch(examples)
    optimizer = keras.optimizers.SGD(learning_rate=0.5)
    classifier.compile(optimizer=optimizer, loss=classifier.default_loss())
    packed_model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss=classifier.default_loss())

    alone = classifier.evaluate(unpacked, labels, batch_size=n, verbose=0, return_dict=True)["loss"]
    together = packed_model.evaluate(packed, targets, sample_weight=weights, batch_size=n, verbose=0,
                                     return_dict=True)["loss"]
    assert abs(alone - together) <= TOLERANCE, (alone, together)

    start = [np.array(w) for w in classifier.get_weights()]
    classifier.train_on_batch(unpacked, labels)
    after_alone = [np.array(w) for w in classifier.get_weights()]
    classifier.set_weights(start)
    packed_model.train_on_batch(packed, targets, sample_weight=weights)
    after_together = classifier.get_weights()  # the packed model trained the classifier's own weights
    moved = max(float(np.abs(a - s).max()) for a, s in zip(after_alone, start))
    differ = max(float(np.abs(a - b).max()) for a, b in zip(after_alone, after_together))
    print(f"{num_classes} outputs, one SGD step: largest change {moved:.3g}, packed vs unpacked {differ:.3g}")
    assert moved > 1e-3 and differ <= TOLERANCE


def test_packed_training_model_needs_the_pooler():
    from keras_bert_impl.models.classifier import BertClassifier

    backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match=r"packed_training_model\(\) needs pooling='pooled'.*pooling='mean'"):
        BertClassifier(backbone, num_classes=2, pooling="mean").packed_training_model()
