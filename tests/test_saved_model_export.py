"""`Task.export`: a SavedModel that takes raw strings, on the TensorFlow and JAX backends (PyTorch: one line).

The real all-MiniLM-L6-v2 checkpoint, real SST-2 sentences and MRPC pairs. The SavedModel is served in a fresh
process that imports only TensorFlow and tensorflow-text (keras_bert_impl made unimportable), as a server runs it,
and must give what `predict` gives on the same strings.
"""

import csv
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_impl import BertBackbone, BertClassifier, BertTextEmbedder, BertTokenClassifier

pytestmark = pytest.mark.multibackend
PRESET = "all_minilm_l6_v2_en"
TORCH = keras.backend.backend() == "torch"
needs_savedmodel_backend = pytest.mark.skipif(TORCH, reason="Keras writes SavedModels from TensorFlow and JAX only")

# Serves SavedModels in a process without keras_bert_impl: argv[1] = JSON [[directory, signature, inputs], ...].
_SERVE = """
import json, sys
sys.modules["keras_bert_impl"] = None
import tensorflow as tf
import tensorflow_text  # registers the WordPiece ops the graph holds
results = []
for path, signature, inputs in json.loads(sys.argv[1]):
    outputs = tf.saved_model.load(path).signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    results.append({name: [v.decode() for v in value.numpy()] if value.dtype == tf.string else value.numpy().tolist()
                    for name, value in outputs.items()})
print(json.dumps(results))
"""


