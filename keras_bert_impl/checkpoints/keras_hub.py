"""keras-hub `BertBackbone` presets: load through keras-hub, map the weights into ours.

keras-hub stores attention projections per head (query kernel
`(hidden, heads, head_dim)`, output kernel `(heads, head_dim, hidden)`); they
are reshaped into our fused qkv kernel `(hidden, 3 * hidden)` and a 2-D
output kernel. keras-hub's encoder uses the tanh-approximate GELU
(`keras_hub.src.utils.keras_utils.gelu_approximate`) and LayerNorm epsilon
1e-12, so the mapped backbone gets `activation="gelu_approximate"`.

keras-hub is an optional dependency (`pip install "keras_bert_impl[keras-hub]"`):
a local keras-hub preset directory's config and tokenizer assets are read
without it, while its weights and any `kaggle://`/`hf://` handle need it
(`require_keras_hub` raises a one-line `ImportError` saying what to install).
"""

import json
import os

import numpy as np

from keras_bert_impl.checkpoints.weight_mapping import (
    WeightTarget,
    assign_present_heads,
    assign_weights,
    identity_target,
)

_ARCHITECTURE_KEYS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "dropout",
    "max_sequence_length",
    "num_segments",
)


def backbone_config_from_keras_hub(config):
    """Our BertBackbone arguments from a keras-hub `BertBackbone` config dict."""
    missing = [key for key in _ARCHITECTURE_KEYS[:5] if key not in config]
    if missing:
        raise ValueError(f"keras-hub BertBackbone config lacks {missing}.")
    result = {key: config[key] for key in _ARCHITECTURE_KEYS if key in config}
    result["activation"] = "gelu_approximate"
    result["layer_norm_epsilon"] = 1e-12
    return result


def missing_keras_hub_message(location):
    """The one-line message for a keras-hub preset asked for without keras-hub installed."""
    return (
        f"Loading the keras-hub preset {location} needs keras-hub, which is not installed: "
        'pip install keras-hub (or pip install "keras_bert_impl[keras-hub]").'
    )


def require_keras_hub(location):
    """Returns the `keras_hub` module, or raises `ImportError` saying what to install."""
    try:
        import keras_hub
    except ImportError as e:
        raise ImportError(missing_keras_hub_message(location), name="keras_hub") from e
    return keras_hub


def _preset_utils(location):
    require_keras_hub(location)
    from keras_hub.src.utils import preset_utils

    return preset_utils


def _load_keras_hub_backbone(location):
    return require_keras_hub(location).models.BertBackbone.from_preset(location)


def read_backbone_config(location):
    """Our BertBackbone arguments from a keras-hub preset directory or handle."""
    if os.path.isdir(location):
        with open(os.path.join(location, "config.json"), encoding="utf-8") as f:
            return backbone_config_from_keras_hub(json.load(f)["config"])
    return backbone_config_from_keras_hub(_preset_utils(location).load_json(location, "config.json")["config"])


def keras_hub_weight_targets(backbone, hidden_dim, num_heads):
    """`WeightTarget`s of our backbone named by keras-hub variable paths."""
    head_dim = hidden_dim // num_heads
    targets = [
        identity_target(backbone.token_embedding.embeddings, "token_embedding/embeddings"),
        identity_target(backbone.position_embedding.position_embeddings, "position_embedding/embeddings"),
        identity_target(backbone.segment_embedding.embeddings, "segment_embedding/embeddings"),
        identity_target(backbone.embeddings_layer_norm.gamma, "embeddings_layer_norm/gamma"),
        identity_target(backbone.embeddings_layer_norm.beta, "embeddings_layer_norm/beta"),
    ]
    per_head_kernel = (hidden_dim, num_heads, head_dim)
    per_head_bias = (num_heads, head_dim)
    for i, layer in enumerate(backbone.transformer_layers):
        p = f"transformer_layer_{i}/"
        a = p + "self_attention_layer/"
        targets += [
            WeightTarget(
                layer.qkv_dense.kernel,
                tuple(a + f"{part}/kernel" for part in ("query", "key", "value")),
                (per_head_kernel,) * 3,
                lambda q, k, v: np.concatenate([x.reshape(hidden_dim, hidden_dim) for x in (q, k, v)], axis=1),
                lambda x: tuple(part.reshape(per_head_kernel) for part in np.split(x, 3, axis=1)),
            ),
            WeightTarget(
                layer.qkv_dense.bias,
                tuple(a + f"{part}/bias" for part in ("query", "key", "value")),
                (per_head_bias,) * 3,
                lambda q, k, v: np.concatenate([x.reshape(-1) for x in (q, k, v)]),
                lambda x: tuple(part.reshape(per_head_bias) for part in np.split(x, 3)),
            ),
            WeightTarget(
                layer.attention_output_dense.kernel,
                (a + "attention_output/kernel",),
                ((num_heads, head_dim, hidden_dim),),
                lambda x: x.reshape(hidden_dim, hidden_dim),
                lambda x: (x.reshape(num_heads, head_dim, hidden_dim),),
            ),
            identity_target(layer.attention_output_dense.bias, a + "attention_output/bias"),
            identity_target(layer.attention_layer_norm.gamma, p + "self_attention_layer_norm/gamma"),
            identity_target(layer.attention_layer_norm.beta, p + "self_attention_layer_norm/beta"),
            identity_target(layer.intermediate_dense.kernel, p + "feedforward_intermediate_dense/kernel"),
            identity_target(layer.intermediate_dense.bias, p + "feedforward_intermediate_dense/bias"),
            identity_target(layer.output_dense.kernel, p + "feedforward_output_dense/kernel"),
            identity_target(layer.output_dense.bias, p + "feedforward_output_dense/bias"),
            identity_target(layer.output_layer_norm.gamma, p + "feedforward_layer_norm/gamma"),
            identity_target(layer.output_layer_norm.beta, p + "feedforward_layer_norm/beta"),
        ]
    targets += [
        identity_target(backbone.pooled_dense.kernel, "pooled_dense/kernel"),
        identity_target(backbone.pooled_dense.bias, "pooled_dense/bias"),
    ]
    return targets


