"""Hugging Face BERT checkpoints (`config.json` + `model.safetensors` or `pytorch_model.bin`): read, map, write.

Tensors are read in NumPy form, without PyTorch: `model.safetensors` (or its
shards) with `safetensors`, or, where a checkpoint has only
`pytorch_model.bin`, with `torch_weights.read_state_dict`, which reads the
pickle without running any code from it. Names
may carry the `bert.` prefix of `BertForPreTraining`/`BertForMaskedLM`
checkpoints or not (`BertModel`), and LayerNorm parameters may be named
`weight`/`bias` or the older `gamma`/`beta`. PyTorch `Linear` weights are
`(out, in)` and are transposed; query, key and value are concatenated into the
backbone's fused qkv kernel `(hidden, 3 * hidden)`.
"""

import json
import logging
import os
import re

from keras_bert_impl.checkpoints.atomic_files import atomic_directory, atomic_write_json
from keras_bert_impl.checkpoints.sentence_transformers import WRITTEN_FILES, write_embedding_settings
from keras_bert_impl.checkpoints.vocabulary_file import vocabulary_is_lowercase, write_vocabulary_file
from keras_bert_impl.checkpoints.weight_mapping import (
    assign_present_heads,
    assign_weights,
    export_tensors,
    fused_qkv_target,
    identity_target,
    transposed_target,
)

logger = logging.getLogger("keras_bert_impl.checkpoints")

# Hugging Face `hidden_act` -> BertBackbone `activation`.
_ACTIVATION_FROM_HF = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "relu": "relu",
}
_ACTIVATION_TO_HF = {"gelu": "gelu", "gelu_approximate": "gelu_pytorch_tanh", "relu": "relu"}

# Why a backbone's pooler was left at its new initialisation (`LoadReport.left_new`), as `use_pooler` reads it.
NO_POOLER = ("the checkpoint has no pooler (as transformers saves BertForMaskedLM, BertForTokenClassification and "
             "BertForQuestionAnswering); it is used by the pooled output (classifiers, next-sentence prediction), "
             "which fine-tuning trains from this new initialisation")
# The transformers classes built without a pooler (`add_pooling_layer=False`): their exports leave it out, or
# `from_pretrained` lists its tensors as unexpected.
_WITHOUT_POOLER = ("BertForMaskedLM", "BertForTokenClassification", "BertForQuestionAnswering")
_SAVED_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


def backbone_config_from_hf(hf_config, source="config.json"):
    """Maps a Hugging Face `BertConfig` dict to BertBackbone constructor arguments.

    `hidden_act` "gelu" (exact erf) maps to `"gelu"`; "gelu_new" and
    "gelu_pytorch_tanh" (tanh form) map to `"gelu_approximate"`.

    Args:
        hf_config: the parsed `config.json`.
        source: file name used in error messages.

    Example:
    >>> backbone_config_from_hf({"vocab_size": 10, "num_hidden_layers": 1, "num_attention_heads": 2,
    ...     "hidden_size": 8, "intermediate_size": 16, "hidden_act": "gelu_new"})["activation"]
    'gelu_approximate'
    """
    required = ("vocab_size", "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size")
    missing = [key for key in required if key not in hf_config]
    if missing:
        raise ValueError(f"{source} lacks {missing}: not a complete BERT config.")
    act = hf_config.get("hidden_act", "gelu")
    if act not in _ACTIVATION_FROM_HF:
        raise ValueError(
            f"{source} has hidden_act={act!r}; supported: {sorted(_ACTIVATION_FROM_HF)}."
        )
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"{source} has position_embedding_type={position_type!r}; BertBackbone has learned "
            "absolute positions only."
        )
    dropout = float(hf_config.get("hidden_dropout_prob", 0.1))
    attention_dropout = float(hf_config.get("attention_probs_dropout_prob", dropout))
    return {
        "vocabulary_size": int(hf_config["vocab_size"]),
        "num_layers": int(hf_config["num_hidden_layers"]),
        "num_heads": int(hf_config["num_attention_heads"]),
        "hidden_dim": int(hf_config["hidden_size"]),
        "intermediate_dim": int(hf_config["intermediate_size"]),
        "dropout": dropout,
        "max_sequence_length": int(hf_config.get("max_position_embeddings", 512)),
        "num_segments": int(hf_config.get("type_vocab_size", 2)),
        "activation": _ACTIVATION_FROM_HF[act],
        "layer_norm_epsilon": float(hf_config.get("layer_norm_eps", 1e-12)),
        "attention_dropout": None if attention_dropout == dropout else attention_dropout,
    }


