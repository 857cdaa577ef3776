"""XLA's persistent compilation cache on JAX: `--compilation_cache auto|none|DIR`.

Under JAX every new input shape compiles an XLA program, and on a GPU that
takes seconds: on one H100, predicting the SQuAD dev windows in three length
buckets with BERT-base spent 12.8 s compiling and 0.4 s computing
(docs/benchmarks.md, session 19), while torch eager compiles nothing. JAX can
keep the compiled programs on disk and reuse them in the next process with the
same shapes, model and versions (`jax_compilation_cache_dir`): a recipe run a
second time then starts computing at once.

`resolve_compilation_cache` decides what `auto` (the recipes' default) means:
the cache folder `~/.cache/keras_bert_impl/jax_compilation_cache` (under
`$XDG_CACHE_HOME` when set) on JAX with a GPU or TPU; nothing on a CPU, where
compiling is fast, and on TensorFlow and PyTorch. JAX caches only programs that
took at least a second to compile, and keys them on the program, the devices
and the versions, so a changed model or a JAX upgrade compiles afresh.

Example:
>>> resolve_compilation_cache("auto", backend="jax", accelerator=False) is None
True
>>> resolve_compilation_cache("/tmp/xla_cache", backend="jax", accelerator=False)
'/tmp/xla_cache'
>>> resolve_compilation_cache("none", backend="jax", accelerator=True) is None
True
"""

import os

import keras

AUTO, NONE = "auto", "none"


def default_directory():
    """`$XDG_CACHE_HOME/keras_bert_impl/jax_compilation_cache`, `~/.cache/...` when the variable is unset."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "keras_bert_impl", "jax_compilation_cache")


def resolve_compilation_cache(value, backend=None, accelerator=None):
    """The cache folder for `value` (`"auto"`, `"none"` or a folder) on this machine, or None for no cache.

    Args:
        value: `"auto"`, `"none"`, or a folder (created on first use).
        backend: the Keras backend (default: the current one). Only JAX has the cache.
        accelerator: whether JAX runs on a GPU or TPU (default: asks JAX).

    Raises:
        ValueError: a folder on a backend other than JAX, or an empty value.
    """
    if not value:
        raise ValueError("--compilation_cache='': expected auto, none or a folder")
    if value == NONE:
        return None
    backend = backend or keras.backend.backend()
    if value == AUTO:
        if backend != "jax":
            return None
        if accelerator is None:
            import jax

            accelerator = jax.default_backend() in ("gpu", "tpu")
        return default_directory() if accelerator else None
    if backend != "jax":
        raise ValueError(f"--compilation_cache={value!r}: the persistent compilation cache is JAX's "
                         f"(KERAS_BACKEND={backend}); use auto or none")
    return value


def enable_compilation_cache(value, backend=None):
    """Turns JAX's persistent compilation cache on for `value` (see `resolve_compilation_cache`), before the first
    compilation; returns the folder, or None where it stays off."""
    directory = resolve_compilation_cache(value, backend=backend)
    if directory is not None:
        import jax

        jax.config.update("jax_compilation_cache_dir", directory)
    return directory