def _served(*calls):
    """Each `(directory, signature, inputs)` called as TF Serving calls it; one dict of NumPy outputs per call."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    calls = [(str(path), signature, inputs) for path, signature, inputs in calls]
    proc = subprocess.run([sys.executable, "-c", _SERVE, json.dumps(calls)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    return [{name: np.array(value) for name, value in result.items()} for result in results]


def _glue(real_data, task, columns, count):
    with open(real_data / "glue" / task / "dev.tsv", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : 1 + count]
    return [tuple(row[c] for c in columns) for row in rows]


@pytest.mark.slow
@needs_savedmodel_backend
def test_a_classifier_serves_raw_strings_and_pairs_as_predict_does_in_a_process_without_the_package(
        shared_data, tmp_path, capsys):
    sentences = [row[0] for row in _glue(shared_data, "SST-2", [0], 6)]
    pairs = _glue(shared_data, "MRPC", [3, 4], 3)
    classifier = BertClassifier.from_preset(PRESET, num_classes=2, label_names=["negative", "positive"],
                                            sequence_length=64)
    classifier.fit(sentences, [0, 1, 0, 1, 1, 0], batch_size=3, epochs=1, verbose=0)  # compiled: the export drops it
    path = tmp_path / "sst2_savedmodel"
    classifier.export(path)
    assert capsys.readouterr().out.strip() == (
        f"Saved BertClassifier as a SavedModel at {path}: serve(text), serving_default(text), "
        "serve_pairs(text_a, text_b), serve_features(token_ids, segment_ids, padding_mask)."
    )

    expected = classifier.predict(sentences, verbose=0)  # the longest sentences are cut to 64 tokens, as in serve
    expected_pairs = classifier.predict(([a for a, _ in pairs], [b for _, b in pairs]), verbose=0)
    features = classifier.preprocessor(sentences[:2])
    features = {name: keras.ops.convert_to_numpy(value).tolist() for name, value in features.items()}
    served, served_pairs, served_default, served_features = _served(
        (path, "serve", {"text": sentences}),
        (path, "serve_pairs", {"text_a": [a for a, _ in pairs], "text_b": [b for _, b in pairs]}),
        (path, "serving_default", {"text": sentences[:2]}),
        (path, "serve_features", features),
    )
    assert sorted(served) == ["label", "label_id", "logits", "probabilities"]
    np.testing.assert_allclose(served["logits"], expected, atol=2e-5)
    np.testing.assert_allclose(served["probabilities"], keras.ops.convert_to_numpy(keras.ops.softmax(expected)),
                               atol=2e-6)
    assert served["label_id"].tolist() == expected.argmax(-1).tolist()
    assert served["label"].tolist() == classifier.predict_labels(sentences)

    np.testing.assert_allclose(served_pairs["logits"], expected_pairs, atol=2e-5)
    assert served_default["label"].tolist() == served["label"][:2].tolist()
    np.testing.assert_allclose(served_features["logits"], expected[:2], atol=2e-5)


@pytest.mark.slow
@needs_savedmodel_backend
def test_regression_multi_label_and_embedder_outputs_are_named_for_what_they_are(tmp_path):
    texts = ["The cat sat on the mat.", "A dog barked at the postman all morning long."]
    backbone = BertBackbone.from_preset(PRESET)
    embedder = BertTextEmbedder.from_preset(PRESET)
    regression = BertClassifier(backbone, num_classes=1, preprocessor=embedder.preprocessor)
    multi_label = BertClassifier(backbone, num_classes=3, multi_label=True, activation="sigmoid",
                                 preprocessor=embedder.preprocessor, label_names=["a", "b", "c"])
    for name, model in [("embedder", embedder), ("regression", regression), ("multi_label", multi_label)]:
        model.export(tmp_path / name, verbose=False)
    embeddings, scores, probabilities = _served(*[(tmp_path / name, "serve", {"text": texts})
                                                  for name in ("embedder", "regression", "multi_label")])
    assert sorted(embeddings) == ["embeddings"]
    np.testing.assert_allclose(embeddings["embeddings"], embedder.encode(texts), atol=2e-5)
    assert sorted(scores) == ["score"]
    np.testing.assert_allclose(scores["score"], regression.predict(texts, verbose=0)[:, 0], atol=2e-5)
    assert sorted(probabilities) == ["probabilities"]  # no single label: the threshold is the caller's
    np.testing.assert_allclose(probabilities["probabilities"], multi_label.predict(texts, verbose=0), atol=2e-6)


@pytest.mark.slow
@needs_savedmodel_backend
def test_a_task_whose_text_runs_in_python_exports_the_features_endpoint_and_exports_are_written_whole(tmp_path):
    tagger = BertTokenClassifier(
        BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                     max_sequence_length=16),
        num_classes=3,
    )
    path = tmp_path / "tagger"
    assert tagger.export(path, verbose=False) is None
    features = {"token_ids": [[2, 7, 9, 3, 0]], "segment_ids": [[0] * 5], "padding_mask": [[1, 1, 1, 1, 0]]}
    (served,) = _served((path, "serving_default", features))
    assert sorted(served) == ["logits"]
    expected = tagger.predict({name: np.array(value, "int32") for name, value in features.items()}, verbose=0)
    np.testing.assert_allclose(served["logits"], expected, atol=1e-5)

    tagger.export(path, verbose=False)  # over an earlier export: replaced
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"Refusing to overwrite .*notes: it already holds \['todo.txt'\]"):
        tagger.export(tmp_path / "notes", verbose=False)
    assert sorted(os.listdir(tmp_path)) == ["notes", "tagger"]  # no temporary directory left behind


@pytest.mark.skipif(not TORCH, reason="the PyTorch backend's refusal")
def test_on_pytorch_a_savedmodel_export_is_one_line_naming_the_way_there(tmp_path):
    classifier = BertClassifier(BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
                                             intermediate_dim=16, max_sequence_length=16), num_classes=2)
    with pytest.raises(ValueError) as error:
        classifier.export(tmp_path / "exported")
    assert str(error.value) == (
        "Keras exports a SavedModel from the PyTorch backend only through torch_xla: export from the TensorFlow or "
        "JAX backend instead (save the model with model.save('model.keras'), load it there with "
        "keras.saving.load_model after `import keras_bert_impl`, then export), or use "
        "model.export(path, format='onnx') for the token-id model."
    )
    assert not (tmp_path / "exported").exists()


@pytest.mark.slow
def test_a_pretrainer_exports_its_token_id_model_on_jax_and_is_one_line_on_pytorch(tmp_path):
    # Before: on JAX Keras named the three feature lengths apart and stopped in the position embedding ("Symbolic
    # dimension comparison 'd' <= '512' is inconclusive"); on PyTorch "'dict' object has no attribute 'shape'".
    from keras_bert_impl import BertPretrainer

    backbone = BertBackbone(vocabulary_size=40, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    pretrainer = BertPretrainer(backbone, nsp=False)
    path = tmp_path / "mlm"
    if TORCH:
        with pytest.raises(ValueError) as error:
            pretrainer.export(path)
        assert str(error.value).startswith("Keras exports a SavedModel from the PyTorch backend only through torch_xla")
        return
    pretrainer.export(path, verbose=False)
    import tensorflow as tf

    served = tf.saved_model.load(str(path))
    for length, predictions in ((5, 2), (9, 3)):  # any length and number of masked positions
        rng = np.random.default_rng(length)
        inputs = {"token_ids": rng.integers(5, 40, (2, length)).astype("int32"),
                  "segment_ids": np.zeros((2, length), "int32"), "padding_mask": np.ones((2, length), "int32"),
                  "mask_positions": np.tile(np.arange(1, 1 + predictions, dtype="int32"), (2, 1))}
        expected = pretrainer.predict(inputs, verbose=0)["mlm"]
        outputs = served.serve({name: tf.constant(value) for name, value in inputs.items()})
        np.testing.assert_allclose(outputs["mlm"].numpy(), expected, atol=1e-5)