def copy_from_keras_hub_backbone(backbone, keras_hub_backbone, source="keras_hub.models.BertBackbone"):
    """Copies the weights of a keras-hub `BertBackbone` into our `backbone`, strictly.

    Args:
        backbone: our `BertBackbone` with the same architecture.
        keras_hub_backbone: a `keras_hub.models.BertBackbone`.
        source: description for messages.

    Returns:
        A `LoadReport`.

    Example:
    >>> import keras_hub  # doctest: +SKIP
    >>> theirs = keras_hub.models.BertBackbone.from_preset("bert_tiny_en_uncased")  # doctest: +SKIP
    >>> ours = BertBackbone(**backbone_config_from_keras_hub(theirs.get_config()))  # doctest: +SKIP
    >>> copy_from_keras_hub_backbone(ours, theirs)  # doctest: +SKIP
    """
    values = {v.path: v for v in keras_hub_backbone.weights}
    from keras import ops

    return assign_weights(
        keras_hub_weight_targets(backbone, keras_hub_backbone.hidden_dim, keras_hub_backbone.num_heads),
        {name: tuple(v.shape) for name, v in values.items()},
        lambda name: ops.convert_to_numpy(values[name]),
        source,
    )


def load_weights(backbone, location):
    """Loads a keras-hub preset (directory or handle) through keras-hub and maps its weights into `backbone`.

    Raises:
        ImportError: keras-hub is not installed (the message says what to install).
    """
    return copy_from_keras_hub_backbone(backbone, _load_keras_hub_backbone(location), source=str(location))


# keras-hub's classifier task (and keras-nlp's older names), saved by its `save_to_preset`: one `Dense` on the
# pooler's output, as ours with pooling="pooled" and transformers' BertForSequenceClassification.
_CLASSIFIER_TASKS = ("keras_hub>BertTextClassifier", "keras_hub>BertClassifier", "keras_nlp>BertClassifier",
                     "keras_nlp>BertTextClassifier")


def read_task_head_config(location, architectures):
    """The classifier head of a keras-hub `BertTextClassifier` preset (its `task.json`), as
    `huggingface.read_task_head_config` gives a transformers one, when `architectures` names
    `BertForSequenceClassification` (our `BertClassifier`); None otherwise.

    Returns:
        None, or `{"architecture": "BertForSequenceClassification", "labels": None (keras-hub names no classes),
        "num_classes": n, "regression": n == 1, "multi_label": False, "activation": ..., "dropout": ...}`.
    """
    if "BertForSequenceClassification" not in architectures or not os.path.isdir(location):
        return None
    try:
        with open(os.path.join(location, "task.json"), encoding="utf-8") as f:
            task = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(task, dict) or task.get("registered_name") not in _CLASSIFIER_TASKS:
        return None
    config = task.get("config") or {}
    num_classes = int(config.get("num_classes", 2))
    head = {"architecture": "BertForSequenceClassification", "labels": None, "num_classes": num_classes,
            "regression": num_classes == 1, "multi_label": False}
    if config.get("activation") not in (None, "linear"):
        head["activation"] = config["activation"]
    if "dropout" in config:
        head["dropout"] = config["dropout"]
    return head


def load_task_head(location, dense, prefix):
    """Loads a keras-hub `BertTextClassifier` preset's head (`task.weights.h5`: the one `Dense` beside its backbone,
    `layers/dense/vars/0` and `1`) into `dense`.

    Returns:
        `(LoadReport or None, [prefix] or [])` (`weight_mapping.assign_present_heads`): nothing where the file holds
        no such layer.
    """
    import h5py

    path = os.path.join(location, "task.weights.h5")
    if not os.path.isfile(path):
        return None, []
    with h5py.File(path, "r") as weights:
        layers = weights.get("layers")
        names = [name for name in (layers or ()) if name == "dense" or name.startswith("dense_")]
        if len(names) != 1:
            return None, []
        tensors = {f"layers/{names[0]}/vars/{index}": np.asarray(layers[names[0]]["vars"][str(index)])
                   for index in (0, 1) if str(index) in layers[names[0]]["vars"]}
    kernel, bias = (f"layers/{names[0]}/vars/{index}" for index in (0, 1))
    targets = {prefix: [identity_target(dense.kernel, kernel), identity_target(dense.bias, bias)]}
    return assign_present_heads(targets, {name: value.shape for name, value in tensors.items()}, tensors.__getitem__,
                                path)


def read_tokenizer_assets(location):
    """`{"vocabulary": path, "lowercase": bool}` from a keras-hub preset's `tokenizer.json` and assets."""
    if os.path.isdir(location):
        tokenizer_json = os.path.join(location, "tokenizer.json")
        if not os.path.exists(tokenizer_json):
            raise FileNotFoundError(f"keras-hub preset {location} has no tokenizer.json (saved without a tokenizer).")
        with open(tokenizer_json, encoding="utf-8") as f:
            config = json.load(f)["config"]
        vocabulary = os.path.join(location, "assets", "tokenizer", "vocabulary.txt")
    else:
        preset_utils = _preset_utils(location)
        config = preset_utils.load_json(location, "tokenizer.json")["config"]
        vocabulary = preset_utils.get_file(location, "assets/tokenizer/vocabulary.txt")
    return {"vocabulary": vocabulary, "lowercase": bool(config.get("lowercase", False))}
