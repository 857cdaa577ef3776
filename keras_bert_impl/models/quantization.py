"""Weight quantization (`model.quantize("int8")`) that survives saving and loading.

Keras's `Model.quantize(mode)` replaces the float kernels of the `Dense` and `Embedding` layers by int8, int4 or
float8 ones (Keras's own layers do the work). A model built again from its config (`from_config`,
`keras.saving.load_model`, `from_preset`, and the copy that `Task.save` writes) would have float layers, and refuse
the quantized weights. So the configs record which layers are quantized, and how:

- `quantized_layers(model)` -> `{layer path: mode}` ("transformer_layer_0/qkv": "int8"), what `get_config` writes
  (`BertBackbone` as its `quantized_layers` argument, a task for its head's layers);
- `quantize_layers(model, layers)` quantizes those layers of a freshly built model the same way (before its weights
  load);
- `quantize_quietly(model, mode, ...)` runs Keras's `quantize` without its warning for every layer that has nothing
  to quantize (each LayerNormalization, Dropout, InputLayer and the tokenizer: about 37 lines for a 6-layer model).

Example:
>>> from keras_bert_impl import BertBackbone
>>> backbone = BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
...                         intermediate_dim=16, max_sequence_length=8)
>>> backbone.quantize("int8")
>>> sorted(quantized_layers(backbone).items())[:2]
[('pooled_dense', 'int8'), ('token_embedding', 'int8')]
>>> BertBackbone.from_config(backbone.get_config()).get_layer("pooled_dense").quantization_mode
'int8'
"""

import contextlib
import gc
import re
import warnings

# Modes a freshly built layer can take from its name alone. GPTQ and AWQ also need the calibration settings Keras
# keeps on the layer, which a `{path: mode}` record does not carry.
REBUILDABLE_MODES = ("int8", "int4", "float8")


def quantization_name(layer):
    """A layer's quantization as its dtype policy names it, without the source dtype: `"int8"`, `"float8"`,
    `"int4/-1"` (int4, one scale per output channel) or `"int4/128"` (blocks of 128); None when not quantized."""
    if getattr(layer, "quantization_mode", None) is None:
        return None
    return layer.dtype_policy.name.rsplit("_from_", 1)[0]


def quantized_layers(model, exclude=()):
    """`{layer path: quantization name}` of the quantized layers of `model`, except the layers in `exclude`.

    Raises `ValueError` (one line) for a GPTQ/AWQ layer, which a config cannot rebuild."""
    excluded = {id(layer) for layer in exclude}
    found = {}
    for layer in model._flatten_layers(include_self=False):
        name = quantization_name(layer)
        if name is None or id(layer) in excluded:
            continue
        if layer.quantization_mode not in REBUILDABLE_MODES:
            raise ValueError(
                f"{type(model).__name__}: layer {layer.path!r} is {layer.quantization_mode}-quantized, which this "
                f"package cannot save (a config rebuilds only {', '.join(REBUILDABLE_MODES)}); save the float model "
                "and quantize it after loading."
            )
        if layer.path in found:
            raise ValueError(f"{type(model).__name__}: two quantized layers share the path {layer.path!r}; "
                             "give them distinct names to save the model.")
        found[layer.path] = name
    return found


def quantize_layers(model, layers):
    """Quantizes the layers named in `layers` (`{path: quantization name}`, from `quantized_layers`) of a built
    `model`, as Keras's `quantize` did them: their float weights become quantized ones, which loading then
    overwrites. A path the model does not have is one `ValueError` naming it."""
    if not layers:
        return
    by_path = {layer.path: layer for layer in model._flatten_layers(include_self=False)}
    unknown = sorted(set(layers) - set(by_path))
    if unknown:
        raise ValueError(
            f"{type(model).__name__} has no layer {unknown[0]!r}, which its config lists as quantized "
            f"({len(unknown)} such); was it saved by another version of the model?"
        )
    with quiet_unquantizable_layers(), collecting_garbage_once():
        for path, name in layers.items():
            layer = by_path[path]
            if str(name).split("/")[0] not in REBUILDABLE_MODES:
                raise ValueError(f"layer {path!r}: quantization {name!r} cannot be rebuilt from a config "
                                 f"(only {', '.join(REBUILDABLE_MODES)}).")
            if quantization_name(layer) == name:
                continue
            if layer.quantization_mode is not None:
                raise ValueError(f"layer {path!r} is already {quantization_name(layer)}-quantized; its config says {name}.")
            # Keras's own route: a quantized policy on a built layer quantizes it (`Layer.dtype_policy`'s setter).
            layer.dtype_policy = f"{name}_from_{layer.dtype_policy.name}"


@contextlib.contextmanager
def quiet_unquantizable_layers():
    """Silences Keras's "Layer X does not have a `quantize` method implemented" warnings (layers with no weights to
    quantize: LayerNormalization, Dropout, the tokenizer...), and only those."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Layer .* does not have a `quantize` method implemented")
        yield


def quantize_quietly(quantize, mode, *args, **kwargs):
    """Calls `quantize(mode, ...)` (a bound `keras.Model.quantize`) inside `quiet_unquantizable_layers` and
    `collecting_garbage_once`."""
    with quiet_unquantizable_layers(), collecting_garbage_once():
        return quantize(mode, *args, **kwargs)


@contextlib.contextmanager
def collecting_garbage_once():
    """One `gc.collect()` at the end instead of one per quantized layer.

    Keras frees each float kernel it replaces with a full `gc.collect()` (`Layer.__delattr__`): on a TensorFlow
    heap 0.35 s a layer, 26 times for a 6-layer model (9 of `quantize`'s 10 s), and minutes in a process that has
    built many models. One collection at the end frees the same memory."""
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


def matches_filters(layer, filters):
    """Keras's `quantize(filters=...)` test: None (every layer), a regular expression or a list of them searched in
    the layer's name, or a callable taking the layer."""
    if filters is None:
        return True
    if isinstance(filters, str):
        return re.search(filters, layer.name) is not None
    if isinstance(filters, (list, tuple)):
        return any(re.search(pattern, layer.name) is not None for pattern in filters)
    return bool(filters(layer))
