"""keras_bert_impl: BERT for Keras 3 (TensorFlow, JAX, PyTorch backends).

Modelling (`layers`, `models`) imports no TensorFlow. Text processing, tf.data
pipelines and tf.distribute strategies live in `text`, `data` and `training`
and are imported lazily, so `import keras_bert_impl` works on a JAX- or
PyTorch-only host.
"""

import importlib

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.version import __version__

# name -> module that defines it; imported on first access.
_LAZY = {
    "BertPretrainer": "keras_bert_impl.models.pretrainer",
    "BertClassifier": "keras_bert_impl.models.classifier",
    "BertSpanExtractor": "keras_bert_impl.models.span_extractor",
    "BertTokenClassifier": "keras_bert_impl.models.token_classifier",
    "BertTokenizer": "keras_bert_impl.text.tokenizer",
    "data": "keras_bert_impl.data",
    "text": "keras_bert_impl.text",
    "training": "keras_bert_impl.training",
    "metrics": "keras_bert_impl.metrics",
    "checkpoints": "keras_bert_impl.checkpoints",
    "layers": "keras_bert_impl.layers",
    "models": "keras_bert_impl.models",
    "presets": "keras_bert_impl.presets",
}


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if _LAZY[name].endswith("." + name) else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_impl' has no attribute {name!r}")


__all__ = ["BertBackbone", "__version__", *_LAZY]
