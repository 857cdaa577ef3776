"""What `Task.fit`, `evaluate` and `predict` use to take the user's inputs as Keras takes them.

Raw text is told from features (`looks_like_text`, `is_dataset`); NumPy
arrays of strings become the lists the preprocessors read
(`numpy_text_as_lists`, also used by `BertTextEmbedder` and
`BertSpanExtractor`); feature dicts given as Python lists become arrays
(`lists_as_arrays`); `verbose="auto"` becomes what suits where the output
goes (`progress_verbosity`); a generator whose first batch was read is given
back whole (`chained`); `joined_processes` says whether this process is
one of several, where `fit` on raw strings would train each alone; a
transformers `BatchEncoding` is read as the dict it holds (`as_plain_dict`)
and a torch `DataLoader` is recognised (`is_torch_data_loader`); and
`batch_shards` says among how many devices a JAX distribution splits each
batch (`check_batch_shards`: a batch size they cannot share is one line).
"""

import collections.abc

import keras
import numpy as np


def joined_processes():
    """`(count, runtime)` of the processes this one has joined through its backend: torch.distributed's world, or
    JAX's `jax.distributed` processes; `(1, None)` alone (and on TensorFlow, whose workers share a strategy).

    Example:
    >>> joined_processes()
    (1, None)
    """
    backend = keras.backend.backend()
    if backend == "torch":
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist.get_world_size(), "PyTorch"
    elif backend == "jax":
        import jax

        if jax.process_count() > 1:
            return jax.process_count(), "JAX"
    return 1, None


def numpy_text_as_lists(x):
    """A NumPy array of strings (or, dtype object, of word lists) or a TensorFlow string tensor (keras-hub's
    `predict(tf.constant([...]))`) -> the Python list every preprocessor reads (a 0-d one: its one string, not its
    characters), also as a part of an `(a, b)` tuple; anything else as it is.

    Example:
    >>> numpy_text_as_lists(np.array("I loved it")), numpy_text_as_lists((np.array(["a"]), np.array(["b"])))
    ('I loved it', (['a'], ['b']))
    """
    if _is_string_tensor(x):
        value = x.numpy()  # bytes, or an array of them (UTF-8)
        return _decoded(value.tolist() if isinstance(value, np.ndarray) else value)
    if isinstance(x, np.ndarray) and x.dtype.kind in ("U", "S", "O"):
        return x.tolist()
    if isinstance(x, tuple) and any(_is_string_tensor(part) or (isinstance(part, np.ndarray) and part.dtype.kind
                                                                in ("U", "S", "O")) for part in x):
        return tuple(numpy_text_as_lists(part) for part in x)
    return x


def _decoded(value):
    """UTF-8 bytes (in nested lists) as text; an invalid byte becomes U+FFFD, which the tokenizer drops as it drops
    invalid bytes."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return [_decoded(item) for item in value] if isinstance(value, list) else value


def _is_string_tensor(x):
    """Whether `x` is an eager TensorFlow tensor of strings (recognised without importing TensorFlow)."""
    return (type(x).__module__.startswith("tensorflow") and getattr(getattr(x, "dtype", None), "name", None) == "string"
            and hasattr(x, "numpy"))


def progress_verbosity(verbose, stream=None):
    """Keras's `verbose="auto"` as a person reads it where the output goes: the progress bar (1) in a terminal or a
    notebook, one line per epoch (2) elsewhere. Keras draws its bar with carriage returns and colour codes whenever
    it runs on a POSIX system, so a log file of `python train.py > log` got every redraw; any other value passes.

    >>> import io
    >>> progress_verbosity("auto", io.StringIO()), progress_verbosity(0, io.StringIO())
    (2, 0)
    """
    if not (isinstance(verbose, str) and verbose == "auto"):
        return verbose
    import sys

    stream = sys.stdout if stream is None else stream
    interactive = getattr(stream, "isatty", lambda: False)() or "ipykernel" in sys.modules
    return 1 if interactive else 2


def lists_as_arrays(x, y=None, sample_weight=None):
    """With a dict of features as `x`, its values and the labels and weights given as Python lists -> NumPy arrays
    (keras-hub's examples pass `y=[0, 3]` beside NumPy features; Keras's own `fit` stops on that mix with
    "Unrecognized data type" and prints the whole dict). Raw text, datasets and arrays pass as they are.

    >>> x, y, _ = lists_as_arrays({"token_ids": [[1, 2]]}, [3])
    >>> type(x["token_ids"]).__name__, y.tolist()
    ('ndarray', [3])
    """
    if not isinstance(x, dict):
        return x, y, sample_weight

    def as_array(value):
        if isinstance(value, dict):
            return {key: as_array(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            array = np.asarray(value)
            return array if array.dtype.kind in "biuf" else value
        return value

    return as_array(x), as_array(y), as_array(sample_weight)


def chained(first, rest):
    """`first`, then what generator `rest` yields: a generator again, as Keras takes only those."""
    yield first
    yield from rest


def is_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (recognised without importing TensorFlow).

    Example:
    >>> is_dataset([1, 2]), is_dataset({"token_ids": [[1]]})
    (False, False)
    """
    return type(x).__module__.startswith("tensorflow") and hasattr(x, "element_spec")


