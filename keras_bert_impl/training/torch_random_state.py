"""PyTorch's global random generators in a checkpoint: what Keras's unseeded dropout draws from on PyTorch.

On the torch backend, a `keras.layers.Dropout` without a seed (all of BERT's) takes
PyTorch's fast path, `torch.nn.functional.dropout`, which draws from the global
generator of the device (the CPU's, or the current GPU's). Its state is not a Keras
variable, so no weights checkpoint holds it. Here it travels in a checkpoint's
`state.json`: `checkpoint_entry()` gives every process's state (a job of several
processes gathers them to process 0, which writes), and
`restore_from_checkpoint_entry(state)` sets each process's own, so a resumed run draws
the dropout masks the uninterrupted run would have drawn.

Processes seeded alike (`--seed` on every process) would draw the same masks for row i
of their batches; `draw_own_stream(index)` reseeds the generators of every process but
process 0 with a seed of its own (process 0 keeps the one-process stream).

Example:
>>> import torch
>>> entry = checkpoint_entry(backend="torch")
>>> first = torch.rand(3)
>>> restore_from_checkpoint_entry(entry, backend="torch")
True
>>> bool(torch.equal(torch.rand(3), first))
True
>>> checkpoint_entry(backend="jax")
{}
"""

import base64

KEY = "torch_random_states"
LEGACY_KEY = "torch_rng_state"  # older fine-tuning checkpoints: process 0's CPU state, a list of ints


def random_state():
    """This process's global generator states: `{"cpu": base64, "cuda": base64}` ("cuda" where a GPU is used)."""
    import torch

    state = {"cpu": _encode(torch.get_rng_state())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = _encode(torch.cuda.get_rng_state())
    return state


def set_random_state(state):
    """Sets this process's global generators to `state` (from `random_state()`)."""
    import torch

    torch.set_rng_state(_decode(state["cpu"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(_decode(state["cuda"]))


def checkpoint_entry(backend=None):
    """`{KEY: [state of process 0, 1, ...]}` to add to a checkpoint's state on PyTorch, else `{}`.

    In a job of several processes every process must call it (it gathers the states).
    """
    if _backend(backend) != "torch":
        return {}
    import torch.distributed as dist

    state = random_state()
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return {KEY: [state]}
    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, state)
    return {KEY: states}


def restore_from_checkpoint_entry(saved, backend=None):
    """Sets this process's generators from a checkpoint's state (`checkpoint_entry()`'s key); True if it did.

    A checkpoint written by another number of processes: process 0 takes process 0's state and the others
    draw their own streams from it (`draw_own_stream`).
    """
    if _backend(backend) != "torch":
        return False
    import torch
    import torch.distributed as dist

    states = saved.get(KEY)
    if states is None and saved.get(LEGACY_KEY) is not None:
        states = [{"cpu": _encode(torch.tensor(saved[LEGACY_KEY], dtype=torch.uint8))}]
    if not states:
        return False
    running = dist.is_available() and dist.is_initialized()
    index, count = (dist.get_rank(), dist.get_world_size()) if running else (0, 1)
    if len(states) == count:
        set_random_state(states[index])
    else:
        set_random_state(states[0])
        draw_own_stream(index)
    return True


def restoring_at_first_batch(saved):
    """A Keras callback that restores `saved`'s generators (`restore_from_checkpoint_entry`) as training starts.

    At the first train batch, after `fit` started its input's iterators: a torch `DataLoader` (Keras's feed of
    a tf.data input on PyTorch) draws a seed from the global generator when it starts, which the uninterrupted
    run did before the epochs the checkpoint holds, not after.
    """
    import keras

    class RestoreRandomState(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.saved = saved

        def on_train_batch_begin(self, batch, logs=None):
            if self.saved is not None:
                restore_from_checkpoint_entry(self.saved)
                self.saved = None

    return RestoreRandomState()


def draw_own_stream(index):
    """Reseeds PyTorch's global generators of process `index` > 0 from their state and `index` (0: unchanged).

    Example:
    >>> import torch
    >>> _ = torch.manual_seed(1)
    >>> draw_own_stream(1)
    >>> first = torch.rand(2)
    >>> _ = torch.manual_seed(1)
    >>> draw_own_stream(0)
    >>> bool(torch.equal(torch.rand(2), first))
    False
    """
    if index == 0:
        return
    import torch

    generator = torch.Generator()
    generator.set_state(torch.get_rng_state())
    base = int(torch.randint(0, 2 ** 62, (1,), generator=generator))  # does not advance the global stream
    torch.manual_seed((base + 7919 * index) % 2 ** 63)  # every device's generator


def _backend(backend):
    if backend is not None:
        return backend
    import keras

    return keras.backend.backend()


def _encode(tensor):
    return base64.b64encode(tensor.numpy().tobytes()).decode("ascii")


def _decode(text):
    import numpy as np
    import torch

    return torch.from_numpy(np.frombuffer(base64.b64decode(text), dtype=np.uint8).copy())
