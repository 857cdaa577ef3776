"""LengthBucketedBatches: NumPy length buckets without TensorFlow, on every backend (real SST-2 dev sentences)."""

import collections
import csv

import keras
import numpy as np
import pytest

from keras_bert_impl.batching.array_batches import LengthBucketedBatches

BOUNDARIES = [16, 32, 48, 64]


@pytest.fixture(scope="module")
def sst2_dev(shared_data):
    """Real SST-2 dev sentences as word ids ([CLS]=1 ... [SEP]=2, words numbered in order of appearance)."""
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    vocabulary = collections.defaultdict(lambda: len(vocabulary) + 3)
    token_ids = [np.array([1] + [vocabulary[w] for w in r[0].split()][:62] + [2], np.int32) for r in rows]
    labels = np.array([int(r[1]) for r in rows], np.int32)
    return token_ids, labels, len(vocabulary) + 3


def _features(token_ids):
    return {
        "token_ids": token_ids,
        "segment_ids": [np.zeros_like(t) for t in token_ids],
        "padding_mask": [np.ones_like(t) for t in token_ids],
    }


def _epoch(batches):
    return [batches[i] for i in range(len(batches))]


pytestmark = pytest.mark.multibackend


def test_every_example_once_per_epoch_padded_to_its_bucket(sst2_dev):
    token_ids, labels, _ = sst2_dev
    batches = LengthBucketedBatches(_features(token_ids), labels, batch_size=32, boundaries=BOUNDARIES, shuffle=True)
    seen = []
    for features, batch_labels, weights in _epoch(batches):
        width = features["token_ids"].shape[1]
        assert features["token_ids"].shape == (32, width) and width in BOUNDARIES
        real = weights > 0
        assert real[: int(real.sum())].all(), "filler rows come last"
        for row in np.flatnonzero(real):
            length = int(features["padding_mask"][row].sum())
            # The smallest boundary that holds the example: no bigger bucket than needed.
            assert width == min(b for b in BOUNDARIES if b >= length)
            assert (features["token_ids"][row, length:] == 0).all()
            seen.append((tuple(features["token_ids"][row, :length]), int(batch_labels[row])))
        assert (batch_labels[~real] == 0).all()
    expected = [(tuple(t), int(y)) for t, y in zip(token_ids, labels)]
    assert sorted(seen) == sorted(expected)  # each of the 872 examples exactly once, with its own label
    # One partial batch per bucket at most: the rest are full.
    widths = collections.Counter(f["token_ids"].shape[1] for f, _, w in _epoch(batches) if w.min() == 0)
    assert all(count == 1 for count in widths.values())


def test_new_order_each_epoch_and_reproducible_with_the_seed(sst2_dev):
    token_ids, labels, _ = sst2_dev

    def order(batches):
        return [tuple(f["token_ids"][0, :4]) for f, _, _ in _epoch(batches)]

    first = LengthBucketedBatches(_features(token_ids), labels, batch_size=32, boundaries=BOUNDARIES, shuffle=True, seed=3)
    again = LengthBucketedBatches(_features(token_ids), labels, batch_size=32, boundaries=BOUNDARIES, shuffle=True, seed=3)
    epoch_1 = order(first)
    assert epoch_1 == order(again)
    count = len(first)
    first.on_epoch_end()
    assert order(first) != epoch_1 and len(first) == count  # reshuffled, same number of batches


def test_evaluation_order_is_kept(sst2_dev):
    token_ids, labels, _ = sst2_dev
    batches = LengthBucketedBatches(_features(token_ids), labels, batch_size=64, boundaries=BOUNDARIES)
    rows = []
    for features, batch_labels, weights in _epoch(batches):
        width = features["token_ids"].shape[1]
        lengths = features["padding_mask"].sum(axis=1)
        assert width == min(b for b in BOUNDARIES if b >= lengths.max())
        rows.extend(tuple(features["token_ids"][i, : lengths[i]]) for i in np.flatnonzero(weights))
    assert rows == [tuple(t) for t in token_ids]
    assert batches.num_examples == 872 and len(batches) == 14


