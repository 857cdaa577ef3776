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


# What `write_embedding_settings` writes beside the transformers files (the folder `2_Normalize` is only named: the
# module has no settings, as in the checkpoints sentence-transformers writes).
WRITTEN_FILES = (SETTINGS_FILE, os.path.dirname(POOLING_FILE), MODULES_FILE)


def write_embedding_settings(directory, sequence_length, pooling, normalize, hidden_dim, write_json):
    """Writes a sentence-transformers model's own files into `directory` (beside a transformers `BertModel`):
    `sentence_bert_config.json` (`max_seq_length`), `1_Pooling/config.json` and `modules.json` (with a
    `Normalize` module when `normalize`), so that `embedding_settings` (and sentence-transformers) read back the
    embedder that wrote them: the same length, pooling and normalisation. `write_json(path, obj)` writes a file.

    Example:
    >>> import json, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write = lambda path, obj: open(path, "w").write(json.dumps(obj))
    >>> write_embedding_settings(folder, 256, "mean", True, 384, write)
    >>> embedding_settings(folder) == {"sequence_length": 256, "pooling": "mean", "normalize": True}
    True
    """
    directory = os.fspath(directory)
    write_json(os.path.join(directory, SETTINGS_FILE), {"max_seq_length": int(sequence_length), "do_lower_case": False})
    os.makedirs(os.path.join(directory, os.path.dirname(POOLING_FILE)), exist_ok=True)
    flags = {flag: mode == pooling for flag, mode in _POOLINGS.items()}
    write_json(os.path.join(directory, POOLING_FILE), {
        "word_embedding_dimension": int(hidden_dim), "pooling_mode_cls_token": flags["pooling_mode_cls_token"],
        "pooling_mode_mean_tokens": flags["pooling_mode_mean_tokens"], "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    modules = [("", "Transformer"), (os.path.dirname(POOLING_FILE), "Pooling")] + (
        [("2_Normalize", "Normalize")] if normalize else [])
    write_json(os.path.join(directory, MODULES_FILE), [
        {"idx": index, "name": str(index), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for index, (path, kind) in enumerate(modules)])
