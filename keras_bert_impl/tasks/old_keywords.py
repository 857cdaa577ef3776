"""The old keyword names that the tasks' batch functions still take (issue 15: one name for one thing).

Every task's `make_dataset` / `make_array_batches` (and `SquadFeatures.to_dataset`
/ `to_array_batches`) reads `(data, batch_size, training, seed, *, boundaries, ...)`.
Before, classification and span_qa called the seed `shuffle_seed` and tagging
called `training` `shuffle`; those keywords still work.

Example:
>>> renamed("make_dataset", "shuffle_seed", 3, "seed", None, None)
3
>>> renamed("make_dataset", "shuffle_seed", None, "seed", 5, None)
5
>>> renamed("make_dataset", "shuffle_seed", 3, "seed", 5, None)
Traceback (most recent call last):
...
TypeError: make_dataset() got `shuffle_seed=3` (the old name of `seed`) and `seed=5`: give `seed` only.
"""

import numpy as np


def renamed(function, old_name, old_value, new_name, new_value, new_default):
    """`new_value`, or `old_value` when the old keyword was given (not None); both given and different: TypeError."""
    if old_value is None:
        return new_value
    if new_value is not new_default and new_value != new_default and new_value != old_value:
        raise TypeError(
            f"{function}() got `{old_name}={old_value!r}` (the old name of `{new_name}`) and "
            f"`{new_name}={new_value!r}`: give `{new_name}` only."
        )
    return old_value


def check_training(function, training):
    """`training` as a bool; anything else is a TypeError (e.g. a length or boundaries passed positionally)."""
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(
            f"{function}(): `training` must be True or False, got {training!r}; the arguments after "
            "`batch_size` are `training, seed`, then keywords only (`boundaries=`, `sequence_length=`, ...)."
        )
    return bool(training)