def test_from_flat_matches_lists(sst2_dev):
    token_ids, labels, _ = sst2_dev
    offsets = np.cumsum([0] + [len(t) for t in token_ids])
    flat = {"token_ids": np.concatenate(token_ids)}
    a = LengthBucketedBatches.from_flat(flat, offsets, labels=labels, batch_size=16, boundaries=BOUNDARIES)
    b = LengthBucketedBatches({"token_ids": token_ids}, labels, batch_size=16, boundaries=BOUNDARIES)
    for (fa, ya, wa), (fb, yb, wb) in zip(_epoch(a), _epoch(b)):
        np.testing.assert_array_equal(fa["token_ids"], fb["token_ids"])
        np.testing.assert_array_equal(ya, yb)


def test_prediction_batches_without_labels(sst2_dev):
    token_ids, _, _ = sst2_dev
    batches = LengthBucketedBatches({"token_ids": token_ids[:40]}, batch_size=32, boundaries=BOUNDARIES)
    assert [len(b) for b in _epoch(batches)] == [1, 1]  # (features,) only
    assert _epoch(batches)[1][0]["token_ids"].shape[0] == 32  # 8 real rows + 24 copies, kept fixed for XLA


def test_bad_input_errors(sst2_dev):
    token_ids, labels, _ = sst2_dev
    with pytest.raises(ValueError, match="example 0 has 10 tokens, more than the last boundary 8"):
        LengthBucketedBatches({"token_ids": [np.ones(10)]}, boundaries=[4, 8])
    with pytest.raises(ValueError, match="example 1: feature 'segment_ids' has length 2"):
        LengthBucketedBatches({"token_ids": [np.ones(3), np.ones(3)], "segment_ids": [np.ones(3), np.ones(2)]})
    with pytest.raises(ValueError, match="2 labels for 1 examples"):
        LengthBucketedBatches({"token_ids": [np.ones(3)]}, labels=[0, 1])
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketedBatches({"token_ids": token_ids}, batch_size=0)
    with pytest.raises(ValueError, match="boundaries"):
        LengthBucketedBatches({"token_ids": token_ids}, boundaries=[64, 32])
    with pytest.raises(ValueError, match="length_key` 'token_ids' is not a feature; features are \\['ids'\\]"):
        LengthBucketedBatches({"ids": token_ids})


@pytest.mark.slow
def test_finetune_trains_a_classifier_from_array_batches(sst2_dev):
    """The JAX/PyTorch-only fine-tuning path: `finetune` counts the batches and fits without tf.data."""
    if keras.backend.backend() == "tensorflow":
        pytest.skip("TensorFlow's PyDataset adapter fixes the batch shape from the first two batches: "
                    "there the tf.data bucket_by_length is the path (documented in array_batches)")
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    token_ids, labels, vocabulary_size = sst2_dev
    setup_finetuning(seed=0)
    backbone = BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=64,
                            intermediate_dim=128, max_sequence_length=64, dropout=0.0)
    model = BertClassifier(backbone, num_classes=2, dropout=0.0)
    # 64 real sentences, memorised in 12 epochs: the training loss must fall well below ln 2.
    train = LengthBucketedBatches(_features(token_ids[:64]), labels[:64], batch_size=16, boundaries=BOUNDARIES,
                                  shuffle=True, seed=0)
    dev = LengthBucketedBatches(_features(token_ids[512:]), labels[512:], batch_size=64, boundaries=BOUNDARIES)

    def eval_fn(m):
        predictions = np.asarray(m.predict(dev, verbose=0))[: dev.num_examples].argmax(-1)
        return {"dev_accuracy": float((predictions == dev.labels).mean())}

    result = finetune(model, train, epochs=12, learning_rate=3e-3, warmup_proportion=0.0, eval_fn=eval_fn, seed=0,
                      verbose=0)
    assert result.train_steps == len(train)
    assert result.history["loss"][-1] < 0.3 < result.history["loss"][0]
    assert len(result.history["dev_accuracy"]) == 12 and 1 <= result.best_epoch <= 12
    assert result.best_metrics["dev_accuracy"] == max(result.history["dev_accuracy"])


