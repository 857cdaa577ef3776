"""Original google-research/bert TF1 checkpoints (`bert_config.json` + `bert_model.ckpt.*`).

Variables are read with `tf.train.load_checkpoint`; TensorFlow is imported
only inside the functions that read a checkpoint, so the rest of the package
works on a JAX- or PyTorch-only host. TF1 Dense kernels are `(in, out)`, the
same layout as Keras, so only query/key/value need fusing. The original TF
code's `gelu` is the tanh approximation, so `hidden_act: "gelu"` maps to
`activation="gelu_approximate"`. Pretraining heads (`cls/*`), `global_step`
and Adam slots (`*/adam_m`, `*/adam_v`) are skipped and reported.
"""

import glob
import json
import logging
import os

from keras_bert_impl.checkpoints.weight_mapping import (
    assign_present_heads,
    assign_weights,
    fused_qkv_target,
    identity_target,
    transposed_target,
)

logger = logging.getLogger("keras_bert_impl.checkpoints")

# google-research/bert `hidden_act` -> BertBackbone `activation`.
_ACTIVATION_FROM_GOOGLE = {"gelu": "gelu_approximate", "relu": "relu"}


def backbone_config_from_google(bert_config, source="bert_config.json"):
    """Maps an original `bert_config.json` dict to BertBackbone arguments.

    Example:
    >>> backbone_config_from_google({"vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 2,
    ...     "hidden_size": 8, "intermediate_size": 16, "hidden_act": "gelu"})["activation"]
    'gelu_approximate'
    """
    required = ("vocab_size", "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size")
    missing = [key for key in required if key not in bert_config]
    if missing:
        raise ValueError(f"{source} lacks {missing}: not a complete BERT config.")
    act = bert_config.get("hidden_act", "gelu")
    if act not in _ACTIVATION_FROM_GOOGLE:
        raise ValueError(f"{source} has hidden_act={act!r}; supported: {sorted(_ACTIVATION_FROM_GOOGLE)}.")
    dropout = float(bert_config.get("hidden_dropout_prob", 0.1))
    attention_dropout = float(bert_config.get("attention_probs_dropout_prob", dropout))
    return {
        "vocabulary_size": int(bert_config["vocab_size"]),
        "num_layers": int(bert_config["num_hidden_layers"]),
        "num_heads": int(bert_config["num_attention_heads"]),
        "hidden_dim": int(bert_config["hidden_size"]),
        "intermediate_dim": int(bert_config["intermediate_size"]),
        "dropout": dropout,
        "max_sequence_length": int(bert_config.get("max_position_embeddings", 512)),
        "num_segments": int(bert_config.get("type_vocab_size", 2)),
        "activation": _ACTIVATION_FROM_GOOGLE[act],
        "layer_norm_epsilon": 1e-12,
        "attention_dropout": None if attention_dropout == dropout else attention_dropout,
    }


def read_backbone_config(directory):
    """BertBackbone arguments from a Google checkpoint directory's `bert_config.json`."""
    path = os.path.join(directory, "bert_config.json")
    with open(path, encoding="utf-8") as f:
        return backbone_config_from_google(json.load(f), source=path)


def checkpoint_prefix(directory):
    """The TF checkpoint prefix in `directory` (`.../bert_model.ckpt`)."""
    preferred = os.path.join(directory, "bert_model.ckpt")
    if os.path.exists(preferred + ".index"):
        return preferred
    indexes = sorted(glob.glob(os.path.join(directory, "*.ckpt.index")))
    if len(indexes) != 1:
        raise FileNotFoundError(
            f"{directory}: expected bert_model.ckpt.index (one TF checkpoint), found {[os.path.basename(i) for i in indexes]}."
        )
    return indexes[0][: -len(".index")]


