"""A task as a TensorFlow SavedModel that takes raw text: the tokenizer and packer inside the graph.

`Task.export(path)` calls `export_saved_model`. The SavedModel serves with
TF Serving, `tf.saved_model.load` or anything else that reads SavedModels,
with no Python tokenizer on the client. Its endpoints:

- `serve` (also `serving_default`): raw text in, each `[batch]` strings
  (`text`; a classifier also has `serve_pairs`, `text_a` and `text_b`); the
  task's named outputs out (`Task.serving_outputs`: a classifier's
  `logits`, `probabilities`, `label_id` and, with `label_names`, `label`).
  A tagger's `serve(text)` runs `predict_entities` in the graph (word split,
  rows, first-piece tags, conlleval's chunking: `token_classifier_serving.py`)
  and gives its words, tags and entities with character offsets; a span
  extractor's `serve(question, context)` runs `answer` in the graph, sliding
  windows included (`span_extractor_serving.py`), and gives each question's
  best answer. This module writes the SavedModel and picks the graph
  (`Task.serving_text_graph`).
- `serve_features`: the packed `token_ids`, `segment_ids` and `padding_mask`
  (int32 `[batch, length]`) in, the model's outputs out: what
  `keras.Model.export` gives, for a client that tokenizes itself (a task
  without a preprocessor, or a tagger without `label_names`, exports this
  endpoint only).

Inside `serve`, the preprocessor's own TensorFlow ops tokenize and pack each
batch, padded to its longest row, so the SavedModel gives the same numbers as
`task.predict` on the same strings. On the JAX backend the model part is
converted with `jax2tf` (batch size and length symbolic, lowered for CPU,
CUDA and TPU, no gradients); on PyTorch, Keras exports SavedModels only
through torch_xla, so `export` says to export from the TensorFlow or JAX
backend (a `.keras` file loads on every backend). The directory is written
whole or not at all (`atomic_directory`).

Example:
>>> import tempfile, os, numpy as np, tensorflow as tf
>>> from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor, BertTokenizer
>>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "great", "dull", "film"]
>>> preprocessor = BertClassifierPreprocessor(BertTokenizer(vocabulary), sequence_length=8)
>>> backbone = BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
...                         max_sequence_length=8)
>>> classifier = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor, label_names=["neg", "pos"])
>>> path = os.path.join(tempfile.mkdtemp(), "classifier")
>>> classifier.export(path, verbose=False)
>>> served = tf.saved_model.load(path)
>>> outputs = served.serve(tf.constant(["a great film", "dull"]))
>>> sorted(outputs)
['label', 'label_id', 'logits', 'probabilities']
>>> bool(np.allclose(outputs["logits"], classifier.predict(["a great film", "dull"], verbose=0), atol=1e-5))
True
"""

import inspect
import os

import keras
import tensorflow as tf

from keras_bert_impl.checkpoints.atomic_files import atomic_directory
from keras_bert_impl.text.span_extractor_serving import span_endpoint
from keras_bert_impl.text.token_classifier_serving import tagger_endpoint

FEATURE_NAMES = ("token_ids", "segment_ids", "padding_mask")
# What `SavedModel` writing puts in its directory: a save over an earlier export replaces these, and nothing else.
SAVED_MODEL_FILES = ("saved_model.pb", "variables", "assets", "fingerprint.pb")
# The platforms a JAX export is lowered for: the SavedModel then serves on any of them, whatever the exporting host.
JAX_PLATFORMS = ("cpu", "cuda", "tpu")


def export_saved_model(task, filepath, verbose=True):
    """Writes `task` as a SavedModel at `filepath` whose `serve` endpoint takes raw strings (see the module).

    Args:
        task: a `Task` with a preprocessor (without one, or a task whose text runs through Python windows, only
            `serve_features` is written, and it is also `serving_default`).
        filepath: the SavedModel directory (new, empty, or an earlier export, which it replaces).
        verbose: print one line naming the directory and its endpoints.

    Returns:
        The endpoints written: name -> its input names.
    """
    check_backend_writes_saved_models()
    archive = keras.export.ExportArchive()
    archive.track(task)
    serve_features = _add_features_endpoint(archive, task)
    endpoints = {}
    text_inputs = task.serving_text_inputs if task.preprocessor is not None else {}
    for name, input_names in text_inputs.items():
        function = _text_endpoint(task, serve_features, input_names)
        archive.add_endpoint(name, function)
        endpoints[name] = input_names
        if "serving_default" not in endpoints:
            archive.add_endpoint("serving_default", function)
            endpoints["serving_default"] = input_names
    endpoints["serve_features"] = FEATURE_NAMES
    with atomic_directory(filepath, SAVED_MODEL_FILES) as directory:
        archive.write_out(directory, verbose=False)
    if verbose:
        listed = ", ".join(f"{name}({', '.join(inputs)})" for name, inputs in endpoints.items())
        print(f"Saved {type(task).__name__} as a SavedModel at {os.fspath(filepath)}: {listed}.")
    return endpoints


