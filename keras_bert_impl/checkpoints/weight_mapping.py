"""Strict assignment of named checkpoint tensors onto BertBackbone variables, with a load report.

Each checkpoint format describes the backbone as a list of `WeightTarget`s:
which checkpoint tensor names (and shapes) make up one backbone variable and
how to convert between the two layouts. `assign_weights` then checks the whole
checkpoint before touching any variable: a missing tensor, an unexpected
tensor or a shape mismatch is an error naming the tensor and the shapes;
tensors matched by the format's skip rules (non-weight buffers, pretraining
heads, optimizer slots) are skipped and listed in the returned `LoadReport`.
"""

import dataclasses

import numpy as np
from keras import ops


@dataclasses.dataclass
class WeightTarget:
    """One backbone variable and the checkpoint tensor(s) it is made of.

    Attributes:
        variable: the `keras.Variable` to fill.
        names: checkpoint tensor names, in the order `to_variable` takes them.
        shapes: the checkpoint shape expected for each name.
        to_variable: `f(*arrays) -> array` in the variable's layout.
        from_variable: `f(array) -> tuple of arrays` in checkpoint layout (for export).
    """

    variable: object
    names: tuple
    shapes: tuple
    to_variable: object
    from_variable: object


def identity_target(variable, name):
    """A target stored with the same layout in the checkpoint and the backbone."""
    return WeightTarget(variable, (name,), (tuple(variable.shape),), lambda x: x, lambda x: (x,))


def transposed_target(variable, name):
    """A 2-D kernel stored transposed in the checkpoint (PyTorch `Linear.weight`, `(out, in)`)."""
    shape = tuple(variable.shape)
    return WeightTarget(variable, (name,), ((shape[1], shape[0]),), lambda x: x.T, lambda x: (x.T,))


