"""Task-independent pretraining input: corpus preparation, documents, sentence pairs (masking: `text.masking`).

tf.data and tensorflow-text build the recipes' pipeline (`pretraining`); the `array_*` modules are its NumPy
twins (`array_pretraining.ArrayPretrainingBatches`), for hosts without TensorFlow.

The fine-tuning tasks (GLUE, CoNLL-2003, SQuAD) live in `keras_bert_impl.tasks`.

Submodules are imported on first attribute access.
"""

import importlib

_SUBMODULES = ("array_masking", "array_pretraining", "array_sentence_pairs", "corpus", "document_records", "pipeline_arguments", "pretraining", "sentence_pairs", "text_documents")
_NAMES = {"pretraining_dataset": "pretraining"}


def __getattr__(name):
    if name in _SUBMODULES:
        module = importlib.import_module(f"keras_bert_impl.data.{name}")
        globals()[name] = module
        return module
    if name in _NAMES:
        value = getattr(importlib.import_module(f"keras_bert_impl.data.{_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_impl.data' has no attribute {name!r}")