def looks_like_text(x):
    """Whether `x` is raw text as `fit` / `predict` take it: a string, strings in a list or an array, or a list of
    string pairs.

    Example:
    >>> looks_like_text("a film"), looks_like_text([["a", "b"]]), looks_like_text([[2, 7, 3]])
    (True, True, False)
    """
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in ("U", "S", "O")
    if isinstance(x, (list, tuple)) and x:
        first = x[0]
        if isinstance(first, (str, bytes)):
            return True
        if isinstance(first, (list, tuple)) and first and isinstance(first[0], (str, bytes)):
            return True
    return False


def as_plain_dict(value):
    """A mapping that is not a dict (transformers' `BatchEncoding`, a `UserDict`) as a dict; anything else as it is,
    so that the features' checks, which look for a dict, see it.

    Example:
    >>> import collections
    >>> type(as_plain_dict(collections.UserDict(token_ids=[[1]]))).__name__, as_plain_dict([1])
    ('dict', [1])
    """
    if isinstance(value, collections.abc.Mapping) and not isinstance(value, dict):
        return dict(value)
    return value


def is_torch_data_loader(x):
    """Whether `x` is a `torch.utils.data.DataLoader` (recognised without importing PyTorch).

    >>> is_torch_data_loader([1, 2])
    False
    """
    return any(cls.__module__.startswith("torch.utils.data") and cls.__name__ == "DataLoader"
               for cls in type(x).__mro__)


def batch_shards():
    """Into how many parts the Keras distribution in effect splits each batch (`keras.distribution.DataParallel` or
    `ModelParallel` on JAX: the size of its batch axis); 1 without one.

    >>> batch_shards()
    1
    """
    distribution = keras.distribution.distribution() if hasattr(keras, "distribution") else None
    mesh = getattr(distribution, "device_mesh", None)
    axis = getattr(distribution, "batch_dim_name", None)
    if mesh is None or axis not in list(mesh.axis_names):
        return 1
    return int(mesh.shape[list(mesh.axis_names).index(axis)])


def check_batch_shards(batch_size, where):
    """Refuses, in one line, a `batch_size` that the distribution's devices cannot share equally (JAX said
    "IndivisibleError: Sharding ... implies that array axis 0 is partitioned 2 times, but the dimension size is 3")."""
    shards = batch_shards()
    if shards > 1 and isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size % shards:
        raise ValueError(f"{where}: batch_size={batch_size} does not split among the {shards} devices of the "
                         f"distribution in effect ({type(keras.distribution.distribution()).__name__}): give a "
                         f"multiple of {shards}.")


def filled_for_every_device(batch, batch_size=None):
    """Rows (features, or `(features, labels, weights)`) with the first row repeated up to a multiple of the devices
    a JAX distribution splits each batch among (`batch_shards`), the repeats weighing 0: `(rows, batch)`, `rows` the
    real rows; `(rows, batch)` as it is without such a distribution. With `batch_size`, rows of several batches are
    filled to whole batches (the size is a multiple of the devices: `check_batch_shards`). Before, one text in
    `train_on_batch` or `predict` over two devices stopped in JAX's `IndivisibleError`.

    >>> filled_for_every_device({"token_ids": np.ones((1, 4))})[0]
    1
    """
    shards = batch_shards()
    leaves = [leaf for leaf in keras.tree.flatten(batch) if leaf is not None]
    rows = len(leaves[0]) if leaves else 0
    multiple = batch_size if batch_size is not None and rows >= batch_size else shards
    missing = -rows % multiple if rows and shards > 1 else 0
    if not missing:
        return rows, batch
    filled = keras.tree.map_structure(
        lambda a: None if a is None else np.concatenate([np.asarray(a), np.repeat(np.asarray(a)[:1], missing, axis=0)]),
        batch)
    if isinstance(filled, tuple) and len(filled) == 3:  # the repeats weigh nothing

        def unweighted(weights):
            weights = np.array(weights)
            weights[rows:] = 0
            return weights

        filled = (filled[0], filled[1], keras.tree.map_structure(unweighted, filled[2]))
    return rows, filled
