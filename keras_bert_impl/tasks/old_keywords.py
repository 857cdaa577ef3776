"""The old keyword names that the tasks' functions still take (issue 15: one name for one thing).

Step 2 is `encode_examples` in every task (`features.py`); tagging's `encode_sentences` and
span_qa's `convert_examples_to_features` (BERT's `run_squad.py` name) are the same functions
under their earlier names, still exported. Packed batches are `make_packed_dataset` in every
task (`batches.py`); tagging's `make_dataset(..., packing=True)` still gives them.

Every task's `make_dataset` / `make_array_batches` (and `SquadFeatures.to_dataset`
/ `to_array_batches`) reads `(data, batch_size, training, seed, *, boundaries, ...)`.
Before, classification and span_qa called the seed `shuffle_seed` and tagging
called `training` `shuffle`; those keywords still work.

The run configs (`tasks/*/run.py`) name the same settings the same way too
(`predict_batch_size`, `max_train_samples`, `max_eval_samples`); their old
field names still work through `old_field_names`.

Span QA cuts questions to `max_question_length` pieces everywhere (the
preprocessor's name); `SpanQaConfig`, `encode_examples` and
`answer_questions` called it `max_query_length` (BERT's `run_squad.py` flag),
which they still take (`old_question_length`). Its SQuAD v2.0 switch is `version="2.0"`
everywhere, as in `SpanQaConfig` and `--version`; `postprocess_predictions` and
`answer_questions` called it `version_2_with_negative=True`, still taken (`squad_version_argument`).

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

import dataclasses
import functools

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


NOT_GIVEN = object()  # an old keyword that was not passed (None is a value: no cut)


def old_question_length(function, max_query_length, max_question_length, default=64):
    """`max_question_length`, or the old keyword `max_query_length` when it was passed (None included: no cut).

    Example:
    >>> old_question_length("answer_questions", NOT_GIVEN, 32), old_question_length("answer_questions", None, 64)
    (32, None)
    >>> old_question_length("answer_questions", 16, 32)
    Traceback (most recent call last):
    ...
    TypeError: answer_questions() got `max_query_length=16` (the old name of `max_question_length`) and `max_question_length=32`: give `max_question_length` only.
    """
    if max_query_length is NOT_GIVEN:
        return max_question_length
    if max_question_length != default and max_question_length != max_query_length:
        raise TypeError(
            f"{function}() got `max_query_length={max_query_length!r}` (the old name of `max_question_length`) and "
            f"`max_question_length={max_question_length!r}`: give `max_question_length` only."
        )
    return max_query_length


SQUAD_VERSIONS = ("1.1", "2.0")


def squad_version_argument(function, version, version_2_with_negative=NOT_GIVEN):
    """`version` ("1.1" or "2.0"), or the old keyword `version_2_with_negative` (BERT's flag) read as a version.

    Every function of `tasks/span_qa` takes SQuAD's switch as `version`, as `SpanQaConfig` and
    `--version` do; `postprocess_predictions` and `answer_questions` called it `version_2_with_negative`.

    Example:
    >>> squad_version_argument("postprocess_predictions", "1.1", True), squad_version_argument("f", "2.0")
    ('2.0', '2.0')
    >>> squad_version_argument("postprocess_predictions", "2", NOT_GIVEN)
    Traceback (most recent call last):
    ...
    ValueError: postprocess_predictions(): `version` must be '1.1' or '2.0', got '2'.
    >>> squad_version_argument("postprocess_predictions", "2.0", False)
    Traceback (most recent call last):
    ...
    TypeError: postprocess_predictions() got `version_2_with_negative=False` (the old name of `version`, '1.1') and `version='2.0'`: give `version` only.
    """
    if version_2_with_negative is not NOT_GIVEN:
        old = "2.0" if version_2_with_negative else "1.1"
        if version != SQUAD_VERSIONS[0] and version != old:
            raise TypeError(
                f"{function}() got `version_2_with_negative={version_2_with_negative!r}` (the old name of `version`, "
                f"{old!r}) and `version={version!r}`: give `version` only."
            )
        version = old
    if version not in SQUAD_VERSIONS:
        raise ValueError(f"{function}(): `version` must be '1.1' or '2.0', got {version!r}.")
    return version


def check_training(function, training):
    """`training` as a bool; anything else is a TypeError (e.g. a length or boundaries passed positionally)."""
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(
            f"{function}(): `training` must be True or False, got {training!r}; the arguments after "
            "`batch_size` are `training, seed`, then keywords only (`boundaries=`, `sequence_length=`, ...)."
        )
    return bool(training)


def old_field_names(**old_to_new):
    """Class decorator for a run's config dataclass: its old field names still work as keywords and attributes.

    `@old_field_names(eval_batch_size="predict_batch_size")` above `@dataclasses.dataclass`
    makes `Config(eval_batch_size=16)` build `Config(predict_batch_size=16)`, and
    `config.eval_batch_size` read `config.predict_batch_size`. Both names given with
    different values is a TypeError naming both.

    Example:
    >>> import dataclasses
    >>> @old_field_names(eval_batch_size="predict_batch_size")
    ... @dataclasses.dataclass
    ... class Config:
    ...     predict_batch_size: int = 64
    >>> Config(eval_batch_size=16), Config(eval_batch_size=16).eval_batch_size
    (Config(predict_batch_size=16), 16)
    >>> Config(eval_batch_size=16, predict_batch_size=8)
    Traceback (most recent call last):
    ...
    TypeError: Config() got `eval_batch_size=16` (the old name of `predict_batch_size`) and `predict_batch_size=8`: give `predict_batch_size` only.
    """

    def decorate(config_class):
        defaults = {field.name: field.default for field in dataclasses.fields(config_class)}
        init = config_class.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    old_value = kwargs.pop(old)
                    new_value = kwargs.get(new, defaults[new])
                    kwargs[new] = renamed(config_class.__name__, old, old_value, new, new_value, defaults[new])
            init(self, *args, **kwargs)

        config_class.__init__ = __init__
        for old, new in old_to_new.items():
            setattr(config_class, old, property(lambda self, new=new: getattr(self, new),
                                                doc=f"The old name of `{new}`."))
        return config_class

    return decorate
