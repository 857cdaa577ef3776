"""`pytorch_model.bin` read into NumPy without PyTorch and without running the pickle's code.

A `torch.save` file (the zip format of PyTorch 1.6 and later) is a zip of
`<name>/data.pkl`, a pickle of the state dict, and `<name>/data/<key>`, the raw
bytes of each tensor storage. Unpickling an arbitrary pickle can run any code,
so this reader's unpickler resolves only the names a state dict of tensors
needs (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2` /
`_rebuild_parameter`, and the `torch.*Storage` types, each mapped to a NumPy
function or dtype here) and refuses every other one in one line, as
`torch.load(weights_only=True)` does. Nothing of `torch` is imported.

Example:
>>> import os, tempfile, zipfile
>>> path = os.path.join(tempfile.mkdtemp(), "bad.bin")
>>> with zipfile.ZipFile(path, "w") as archive:
...     archive.writestr("bad/data.pkl", b"cos\\nsystem\\n(S'echo hi'\\ntR.")
>>> read_state_dict(path)
Traceback (most recent call last):
...
ValueError: ... os.system, which a file of weights does not need: not loaded (nothing in it ran).
"""

import collections
import pickle
import zipfile

import numpy as np

# The storage types of a state dict, by their pickled name, and their NumPy dtypes ("bfloat16": widened below).
STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16, "BFloat16Storage": "bfloat16",
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


def read_state_dict(path):
    """The tensors of a `torch.save` file as `{name: np.ndarray}` (bfloat16 widened to float32): the zip format of
    PyTorch 1.6 and later, or the legacy format before it.

    Raises:
        ValueError: the file is not a `torch.save` file, is cut short, or names anything but tensors and their
            storages (each one line naming the file).
    """
    path = str(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickles = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
            if len(pickles) != 1:
                raise ValueError(f"{path} is a zip, but not a torch.save file (no <name>/data.pkl in it).")
            root = pickles[0][: -len("data.pkl")]
            byteorder = archive.read(root + "byteorder").decode().strip() if root + "byteorder" in names else "little"
            order = "<" if byteorder == "little" else ">"  # (files of PyTorch before 1.10 have no byteorder: little)
            state = _WeightsUnpickler(archive.open(pickles[0]), path).load()
            raw = {key: archive.read(f"{root}data/{key}") for key in _storage_types(state)}
    else:
        with open(path, "rb") as file:
            if file.read(2) == b"PK":
                raise ValueError(f"{path} is a zip cut short (a truncated download: fetch it again).")
            file.seek(0)
            state, raw = _read_legacy(file, path)
        order = "<"
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a {type(state).__name__}, not a state dict of tensors.")
    storages = {}
    tensors = {}
    for name, value in state.items():
        if not isinstance(value, _Tensor):
            raise ValueError(f"{path}: {name!r} is {type(value).__name__} {value!r:.40}, not a tensor.")
        key = value.storage.key
        if key not in storages:
            storages[key] = _storage_array(raw[key], value.storage, order, path)
        tensors[name] = value.array(storages[key], path)
    return tensors


# The first pickle of a legacy (before PyTorch 1.6) file, and the protocol version after it.
LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL_VERSION = 1001


def _read_legacy(file, path):
    """A legacy `torch.save` file: pickles of the magic number, the protocol, the system info, the state dict and
    the storage keys, then each storage's bytes after its element count (int64)."""
    def load():
        return _WeightsUnpickler(file, path).load()

    try:
        magic = load()
    except Exception:
        magic = None
    if magic != LEGACY_MAGIC_NUMBER:
        raise ValueError(f"{path} is not a torch.save file (neither the zip format nor the legacy one).")
    if load() != LEGACY_PROTOCOL_VERSION:
        raise ValueError(f"{path}: a legacy torch.save file of an unknown protocol version.")
    load()  # system info (byte order, sizes of C types)
    state = load()
    keys = load()
    storages = _storage_types(state)
    raw = {}
    for key in keys:
        header = file.read(8)
        if len(header) < 8:
            raise ValueError(f"{path} is cut short before storage {key} (a truncated download: fetch it again).")
        count = int(np.frombuffer(header, "<i8")[0])
        storage = storages.get(str(key))
        size = count * (2 if storage is None or storage.dtype == "bfloat16" else np.dtype(storage.dtype).itemsize)
        raw[str(key)] = file.read(size)
    return state, raw


class _Storage:
    def __init__(self, type_name, key, numel):
        self.dtype, self.key, self.numel = STORAGE_DTYPES[type_name], key, numel


class _Tensor:
    """A tensor as the pickle describes it (storage, offset, shape, strides), made an array once the bytes are read."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def array(self, storage, path):
        offset, size, stride = self.offset, self.size, self.stride
        if not size:
            return np.array(storage[offset])
        if not all(size):
            return np.zeros(size, storage.dtype)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= storage.size:
            raise ValueError(f"{path}: a tensor of shape {size} reaches past its storage of {storage.size} values "
                             "(a truncated file: download it again).")
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                               strides=[s * storage.itemsize for s in stride])
        return np.array(view)


def _storage_types(state):
    """The storages the state dict's tensors use, by key."""
    return {value.storage.key: value.storage for value in state.values() if isinstance(value, _Tensor)} \
        if isinstance(state, dict) else {}


def _storage_array(raw, storage, order, path):
    if storage.dtype == "bfloat16":  # the upper half of a float32: widen the bits
        array = (np.frombuffer(raw, order + "u2").astype(np.uint32) << 16).view(np.float32)
    else:
        dtype = np.dtype(storage.dtype).newbyteorder(order)
        array = np.frombuffer(raw[: len(raw) - len(raw) % dtype.itemsize], dtype)
    if array.size < storage.numel:
        raise ValueError(f"{path}: storage {storage.key} holds {array.size} values, {storage.numel} expected "
                         "(a truncated file: download it again).")
    return array


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """`torch._utils._rebuild_tensor_v2`."""
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *unused):
    return data


class _WeightsUnpickler(pickle.Unpickler):
    """Resolves only the names of a state dict of tensors; any other global stops the read."""

    ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        **{("torch", name): name for name in STORAGE_DTYPES},
    }

    def __init__(self, file, path):
        super().__init__(file)
        self.path = path

    def find_class(self, module, name):
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise ValueError(f"{self.path} refers to {module}.{name}, which a file of weights does not need: not "
                             "loaded (nothing in it ran).") from None

    def persistent_load(self, pid):
        # ("storage", type, key, location, numel) in both formats (the legacy one adds view metadata).
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage" and pid[1] in STORAGE_DTYPES):
            raise ValueError(f"{self.path}: a storage reference {pid!r:.80} that is not a tensor storage.")
        if len(pid) > 5 and pid[5] is not None:
            raise ValueError(f"{self.path}: a storage view (a legacy torch.save form before PyTorch 1.0) is not read: "
                             "save the state dict again with a recent PyTorch.")
        _, type_name, key, _, numel = pid[:5]
        return _Storage(type_name, str(key), int(numel))