def test_same_batch_shapes_as_the_tf_data_pipeline(sst2_dev):
    """Per epoch, the (width, real rows) of every batch equal those of bucket_by_length + fill_batches."""
    tf = pytest.importorskip("tensorflow")
    from keras_bert_impl.batching.tf_batches import bucket_by_length, fill_batches

    token_ids, labels, _ = sst2_dev
    ours = LengthBucketedBatches({"token_ids": token_ids}, labels, batch_size=32, boundaries=BOUNDARIES, shuffle=True)
    dataset = tf.data.Dataset.from_generator(
        lambda: (({"token_ids": t}, y, np.float32(1)) for t, y in zip(token_ids, labels)),
        output_signature=({"token_ids": tf.TensorSpec([None], tf.int32)}, tf.TensorSpec([], tf.int32),
                          tf.TensorSpec([], tf.float32)),
    ).shuffle(1000, seed=0)
    reference = fill_batches(bucket_by_length(dataset, BOUNDARIES, 32), 32, label_fill_value=0)
    shapes = sorted((f["token_ids"].shape[1], int(w.sum())) for f, _, w in _epoch(ours))
    expected = sorted((int(f["token_ids"].shape[1]), int(w.numpy().sum())) for f, _, w in reference)
    assert shapes == expected


@pytest.fixture(scope="module")
def conll_dev(shared_data):
    """Real CoNLL-2003 dev sentences as word ids with their tag ids as per-token labels ([CLS]/[SEP] labelled -1)."""
    from keras_bert_impl.tasks import tagging as conll

    sentences = conll.read_conll(shared_data / "conll2003" / "eng.testa")[:300]
    tags = conll.label_vocabulary(sentences)
    vocabulary = collections.defaultdict(lambda: len(vocabulary) + 3)
    token_ids, token_labels = [], []
    for s in sentences:
        words = s.words[:62]
        token_ids.append(np.array([1] + [vocabulary[w] for w in words] + [2], np.int32))
        token_labels.append(np.array([-1] + [tags.index(t) for t in s.tags[:62]] + [-1], np.int32))
    return token_ids, token_labels, tags, len(vocabulary) + 3


def test_per_token_labels_random_batches(conll_dev):
    """CoNLL's training batches: random (not grouped), each padded to its longest sentence's bucket, labels -1 off."""
    token_ids, token_labels, _, _ = conll_dev
    batches = LengthBucketedBatches(_features(token_ids), token_labels, batch_size=32, boundaries=BOUNDARIES,
                                    shuffle=True, group_by_length=False, label_fill_value=-1)
    assert len(batches) == 10  # ceil(300 / 32): random batches, one partial batch at the end
    seen = []
    for features, labels in _epoch(batches):
        assert labels.shape == features["token_ids"].shape and labels.dtype == np.int32
        lengths = features["padding_mask"].sum(axis=1)
        real = int((labels != -1).any(axis=1).sum())  # every real CoNLL sentence has a labelled word
        assert features["token_ids"].shape[1] == min(b for b in BOUNDARIES if b >= lengths[:real].max())
        assert (labels[real:] == -1).all(), "filler rows are ignored by the loss"
        for row in range(real):
            assert (labels[row, lengths[row]:] == -1).all()
            seen.append((tuple(features["token_ids"][row, : lengths[row]]), tuple(labels[row, : lengths[row]])))
    assert sorted(seen) == sorted((tuple(t), tuple(y)) for t, y in zip(token_ids, token_labels))
    # A new random order each epoch.
    first = [tuple(f["token_ids"][0]) for f, _ in _epoch(batches)]
    batches.on_epoch_end()
    assert first != [tuple(f["token_ids"][0]) for f, _ in _epoch(batches)]


def test_per_token_labels_from_flat(conll_dev):
    token_ids, token_labels, _, _ = conll_dev
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in token_ids])])
    flat = LengthBucketedBatches.from_flat({"token_ids": np.concatenate(token_ids)}, offsets,
                                           token_labels=np.concatenate(token_labels), batch_size=64,
                                           boundaries=BOUNDARIES, label_fill_value=-1)
    lists = LengthBucketedBatches({"token_ids": token_ids}, token_labels, batch_size=64, boundaries=BOUNDARIES,
                                  label_fill_value=-1)
    for (fa, ya), (fb, yb) in zip(_epoch(flat), _epoch(lists)):
        np.testing.assert_array_equal(fa["token_ids"], fb["token_ids"])
        np.testing.assert_array_equal(ya, yb)