def hf_config_from_backbone(backbone):
    """The Hugging Face `config.json` dict for a BertBackbone (a `BertModel`)."""
    dropout = backbone.dropout
    attention_dropout = dropout if backbone.attention_dropout is None else backbone.attention_dropout
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": _ACTIVATION_TO_HF[backbone.activation],
        "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": attention_dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": 0.02,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
    }


def read_backbone_config(directory):
    """BertBackbone arguments from a Hugging Face directory's `config.json`."""
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as f:
        return backbone_config_from_hf(json.load(f), source=path)


def hf_weight_targets(backbone):
    """The `WeightTarget`s of a backbone under `BertModel` tensor names (no `bert.` prefix)."""
    targets = [
        identity_target(backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight"),
        identity_target(backbone.position_embedding.position_embeddings, "embeddings.position_embeddings.weight"),
        identity_target(backbone.segment_embedding.embeddings, "embeddings.token_type_embeddings.weight"),
        identity_target(backbone.embeddings_layer_norm.gamma, "embeddings.LayerNorm.weight"),
        identity_target(backbone.embeddings_layer_norm.beta, "embeddings.LayerNorm.bias"),
    ]
    for i, layer in enumerate(backbone.transformer_layers):
        p = f"encoder.layer.{i}."
        qkv = [p + f"attention.self.{part}" for part in ("query", "key", "value")]
        targets += [
            fused_qkv_target(layer.qkv_dense.kernel, [n + ".weight" for n in qkv], transposed=True),
            fused_qkv_target(layer.qkv_dense.bias, [n + ".bias" for n in qkv], transposed=True),
            transposed_target(layer.attention_output_dense.kernel, p + "attention.output.dense.weight"),
            identity_target(layer.attention_output_dense.bias, p + "attention.output.dense.bias"),
            identity_target(layer.attention_layer_norm.gamma, p + "attention.output.LayerNorm.weight"),
            identity_target(layer.attention_layer_norm.beta, p + "attention.output.LayerNorm.bias"),
            transposed_target(layer.intermediate_dense.kernel, p + "intermediate.dense.weight"),
            identity_target(layer.intermediate_dense.bias, p + "intermediate.dense.bias"),
            transposed_target(layer.output_dense.kernel, p + "output.dense.weight"),
            identity_target(layer.output_dense.bias, p + "output.dense.bias"),
            identity_target(layer.output_layer_norm.gamma, p + "output.LayerNorm.weight"),
            identity_target(layer.output_layer_norm.beta, p + "output.LayerNorm.bias"),
        ]
    targets += [
        transposed_target(backbone.pooled_dense.kernel, "pooler.dense.weight"),
        identity_target(backbone.pooled_dense.bias, "pooler.dense.bias"),
    ]
    return targets


def hf_pretraining_head_targets(masked_lm_head, next_sentence_head=None):
    """`{head: [WeightTarget]}` of `BertForPreTraining`'s `cls.predictions` (masked LM; its decoder is the tied word
    embedding) and `cls.seq_relationship` (next sentence) heads."""
    heads = {"masked LM": [
        transposed_target(masked_lm_head.transform_dense.kernel, "cls.predictions.transform.dense.weight"),
        identity_target(masked_lm_head.transform_dense.bias, "cls.predictions.transform.dense.bias"),
        identity_target(masked_lm_head.layer_norm.gamma, "cls.predictions.transform.LayerNorm.weight"),
        identity_target(masked_lm_head.layer_norm.beta, "cls.predictions.transform.LayerNorm.bias"),
        identity_target(masked_lm_head.output_bias, "cls.predictions.bias"),
    ]}
    if next_sentence_head is not None:
        heads["next sentence"] = [
            transposed_target(next_sentence_head.dense.kernel, "cls.seq_relationship.weight"),
            identity_target(next_sentence_head.dense.bias, "cls.seq_relationship.bias"),
        ]
    return heads


def load_pretraining_heads(directory, masked_lm_head, next_sentence_head=None):
    """Loads the pretraining heads of a Hugging Face `BertForPreTraining` / `BertForMaskedLM` checkpoint if it has them.

    Returns:
        `(LoadReport or None, [heads loaded])` (`weight_mapping.assign_present_heads`).
    """
    reader = _weights_reader(os.fspath(directory))
    shapes = {_normalise_name(name): shape for name, shape in reader.shapes.items()}
    original = {_normalise_name(name): name for name in reader.shapes}
    return assign_present_heads(hf_pretraining_head_targets(masked_lm_head, next_sentence_head), shapes,
                                lambda name: reader.read(original[name]), reader.description)


def read_task_head_config(directory, architectures):
    """The task a transformers checkpoint was fine-tuned for, when its `config.json` names one of `architectures`.

    Returns:
        None (another architecture, or none named), or `{"architecture": name, "labels": [label names in id order
        (`id2label`)], "num_classes": their count, "regression": bool, "multi_label": bool}` (regression: `problem_type` "regression", or one
        label; multi-label: `problem_type` "multi_label_classification").
    """
    path = os.path.join(os.fspath(directory), "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    named = [name for name in config.get("architectures") or () if name in architectures]
    if not named:
        return None
    id2label = config.get("id2label") or {}
    try:
        labels = [str(id2label[key]) for key in sorted(id2label, key=int)]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: id2label must map label ids to names, got {id2label!r} ({e}).") from None
    if not labels:
        labels = [f"LABEL_{i}" for i in range(int(config.get("num_labels", 2)))]
    return {"architecture": named[0], "labels": labels, "num_classes": len(labels),
            "regression": config.get("problem_type") == "regression" or len(labels) == 1,
            "multi_label": config.get("problem_type") == "multi_label_classification"}


def load_task_head(directory, dense, prefix):
    """Loads a transformers task head into the Keras `Dense` that plays its part: `classifier.*`
    (`BertForSequenceClassification`, `BertForTokenClassification`) or `qa_outputs.*` (`BertForQuestionAnswering`:
    column 0 the start logits, 1 the end logits, as `SpanHead`'s).

    Returns:
        `(LoadReport or None, [prefix] or [])` (`weight_mapping.assign_present_heads`): nothing when the checkpoint
        holds no such tensors.
    """
    reader = _weights_reader(os.fspath(directory))
    shapes = {_normalise_name(name): shape for name, shape in reader.shapes.items()}
    original = {_normalise_name(name): name for name in reader.shapes}
    targets = {prefix: [transposed_target(dense.kernel, f"{prefix}.weight"), identity_target(dense.bias, f"{prefix}.bias")]}
    return assign_present_heads(targets, shapes, lambda name: reader.read(original[name]), reader.description)


def hf_skip_reason(name):
    """Why a (normalised) Hugging Face tensor name is skipped, or None if it is a backbone weight."""
    if name == "embeddings.position_ids":
        return "non-weight buffer (the position index table 0..max_len-1)"
    if name.startswith("cls."):
        return "pretraining head (masked LM / next sentence), not part of the backbone"
    if name.startswith(("classifier.", "qa_outputs.")):
        return "task head, not part of the backbone"
    return None


def _normalise_name(name):
    if name.startswith("bert."):
        name = name[len("bert."):]
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def read_weight_map(index_path):
    """The `weight_map` (tensor name -> shard file) of a sharded checkpoint's index, `model.safetensors.index.json`
    or `pytorch_model.bin.index.json`."""
    kind = "safetensors" if index_path.endswith("safetensors.index.json") else "pytorch_model.bin"
    try:
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{index_path} is not a {kind} index: expected JSON with a 'weight_map' of tensor name -> shard file "
            f"({type(e).__name__}: {e}); replace it with a complete copy."
        ) from None
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index_path}: 'weight_map' must map tensor names to shard files.")
    return weight_map


