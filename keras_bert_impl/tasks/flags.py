"""The numeric-flag checks shared by the fine-tuning stories (`tasks/*/run.py`), run before any file is read.

A bad value is a `ValueError` whose message is one line naming the flag, its
value and what was expected (`--batch_size=0: must be an integer >= 1`); the
recipes print it as `error: ...` and exit with code 2.

- `check_numbers(config, integers=..., positive=..., fractions=...)`: every
  named field of `config` is in range (a field that is None is not checked).
- `check_starting_point(config)`: exactly one of `preset` and `init_checkpoint`
  (SQuAD, tagging).
- `check_epochs(config, head)`: `epochs >= 1`, or `epochs == 0` only with a
  fine-tuned `--init_checkpoint model.keras` (predicting with a new, random
  head would write outputs that mean nothing).
- `learning_rate_or_default(learning_rate, lora_rank, default)`: an unset
  `--learning_rate` is the task's rate, or LoRA's 5e-4 with `--lora_rank`.
- `check_vocabulary(backbone, tokenizer, flag, tokenizer_source)`: the
  backbone's embedding rows equal the tokenizer's vocabulary (else a gather
  error at the first step), checked before training.
- `check_training_scores_kept(config, score_files)`: an `epochs == 0` run
  does not replace the scores a training run left beside its `model.keras`
  in `--model_dir` (its best epoch, history and timings would be lost).

Example:
>>> import types
>>> check_numbers(types.SimpleNamespace(batch_size=0), integers={"batch_size": 1})
Traceback (most recent call last):
...
ValueError: --batch_size=0: must be an integer >= 1
"""

import numbers
import os

from keras_bert_impl.models.lora import LORA_LEARNING_RATE


def _is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value  # not NaN


def check_numbers(config, integers=None, positive=None, fractions=None):
    """Checks numeric fields of `config`; a field that is None is not checked.

    Args:
        config: any object with the fields as attributes (a run's config dataclass).
        integers: `{field: minimum}`: an integer >= minimum.
        positive: names of fields that must be a finite number > 0 (a learning rate).
        fractions: `{field: (low, high, high_included)}`: a number with
            `low <= value <= high` (or `< high` when `high_included` is False).

    Raises:
        ValueError: `--<field>=<value>: must be ...`, the first field out of range.

    Example:
    >>> import types
    >>> config = types.SimpleNamespace(learning_rate=3e-5, warmup_proportion=1.5, dropout=None)
    >>> check_numbers(config, positive=["learning_rate"], fractions={"warmup_proportion": (0, 1, True)})
    Traceback (most recent call last):
    ...
    ValueError: --warmup_proportion=1.5: must be a number in [0, 1]
    """
    for name, minimum in (integers or {}).items():
        value = getattr(config, name)
        if value is not None and not (_is_integer(value) and value >= minimum):
            raise ValueError(f"--{name}={value!r}: must be an integer >= {minimum}")
    for name in positive or ():
        value = getattr(config, name)
        if value is not None and not (_is_number(value) and 0 < value < float("inf")):
            raise ValueError(f"--{name}={value!r}: must be a finite number > 0")
    for name, (low, high, high_included) in (fractions or {}).items():
        value = getattr(config, name)
        inside = _is_number(value) and low <= value and (value <= high if high_included else value < high)
        if value is not None and not inside:
            raise ValueError(f"--{name}={value!r}: must be a number in [{low}, {high}{']' if high_included else ')'}")


def is_fine_tuned_model(init_checkpoint):
    """True for a fine-tuned task model file (`.keras`), which holds a trained head.

    Example:
    >>> is_fine_tuned_model("runs/squad/model.keras"), is_fine_tuned_model("runs/pretrain/export")
    (True, False)
    """
    return bool(init_checkpoint) and str(init_checkpoint).endswith(".keras")


def check_starting_point(config):
    """Exactly one of `preset` and `init_checkpoint` (the recipes' flags are exclusive; in Python both were taken and
    one silently ignored, or neither and the tokenizer failed to load `None`).

    Example:
    >>> import types
    >>> check_starting_point(types.SimpleNamespace(preset="bert_tiny_en_uncased", init_checkpoint="runs/export"))
    Traceback (most recent call last):
    ...
    ValueError: preset='bert_tiny_en_uncased' and init_checkpoint='runs/export': give one of them (--preset or \
--init_checkpoint), the backbone to start from
    """
    if bool(config.preset) == bool(config.init_checkpoint):
        given = (f"preset={config.preset!r} and init_checkpoint={config.init_checkpoint!r}" if config.preset
                 else "neither preset nor init_checkpoint")
        raise ValueError(f"{given}: give one of them (--preset or --init_checkpoint), the backbone to start from")


