"""Hugging Face Hub model ids as presets: `hf://owner/name`, `owner/name`, and BERT's unprefixed names.

`from_preset` takes what `transformers`' `from_pretrained` and keras-hub's
`from_preset` take for a model on the Hub:

- `"hf://owner/name"` (keras-hub's form), `"hf://owner/name@revision"`
  (a branch, tag or commit);
- `"owner/name"` when no local directory has that path (`from_pretrained`'s
  form, e.g. `"dslim/bert-base-NER"`, whose trained tagging head and labels
  `BertTokenClassifier.from_preset` then loads);
- the original unprefixed names (`"bert-base-uncased"`, ...), which the Hub
  keeps under `google-bert/`.

The repository's `config.json` (a BERT one: `model_type` "bert"),
`vocab.txt` and `model.safetensors` (or, where it has none, as many older
models, `pytorch_model.bin`, read without running its pickle's code) are
downloaded (with `tokenizer_config.json` and `special_tokens_map.json` when it
has them) into `<preset cache>/hf--owner--name[--revision]`, which then loads
as any Hugging Face directory; the cache entry appears only once every file is
complete. `HF_ENDPOINT` names another Hub (a mirror), `HF_TOKEN` is sent
for private and gated repositories, and `HF_HUB_OFFLINE=1` (or
`TRANSFORMERS_OFFLINE=1`) loads from the cache only, as `huggingface_hub` does. A repository
that is not BERT is refused before its weights are downloaded.

Example:
>>> hub_model_id("hf://dslim/bert-base-NER"), hub_model_id("bert-base-uncased"), hub_model_id("bert_base_en")
(('dslim/bert-base-NER', 'main'), ('google-bert/bert-base-uncased', 'main'), None)
"""

import json
import os
import re
import shutil
import tempfile

from keras_bert_impl.checkpoints import download

# The unprefixed names of the original BERT checkpoints on the Hub, and where the Hub keeps them now.
LEGACY_NAMES = {
    name: f"google-bert/{name}"
    for name in (
        "bert-base-uncased", "bert-base-cased", "bert-large-uncased", "bert-large-cased",
        "bert-base-multilingual-uncased", "bert-base-multilingual-cased", "bert-base-chinese",
        "bert-large-uncased-whole-word-masking", "bert-large-cased-whole-word-masking",
        "bert-large-uncased-whole-word-masking-finetuned-squad", "bert-large-cased-whole-word-masking-finetuned-squad",
    )
}
REQUIRED_FILES = ("config.json", "vocab.txt")
# The first the repository has: a file of weights, or the index of its shards (then the shards it names too).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
OPTIONAL_FILES = ("tokenizer_config.json", "special_tokens_map.json",
                  # a sentence-transformers model's settings (`sentence_transformers.py`: BertTextEmbedder's defaults)
                  "sentence_bert_config.json", "modules.json", "1_Pooling/config.json")
# The variables that keep huggingface_hub and transformers from the network; from_preset honours them too.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def hub_model_id(preset):
    """`(repo id, revision)` when `preset` names a Hub model (the forms above), else None.

    An `"owner/name"` that is also a local path is the path, not a Hub id; `"hf://"` with anything but
    `owner/name[@revision]` after it is a one-line `ValueError`.
    """
    preset = os.fspath(preset)
    if preset.startswith("hf://"):
        repo, _, revision = preset[len("hf://"):].partition("@")
        if not _REPO_ID.fullmatch(repo) or "@" in revision:
            raise ValueError(f"Preset {preset!r}: a Hugging Face Hub id is hf://owner/name or "
                             "hf://owner/name@revision (e.g. hf://google-bert/bert-base-uncased).")
        return repo, revision or "main"
    if preset in LEGACY_NAMES:
        return LEGACY_NAMES[preset], "main"
    repo, _, revision = preset.partition("@")
    if _REPO_ID.fullmatch(repo) and "@" not in revision and not os.path.exists(preset):
        return repo, revision or "main"
    return None


def hub_cache_dir(repo, revision, cache_root):
    """The cache entry of a Hub model: one directory, `hf--owner--name` (`--revision` unless "main")."""
    name = "hf--" + repo.replace("/", "--") + ("" if revision == "main" else "--" + revision.replace("/", "-"))
    return os.path.join(cache_root, name)