def test_dict_labels_fill_rows_with_the_ignore_label(sst2_dev):
    """SQuAD-style labels, one start and one end position per example; filler rows are -1 (ignored by SpanLoss)."""
    token_ids, _, _ = sst2_dev
    token_ids = token_ids[:50]
    starts = np.array([len(t) // 3 for t in token_ids])
    ends = np.array([len(t) // 2 for t in token_ids])
    batches = LengthBucketedBatches({"token_ids": token_ids}, {"start_logits": starts, "end_logits": ends},
                                    batch_size=32, boundaries=BOUNDARIES, shuffle=True, label_fill_value=-1)
    rows = 0
    for features, labels in _epoch(batches):
        assert set(labels) == {"start_logits", "end_logits"} and len(labels["start_logits"]) == 32
        real = labels["start_logits"] >= 0
        assert real[: int(real.sum())].all() and (labels["end_logits"][~real] == -1).all()
        for row in np.flatnonzero(real):
            length = int((features["token_ids"][row] > 0).sum())
            assert (labels["start_logits"][row], labels["end_logits"][row]) == (length // 3, length // 2)
        rows += int(real.sum())
    assert rows == 50


def test_label_form_errors(conll_dev):
    token_ids, token_labels, _, _ = conll_dev
    with pytest.raises(ValueError, match="per-token labels need `label_fill_value`"):
        LengthBucketedBatches({"token_ids": token_ids}, token_labels)
    with pytest.raises(ValueError, match="example 1: per-token labels have shape \\(2,\\), the example has 3 tokens"):
        LengthBucketedBatches({"token_ids": [np.ones(3), np.ones(3)]}, [np.ones(3), np.ones(2)], label_fill_value=-1)
    with pytest.raises(ValueError, match="dict labels need `label_fill_value`"):
        LengthBucketedBatches({"token_ids": token_ids}, {"start_logits": np.zeros(len(token_ids))})
    with pytest.raises(ValueError, match="labels\\['end_logits'\\] must be 1-D with one label per example \\(2\\)"):
        LengthBucketedBatches({"token_ids": [np.ones(3), np.ones(3)]}, {"end_logits": np.zeros(3)}, label_fill_value=-1)
    with pytest.raises(ValueError, match="array labels must be 1-D"):
        LengthBucketedBatches({"token_ids": [np.ones(3), np.ones(3)]}, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="give `labels` or `token_labels`, not both"):
        LengthBucketedBatches.from_flat({"token_ids": np.ones(6)}, [0, 3, 6], token_labels=np.zeros(6),
                                        labels=np.zeros(2), label_fill_value=-1)


def test_finetune_trains_a_token_classifier_from_array_batches(conll_dev):
    """The JAX/PyTorch path of benchmarks/conll.py: per-token labels, -1 ignored by the loss."""
    if keras.backend.backend() == "tensorflow":
        pytest.skip("TensorFlow's PyDataset adapter fixes the batch shape from the first two batches")
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.token_classifier import BertTokenClassifier
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    token_ids, token_labels, tags, vocabulary_size = conll_dev
    setup_finetuning(seed=0)
    backbone = BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=64,
                            intermediate_dim=128, max_sequence_length=64, dropout=0.0)
    model = BertTokenClassifier(backbone, len(tags), dropout=0.0)
    train = LengthBucketedBatches(_features(token_ids[:64]), token_labels[:64], batch_size=16,
                                  boundaries=BOUNDARIES, shuffle=True, group_by_length=False, label_fill_value=-1)
    result = finetune(model, train, epochs=10, learning_rate=3e-3, warmup_proportion=0.0, seed=0, verbose=0)
    assert result.history["loss"][-1] < 0.3 * result.history["loss"][0]
    # The memorised tags come back on the labelled positions.
    features, labels = train[0]
    predicted = np.asarray(model.predict_on_batch(features)).argmax(-1)
    labelled = labels != -1
    assert (predicted[labelled] == labels[labelled]).mean() > 0.9
