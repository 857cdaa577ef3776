"""BertClassifier: heads train on real GLUE examples (loss goes down), .keras round trip, argument errors.

Backend-agnostic: inputs are tokenized with Hugging Face `tokenizers` and the
real all-MiniLM-L6-v2 vocabulary, so no TensorFlow is needed.
"""

import csv

import keras
import numpy as np
import pytest

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import BertClassifier

pytestmark = pytest.mark.multibackend


def _read_tsv(path, count):
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[1 : count + 1]


def _encode(minilm_dir, texts_a, texts_b=None, length=48):
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.enable_truncation(length)
    tokenizer.enable_padding(length=length)
    pairs = list(zip(texts_a, texts_b)) if texts_b is not None else list(texts_a)
    encodings = tokenizer.encode_batch(pairs)
    return {
        "token_ids": np.array([e.ids for e in encodings], "int32"),
        "segment_ids": np.array([e.type_ids for e in encodings], "int32"),
        "padding_mask": np.array([e.attention_mask for e in encodings], "int32"),
    }


def _small_backbone():
    return BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=32, intermediate_dim=64,
        max_sequence_length=64, dropout=0.0,
    )


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(0)
    return _small_backbone()


def _loss_before_and_after(model, features, labels, steps=30):
    losses = [float(np.ravel(model.train_on_batch(features, labels))[0]) for _ in range(steps)]
    return losses[0], losses[-1]


@pytest.mark.slow
def test_classification_head_trains_on_real_rte(shared_data, minilm_dir, backbone):
    rows = _read_tsv(shared_data / "glue" / "RTE" / "train.tsv", 16)
    features = _encode(minilm_dir, [r[1] for r in rows], [r[2] for r in rows])
    labels = np.array([["entailment", "not_entailment"].index(r[3]) for r in rows], "int32")
    model = BertClassifier(backbone, num_classes=2, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    before, after = _loss_before_and_after(model, features, labels)
    assert after < 0.5 * before
    assert model.predict(features, verbose=0).shape == (16, 2)


def test_regression_head_trains_on_real_stsb(data_slices, minilm_dir, backbone):
    rows = _read_tsv(data_slices / "glue" / "STS-B" / "train.tsv", 16)
    features = _encode(minilm_dir, [r[7] for r in rows], [r[8] for r in rows])
    scores = np.array([float(r[9]) for r in rows], "float32")
    model = BertClassifier(backbone, num_classes=1, dropout=0.0)
    assert isinstance(model.loss, keras.losses.MeanSquaredError)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    before, after = _loss_before_and_after(model, features, scores)
    assert after < 0.5 * before
    assert model.predict(features, verbose=0).shape == (16, 1)


def test_keras_round_trip(shared_data, minilm_dir, backbone, tmp_path):
    rows = _read_tsv(shared_data / "glue" / "MRPC" / "dev.tsv", 4)
    features = _encode(minilm_dir, [r[3] for r in rows], [r[4] for r in rows])
    model = BertClassifier(backbone, num_classes=2, label_names=["0", "1"])
    expected = model.predict(features, verbose=0)
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertClassifier)
    assert restored.num_classes == 2 and restored.label_names == ["0", "1"] and restored.dropout == 0.1
    np.testing.assert_allclose(restored.predict(features, verbose=0), expected, atol=1e-5)


def test_raw_strings_need_a_preprocessor(backbone):
    model = BertClassifier(backbone, num_classes=2)
    with pytest.raises(ValueError, match="has no `preprocessor`"):
        model.predict(["a sentence"])


def test_bad_arguments(backbone):
    with pytest.raises(ValueError, match="`num_classes` must be a positive int"):
        BertClassifier(backbone, num_classes=0)
    with pytest.raises(ValueError, match="`dropout` must be a number in"):
        BertClassifier(backbone, num_classes=2, dropout=1.0)
    with pytest.raises(ValueError, match="`label_names` must list 3 names"):
        BertClassifier(backbone, num_classes=3, label_names=["a", "b"])


