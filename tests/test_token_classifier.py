"""BertTokenClassifier: shapes, ignored labels, .keras round trip, training on real CoNLL windows."""

import numpy as np
import pytest

import keras

from keras_bert_impl import BertBackbone, BertTokenClassifier
from keras_bert_impl.models.token_classifier import MaskedTokenAccuracy, token_classification_loss


def _tiny_backbone(vocabulary_size=64):
    return BertBackbone(
        vocabulary_size=vocabulary_size, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=32,
    )


def _inputs(batch=2, length=8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(1, 64, (batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


@pytest.mark.multibackend
def test_output_shape_and_keras_round_trip(tmp_path):
    model = BertTokenClassifier(_tiny_backbone(), num_classes=9, dropout=0.2)
    inputs = _inputs()
    logits = model.predict(inputs, verbose=0)
    assert logits.shape == (2, 8, 9) and logits.dtype == np.float32
    path = str(tmp_path / "ner.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored, BertTokenClassifier)
    assert (restored.num_classes, restored.dropout) == (9, 0.2)
    np.testing.assert_allclose(restored.predict(inputs, verbose=0), logits, atol=1e-5)
    assert restored.get_config()["backbone"]["config"]["hidden_dim"] == 16


@pytest.mark.multibackend
def test_ignored_labels_do_not_count():
    logits = np.array([[[2.0, 0.0], [0.0, 3.0], [5.0, -5.0]]], "float32")
    labels_all = np.array([[0, 1, 1]])
    labels_masked = np.array([[0, 1, -1]])
    loss = token_classification_loss()
    expected = np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(-3.0))])
    assert float(loss(labels_masked, logits)) == pytest.approx(expected, rel=1e-5)
    assert float(loss(labels_all, logits)) > float(loss(labels_masked, logits))
    metric = MaskedTokenAccuracy()
    metric.update_state(labels_masked, logits)
    assert float(metric.result()) == 1.0
    metric.update_state(labels_all, logits)
    assert float(metric.result()) == pytest.approx(4 / 5)


@pytest.mark.multibackend
def test_bad_arguments():
    with pytest.raises(ValueError, match=r"`num_classes` must be a positive int \(or give `label_names`\), got 0"):
        BertTokenClassifier(_tiny_backbone(), num_classes=0)
    with pytest.raises(ValueError, match=r"`dropout` must be a number in \[0, 1\), got 1.5"):
        BertTokenClassifier(_tiny_backbone(), num_classes=3, dropout=1.5)


def test_training_steps_reduce_loss_on_real_conll(shared_data, minilm_dir):
    from keras_bert_impl.tasks import tagging as conll
    from keras_bert_impl.text.tokenizer import BertTokenizer

    keras.utils.set_random_seed(0)
    tokenizer = BertTokenizer.from_preset(str(minilm_dir))
    sentences = conll.read_conll(shared_data / "conll2003" / "eng.testa")[:64]
    labels = conll.label_vocabulary(sentences)
    features = conll.encode_examples(sentences, tokenizer, labels, 64)
    backbone = BertBackbone(
        vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=32,
        intermediate_dim=64, max_sequence_length=64,
    )
    model = BertTokenClassifier(backbone, len(labels))
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    dataset = conll.make_dataset(features, 32, boundaries=[32, 64])
    before = model.evaluate(dataset, verbose=0, return_dict=True)
    model.fit(dataset.repeat(), steps_per_epoch=20, epochs=1, verbose=0)
    after = model.evaluate(dataset, verbose=0, return_dict=True)
    assert after["loss"] < 0.7 * before["loss"]
    assert after["accuracy"] > before["accuracy"]
