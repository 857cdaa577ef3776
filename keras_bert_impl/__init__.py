"""keras_bert_impl: BERT for Keras 3 (TensorFlow, JAX, PyTorch backends).

Modelling (`layers`, `models`) imports no TensorFlow. Text processing
(tokenizer and preprocessor layers), tf.data pipelines and tf.distribute
strategies live in `text`, `data`, `tasks` and `training`, need TensorFlow
and tensorflow-text, and are imported on first use.

Importing the package registers every serialisable class with Keras, so
`keras.saving.load_model("model.keras")` works after `import keras_bert_impl`.

Example:
>>> import keras_bert_impl
>>> sorted(keras_bert_impl.BertBackbone.presets)[:1]
['all_minilm_l6_v2_en']
"""

import importlib

import keras

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import BertClassifier, MultiLabelF1Score
from keras_bert_impl.models.entity_f1 import EntityF1
from keras_bert_impl.models.glue_scores import (
    ClassAUC,
    ClassF1Score,
    ClassPrecision,
    ClassRecall,
    MatthewsCorrelation,
    PearsonCorrelation,
)
from keras_bert_impl.models.pretrainer import BertMaskedLM, BertPretrainer
from keras_bert_impl.models.span_extractor import BertSpanExtractor, SpanLoss
from keras_bert_impl.models.text_embedder import BertTextEmbedder
from keras_bert_impl.models.token_classifier import BertTokenClassifier, MaskedTokenAccuracy
from keras_bert_impl.models.trace_warnings import quiet_keras_step_retracing as _quiet_keras_step_retracing
from keras_bert_impl.version import __version__

# Several models in one process read to TensorFlow as one step function retraced (models/trace_warnings.py).
_quiet_keras_step_retracing()

# Preprocessing layers (TensorFlow): imported on first access. Until then Keras knows each by a stand-in
# whose `from_config` imports the real class, so `keras.saving.load_model` finds them after
# `import keras_bert_impl` while the import itself stays free of TensorFlow (JAX- and PyTorch-only hosts).
_PREPROCESSING = {
    "BertTokenizer": "keras_bert_impl.text.tokenizer",
    "BertClassifierPreprocessor": "keras_bert_impl.text.classifier_preprocessor",
    "ClassifierPreprocessor": "keras_bert_impl.text.classifier_preprocessor",
    "BertTokenClassifierPreprocessor": "keras_bert_impl.text.token_classifier_preprocessor",
    "BertSpanExtractorPreprocessor": "keras_bert_impl.text.span_extractor_preprocessor",
    "BertPretrainerPreprocessor": "keras_bert_impl.text.pretrainer_preprocessor",
}


def _register_on_first_use(name, module):
    def from_config(cls, config):
        return getattr(importlib.import_module(module), name).from_config(config)

    key = f"keras_bert_impl>{name}"
    custom_objects = keras.saving.get_custom_objects()
    if key not in custom_objects:  # the real class, once imported, registers itself under the same key
        custom_objects[key] = type(name, (), {"from_config": classmethod(from_config), "__module__": module})


# The learning-rate schedule (training/, Keras only): the same stand-in, so a model saved with
# `save(path, include_optimizer=True)` loads with its optimizer after `import keras_bert_impl`. (The optimizers
# themselves, in optimizers/, are imported with the models.)
_TRAINING_OBJECTS = {
    "WarmupLinearDecay": "keras_bert_impl.training.schedule",
}

# keras-hub's names, so that code written for `keras_hub.models` runs with the import changed (the same classes:
# a model is saved under our name). `BertMaskedLM` builds a `BertPretrainer(nsp=False)`.
BertTextClassifier = BertClassifier
_KERAS_HUB_PREPROCESSING = {
    "BertTextClassifierPreprocessor": "BertClassifierPreprocessor",
    "BertMaskedLMPreprocessor": "BertPretrainerPreprocessor",
}

for _name, _module in {**_PREPROCESSING, **_TRAINING_OBJECTS}.items():
    _register_on_first_use(_name, _module)

# Sub-packages: imported on first access.
_LAZY_MODULES = ("data", "text", "tasks", "training", "metrics", "checkpoints", "layers", "models", "optimizers",
                 "presets", "batching")


def __getattr__(name):
    if name in _LAZY_MODULES:
        module = importlib.import_module(f"keras_bert_impl.{name}")
        globals()[name] = module
        return module
    if name in _PREPROCESSING or name in _KERAS_HUB_PREPROCESSING:
        ours = _KERAS_HUB_PREPROCESSING.get(name, name)
        value = getattr(importlib.import_module(_PREPROCESSING[ours]), ours)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_impl' has no attribute {name!r}")


__all__ = [
    "BertBackbone",
    "BertClassifier",
    "BertMaskedLM",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTextClassifier",
    "BertTextEmbedder",
    "BertTokenClassifier",
    "ClassAUC",
    "ClassF1Score",
    "ClassPrecision",
    "ClassRecall",
    "EntityF1",
    "MaskedTokenAccuracy",
    "MatthewsCorrelation",
    "MultiLabelF1Score",
    "PearsonCorrelation",
    "SpanLoss",
    "__version__",
    *(name for name in _PREPROCESSING if name != "ClassifierPreprocessor"),
    *_KERAS_HUB_PREPROCESSING,
    *_LAZY_MODULES,
]
