"""Which array of a checkpoint belongs to which variable: by path, whatever backend or process wrote it.

`run_checkpoints` records every variable's path (`variable_path`) beside its array and, on restore, maps each of
the model's variables to its array with `restore_order`: PyTorch lists a model's variables in another order than
TensorFlow and JAX, and Keras numbers unnamed layers and dropout seed generators per process.
"""

import re


def variable_path(variable):
    return getattr(variable, "path", None) or getattr(variable, "name", "")


def restore_order(recorded_paths, variables):
    """For each of `variables`, the index of its array in the checkpoint: by path where the checkpoint recorded the
    same paths in another order (written on another backend: PyTorch lists a model's variables in another order
    than TensorFlow and JAX), else by position (a checkpoint written before paths were recorded).

    Keras numbers unnamed layers and dropout seed generators per process (`seed_generator_7` where a fresh
    process says `seed_generator_1`): paths are matched with those numbers replaced by their rank among the paths
    that differ only in them, which is the order the model created them in, on every backend.

    >>> import types
    >>> variables = [types.SimpleNamespace(path=p) for p in ("embedding", "dense/kernel", "dense/bias")]
    >>> restore_order(["dense/kernel", "dense/bias", "embedding"], variables)  # written on another backend
    [2, 0, 1]
    >>> restore_order(["dense_4/kernel", "dense_4/bias", "embedding"], variables)  # in a process of other models
    [2, 0, 1]
    >>> restore_order(None, variables), restore_order(["dense/kernel", "dense/bias", "other"], variables)
    ([0, 1, 2], [0, 1, 2])
    """
    paths = [variable_path(v) for v in variables]
    if recorded_paths and len(recorded_paths) == len(paths):
        for key in (list, _numbers_ranked):
            here, there = key(paths), key(list(recorded_paths))
            if len(set(here)) == len(here) and set(here) == set(there):
                where = {recorded: i for i, recorded in enumerate(there)}
                return [where[p] for p in here]
    return list(range(len(paths)))


_NUMBER = re.compile(r"_(\d+)(?=[_/]|$)")  # `_7` of `seed_generator_7/...`, `dense_3_kernel_momentum`


def _numbers_ranked(paths):
    """Each path as `(path without its _<n> numbers, rank of its numbers among the paths alike)`."""
    keys = [(_NUMBER.sub("", p), tuple(int(n) for n in _NUMBER.findall(p))) for p in paths]
    alike = {}
    for stripped, numbers in keys:
        alike.setdefault(stripped, set()).add(numbers)
    ranks = {stripped: sorted(numbers) for stripped, numbers in alike.items()}
    return [(stripped, ranks[stripped].index(numbers)) for stripped, numbers in keys]
