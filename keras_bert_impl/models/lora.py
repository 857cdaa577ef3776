"""LoRA (Hu et al., 2021) on a `BertBackbone`: freeze the encoder, train low-rank updates of chosen projections.

`BertBackbone.enable_lora`, `save_lora_weights` and `load_lora_weights` (keras-hub's names) call the functions
here. The low-rank factors live in Keras's own `Dense` LoRA (`Dense.enable_lora`): the layer's `kernel` is the
frozen kernel plus `lora_alpha / rank * A @ B`, so every other path (`.keras` files, `save_to_preset`, Hugging
Face export) sees the merged kernel and a LoRA-tuned model loads as a plain one. The `.lora.h5` file holds the
factors alone: a few hundred kilobytes beside the base model's tens or hundreds of megabytes.
"""

import os

import numpy as np

from keras_bert_impl.checkpoints.atomic_files import atomic_save

# The Dense layers of a backbone that LoRA can target, by name: every block's projections, and the pooler.
LORA_LAYER_NAMES = ("qkv", "attention_output", "intermediate", "output", "pooled_dense")

# The fused query/key/value projection of every block: the query and value projections keras-hub's BERT targets
# live in it, beside the key (PEFT does the same on GPT-2's fused `c_attn`).
DEFAULT_LORA_LAYER_NAMES = ("qkv",)

LORA_FILE_SUFFIX = ".lora.h5"

# A task's "auto" optimizer is AdamW at this rate when the backbone trains LoRA factors: the rate of Hu et al.'s
# RoBERTa-base GLUE runs (4e-4 to 5e-4, alpha = rank as Keras's default), ten times full fine-tuning's 5e-5.
LORA_LEARNING_RATE = 5e-4


def lora_layers(backbone, target_layer_names):
    """The backbone's `Dense` layers with these names, as `[(path, layer)]`, in a fixed order.

    Example:
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> [path for path, _ in lora_layers(backbone, ["qkv"])]
    ['transformer_layer_0/qkv', 'transformer_layer_1/qkv']
    """
    names = _check_names(target_layer_names)
    found = []
    for block in backbone.transformer_layers:
        for name, dense in (
            ("qkv", block.qkv_dense),
            ("attention_output", block.attention_output_dense),
            ("intermediate", block.intermediate_dense),
            ("output", block.output_dense),
        ):
            if name in names:
                found.append((f"{block.name}/{name}", dense))
    if "pooled_dense" in names:
        found.append(("pooled_dense", backbone.pooled_dense))
    return found


