"""Task metrics: GLUE (accuracy, F1, MCC, Pearson/Spearman), SQuAD EM/F1, CoNLL entity F1, multi-label F1.

Pure NumPy/Python; submodules `glue`, `squad`, `conll`, `multi_label` are imported on first access.
"""

import importlib

_SUBMODULES = ("glue", "squad", "conll", "multi_label")


def __getattr__(name):
    if name in _SUBMODULES:
        module = importlib.import_module(f"keras_bert_impl.metrics.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'keras_bert_impl.metrics' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBMODULES})
