"""Checkpoint converters: Hugging Face, original Google TF1, keras-hub, own presets; export.

Public entry points:

- `save_huggingface(backbone, directory, vocabulary=None, lowercase=None)`:
  export to a `transformers.BertModel` directory.
- `load_backbone(cls, preset, ...)`: what `BertBackbone.from_preset` calls.
- `resolve_preset(name_or_path)`, `detect_format(directory)`.
- `resolve_tokenizer_assets(name_or_path) -> {"vocabulary": path, "lowercase": bool}`.
- `LoadReport`; the errors, each one line naming the file and what to do:
  `CheckpointMismatchError` (missing, unexpected or mis-shaped tensors),
  `CheckpointFileError` (a truncated or corrupt weights file),
  `PresetUnavailableError` (every source of a preset name failed: each try
  with its reason, and the cache directory to fill by hand), `DownloadError`.

TensorFlow is imported only when an original Google checkpoint is read.
"""

from keras_bert_impl.checkpoints.download import CheckpointFileError, DownloadError
from keras_bert_impl.checkpoints.huggingface import save_huggingface
from keras_bert_impl.checkpoints.loading import (
    PresetUnavailableError,
    detect_format,
    load_backbone,
    preset_cache_root,
    resolve_preset,
    resolve_tokenizer_assets,
)
from keras_bert_impl.checkpoints.weight_mapping import CheckpointMismatchError, LoadReport

__all__ = [
    "CheckpointFileError",
    "CheckpointMismatchError",
    "DownloadError",
    "LoadReport",
    "PresetUnavailableError",
    "detect_format",
    "load_backbone",
    "preset_cache_root",
    "resolve_preset",
    "resolve_tokenizer_assets",
    "save_huggingface",
]