def fused_qkv_target(variable, names, transposed):
    """The fused `[query | key | value]` kernel or bias from three checkpoint tensors.

    Args:
        variable: the qkv Dense kernel `(hidden, 3 * hidden)` or bias `(3 * hidden,)`.
        names: the query, key and value tensor names.
        transposed: True when checkpoint kernels are `(out, in)` (PyTorch).
    """
    shape = tuple(variable.shape)
    if len(shape) == 1:
        part = (shape[0] // 3,)
        return WeightTarget(
            variable, tuple(names), (part,) * 3,
            lambda q, k, v: np.concatenate([q, k, v]),
            lambda x: tuple(np.split(x, 3)),
        )
    part = (shape[1] // 3, shape[0]) if transposed else (shape[0], shape[1] // 3)
    if transposed:
        return WeightTarget(
            variable, tuple(names), (part,) * 3,
            lambda q, k, v: np.concatenate([q.T, k.T, v.T], axis=1),
            lambda x: tuple(p.T for p in np.split(x, 3, axis=1)),
        )
    return WeightTarget(
        variable, tuple(names), (part,) * 3,
        lambda q, k, v: np.concatenate([q, k, v], axis=1),
        lambda x: tuple(np.split(x, 3, axis=1)),
    )


@dataclasses.dataclass
class LoadReport:
    """What a checkpoint load used and what it skipped.

    Attributes:
        source: description of the checkpoint (its path).
        loaded: checkpoint tensor names that were loaded.
        skipped: `{name: reason}` for tensors that were deliberately not loaded.
        left_new: `{backbone variable path: reason}` for weights the checkpoint does not hold that keep their
            new initialisation (the pooler of a Hugging Face `BertForMaskedLM` save).
    """

    source: str
    loaded: list
    skipped: dict
    left_new: dict = dataclasses.field(default_factory=dict)

    def __str__(self):
        lines = [f"Loaded {len(self.loaded)} tensors from {self.source}."]
        if self.left_new:
            lines.append(f"Left {len(self.left_new)} weights at their new initialisation:")
            lines.extend(f"  {name}: {reason}" for name, reason in sorted(self.left_new.items()))
        if self.skipped:
            lines.append(f"Skipped {len(self.skipped)} tensors:")
            lines.extend(f"  {name}: {reason}" for name, reason in sorted(self.skipped.items()))
        return "\n".join(lines)


class CheckpointMismatchError(ValueError):
    """A checkpoint does not match the backbone: missing, unexpected or mis-shaped tensors."""


def _shape(shape):
    return str(tuple(int(d) for d in shape))


def assign_weights(targets, shapes, read_tensor, source, skip_reason=lambda name: None, display_name=lambda n: n):
    """Checks a checkpoint against `targets`, then assigns every backbone variable.

    Args:
        targets: list of `WeightTarget`.
        shapes: `{checkpoint name: shape}` of every tensor in the checkpoint
            (names normalised by the format, e.g. without a `bert.` prefix).
        read_tensor: `f(name) -> np.ndarray` reading one tensor.
        source: path or description used in messages and the report.
        skip_reason: `f(name) -> str or None`; a string skips (and reports) the tensor.
        display_name: `f(name) -> str`, the name as written in the file (for messages).

    Returns:
        A `LoadReport`.

    Raises:
        CheckpointMismatchError: listing every missing tensor, unexpected
            tensor and shape mismatch, each with the tensor name and shapes.

    Example:
    >>> import keras, numpy as np
    >>> layer = keras.layers.Dense(2); layer.build((None, 3))
    >>> report = assign_weights([transposed_target(layer.kernel, "w")], {"w": (2, 3)},
    ...                         lambda n: np.ones((2, 3), "float32"), "example")
    >>> report.loaded
    ['w']
    """
    expected = {}
    for target in targets:
        for name, shape in zip(target.names, target.shapes):
            expected[name] = (tuple(shape), target.variable)
    mismatched, unexpected, missing, skipped = [], [], [], {}
    for name, shape in shapes.items():
        if name in expected:
            want, variable = expected[name]
            if tuple(int(d) for d in shape) != want:
                mismatched.append(
                    f"shape mismatch for tensor '{display_name(name)}': checkpoint has {_shape(shape)}, "
                    f"expected {_shape(want)} (for BertBackbone variable '{variable.path}')"
                )
            continue
        reason = skip_reason(name)
        if reason:
            skipped[display_name(name)] = reason
        else:
            unexpected.append(
                f"unexpected tensor '{display_name(name)}' with shape {_shape(shape)}: "
                "it is not a BertBackbone weight (wrong architecture or a head this loader does not know)"
            )
    for name, (want, variable) in expected.items():
        if name not in shapes:
            missing.append(
                f"missing tensor '{display_name(name)}' (expected shape {_shape(want)}, "
                f"for BertBackbone variable '{variable.path}')"
            )
    problems = len(mismatched) + len(unexpected) + len(missing)
    if problems:
        lines = []
        for kind, entries in (("shape mismatches", mismatched), ("missing", missing), ("unexpected", unexpected)):
            lines.extend(sorted(entries)[:12])
            if len(entries) > 12:
                lines.append(f"... and {len(entries) - 12} more {kind}")
        raise CheckpointMismatchError(
            f"Checkpoint {source} does not match the BertBackbone config ({problems} problem(s)):\n  "
            + "\n  ".join(lines)
        )
    loaded = []
    for target in targets:
        arrays = [np.asarray(read_tensor(name)) for name in target.names]
        value = target.to_variable(*arrays)
        target.variable.assign(ops.cast(value, target.variable.dtype))
        loaded.extend(display_name(name) for name in target.names)
    return LoadReport(source=str(source), loaded=loaded, skipped=skipped)


def export_tensors(targets):
    """Returns `{checkpoint name: np.ndarray}` for every target, in checkpoint layout (float32)."""
    tensors = {}
    for target in targets:
        value = np.asarray(ops.convert_to_numpy(ops.cast(target.variable, "float32")))
        for name, array in zip(target.names, target.from_variable(value)):
            tensors[name] = np.ascontiguousarray(array)
    return tensors


def assign_present_heads(head_targets, shapes, read_tensor, source):
    """Assigns the pretraining-head targets whose tensors the checkpoint holds; the rest of it is skipped.

    Args:
        head_targets: `{head name: [WeightTarget, ...]}`, e.g. `{"masked LM": [...], "next sentence": [...]}`.
        shapes, read_tensor, source: as `assign_weights`.

    Returns:
        `(LoadReport or None, [head names loaded])`: None and [] when the checkpoint holds none of the heads (e.g. a
        sentence-transformers checkpoint, or a `BertModel` without `cls.*`). A head loads whole or not at all: one
        whose tensors are only partly present, or of other shapes, raises `CheckpointMismatchError`.
    """
    present = {head: targets for head, targets in head_targets.items()
               if any(name in shapes for target in targets for name in target.names)}
    if not present:
        return None, []
    targets = [target for head_list in present.values() for target in head_list]
    wanted = {name for target in targets for name in target.names}
    report = assign_weights(
        targets, shapes, read_tensor, source,
        skip_reason=lambda name: None if name in wanted else "not a weight of the pretraining heads",
    )
    return report, list(present)
