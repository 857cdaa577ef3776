"""This package's own preset directory: written by `BertBackbone.save_to_preset`, read by `from_preset`.

Layout:

```
config.json            {"module", "class_name", "registered_name": "keras_bert_impl>BertBackbone",
                        "config": <architecture config>, "format_version": 1}
model.weights.h5       Keras weights of the backbone
vocab.txt              the WordPiece vocabulary (when given)
tokenizer_config.json  {"class_name": "BertTokenizer", "vocabulary": "vocab.txt", "lowercase": bool}
task.json              a task model's class, head configuration and preprocessor settings (Task.save_to_preset)
task.weights.h5        the task model's weights, head included (Task.save_to_preset)
```

The directory is assembled in a temporary directory beside the target and
renamed into place, so a crash never leaves a half-written preset.
"""

import json
import os

from keras_bert_impl.checkpoints.atomic_files import atomic_directory, atomic_write_json
from keras_bert_impl.checkpoints.vocabulary_file import vocabulary_is_lowercase, write_vocabulary_file

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
VOCABULARY_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
FORMAT_VERSION = 1
PRESET_FILES = (CONFIG_FILE, WEIGHTS_FILE, VOCABULARY_FILE, TOKENIZER_CONFIG_FILE, TASK_CONFIG_FILE, TASK_WEIGHTS_FILE)


def save_backbone_preset(backbone, preset_dir, vocabulary=None, lowercase=None, config_overrides=None,
                         write_task_files=None):
    """Writes `backbone` (and optionally its vocabulary) as a preset directory, atomically.

    Args:
        backbone: a `BertBackbone`.
        preset_dir: destination; created, or replaced when it only holds
            files of an earlier preset save.
        vocabulary: path to a vocab.txt or a list of tokens, optional.
        lowercase: tokenizer casing; inferred from the vocabulary when None.
        config_overrides: dict of training-time settings to record instead of
            the backbone's own (only `dropout`: a run that pretrained without
            dropout still exports the architecture's dropout for fine-tuning).
        write_task_files: None, or `f(directory)` that writes a task model's
            `task.json` and `task.weights.h5` into the directory being
            assembled (`Task.write_task_files`), so that the whole preset,
            head included, appears at once; saving again over an earlier
            preset save replaces it.

    Example:
    >>> from keras_bert_impl import BertBackbone
    >>> import tempfile, os
    >>> backbone = BertBackbone(vocabulary_size=20, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
    >>> preset = os.path.join(tempfile.mkdtemp(), "preset")
    >>> backbone.save_to_preset(preset)
    >>> BertBackbone.from_preset(preset).hidden_dim
    8
    """
    architecture = backbone.architecture_config()
    unknown = set(config_overrides or ()) - {"dropout"}
    if unknown:
        raise ValueError(f"config_overrides may only set 'dropout' (a training-time setting), got {sorted(unknown)}")
    architecture.update(config_overrides or {})
    config = {
        "module": type(backbone).__module__,
        "class_name": type(backbone).__name__,
        "registered_name": "keras_bert_impl>BertBackbone",
        "config": architecture,
        "format_version": FORMAT_VERSION,
    }
    with atomic_directory(preset_dir, replaceable_files=PRESET_FILES) as temp_dir:
        atomic_write_json(os.path.join(temp_dir, CONFIG_FILE), config)
        backbone.save_weights(os.path.join(temp_dir, WEIGHTS_FILE))
        if write_task_files is not None:
            write_task_files(temp_dir)
        if vocabulary is not None:
            vocab_path = os.path.join(temp_dir, VOCABULARY_FILE)
            write_vocabulary_file(vocabulary, vocab_path)
            if lowercase is None:
                lowercase = vocabulary_is_lowercase(vocab_path)
            atomic_write_json(
                os.path.join(temp_dir, TOKENIZER_CONFIG_FILE),
                {"class_name": "BertTokenizer", "vocabulary": VOCABULARY_FILE, "lowercase": bool(lowercase)},
            )


def _read_config(preset_dir):
    path = os.path.join(preset_dir, CONFIG_FILE)
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    version = config.get("format_version", FORMAT_VERSION)
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{path} has format_version={version}; this keras_bert_impl reads up to {FORMAT_VERSION}. Upgrade the package."
        )
    if not isinstance(config.get("config"), dict):
        raise ValueError(f"{path} has no 'config' dict with the backbone architecture.")
    return config["config"]


def read_backbone_config(preset_dir):
    """BertBackbone arguments from an own preset's `config.json`."""
    return dict(_read_config(preset_dir))


def load_weights(backbone, preset_dir):
    """Loads `model.weights.h5` of an own preset into `backbone`. Returns None (Keras checks the file)."""
    path = os.path.join(preset_dir, WEIGHTS_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Preset {preset_dir} has no {WEIGHTS_FILE}.")
    from keras_bert_impl.checkpoints.download import check_h5_file

    check_h5_file(path)
    backbone.load_weights(path)
    return None


def read_tokenizer_assets(preset_dir):
    """`{"vocabulary": path, "lowercase": bool}` of an own preset saved with a vocabulary."""
    path = os.path.join(preset_dir, TOKENIZER_CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"Preset {preset_dir} was saved without a vocabulary (no {TOKENIZER_CONFIG_FILE}); "
            "pass vocabulary= to save_to_preset."
        )
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    return {
        "vocabulary": os.path.join(preset_dir, config.get("vocabulary", VOCABULARY_FILE)),
        "lowercase": bool(config["lowercase"]),
    }
