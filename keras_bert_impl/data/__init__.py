"""Task-independent pretraining input (TensorFlow-only): corpus preparation, documents, sentence pairs, masking.

The fine-tuning tasks (GLUE, CoNLL-2003, SQuAD) live in `keras_bert_impl.tasks`.

Submodules are imported on first attribute access.
"""

import importlib

_SUBMODULES = ("corpus", "document_records", "masking", "pretraining", "sentence_pairs", "text_documents")
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