def enable_lora(backbone, rank, target_layer_names=None, lora_alpha=None):
    """Freezes every weight of `backbone` and adds trainable rank-`rank` factors to the target `Dense` layers.

    The targets' biases stay frozen too (PEFT's default; keras-hub trains them but does not save them), so the
    factors are all that changes in the backbone and `save_lora_weights` saves the whole update. `B` starts at zero, so the outputs do not change until
    training moves it. A task model's head is not part of the backbone and stays trainable. Call it before
    `compile` (or `fit`, which compiles with the task's defaults if needed).

    Example:
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> enable_lora(backbone, rank=2)
    >>> sorted({v.path.split("/")[-1] for v in backbone.trainable_variables})
    ['lora_kernel_a', 'lora_kernel_b']
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"`rank` must be a positive int (the LoRA factors' inner width, e.g. 4 or 8), got {rank!r}.")
    targets = lora_layers(backbone, DEFAULT_LORA_LAYER_NAMES if target_layer_names is None else target_layer_names)
    if not targets:
        raise ValueError(f"`target_layer_names`={list(target_layer_names)!r} names no layer of this backbone.")
    if lora_rank(backbone) is not None:
        raise ValueError(
            f"LoRA is already enabled on this backbone (rank {lora_rank(backbone)}); it can be enabled once. "
            "Build the model again (from_preset) for another rank or other layers."
        )
    backbone.trainable = True
    for layer in backbone.layers:
        layer.trainable = False
    for _, dense in targets:
        dense.trainable = True
        dense.enable_lora(rank, lora_alpha=lora_alpha)
        if dense.bias is not None:
            # Frozen too (PEFT's `bias="none"`): the factors alone are the update, so the `.lora.h5` file holds all
            # that training changed in the backbone.
            dense.bias.trainable = False


def lora_rank(backbone):
    """The rank LoRA was enabled with, or None.

    Example:
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> lora_rank(backbone), (enable_lora(backbone, 4), lora_rank(backbone))[1]
    (None, 4)
    """
    ranks = {dense.lora_rank for _, dense in lora_layers(backbone, LORA_LAYER_NAMES) if dense.lora_enabled}
    return ranks.pop() if ranks else None


def save_lora_weights(backbone, filepath):
    """Writes the LoRA factors (and the rank, alpha and targets) to `filepath` (`*.lora.h5`), atomically.

    Example:
    >>> import os, tempfile
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> enable_lora(backbone, 2)
    >>> path = os.path.join(tempfile.mkdtemp(), "adapter.lora.h5")
    >>> save_lora_weights(backbone, path); os.path.exists(path)
    True
    """
    import h5py

    path = os.fspath(filepath)
    if not path.endswith(LORA_FILE_SUFFIX):
        raise ValueError(f"The LoRA weights file name must end in {LORA_FILE_SUFFIX!r}, got {path!r}.")
    enabled = [(name, dense) for name, dense in lora_layers(backbone, LORA_LAYER_NAMES) if dense.lora_enabled]
    if not enabled:
        raise ValueError("This backbone has no LoRA layers: call `backbone.enable_lora(rank)` first.")
    _, first = enabled[0]

    def write(temp_path):
        with h5py.File(temp_path, "w") as f:
            f.attrs["rank"] = first.lora_rank
            f.attrs["lora_alpha"] = first.lora_alpha
            f.attrs["target_layer_names"] = sorted({name.split("/")[-1] for name, _ in enabled})
            for name, dense in enabled:
                group = f.create_group(name)
                group["lora_kernel_a"] = np.asarray(dense.lora_kernel_a.numpy())
                group["lora_kernel_b"] = np.asarray(dense.lora_kernel_b.numpy())

    atomic_save(path, write)


def load_lora_weights(backbone, filepath):
    """Loads factors written by `save_lora_weights`, enabling LoRA with the file's rank and targets if needed.

    Example:
    >>> import os, tempfile
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> def small():
    ...     return BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=8)
    >>> tuned = small(); enable_lora(tuned, 2)
    >>> path = os.path.join(tempfile.mkdtemp(), "adapter.lora.h5")
    >>> save_lora_weights(tuned, path)
    >>> fresh = small(); load_lora_weights(fresh, path); lora_rank(fresh)
    2
    """
    import h5py

    path = os.fspath(filepath)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such LoRA weights file (written by `backbone.save_lora_weights`).")
    with h5py.File(path, "r") as f:
        rank = int(f.attrs["rank"])
        alpha = float(f.attrs["lora_alpha"])
        targets = [str(name) for name in f.attrs["target_layer_names"]]
        factors = {
            name: {key: f[name][key][()] for key in ("lora_kernel_a", "lora_kernel_b")}
            for name, _ in lora_layers(backbone, targets)
            if name in f
        }
    if lora_rank(backbone) is not None and lora_rank(backbone) != rank:
        raise ValueError(
            f"{path}: LoRA rank {rank}, but this backbone's LoRA has rank {lora_rank(backbone)}: load it into "
            "a backbone without LoRA (it is then enabled with the file's rank) or enable the same rank."
        )
    # Every check before any change: a file that does not fit leaves the backbone as it was.
    layers = lora_layers(backbone, targets)
    for name, dense in layers:
        if name not in factors:
            raise ValueError(f"{path}: no factors for layer {name!r}: the file is for a backbone with fewer layers.")
        inputs, units = dense.kernel.shape[0], dense.units
        for key, shape in (("lora_kernel_a", (inputs, rank)), ("lora_kernel_b", (rank, units))):
            if tuple(factors[name][key].shape) != shape:
                raise ValueError(
                    f"{path}: {name}/{key} has shape {tuple(factors[name][key].shape)}, this backbone's has "
                    f"{shape}: the file is for a backbone of another width."
                )
    if lora_rank(backbone) is None:
        enable_lora(backbone, rank, targets, lora_alpha=alpha)
    for name, dense in layers:
        dense.lora_kernel_a.assign(factors[name]["lora_kernel_a"])
        dense.lora_kernel_b.assign(factors[name]["lora_kernel_b"])


def _check_names(names):
    if isinstance(names, str):
        names = [names]
    names = list(names)
    unknown = [name for name in names if name not in LORA_LAYER_NAMES]
    if unknown:
        raise ValueError(f"Unknown LoRA target layer {unknown[0]!r}: expected some of {list(LORA_LAYER_NAMES)}.")
    return set(names)
