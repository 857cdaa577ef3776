"""The post-LayerNorm Transformer encoder block of BERT."""

import math

import keras
from keras import ops

from keras_bert_impl.layers.float32_layer_norm import Float32LayerNormalization
from keras_bert_impl.layers.key_lengths_attention import (
    ATTENTION_PADDINGS,
    attention_over_key_lengths,
    key_lengths,
)
from keras_bert_impl.layers.layer_norm_backward import check_layer_norm_backward
from keras_bert_impl.layers.packed_examples import attention_mask_from_example_ids
from keras_bert_impl.layers.recomputed_in_backward import recomputed_in_backward

_ACTIVATIONS = ("gelu", "gelu_approximate", "relu")
QKV_PROJECTIONS = ("fused", "split")


def get_activation(name):
    """Returns the activation function for `"gelu"`, `"gelu_approximate"` or `"relu"`.

    `"gelu"` is the exact erf GELU used by Hugging Face checkpoints;
    `"gelu_approximate"` is the tanh approximation of the original TF code.
    """
    if name == "gelu":
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name == "gelu_approximate":
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "relu":
        return keras.activations.relu
    raise ValueError(
        f"Unknown activation {name!r}: expected one of {', '.join(_ACTIVATIONS)}."
    )


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class TransformerEncoder(keras.layers.Layer):
    """One BERT encoder block: self-attention and feed-forward, post-LayerNorm.

    `x = LayerNorm(x + Dropout(Attention(x)))`, then
    `x = LayerNorm(x + Dropout(Dense(act(Dense(x)))))`, exactly as in the paper
    and in google-research/bert `modeling.py`.

    Attention runs through `keras.ops.dot_product_attention`, so each backend
    uses its fused kernel where it has one. When training with
    `attention_dropout > 0` the attention probabilities must be materialised
    to apply dropout, so that case takes an explicit softmax path (softmax in
    float32). LayerNorm always computes in float32 under mixed precision.

    Args:
        num_heads: int. Number of attention heads; must divide the hidden size.
        intermediate_dim: int. Width of the feed-forward layer.
        dropout: float. Dropout after attention and feed-forward outputs.
        attention_dropout: float or None. Dropout on attention probabilities;
            `None` means the same as `dropout` (the paper's setting).
        activation: `"gelu"` (exact, Hugging Face), `"gelu_approximate"`
            (tanh, original TF code) or `"relu"`.
        layer_norm_epsilon: float. Defaults to 1e-12 as in BERT.
        kernel_initializer: initializer for dense kernels. Defaults to
            `TruncatedNormal(stddev=0.02)`.
        attention_padding: `"mask"` (default) or `"lengths"`: how the
            attention learns which keys are padding. `"mask"` builds a
            `(batch, 1, query, key)` mask from `padding_mask`, which also
            keeps packed examples apart. `"lengths"` passes the number of real
            tokens of each row, which cuDNN's fused attention (JAX, GPU,
            bf16/fp16) takes without any mask tensor; rows must then hold one
            example padded on the right, and an `attention_mask` or training
            with attention dropout falls back to the mask
            (`key_lengths_attention`). Outputs are the same either way.
        qkv_projection: `"fused"` (default) or `"split"`: how the query, key
            and value come out of the one `qkv` kernel `(hidden, 3 * hidden)`.
            `"fused"` runs one matmul and slices its output into the three;
            `"split"` runs three matmuls on the kernel's column blocks, so the
            activations are never sliced (on a GPU the slice copies the whole
            `3 * hidden` output to feed the attention kernel). Same weights and
            the same outputs either way; which is faster is a GPU measurement
            (`benchmarks/backbone_speed.py --qkv_projection split`).
        recompute_activation: bool, default True. On JAX, the backward pass
            recomputes the feed-forward bias + activation from the
            intermediate matmul's output instead of storing an intermediate
            of the activation: on a GPU that saves writing and reading one
            `(batch, sequence_length, intermediate_dim)` tensor per block
            (`recomputed_in_backward`; `benchmarks/hlo_traffic.py` counts the
            bytes). Same outputs either way; TensorFlow and PyTorch ignore it.
        layer_norm_backward: `"explicit"` (default) or `"autodiff"`: the
            LayerNorms' backward pass on JAX, hand-written (fewer bytes on a
            GPU) or autodiff's (fewer still beside XLA's cuDNN LayerNorm
            flag); `Float32LayerNormalization(backward=...)`. Same outputs.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor `(batch, sequence_length, hidden_dim)`.
        padding_mask: optional int/bool tensor `(batch, sequence_length)`,
            1 (True) for real tokens, 0 for padding. A row that packs several
            examples numbers them instead (1, 2, ...; 0 for padding): each
            token then attends only to its own example's tokens
            (`packed_examples.attention_mask_from_example_ids`).
        attention_mask: optional bool/int tensor `(batch, sequence_length,
            sequence_length)`, 1 where query token `q` may attend key token
            `k`; combined with `padding_mask` when both are given.
        training: bool, enables dropout.

    Example:
    >>> import numpy as np
    >>> block = TransformerEncoder(num_heads=2, intermediate_dim=32)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    >>> tuple(block(x, padding_mask=mask).shape)
    (2, 5, 16)
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        attention_padding="mask",
        qkv_projection="fused",
        recompute_activation=True,
        layer_norm_backward="explicit",
        **kwargs,
    ):
        super().__init__(**kwargs)
        get_activation(activation)  # validates the name
        if attention_padding not in ATTENTION_PADDINGS:
            raise ValueError(
                f"attention_padding={attention_padding!r}: expected 'mask' (any rows, packed ones "
                "included) or 'lengths' (rows of one example padded on the right)."
            )
        self.attention_padding = attention_padding
        if qkv_projection not in QKV_PROJECTIONS:
            raise ValueError(
                f"qkv_projection={qkv_projection!r}: expected 'fused' (one matmul, its output sliced) or "
                "'split' (three matmuls on the kernel's column blocks)."
            )
        self.qkv_projection = qkv_projection
        if not isinstance(recompute_activation, bool):
            raise ValueError(f"recompute_activation={recompute_activation!r}: expected True or False.")
        self.recompute_activation = recompute_activation
        check_layer_norm_backward(layer_norm_backward)
        self.layer_norm_backward = layer_norm_backward
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        if hidden_dim % self.num_heads != 0:
            raise ValueError(
                f"hidden_dim={hidden_dim} is not divisible by num_heads="
                f"{self.num_heads}: each head needs hidden_dim / num_heads "
                "features."
            )
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // self.num_heads

        def dense(units, name):
            layer = keras.layers.Dense(
                units,
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name=name,
            )
            return layer

        # Query, key and value share one matmul: kernel (hidden, 3 * hidden),
        # columns laid out [query | key | value], each head-major.
        self.qkv_dense = dense(3 * hidden_dim, "qkv")
        self.qkv_dense.build(inputs_shape)
        self.attention_output_dense = dense(hidden_dim, "attention_output")
        self.attention_output_dense.build(inputs_shape)
        self.attention_layer_norm = Float32LayerNormalization(
            epsilon=self.layer_norm_epsilon, backward=self.layer_norm_backward, dtype=self.dtype_policy,
            name="attention_layer_norm",
        )
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate_dense = dense(self.intermediate_dim, "intermediate")
        self.intermediate_dense.build(inputs_shape)
        self.output_dense = dense(hidden_dim, "output")
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))
        self.output_layer_norm = Float32LayerNormalization(
            epsilon=self.layer_norm_epsilon, backward=self.layer_norm_backward, dtype=self.dtype_policy,
            name="output_layer_norm",
        )
        self.output_layer_norm.build(inputs_shape)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.attention_dropout_layer = keras.layers.Dropout(
            self.attention_dropout, dtype=self.dtype_policy
        )
        self._activation_fn = get_activation(self.activation)
        activation_fn = self._activation_fn
        self._bias_activation = recomputed_in_backward(lambda h, bias: activation_fn(h + bias))
        self.built = True

    def _query_key_value(self, x):
        """The query, key and value, each `(batch, length, heads, head_dim)`, from the one `qkv` kernel."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        heads = (batch, length, self.num_heads, self.head_dim)
        dense = self.qkv_dense
        if self.qkv_projection == "fused" or dense.lora_enabled or dense.quantization_mode:
            # LoRA and quantized kernels live in the Dense layer's own call.
            qkv = ops.reshape(dense(x), (batch, length, 3, self.num_heads, self.head_dim))
            return qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        # "split": the kernel's columns are [query | key | value]; slicing the (hidden, 3 * hidden) weights is
        # cheap, slicing the (batch, length, 3 * hidden) output is not.
        kernel = ops.cast(dense.kernel, self.compute_dtype)
        bias = ops.cast(dense.bias, self.compute_dtype)
        width = self.hidden_dim
        columns = [slice(i * width, (i + 1) * width) for i in range(3)]
        return tuple(ops.reshape(ops.matmul(x, kernel[:, c]) + bias[c], heads) for c in columns)

    def _feed_forward_activation(self, x):
        """`activation(intermediate_dense(x))`; with `recompute_activation`, the bias + activation are recomputed
        in the backward pass from the matmul's output, which the backward keeps anyway."""
        dense = self.intermediate_dense
        if not self.recompute_activation or dense.lora_enabled or dense.quantization_mode:
            # LoRA and quantized kernels live in the Dense layer's own call.
            return self._activation_fn(dense(x))
        hidden = ops.matmul(x, ops.cast(dense.kernel, self.compute_dtype))
        return self._bias_activation(hidden, ops.cast(dense.bias, self.compute_dtype))

    def _attention(self, x, padding_mask, attention_mask, training):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        query, key, value = self._query_key_value(x)
        mask = None
        if padding_mask is not None:
            # (batch, query, key): real keys of the query's own example only.
            mask = attention_mask_from_example_ids(padding_mask)
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            mask = attention_mask if mask is None else ops.logical_and(mask, attention_mask)
        if mask is not None:
            mask = mask[:, None, :, :]  # one mask for every head
        scale = 1.0 / math.sqrt(self.head_dim)
        if training and self.attention_dropout > 0:
            scores = ops.einsum("btnh,bsnh->bnts", query, key)
            scores = ops.cast(scores, "float32") * scale
            if mask is not None:
                scores = ops.where(mask, scores, -1e9)
            probs = ops.softmax(scores, axis=-1)
            probs = self.attention_dropout_layer(
                ops.cast(probs, self.compute_dtype), training=training
            )
            context = ops.einsum("bnts,bsnh->btnh", probs, value)
        elif self.attention_padding == "lengths" and attention_mask is None and padding_mask is not None:
            context = attention_over_key_lengths(query, key, value, key_lengths(padding_mask), scale)
        else:
            flash_attention = None  # the backend decides
            # cuDNN's fused attention (JAX on GPU) takes a mask only as a full
            # (batch, 1, query, key) tensor, which `mask` is; it runs fp16/bf16 only.
            if keras.backend.backend() == "jax" and self.compute_dtype not in ("float16", "bfloat16"):
                flash_attention = False  # skip the failing cuDNN try in float32
            context = ops.dot_product_attention(
                query, key, value, mask=mask, scale=scale, flash_attention=flash_attention
            )
        context = ops.reshape(context, (batch, length, self.hidden_dim))
        return self.attention_output_dense(context)

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None):
        x = inputs
        attention = self._attention(x, padding_mask, attention_mask, training)
        attention = self.dropout_layer(attention, training=training)
        x = self.attention_layer_norm(x + attention)
        ffn = self._feed_forward_activation(x)
        ffn = self.dropout_layer(self.output_dense(ffn), training=training)
        return self.output_layer_norm(x + ffn)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "attention_padding": self.attention_padding,
                "qkv_projection": self.qkv_projection,
                "recompute_activation": self.recompute_activation,
                "layer_norm_backward": self.layer_norm_backward,
            }
        )
        return config
