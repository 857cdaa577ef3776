"""keras_bert_impl: BERT for Keras 3 (TensorFlow, JAX, PyTorch backends).

Modelling (`layers`, `models`) imports no TensorFlow. Text processing
(tokenizer and preprocessor layers), tf.data pipelines and tf.distribute
strategies live in `text`, `data`, `tasks` and `training` and need TensorFlow
and tensorflow-text.

Importing the package registers every serialisable class with Keras, so
`keras.saving.load_model("model.keras")` works after `import keras_bert_impl`.
The preprocessor layers are registered when TensorFlow is installed; on a
JAX- or PyTorch-only host the models still import and run on token ids.

Example:
>>> import keras_bert_impl
>>> sorted(keras_bert_impl.BertBackbone.presets)[:1]
['all_minilm_l6_v2_en']
"""

import importlib
import importlib.util

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import BertClassifier
from keras_bert_impl.models.pretrainer import BertPretrainer
from keras_bert_impl.models.span_extractor import BertSpanExtractor, SpanLoss
from keras_bert_impl.models.text_embedder import BertTextEmbedder
from keras_bert_impl.models.token_classifier import BertTokenClassifier, MaskedTokenAccuracy
from keras_bert_impl.version import __version__

# Preprocessing layers (TensorFlow): imported now, so that Keras can deserialise them, when TensorFlow is there.
_PREPROCESSING = {
    "BertTokenizer": "keras_bert_impl.text.tokenizer",
    "BertClassifierPreprocessor": "keras_bert_impl.text.classifier_preprocessor",
    "BertTokenClassifierPreprocessor": "keras_bert_impl.text.token_classifier_preprocessor",
    "BertSpanExtractorPreprocessor": "keras_bert_impl.text.span_extractor_preprocessor",
}
_HAS_TENSORFLOW_TEXT = (
    importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("tensorflow_text") is not None
)
if _HAS_TENSORFLOW_TEXT:
    for _name, _module in _PREPROCESSING.items():
        globals()[_name] = getattr(importlib.import_module(_module), _name)

# Sub-packages: imported on first access.
_LAZY_MODULES = ("data", "text", "tasks", "training", "metrics", "checkpoints", "layers", "models", "presets", "batching")


def __getattr__(name):
    if name in _LAZY_MODULES:
        module = importlib.import_module(f"keras_bert_impl.{name}")
        globals()[name] = module
        return module
    if name in _PREPROCESSING:
        raise ImportError(
            f"keras_bert_impl.{name} needs TensorFlow and tensorflow-text: pip install tensorflow tensorflow-text"
        )
    raise AttributeError(f"module 'keras_bert_impl' has no attribute {name!r}")


__all__ = [
    "BertBackbone",
    "BertClassifier",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTextEmbedder",
    "BertTokenClassifier",
    "MaskedTokenAccuracy",
    "SpanLoss",
    "__version__",
    *_PREPROCESSING,
    *_LAZY_MODULES,
]