def check_backend_writes_saved_models():
    """Refuses, in one line, a SavedModel export from the PyTorch backend (Keras writes one there only through
    torch_xla, and stops otherwise inside its tracing: "'dict' object has no attribute 'shape'")."""
    if keras.backend.backend() == "torch":
        raise ValueError(
            "Keras exports a SavedModel from the PyTorch backend only through torch_xla: export from the TensorFlow "
            "or JAX backend instead (save the model with model.save('model.keras'), load it there with "
            "keras.saving.load_model after `import keras_bert_impl`, then export), or use "
            "model.export(path, format='onnx') for the token-id model."
        )


def jax2tf_shapes(model):
    """`jax2tf_kwargs` for Keras's own SavedModel export of `model` (a task whose inputs are more than the packed
    features, e.g. the pretrainer's `mask_positions`) on JAX: the packed features share one symbolic batch size
    and length, bounded by the position table (Keras names every unknown length apart, and the position embedding
    then stops on "Symbolic dimension comparison 'd' <= '512' is inconclusive"); other inputs keep a length of
    their own."""
    names = iter(f"length_{index}" for index in range(len(model.input)))
    shapes = {name: "(batch, length)" if name in FEATURE_NAMES else f"(batch, {next(names)})" for name in model.input}
    return {
        "polymorphic_shapes": [shapes],
        "polymorphic_constraints": [f"length <= {model.backbone.max_sequence_length}"],
        "native_serialization_platforms": JAX_PLATFORMS,
        "with_gradient": False,
    }


def _add_features_endpoint(archive, task):
    """`serve_features(token_ids, segment_ids, padding_mask)` -> the task's named outputs, as a `tf.function` the
    text endpoints call."""

    def serve_features(token_ids, segment_ids, padding_mask):
        features = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return task.serving_outputs(task(features, training=False))

    options = {}
    if keras.backend.backend() == "jax":
        # One symbolic batch size and length for the three inputs; the position table bounds the length.
        options["jax2tf_kwargs"] = {
            "polymorphic_shapes": ["(batch, length)"] * len(FEATURE_NAMES),
            "polymorphic_constraints": [f"length <= {task.backbone.max_sequence_length}"],
            "native_serialization_platforms": JAX_PLATFORMS,
            "with_gradient": False,
        }
    signature = [tf.TensorSpec([None, None], tf.int32, name=name) for name in FEATURE_NAMES]
    return archive.add_endpoint("serve_features", serve_features, input_signature=signature, **options)


def _text_endpoint(task, serve_features, input_names):
    """A `tf.function` of `[batch]` string inputs: tokenize and pack (padded to the batch's longest row), then
    `serve_features`; a classifier with `label_names` also gives each predicted `label`. A tagger's and a span
    extractor's text runs through the graph of `tagger_endpoint` / `span_endpoint` (`Task.serving_text_graph`)."""
    preprocessor = task.preprocessor
    label_names = getattr(task, "label_names", None)
    graphs = {"entities": tagger_endpoint, "answer": span_endpoint}

    def serve(*texts):
        packed = preprocessor.unpadded(texts[0] if len(texts) == 1 else tuple(texts))
        features = {name: tf.cast(packed[name].to_tensor(), tf.int32) for name in FEATURE_NAMES}
        outputs = dict(serve_features(**features))
        if label_names and "label_id" in outputs:
            outputs["label"] = tf.gather(tf.constant(label_names), outputs["label_id"])
        return outputs

    graph = getattr(task, "serving_text_graph", None)
    if graph is not None:
        serve = graphs[graph](task, serve_features)
    # Callable by the inputs' names, as the signature is (`served.serve(text=...)`).
    serve.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in input_names])
    function = tf.function(serve, input_signature=[tf.TensorSpec([None], tf.string, name=name) for name in input_names],
                           autograph=False)
    function.get_concrete_function()  # traced once: the archive takes it as it is
    return function