class _SafetensorsReader:
    """Lazy access to the tensors of a (possibly sharded) safetensors checkpoint."""

    def __init__(self, directory):
        from safetensors import safe_open

        index_path = os.path.join(directory, "model.safetensors.index.json")
        single = os.path.join(directory, "model.safetensors")
        from keras_bert_impl.checkpoints.download import check_safetensors_file, truncated_file_error

        if os.path.exists(single):
            files = {single}
            self.description = single
        else:
            files = {os.path.join(directory, v) for v in read_weight_map(index_path).values()}
            self.description = index_path
        self._handles = {}
        self._file_of = {}
        self.shapes = {}
        for path in sorted(files):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{index_path} names the shard {os.path.basename(path)}, but {path} does not exist.")
            check_safetensors_file(path)
            try:
                handle = safe_open(path, framework="numpy")
            except Exception as e:  # safetensors_rust.SafetensorError: a header it cannot parse
                raise truncated_file_error(path, f"safetensors says {str(e)!r}") from None
            self._handles[path] = handle
            for key in handle.keys():
                self._file_of[key] = path
                self.shapes[key] = tuple(handle.get_slice(key).get_shape())

    def read(self, name):
        return self._handles[self._file_of[name]].get_tensor(name)


class _PickleReader:
    """The tensors of `pytorch_model.bin` (or of its shards, `pytorch_model.bin.index.json`), read without PyTorch and
    without running the pickle's code; floats as float32, as `torch.load(...).float()` gives them."""

    def __init__(self, directory):
        from keras_bert_impl.checkpoints.torch_weights import read_state_dict

        path = os.path.join(directory, "pytorch_model.bin")
        if os.path.exists(path):
            files, self.description = [path], path
        else:
            index_path = path + ".index.json"
            files = sorted({os.path.join(directory, name) for name in read_weight_map(index_path).values()})
            self.description = index_path
            for shard in files:
                if not os.path.isfile(shard):
                    raise FileNotFoundError(
                        f"{index_path} names the shard {os.path.basename(shard)}, but {shard} does not exist.")
        self.tensors = {}
        for shard in files:
            state = read_state_dict(shard)
            self.tensors.update({k: v.astype("float32") if v.dtype.kind == "f" else v for k, v in state.items()})
        self.shapes = {k: tuple(v.shape) for k, v in self.tensors.items()}

    def read(self, name):
        return self.tensors[name]


