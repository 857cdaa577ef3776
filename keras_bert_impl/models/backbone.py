"""BertBackbone: the BERT encoder as a functional Keras model."""

import keras

from keras_bert_impl.layers.float32_layer_norm import Float32LayerNormalization
from keras_bert_impl.layers.layer_norm_backward import check_layer_norm_backward
from keras_bert_impl.layers.one_hot_embedding import OneHotEmbedding
from keras_bert_impl.layers.position_embedding import PositionEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder, get_activation
from keras_bert_impl.models import lora, quantization
from keras_bert_impl.models.functional_model import FunctionalModel
from keras_bert_impl.models.unknown_arguments import check_arguments
from keras_bert_impl.presets import PresetsAttribute


def bert_kernel_initializer(stddev=0.02):
    """BERT's weight initializer: a normal distribution of `stddev` (0.02) cut at two standard deviations.

    Example:
    >>> bert_kernel_initializer().get_config()["stddev"]
    0.02
    """
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertBackbone(FunctionalModel):
    """BERT encoder (Devlin et al., 2018) as a functional Keras 3 model.

    Token + segment + learned position embeddings, LayerNorm and dropout, then
    `num_layers` post-LayerNorm `TransformerEncoder` blocks, and the pooler
    (dense + tanh on the [CLS] position). Runs on the TensorFlow, JAX and
    PyTorch backends; imports no TensorFlow.

    Inputs are a dict `{"token_ids", "segment_ids", "padding_mask"}` of int
    tensors `(batch, sequence_length)`; outputs are a dict
    `{"sequence_output": (batch, sequence_length, hidden_dim),
    "pooled_output": (batch, hidden_dim)}`. Names follow keras-hub.

    Args:
        vocabulary_size: int. Size of the WordPiece vocabulary.
        num_layers: int. Number of encoder blocks.
        num_heads: int. Attention heads per block; must divide `hidden_dim`.
        hidden_dim: int. Width of the encoder.
        intermediate_dim: int. Width of each feed-forward layer.
        dropout: float. Dropout of embeddings, attention and feed-forward.
        max_sequence_length: int. Size of the position table (512 for all
            released checkpoints).
        num_segments: int. Size of the segment (token type) table.
        activation: `"gelu"` (exact erf GELU, Hugging Face checkpoints) or
            `"gelu_approximate"` (tanh form, the original TF code).
        layer_norm_epsilon: float. 1e-12 as in BERT.
        attention_dropout: float or None. Dropout on attention probabilities;
            None means `dropout`. Set 0 to always use the fused attention kernel.
        attention_padding: `"mask"` (default; also right for packed rows) or
            `"lengths"`: the padding reaches the attention as one length per
            row, which cuDNN's fused attention takes without a mask tensor
            (JAX on a GPU in bf16/fp16; the same outputs everywhere). Rows must
            hold one example padded on the right. Not part of the saved
            architecture: `from_preset(..., attention_padding="lengths")`.
        qkv_projection: `"fused"` (default: one matmul, its output sliced
            into query, key and value) or `"split"` (three matmuls on the
            same kernel's column blocks). Same weights, same outputs; not part
            of the saved architecture either (`TransformerEncoder`).
        recompute_activation: bool, default True: on JAX the backward pass
            recomputes each block's feed-forward bias + GELU rather than
            storing an intermediate as large as the activation (less memory
            traffic on a GPU; `TransformerEncoder`). Same outputs; not part of
            the saved architecture.
        layer_norm_backward: `"explicit"` (default) or `"autodiff"`: on JAX
            the LayerNorms' gradient comes from a hand-written backward pass
            that moves fewer bytes on a GPU, or from autodiff, which moves
            fewer beside XLA's cuDNN LayerNorm flag
            (`Float32LayerNormalization(backward=...)`). Same outputs; not
            part of the saved architecture.
        quantized_layers: None, or `{layer path: quantization}` such as
            `{"transformer_layer_0/qkv": "int8"}`: those layers are built
            quantized. `get_config` records what `quantize` did, so a
            quantized backbone's config, `.keras` file or preset loads
            quantized; not usually written by hand
            (`keras_bert_impl.models.quantization`).
        dtype: None, a dtype or a policy name such as `"mixed_bfloat16"`.

    Example:
    >>> import numpy as np
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                         hidden_dim=32, intermediate_dim=64,
    ...                         max_sequence_length=16)
    >>> out = backbone({"token_ids": np.ones((1, 8), "int32"),
    ...                 "segment_ids": np.zeros((1, 8), "int32"),
    ...                 "padding_mask": np.ones((1, 8), "int32")})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((1, 8, 32), (1, 32))

    Load released weights with `BertBackbone.from_preset("bert_base_en_uncased")`
    or from a local Hugging Face / Google / keras-hub / own preset directory.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        attention_dropout=None,
        attention_padding="mask",
        qkv_projection="fused",
        recompute_activation=True,
        layer_norm_backward="explicit",
        quantized_layers=None,
        dtype=None,
        **kwargs,
    ):
        check_arguments(type(self), kwargs)
        _check_positive_ints(
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
        )
        if hidden_dim % num_heads != 0:
            raise ValueError(
                f"hidden_dim={hidden_dim} is not divisible by num_heads={num_heads}: "
                f"each attention head needs hidden_dim / num_heads features "
                f"(e.g. hidden_dim={num_heads * max(1, round(hidden_dim / num_heads))})."
            )
        get_activation(activation)
        check_layer_norm_backward(layer_norm_backward)

        # === Layers ===
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        # A one-hot matmul: the gradient of a gather into 2 rows is a scatter-add that a GPU serialises.
        self.segment_embedding = OneHotEmbedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.position_embedding = PositionEmbedding(
            max_sequence_length, dtype=dtype, name="position_embedding"
        )
        self.embeddings_layer_norm = Float32LayerNormalization(
            epsilon=layer_norm_epsilon, backward=layer_norm_backward, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.transformer_layers = [
            TransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                attention_padding=attention_padding,
                qkv_projection=qkv_projection,
                recompute_activation=recompute_activation,
                layer_norm_backward=layer_norm_backward,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional Model ===
        token_id_input = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_id_input = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask_input = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        tokens = self.token_embedding(token_id_input)
        positions = self.position_embedding(tokens, padding_mask=padding_mask_input)
        x = tokens + positions + self.segment_embedding(segment_id_input)
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)
        for layer in self.transformer_layers:
            x = layer(x, padding_mask=padding_mask_input)
        sequence_output = x
        pooled_output = self.pooled_dense(x[:, 0, :])
        super().__init__(
            inputs={
                "token_ids": token_id_input,
                "segment_ids": segment_id_input,
                "padding_mask": padding_mask_input,
            },
            outputs={"sequence_output": sequence_output, "pooled_output": pooled_output},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = attention_dropout
        self.attention_padding = attention_padding
        self.qkv_projection = qkv_projection
        self.recompute_activation = recompute_activation
        self.layer_norm_backward = layer_norm_backward
        quantization.quantize_layers(self, quantized_layers)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "attention_dropout": self.attention_dropout,
            "attention_padding": self.attention_padding,
            "qkv_projection": self.qkv_projection,
            "recompute_activation": self.recompute_activation,
            "layer_norm_backward": self.layer_norm_backward,
        }
        quantized = quantization.quantized_layers(self)
        if quantized:  # (a float backbone's config stays as it always was)
            config["quantized_layers"] = quantized
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)

    # How the model runs, not what it is: the same weights and outputs either way, so presets do not record
    # them and `from_preset(..., attention_padding="lengths")` may set them on any preset.
    run_settings = ("attention_padding", "qkv_projection", "recompute_activation", "layer_norm_backward")

    def architecture_config(self):
        """The constructor arguments that define the weights' shapes and math (no name/dtype)."""
        config = self.get_config()
        for key in ("name", "trainable", "dtype", *self.run_settings):
            config.pop(key, None)
        return config

    @property
    def token_embedding_matrix(self):
        return self.token_embedding.embeddings

    # === LoRA (models/lora.py) ===

    def default_lora_layer_names(self):
        """The layers `enable_lora` targets by default: every block's fused query/key/value projection."""
        return list(lora.DEFAULT_LORA_LAYER_NAMES)

    def enable_lora(self, rank, target_layer_names=None, lora_alpha=None):
        """Freezes the backbone and trains rank-`rank` LoRA factors on `target_layer_names` (keras-hub's call).

        Targets are names among `"qkv"`, `"attention_output"`, `"intermediate"`, `"output"`, `"pooled_dense"`;
        default `["qkv"]`. A task model's head stays trainable. Saved `.keras` files and presets hold the merged
        kernels (they load as plain models); `save_lora_weights` writes the factors alone.

        Example:
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
        ...                         intermediate_dim=16, max_sequence_length=8)
        >>> backbone.enable_lora(rank=2)
        >>> [v.path for v in backbone.trainable_variables if "lora" in v.path]
        ['transformer_layer_0/qkv/lora_kernel_a', 'transformer_layer_0/qkv/lora_kernel_b']
        """
        lora.enable_lora(self, rank, target_layer_names, lora_alpha=lora_alpha)

    def save_lora_weights(self, filepath):
        """Writes the LoRA factors to `filepath` (`*.lora.h5`, atomically); `load_lora_weights` reads them."""
        lora.save_lora_weights(self, filepath)

    def load_lora_weights(self, filepath):
        """Loads `save_lora_weights`'s factors, enabling LoRA with the file's rank and targets if not yet on."""
        lora.load_lora_weights(self, filepath)

    # === Quantization (models/quantization.py) ===

    def quantize(self, mode=None, *args, **kwargs):
        """Keras's `Model.quantize` (`"int8"`, `"int4"`, `"float8"`: the Dense kernels and the token embedding
        become quantized), without a warning per layer that has nothing to quantize. `get_config`, `.keras` files
        and `save_to_preset` record the quantized layers, so the model loads quantized.

        Example:
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
        ...                         intermediate_dim=16, max_sequence_length=8)
        >>> backbone.quantize("int8")
        >>> backbone.get_layer("transformer_layer_0").qkv_dense.kernel.dtype
        'int8'
        """
        return quantization.quantize_quietly(super().quantize, mode, *args, **kwargs)

    # === Presets ===
    presets = PresetsAttribute()

    @staticmethod
    def get_layout_map(device_mesh, model_parallel_dim_name="model", data_parallel_dim_name="batch"):
        """A `keras.distribution.LayoutMap` for `keras.distribution.ModelParallel` (JAX), as keras-hub's backbones
        give one: the encoder's large matrices split over the mesh's model axis as Megatron-LM splits them (the
        query/key/value and intermediate kernels by columns, the attention output and output kernels by rows), the
        token embeddings by their hidden columns; the rest (LayerNorms, position and segment embeddings, a task's
        head) is copied to every device. `data_parallel_dim_name` is the mesh's batch axis, which `ModelParallel`
        is given too.

        Example (two devices: `XLA_FLAGS=--xla_force_host_platform_device_count=2` on a CPU):
        >>> mesh = keras.distribution.DeviceMesh((1, 2), ["batch", "model"])  # doctest: +SKIP
        >>> layout_map = BertBackbone.get_layout_map(mesh)  # doctest: +SKIP
        >>> keras.distribution.set_distribution(  # doctest: +SKIP
        ...     keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch"))
        >>> classifier = BertClassifier.from_preset("bert_base_en_uncased", num_classes=2)  # doctest: +SKIP
        """
        names = list(device_mesh.axis_names)
        for role, name in (("model_parallel_dim_name", model_parallel_dim_name),
                           ("data_parallel_dim_name", data_parallel_dim_name)):
            if name not in names:
                raise ValueError(f"get_layout_map: {role}={name!r} is not an axis of the device mesh, whose axes are "
                                 f"{names}: name the mesh's axes, e.g. DeviceMesh((1, 2), ['batch', 'model']).")
        model = model_parallel_dim_name
        layout_map = keras.distribution.LayoutMap(device_mesh)
        layout_map["token_embedding/embeddings"] = (None, model)
        layout_map[r"transformer_layer_\d+/(qkv|intermediate)/kernel"] = (None, model)
        layout_map[r"transformer_layer_\d+/(qkv|intermediate)/bias"] = (model,)
        layout_map[r"transformer_layer_\d+/(attention_output|output)/kernel"] = (model, None)
        return layout_map

    @classmethod
    def from_preset(cls, preset, load_weights=True, dtype=None, **kwargs):
        """Builds a backbone from a preset name or a local directory.

        `preset` is a name from `BertBackbone.presets` (resolved through the
        local cache, then downloaded), or a directory holding one of:
        a Hugging Face BERT (`config.json` + `model.safetensors`), an original
        Google checkpoint (`bert_config.json` + `bert_model.ckpt.*`), a
        keras-hub BERT preset, or a preset written by `save_to_preset`.
        Keyword arguments override config entries (e.g. `dropout=0.0`).

        Example:
        >>> backbone = BertBackbone.from_preset("all_minilm_l6_v2_en")  # doctest: +SKIP
        """
        from keras_bert_impl.checkpoints.loading import load_backbone

        return load_backbone(cls, preset, load_weights=load_weights, dtype=dtype, **kwargs)

    def save_to_preset(self, preset_dir, vocabulary=None, lowercase=None, write_task_files=None):
        """Writes `config.json`, `model.weights.h5` (and the vocabulary) to `preset_dir`, atomically.

        `vocabulary` is a path to a vocab.txt or a list of tokens; `lowercase`
        records the tokenizer's casing. `BertBackbone.from_preset(preset_dir)`
        and `BertTokenizer.from_preset(preset_dir)` read it back.
        `write_task_files(directory)` adds a task model's files to the same
        atomic save (`Task.save_to_preset` passes it).
        """
        from keras_bert_impl.checkpoints.own_preset import save_backbone_preset

        save_backbone_preset(self, preset_dir, vocabulary=vocabulary, lowercase=lowercase,
                             write_task_files=write_task_files)


def _check_positive_ints(**values):
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
