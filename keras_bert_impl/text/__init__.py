"""Text processing (TensorFlow + tensorflow-text): WordPiece tokenizer, vocabulary building, segment packing.

Names are imported on first access: `keras_bert_impl.text.BertTokenizer`,
`keras_bert_impl.text.SegmentPacker`, `keras_bert_impl.text.build_vocabulary`.
"""

import importlib

_LAZY = {
    "BertTokenizer": "keras_bert_impl.text.tokenizer",
    "SegmentPacker": "keras_bert_impl.text.packer",
    "build_vocabulary": "keras_bert_impl.text.vocabulary",
    "bert_normalize": "keras_bert_impl.text.normalization",
    "TruncationWarning": "keras_bert_impl.text.classifier_preprocessor",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_impl.text' has no attribute {name!r}")


__all__ = list(_LAZY)
