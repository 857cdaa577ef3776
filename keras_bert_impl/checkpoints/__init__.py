"""Checkpoint converters: Hugging Face, original Google TF1, keras-hub, own presets; export.

Public entry points:

- `save_huggingface(backbone, directory, vocabulary=None, lowercase=None)`:
  export to a `transformers.BertModel` directory.
- `load_backbone(cls, preset, ...)`: what `BertBackbone.from_preset` calls.
- `resolve_preset(name_or_path)`, `detect_format(directory)`.
- `resolve_tokenizer_assets(name_or_path) -> {"vocabulary": path, "lowercase": bool}`.
- `LoadReport`, `CheckpointMismatchError`.

TensorFlow is imported only when an original Google checkpoint is read.
"""

from keras_bert_impl.checkpoints.huggingface import save_huggingface
from keras_bert_impl.checkpoints.loading import (
    detect_format,
    load_backbone,
    preset_cache_root,
    resolve_preset,
    resolve_tokenizer_assets,
)
from keras_bert_impl.checkpoints.weight_mapping import CheckpointMismatchError, LoadReport

__all__ = [
    "CheckpointMismatchError",
    "LoadReport",
    "detect_format",
    "load_backbone",
    "preset_cache_root",
    "resolve_preset",
    "resolve_tokenizer_assets",
    "save_huggingface",
]
