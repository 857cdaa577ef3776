"""Task models `from_preset` on each kind of directory `BertBackbone.from_preset` reads (issue 14).

`BertClassifier/BertTokenClassifier/BertSpanExtractor/BertPretrainer.from_preset(preset)` take anything the
backbone takes; the backbone weights load, the head is new, and the preprocessor is built from the same
directory's vocabulary. Checked here on a Hugging Face directory (the real all-MiniLM-L6-v2 checkpoint),
a keras-hub preset directory and an own preset directory (`BertBackbone.save_to_preset`, the format of the
pretraining export).
"""

import json

import keras
import numpy as np
import pytest

import keras_bert_impl
from keras_bert_impl import BertBackbone, BertClassifier, BertPretrainer, BertSpanExtractor, BertTokenClassifier

pytestmark = pytest.mark.multibackend
PRESET = "all_minilm_l6_v2_en"
TEXTS = ["I loved it", "Zoë's café was dull and long."]


def _numpy(weights):
    return [keras.ops.convert_to_numpy(w) for w in weights]


def _ids(preprocessor, texts):
    return keras.ops.convert_to_numpy(preprocessor(texts)["token_ids"]).tolist()


@pytest.mark.slow
def test_hugging_face_directory(minilm_dir):
    classifier = BertClassifier.from_preset(str(minilm_dir), num_classes=2, sequence_length=32)
    named = BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32)
    for ours, reference in zip(_numpy(classifier.backbone.weights), _numpy(named.backbone.weights)):
        np.testing.assert_array_equal(ours, reference)
    assert _ids(classifier.preprocessor, TEXTS) == _ids(named.preprocessor, TEXTS)
    assert classifier.predict(TEXTS, verbose=0).shape == (2, 2)
    tagger = BertTokenClassifier.from_preset(str(minilm_dir), label_names=["O", "B-PER", "I-PER"])
    assert isinstance(tagger.predict_entities("John lives in Paris."), list)


def _tiny_vocabulary():
    words = ["i", "loved", "it", "was", "dull", "and", "long", "john", "lives", "in", "paris", "."]
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]


def test_keras_hub_preset_directory(tmp_path):
    keras_hub = pytest.importorskip("keras_hub")
    vocabulary = _tiny_vocabulary()
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16, max_sequence_length=32)
    directory = tmp_path / "keras_hub_preset"
    backbone.save_to_preset(str(directory))
    keras_hub.models.BertTokenizer(vocabulary=vocabulary).save_to_preset(str(directory))
    classifier = BertClassifier.from_preset(str(directory), num_classes=3, sequence_length=16)
    features = classifier.preprocessor(["i loved it", "john lives in paris ."])
    ids = keras.ops.convert_to_numpy(features["token_ids"]).tolist()
    assert ids[0][:5] == [2, 5, 6, 7, 3]  # [CLS] i loved it [SEP], from the preset's own vocabulary
    # The backbone weights loaded: the same encoder output as keras-hub's own backbone.
    ours = classifier.backbone(features)["sequence_output"]
    reference = backbone(features)["sequence_output"]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(reference), atol=1e-5)
    assert classifier.predict(["i loved it", "john lives in paris ."], verbose=0).shape == (2, 3)


def test_a_keras_hub_classifier_preset_loads_with_its_trained_head(tmp_path):
    # From the keras-hub habits audit: keras-hub's `BertTextClassifier.save_to_preset(d)` then ours
    # `BertClassifier.from_preset(d)` said "load it with BertTextClassifier.from_preset", our own name for the same
    # class (a circle); with num_classes=2 it loaded a new head silently, 0.019 off keras-hub's predictions.
    keras_hub = pytest.importorskip("keras_hub")
    vocabulary = _tiny_vocabulary()
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
                                             hidden_dim=8, intermediate_dim=16, max_sequence_length=32)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    theirs = keras_hub.models.BertTextClassifier(backbone, num_classes=3, preprocessor=preprocessor,
                                                 activation="softmax")
    dense = theirs.output_dense
    dense.kernel.assign(np.random.RandomState(0).normal(size=dense.kernel.shape).astype("float32"))
    dense.bias.assign(np.array([0.5, -0.5, 0.25], "float32"))
    directory = tmp_path / "keras_hub_classifier"
    theirs.save_to_preset(str(directory))
    texts = ["i loved it", "john lives in paris ."]
    expected = keras.ops.convert_to_numpy(theirs.predict(texts, verbose=0))

    for cls in (BertClassifier, keras_bert_impl.BertTextClassifier):
        ours = cls.from_preset(str(directory))
        assert ours.heads_loaded == ["classifier"] and ours.num_classes == 3 and ours.activation == "softmax"
        np.testing.assert_allclose(ours.predict(texts, verbose=0), expected, atol=1e-5)
    assert BertClassifier.from_preset(str(directory), num_classes=3).heads_loaded == ["classifier"]
    other = BertClassifier.from_preset(str(directory), num_classes=2)  # other classes: a new head on its backbone
    assert other.heads_loaded == [] and other.predict(texts, verbose=0).shape == (2, 2)
    # keras-nlp named its task BertClassifier, as ours is: still keras-hub's folder, not a save_to_preset of ours.
    task = json.loads((directory / "task.json").read_text())
    task.update(class_name="BertClassifier", registered_name="keras_nlp>BertClassifier")
    (directory / "task.json").write_text(json.dumps(task))
    older = BertClassifier.from_preset(str(directory))
    assert older.heads_loaded == ["classifier"]
    np.testing.assert_allclose(older.predict(texts, verbose=0), expected, atol=1e-5)
    with pytest.raises(ValueError) as error:  # another task: says which of ours holds it
        BertTokenClassifier.from_preset(str(directory))
    assert "holds keras-hub's BertClassifier, saved by save_to_preset: load it with BertClassifier.from_preset" \
        in str(error.value)


def test_own_preset_directory(tmp_path, minilm_dir):
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                            max_sequence_length=128)
    directory = tmp_path / "own_preset"
    backbone.save_to_preset(directory, vocabulary=str(minilm_dir / "vocab.txt"), lowercase=True)
    qa = BertSpanExtractor.from_preset(str(directory), sequence_length=64)
    for ours, reference in zip(_numpy(qa.backbone.weights), _numpy(backbone.weights)):
        np.testing.assert_array_equal(ours, reference)
    context = "The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third Super Bowl title."
    answer = qa.answer("Who won?", context)
    assert answer["text"] == context[answer["start"] : answer["end"]]
    pretrainer = BertPretrainer.from_preset(str(directory))
    assert pretrainer.backbone.num_layers == 1