def test_head_arguments_as_users_write_them(backbone):
    """NumPy's ints (`df.label.max() + 1`) are ints, `label_names` alone gives the class count (as the tagger's),
    Hugging Face's names are named as such, and a repeated name, a non-number dropout or the wrong preprocessor
    is one line."""
    from keras_bert_impl import BertTokenClassifier, BertTokenClassifierPreprocessor

    assert BertClassifier(backbone, num_classes=np.int64(3)).num_classes == 3
    named = BertClassifier(backbone, label_names=["negative", "positive"])
    assert (named.num_classes, named.label_names) == (2, ["negative", "positive"])
    with pytest.raises(TypeError) as error:
        BertClassifier(backbone, num_labels=2)
    assert str(error.value).startswith("BertClassifier got an unknown argument `num_labels` (did you mean `num_classes`?)")
    with pytest.raises(TypeError, match=r"^BertTokenClassifier got an unknown argument `id2label` \(did you mean "
                                        r"`label_names`\?\)"):
        BertTokenClassifier(backbone, id2label={0: "O"})
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, label_names=["a", "b", "a"])
    assert str(error.value) == "`label_names` names each class once; ['a'] appear more than once in ['a', 'b', 'a']."
    # Hugging Face's id2label (keys strings, as in a config.json) and label2id: the names in id order, not the keys.
    assert BertClassifier(backbone, label_names={"1": "positive", "0": "negative"}).label_names == ["negative",
                                                                                                    "positive"]
    assert BertTokenClassifier(backbone, label_names={"O": 0, "B-PER": 1}).label_names == ["O", "B-PER"]
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, label_names={"neg": "negative", "pos": "positive"})
    assert str(error.value) == ("`label_names` is a dict, but neither its keys nor its values are class ids: give a "
                                "list of names, id2label ({0: 'negative', 1: 'positive'}) or label2id; got "
                                "{'neg': 'negative', 'pos': 'positive'}.")
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, label_names="positive")
    assert str(error.value) == "`label_names` must be a list of names, got the string 'positive'."
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, num_classes=2, dropout=None)
    assert str(error.value) == "`dropout` must be a number in [0, 1), got None."
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone)
    assert str(error.value) == ("`num_classes` must be a positive int (1 for regression; or give `label_names`), "
                                "got None.")
    tagger_preprocessor = BertTokenClassifierPreprocessor.from_preset("all_minilm_l6_v2_en")
    with pytest.raises(ValueError) as error:
        BertClassifier(backbone, num_classes=2, preprocessor=tagger_preprocessor)
    assert str(error.value) == (
        "BertClassifier reads its text with a BertClassifierPreprocessor, got a BertTokenClassifierPreprocessor: build "
        "it with BertClassifierPreprocessor.from_preset(...), or let BertClassifier.from_preset make it.")


@pytest.mark.parametrize("num_classes", [2, 1])
def test_weight_zero_filler_rows_change_neither_loss_nor_metric(data_slices, minilm_dir, backbone, num_classes):
    rows = _read_tsv(data_slices / "glue" / "STS-B" / "train.tsv", 12)
    features = _encode(minilm_dir, [r[7] for r in rows], [r[8] for r in rows])
    scores = np.array([float(r[9]) for r in rows], "float32")
    labels = scores if num_classes == 1 else (scores > 2.5).astype("int32")
    model = BertClassifier(backbone, num_classes=num_classes, dropout=0.0)
    plain = model.evaluate(features, labels, verbose=0, return_dict=True)
    # The same 12 examples in a batch of 16: 4 copies of the first with label 0 and weight 0.
    filled = {k: np.concatenate([v, np.repeat(v[:1], 4, axis=0)]) for k, v in features.items()}
    filled_labels = np.concatenate([labels, np.zeros(4, labels.dtype)])
    weights = np.concatenate([np.ones(12, "float32"), np.zeros(4, "float32")])
    weighted = model.evaluate(filled, filled_labels, sample_weight=weights, batch_size=16, verbose=0, return_dict=True)
    assert weighted["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    if num_classes == 2:
        assert weighted["accuracy"] == pytest.approx(plain["accuracy"], abs=1e-6)


@pytest.mark.slow
def test_mean_pooling_head_reads_real_tokens_only_trains_and_round_trips(shared_data, minilm_dir, tmp_path):
    """`pooling="mean"`: the mean of the real tokens' vectors (padding changes nothing), pooler frozen, saved."""
    keras.utils.set_random_seed(0)
    model = BertClassifier(_small_backbone(), num_classes=2, pooling="mean", dropout=0.0)
    assert model.backbone.pooled_dense.trainable is False  # no gradient reaches it: frozen, no warning
    rows = _read_tsv(shared_data / "glue" / "SST-2" / "dev.tsv", 16)
    short = _encode(minilm_dir, [r[0] for r in rows], length=48)
    assert short["padding_mask"].sum(axis=1).max() < 48  # nothing truncated
    long = _encode(minilm_dir, [r[0] for r in rows], length=64)  # the same sentences with 16 more padding positions
    np.testing.assert_allclose(model.predict(long, verbose=0), model.predict(short, verbose=0), atol=1e-5)
    labels = np.array([int(r[1]) for r in rows])
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    first, last = _loss_before_and_after(model, short, labels)
    assert last < first - 0.1, (first, last)
    path = str(tmp_path / "mean.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.pooling == "mean"
    np.testing.assert_allclose(restored.predict(short, verbose=0), model.predict(short, verbose=0), atol=1e-5)
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        BertClassifier(_small_backbone(), num_classes=2, pooling="max")
