"""A sentence-transformers checkpoint's own embedding settings: what `BertTextEmbedder.from_preset` defaults to.

A sentence-transformers model directory (all-MiniLM-L6-v2, ...) says, beside its transformers files, how it
embeds: `sentence_bert_config.json` the length texts are cut to (`max_seq_length`: 256 for all-MiniLM-L6-v2, where
the preprocessors' own default is 128), `1_Pooling/config.json` the pooling (mean or [CLS] token) and
`modules.json` whether the vector is normalised. Read, they make `encode` give sentence-transformers' vectors on
texts of any length, not only on the short ones. A pooling that `SequencePooling` does not have (max, mean over
the square root of the length) is one line, unless the caller chooses a pooling itself.

Example:
>>> import json, os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "sentence_bert_config.json"), "w") as f:
...     json.dump({"max_seq_length": 256, "do_lower_case": False}, f)
>>> embedding_settings(folder)
{'sequence_length': 256}
"""

import json
import os

SETTINGS_FILE = "sentence_bert_config.json"
POOLING_FILE = os.path.join("1_Pooling", "config.json")
MODULES_FILE = "modules.json"
# sentence-transformers' pooling flags -> `SequencePooling`'s modes (the others have none).
_POOLINGS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}


def _read(directory, name):
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        return path, None
    try:
        with open(path, encoding="utf-8") as f:
            return path, json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable sentence-transformers config ({error}).") from None


def embedding_settings(directory, choose_pooling=True):
    """The `BertTextEmbedder.from_preset` arguments a sentence-transformers directory implies: `sequence_length`
    (its `max_seq_length`), `pooling` ("mean" or "cls") and `normalize` (a `Normalize` module listed), each only
    where its file says it; `{}` for any other directory.

    Args:
        directory: a local checkpoint directory.
        choose_pooling: False when the caller passes `pooling` itself: a pooling of the checkpoint's that
            `SequencePooling` lacks is then not refused.

    Raises:
        ValueError: a file that is not JSON, or (with `choose_pooling`) a pooling other than mean or [CLS].
    """
    directory = os.fspath(directory)
    settings = {}
    _, config = _read(directory, SETTINGS_FILE)
    if isinstance(config, dict) and isinstance(config.get("max_seq_length"), int):
        settings["sequence_length"] = config["max_seq_length"]
    path, pooling = _read(directory, POOLING_FILE)
    if isinstance(pooling, dict):
        modes = [flag for flag, on in pooling.items() if flag.startswith("pooling_mode_") and on]
        if modes == [flag for flag in modes if flag in _POOLINGS] and len(modes) == 1:
            settings["pooling"] = _POOLINGS[modes[0]]
        elif choose_pooling and modes:
            raise ValueError(f"{path}: the checkpoint pools by {', '.join(m[len('pooling_mode_'):] for m in modes)}, "
                             "which BertTextEmbedder does not (it pools by mean or by the [CLS] token): pass "
                             "pooling='mean' or pooling='cls' to embed with one of them anyway.")
    _, modules = _read(directory, MODULES_FILE)
    if isinstance(modules, list):
        settings["normalize"] = any(str(m.get("type", "")).endswith(".Normalize") for m in modules
                                    if isinstance(m, dict))
    return settings


def preset_embedding_settings(preset, choose_pooling=True):
    """`embedding_settings` of a preset name or directory (resolved as the backbone's checkpoint is); `{}` for a
    checkpoint that is not a local Hugging Face directory."""
    from keras_bert_impl.checkpoints.loading import HUGGINGFACE, resolve_preset

    if not isinstance(preset, (str, os.PathLike)):
        return {}
    resolved = resolve_preset(preset)
    if resolved.format != HUGGINGFACE or not os.path.isdir(resolved.location):
        return {}
    return embedding_settings(resolved.location, choose_pooling)