def google_weight_targets(backbone):
    """The `WeightTarget`s of a backbone under the original TF1 variable names."""
    targets = [
        identity_target(backbone.token_embedding.embeddings, "bert/embeddings/word_embeddings"),
        identity_target(backbone.position_embedding.position_embeddings, "bert/embeddings/position_embeddings"),
        identity_target(backbone.segment_embedding.embeddings, "bert/embeddings/token_type_embeddings"),
        identity_target(backbone.embeddings_layer_norm.gamma, "bert/embeddings/LayerNorm/gamma"),
        identity_target(backbone.embeddings_layer_norm.beta, "bert/embeddings/LayerNorm/beta"),
    ]
    for i, layer in enumerate(backbone.transformer_layers):
        p = f"bert/encoder/layer_{i}/"
        qkv = [p + f"attention/self/{part}" for part in ("query", "key", "value")]
        targets += [
            fused_qkv_target(layer.qkv_dense.kernel, [n + "/kernel" for n in qkv], transposed=False),
            fused_qkv_target(layer.qkv_dense.bias, [n + "/bias" for n in qkv], transposed=False),
            identity_target(layer.attention_output_dense.kernel, p + "attention/output/dense/kernel"),
            identity_target(layer.attention_output_dense.bias, p + "attention/output/dense/bias"),
            identity_target(layer.attention_layer_norm.gamma, p + "attention/output/LayerNorm/gamma"),
            identity_target(layer.attention_layer_norm.beta, p + "attention/output/LayerNorm/beta"),
            identity_target(layer.intermediate_dense.kernel, p + "intermediate/dense/kernel"),
            identity_target(layer.intermediate_dense.bias, p + "intermediate/dense/bias"),
            identity_target(layer.output_dense.kernel, p + "output/dense/kernel"),
            identity_target(layer.output_dense.bias, p + "output/dense/bias"),
            identity_target(layer.output_layer_norm.gamma, p + "output/LayerNorm/gamma"),
            identity_target(layer.output_layer_norm.beta, p + "output/LayerNorm/beta"),
        ]
    targets += [
        identity_target(backbone.pooled_dense.kernel, "bert/pooler/dense/kernel"),
        identity_target(backbone.pooled_dense.bias, "bert/pooler/dense/bias"),
    ]
    return targets


def google_skip_reason(name):
    """Why an original-checkpoint variable is skipped, or None if it is a backbone weight."""
    if name.endswith(("/adam_m", "/adam_v")):
        return "optimizer slot (Adam moment), not a weight"
    if name == "global_step":
        return "training step counter, not a weight"
    if name.startswith("cls/"):
        return "pretraining head (masked LM / next sentence), not part of the backbone"
    return None


def google_pretraining_head_targets(masked_lm_head, next_sentence_head=None):
    """`{head: [WeightTarget]}` of google-research/bert's `cls/predictions` (masked LM, tied to the word embedding)
    and `cls/seq_relationship` (next sentence) variables."""
    heads = {"masked LM": [
        identity_target(masked_lm_head.transform_dense.kernel, "cls/predictions/transform/dense/kernel"),
        identity_target(masked_lm_head.transform_dense.bias, "cls/predictions/transform/dense/bias"),
        identity_target(masked_lm_head.layer_norm.gamma, "cls/predictions/transform/LayerNorm/gamma"),
        identity_target(masked_lm_head.layer_norm.beta, "cls/predictions/transform/LayerNorm/beta"),
        identity_target(masked_lm_head.output_bias, "cls/predictions/output_bias"),
    ]}
    if next_sentence_head is not None:
        heads["next sentence"] = [
            transposed_target(next_sentence_head.dense.kernel, "cls/seq_relationship/output_weights"),
            identity_target(next_sentence_head.dense.bias, "cls/seq_relationship/output_bias"),
        ]
    return heads


def load_pretraining_heads(directory, masked_lm_head, next_sentence_head=None):
    """Loads the pretraining heads of an original Google checkpoint (`cls/*`) if it has them.

    Returns:
        `(LoadReport or None, [heads loaded])` (`weight_mapping.assign_present_heads`).
    """
    import tensorflow as tf

    prefix = checkpoint_prefix(os.fspath(directory))
    reader = tf.train.load_checkpoint(prefix)
    shapes = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
    return assign_present_heads(google_pretraining_head_targets(masked_lm_head, next_sentence_head), shapes,
                                reader.get_tensor, prefix)


def load_weights(backbone, directory):
    """Loads an original Google TF1 checkpoint into `backbone`, strictly.

    Args:
        backbone: a built `BertBackbone` whose config matches `bert_config.json`.
        directory: directory holding `bert_model.ckpt.index` / `.data-*`.

    Returns:
        A `LoadReport`; `cls/*`, `global_step` and Adam slots are in `skipped`.

    Raises:
        CheckpointMismatchError: missing/unexpected variables or shape mismatches.

    Example:
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = BertBackbone(**read_backbone_config(google_dir))  # doctest: +SKIP
    >>> print(load_weights(backbone, google_dir))  # doctest: +SKIP
    """
    import tensorflow as tf

    prefix = checkpoint_prefix(os.fspath(directory))
    reader = tf.train.load_checkpoint(prefix)
    shapes = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
    report = assign_weights(
        google_weight_targets(backbone), shapes, reader.get_tensor, prefix, skip_reason=google_skip_reason
    )
    for name, reason in report.skipped.items():
        logger.info("Skipped %s in %s: %s", name, prefix, reason)
    return report