def _weights_reader(directory):
    """The reader of a Hugging Face directory's weights: `model.safetensors` (or its shards), else
    `pytorch_model.bin` (or its shards)."""
    if any(os.path.exists(os.path.join(directory, n)) for n in ("model.safetensors", "model.safetensors.index.json")):
        return _SafetensorsReader(directory)
    if any(os.path.exists(os.path.join(directory, n)) for n in ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        return _PickleReader(directory)
    raise FileNotFoundError(f"{directory} has no model.safetensors (nor pytorch_model.bin).")


def load_weights(backbone, directory, allow_pytorch_pickle=None):
    """Loads a Hugging Face BERT checkpoint into `backbone`, strictly.

    Args:
        backbone: a built `BertBackbone` whose config matches the checkpoint.
        directory: Hugging Face directory with `model.safetensors`
            (or `model.safetensors.index.json` and shards), or with
            `pytorch_model.bin` only (read without running its pickle's code).
        allow_pytorch_pickle: ignored (kept for earlier calls: a
            `pytorch_model.bin` loads without it now, as it runs nothing).

    Returns:
        A `LoadReport`; `embeddings.position_ids` and `cls.*` heads are in `skipped`; a checkpoint without a
        pooler (`BertForMaskedLM`) loads all else, and the pooler's variables are in `left_new`.

    Raises:
        CheckpointMismatchError: missing/unexpected tensors or shape mismatches
            (each named, with both shapes).

    Example:
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = BertBackbone(**read_backbone_config(hf_dir))  # doctest: +SKIP
    >>> print(load_weights(backbone, hf_dir))  # doctest: +SKIP
    """
    directory = os.fspath(directory)
    reader = _weights_reader(directory)
    original = {}
    for name in reader.shapes:
        normalised = _normalise_name(name)
        if normalised in original:
            raise ValueError(
                f"{reader.description} holds both '{original[normalised]}' and '{name}', which name the same weight."
            )
        original[normalised] = name
    targets, left_new = hf_weight_targets(backbone), {}
    if not any(name.startswith("pooler.") for name in original):
        # transformers' BertForMaskedLM, BertForTokenClassification and BertForQuestionAnswering have no pooler:
        # load the rest, as transformers does. The heads that read the pooler say so when they are built on it
        # (`head_building.use_pooler`); the others never read it.
        targets = [target for target in targets if not target.names[0].startswith("pooler.")]
        left_new = {variable.path: NO_POOLER for variable in (backbone.pooled_dense.kernel, backbone.pooled_dense.bias)}
        logger.info("%s has no pooler (pooler.dense.*): the pooler keeps its new initialisation.", reader.description)
    report = assign_weights(
        targets,
        {n: reader.shapes[o] for n, o in original.items()},
        lambda n: reader.read(original[n]),
        reader.description,
        skip_reason=hf_skip_reason,
        display_name=lambda n: original.get(n, n),
    )
    report.left_new = left_new
    for name, reason in report.skipped.items():
        logger.info("Skipped %s in %s: %s", name, reader.description, reason)
    return report


def save_huggingface(backbone, directory, vocabulary=None, lowercase=None, head=None, embedding=None):
    """Writes `backbone` as a Hugging Face `BertModel` directory, atomically.

    Writes `config.json`, `model.safetensors` (float32) and, when a
    vocabulary is given, `vocab.txt`, `tokenizer_config.json` and
    `special_tokens_map.json`. `transformers.BertModel.from_pretrained(directory)`
    then computes the same outputs. The activation is written as
    `hidden_act` "gelu" (exact) or "gelu_pytorch_tanh" (approximate).

    Args:
        backbone: a `BertBackbone`.
        directory: destination; created, or replaced if it only holds files
            of an earlier export.
        vocabulary: path to vocab.txt or list of tokens, optional.
        lowercase: tokenizer casing; inferred from the vocabulary when None.
        head: None (a `BertModel`), or a task head to write with it:
            `{"architecture": "BertForSequenceClassification" (or
            "BertForTokenClassification", "BertForQuestionAnswering"),
            "prefix": "classifier" / "qa_outputs", "dense": the Keras
            `Dense` holding it, "labels": class names or None, "regression":
            bool, "multi_label": bool}`, or the pretraining heads `{"architecture":
            "BertForPreTraining" / "BertForMaskedLM", "masked_lm_head": ...,
            "next_sentence_head": ... or None}` (`Task.save_huggingface`
            builds it), so that
            `transformers.AutoModelFor...from_pretrained(directory)` and its
            `pipeline` compute the same outputs.
        embedding: None, or a sentence embedder's settings `{"sequence_length", "pooling", "normalize"}`, written
            as sentence-transformers' own files (`sentence_transformers.write_embedding_settings`), so that the
            directory embeds as the embedder did (`BertTextEmbedder.from_preset`, `SentenceTransformer`).

    Example:
    >>> from keras_bert_impl import BertBackbone
    >>> import tempfile, os
    >>> backbone = BertBackbone(vocabulary_size=20, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
    >>> out = os.path.join(tempfile.mkdtemp(), "hf")
    >>> save_huggingface(backbone, out)
    >>> sorted(os.listdir(out))
    ['config.json', 'model.safetensors']
    """
    from safetensors.numpy import save_file

    tensors = export_tensors(hf_weight_targets(backbone))
    config = hf_config_from_backbone(backbone)
    if head is not None:
        if "masked_lm_head" in head:
            heads = hf_pretraining_head_targets(head["masked_lm_head"], head.get("next_sentence_head"))
            tensors.update(export_tensors([target for targets in heads.values() for target in targets]))
        else:
            tensors.update(export_tensors([transposed_target(head["dense"].kernel, f"{head['prefix']}.weight"),
                                           identity_target(head["dense"].bias, f"{head['prefix']}.bias")]))
        config["architectures"] = [head["architecture"]]
        if head["architecture"] in _WITHOUT_POOLER:
            tensors = {name: value for name, value in tensors.items() if not name.startswith("pooler.")}
        if head.get("prefix") == "classifier":
            labels = head.get("labels") or [f"LABEL_{i}" for i in range(int(head["dense"].kernel.shape[-1]))]
            config["id2label"] = {str(i): name for i, name in enumerate(labels)}
            config["label2id"] = {name: i for i, name in enumerate(labels)}
            if head.get("regression"):
                config["problem_type"] = "regression"
            elif head.get("multi_label"):  # transformers then trains with BCEWithLogits and its pipeline gives sigmoids
                config["problem_type"] = "multi_label_classification"
    with atomic_directory(directory, replaceable_files=_SAVED_FILES + WRITTEN_FILES) as temp_dir:
        atomic_write_json(os.path.join(temp_dir, "config.json"), config)
        if embedding is not None:
            write_embedding_settings(temp_dir, embedding["sequence_length"], embedding["pooling"],
                                     embedding["normalize"], backbone.hidden_dim, atomic_write_json)
        save_file(tensors, os.path.join(temp_dir, "model.safetensors"), metadata={"format": "pt"})
        if vocabulary is not None:
            vocab_path = os.path.join(temp_dir, "vocab.txt")
            write_vocabulary_file(vocabulary, vocab_path)
            if lowercase is None:
                lowercase = vocabulary_is_lowercase(vocab_path)
            special = {
                "unk_token": "[UNK]",
                "sep_token": "[SEP]",
                "pad_token": "[PAD]",
                "cls_token": "[CLS]",
                "mask_token": "[MASK]",
            }
            atomic_write_json(
                os.path.join(temp_dir, "tokenizer_config.json"),
                {
                    "tokenizer_class": "BertTokenizer",
                    "do_lower_case": bool(lowercase),
                    "model_max_length": backbone.max_sequence_length,
                    **special,
                },
            )
            atomic_write_json(os.path.join(temp_dir, "special_tokens_map.json"), special)