def fetch_hub_model(repo, revision, cache_root, progress_stream="stderr"):
    """Downloads a Hub model's files into its cache entry (unless they are there) and returns that directory.

    Raises:
        DownloadError: a file could not be fetched (the message names the model, the URL and why).
        ValueError: the repository is not BERT, or has no vocabulary or weights that load.
    """
    cache_dir = hub_cache_dir(repo, revision, cache_root)
    if (all(os.path.isfile(os.path.join(cache_dir, name)) for name in REQUIRED_FILES)
            and any(os.path.isfile(os.path.join(cache_dir, name)) for name in WEIGHT_FILES)):
        return cache_dir
    offline = [name for name in OFFLINE_VARIABLES
               if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")]
    if offline:
        raise download.DownloadError(
            f"Hugging Face model {repo!r} (revision {revision}) is not in the cache ({cache_dir}) and {offline[0]} is "
            "set, so it is not downloaded: unset it, or put the model's directory there (config.json, vocab.txt, "
            "model.safetensors)."
        )
    os.makedirs(cache_root, exist_ok=True)
    temp_dir = tempfile.mkdtemp(dir=cache_root, prefix="." + os.path.basename(cache_dir) + ".", suffix=".tmp")
    try:
        for name in REQUIRED_FILES:
            _fetch(repo, revision, name, temp_dir, progress_stream, required=True)
            if name == "config.json":
                _check_is_bert(repo, os.path.join(temp_dir, name))
        _fetch_weights(repo, revision, temp_dir, progress_stream)
        for name in OPTIONAL_FILES:
            _fetch(repo, revision, name, temp_dir, progress_stream, required=False)
        return download.move_into_cache(temp_dir, cache_dir)  # an incomplete entry left by hand is replaced whole
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def file_url(repo, revision, name):
    """The download address of file `name` of a Hub repository at `revision` (`HF_ENDPOINT` overrides the host).

    Example:
    >>> import os
    >>> os.environ.get("HF_ENDPOINT") or file_url("google-bert/bert-base-uncased", "main", "config.json")
    'https://huggingface.co/google-bert/bert-base-uncased/resolve/main/config.json'
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    return f"{endpoint}/{repo}/resolve/{revision}/{name}"


def _fetch(repo, revision, name, directory, progress_stream, required):
    """Downloads one file of the repository; False for an optional file it does not have."""
    url = file_url(repo, revision, name)
    token = os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    try:
        download.download_file(url, os.path.join(directory, name), progress_stream=progress_stream,
                               headers=headers)
        return True
    except download.DownloadError as error:
        missing = "404" in str(error.short_reason or "")
        if missing and not required:
            folder = os.path.dirname(os.path.join(directory, name))
            if os.path.normpath(folder) != os.path.normpath(directory) and not os.listdir(folder):
                os.rmdir(folder)  # (made for `1_Pooling/config.json`, which the repository does not have)
            return False
        if missing and name == "config.json":
            raise download.DownloadError(
                f"Hugging Face model {repo!r} (revision {revision}) could not be fetched: {url} answered "
                f"{error.short_reason}. Check the id; a private or gated model needs HF_TOKEN set.",
                short_reason=error.short_reason) from None
        if missing and name == "vocab.txt":
            raise ValueError(
                f"Hugging Face model {repo!r} has no vocab.txt (revision {revision}): the WordPiece vocabulary is "
                "needed for the tokenizer."
            ) from None
        raise download.DownloadError(f"Hugging Face model {repo!r}: {error}", short_reason=error.short_reason) \
            from None


def _fetch_weights(repo, revision, directory, progress_stream):
    """Downloads the first of `WEIGHT_FILES` the repository has; for an index of shards, every shard it names."""
    from keras_bert_impl.checkpoints.huggingface import read_weight_map

    for name in WEIGHT_FILES:
        if not _fetch(repo, revision, name, directory, progress_stream, required=False):
            continue
        if name.endswith(".index.json"):
            for shard in sorted(set(read_weight_map(os.path.join(directory, name)).values())):
                if os.path.basename(shard) != shard:
                    raise ValueError(f"Hugging Face model {repo!r}: its {name} names the shard {shard!r}, not a file "
                                     "name of the repository's top folder.")
                _fetch(repo, revision, shard, directory, progress_stream, required=True)
        return name
    raise ValueError(
        f"Hugging Face model {repo!r} has none of {', '.join(WEIGHT_FILES)} (revision {revision}): no weights that "
        "load (TensorFlow / Flax weights only?)."
    )


def _check_is_bert(repo, config_path):
    with open(config_path, encoding="utf-8") as f:
        try:
            config = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"Hugging Face model {repo!r}: its config.json is not valid JSON: {error}") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type != "bert":
        raise ValueError(
            f"Hugging Face model {repo!r} has model_type={model_type!r}; only BERT checkpoints (model_type 'bert') "
            "load into BertBackbone."
        )