def check_epochs(config, head):
    """`--epochs` is >= 1, or 0 with a fine-tuned `--init_checkpoint *.keras` (predict only).

    Args:
        config: with `epochs`, `init_checkpoint` and (optionally) `preset`.
        head: what the task model adds to the backbone, for the message ("span head").

    Raises:
        ValueError: one line naming the flag, what it would do and what to pass instead.

    Example:
    >>> import tempfile, types
    >>> check_epochs(types.SimpleNamespace(epochs=0, init_checkpoint="runs/squad/model.keras"), "span head")
    >>> check_epochs(types.SimpleNamespace(epochs=0, init_checkpoint=None, preset="bert_tiny_en_uncased"), "span head")
    Traceback (most recent call last):
    ...
    ValueError: --epochs=0 predicts without training, but --preset bert_tiny_en_uncased has no trained span head: \
the predictions would come from a random span head. Pass --epochs 1 or more (with training data), or \
--init_checkpoint a fine-tuned model.keras to predict only
    >>> run = tempfile.mkdtemp(); open(os.path.join(run, "model.keras"), "wb").close()
    >>> check_epochs(types.SimpleNamespace(epochs=0, init_checkpoint=run), "span head")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ... or --init_checkpoint .../model.keras, the model of the run in that folder, to predict only
    """
    epochs = config.epochs
    if not (_is_integer(epochs) and epochs >= 0):
        raise ValueError(f"--epochs={epochs!r}: must be an integer >= 1 (or 0 with a fine-tuned --init_checkpoint "
                         "model.keras, to predict only)")
    if epochs == 0 and not is_fine_tuned_model(config.init_checkpoint):
        given = config.init_checkpoint or getattr(config, "preset", None)
        source = f"--init_checkpoint {given}" if config.init_checkpoint else f"--preset {given}"
        model_file = os.path.join(given, "model.keras") if isinstance(given, str) and os.path.isdir(given) else None
        instead = (f"--init_checkpoint {model_file}, the model of the run in that folder, to predict only"
                   if model_file and os.path.isfile(model_file) else
                   "--init_checkpoint a fine-tuned model.keras to predict only")  # (a run's folder for its model)
        raise ValueError(
            f"--epochs=0 predicts without training, but {source} has no trained {head}: the predictions would come "
            f"from a random {head}. Pass --epochs 1 or more (with training data), or {instead}"
        )


def check_vocabulary(backbone, tokenizer, flag, tokenizer_source):
    """Refuses a backbone whose embedding rows differ from the tokenizer's vocabulary (a gather error at step 1).

    Example:
    >>> import types
    >>> check_vocabulary(types.SimpleNamespace(vocabulary_size=4291),
    ...                  types.SimpleNamespace(vocabulary_size=lambda: 30522), "--init_checkpoint run/export",
    ...                  "bert_base_en_uncased")
    Traceback (most recent call last):
    ...
    ValueError: --init_checkpoint run/export has 4291 embedding rows but the tokenizer of bert_base_en_uncased has \
30522 tokens: put the checkpoint's own vocab.txt next to its weights, or pass the --preset whose tokenizer it was \
trained with
    """
    rows, tokens = backbone.vocabulary_size, tokenizer.vocabulary_size()
    if rows != tokens:
        raise ValueError(
            f"{flag} has {rows} embedding rows but the tokenizer of {tokenizer_source} has {tokens} tokens: put "
            "the checkpoint's own vocab.txt next to its weights, or pass the --preset whose tokenizer it was trained "
            "with"
        )


def check_training_scores_kept(config, score_files):
    """With `epochs == 0`, refuses a `model_dir` that holds a training run's `model.keras` and one of `score_files`.

    A run that predicts only writes the same score files as the training run (`dev_results.json`, ...): in the
    training run's directory it would replace the record of that training (its best epoch, validation history,
    timings) with a prediction's. Predictions alone (the table recipe's `test_predictions.tsv`, CoNLL's
    `--predict_text`) are no record of training: a run that writes no score file may use the training run's
    directory. A predicting run never writes `model.keras`, so one beside the score files says a training run
    wrote them.

    Args:
        config: with `epochs` and `model_dir`.
        score_files: the names of the score files this run would write into `model_dir`.

    Raises:
        ValueError: one line naming the directory, the files and what to pass instead.

    Example:
    >>> import pathlib, tempfile, types
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("model.keras", "dev_results.json"):
    ...     _ = (run / name).write_text("{}")
    >>> check_training_scores_kept(types.SimpleNamespace(epochs=0, model_dir=str(run)), ["test_results.json"])
    >>> check_training_scores_kept(types.SimpleNamespace(epochs=2, model_dir=str(run)), ["dev_results.json"])
    >>> check_training_scores_kept(types.SimpleNamespace(epochs=0, model_dir="runs/sst2"), ["dev_results.json"])
    >>> check_training_scores_kept(types.SimpleNamespace(epochs=0, model_dir=str(run)),
    ...                            ["dev_results.json"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --model_dir /tmp/... holds the model.keras of a training run and its scores (dev_results.json): \
--epochs 0 would replace them. Give another --model_dir for this run's outputs (--init_checkpoint reads the model \
from wherever it is)
    >>> import shutil; shutil.rmtree(run)
    """
    if config.epochs != 0 or not os.path.isfile(os.path.join(config.model_dir, "model.keras")):
        return
    replaced = [name for name in score_files if os.path.exists(os.path.join(config.model_dir, name))]
    if replaced:
        raise ValueError(
            f"--model_dir {config.model_dir} holds the model.keras of a training run and its scores "
            f"({', '.join(replaced)}): --epochs 0 would replace them. Give another --model_dir for this run's outputs "
            "(--init_checkpoint reads the model from wherever it is)"
        )


__all__ = ["check_epochs", "check_numbers", "check_starting_point", "check_training_scores_kept", "check_vocabulary",
           "is_fine_tuned_model"]


def learning_rate_or_default(learning_rate, lora_rank, default):
    """`--learning_rate` as given; unset (None), the task's `default`, or LoRA's rate with `--lora_rank`.

    LoRA trains factors that start at zero on a frozen backbone: it needs a
    step about ten times larger than full fine-tuning (Hu et al. tuned 4e-4 to
    5e-4 on GLUE), and with the full fine-tuning rate it barely moves.

    Example:
    >>> learning_rate_or_default(None, None, 2e-5), learning_rate_or_default(None, 8, 2e-5)
    (2e-05, 0.0005)
    >>> learning_rate_or_default(1e-4, 8, 2e-5)
    0.0001
    """
    if learning_rate is not None:
        return learning_rate
    return LORA_LEARNING_RATE if lora_rank else default
