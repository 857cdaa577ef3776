"""Your own labelled table (CSV, TSV or JSON Lines) -> a fine-tuned `BertClassifier`: the story of
`recipes/finetune_classifier.py`, in the steps of the other tasks.

0. `check_flags` refuses a number out of range;
1. read: `read_inputs` reads and checks every file (`table_files.read_table`:
   file, line and column in each error) and takes the label names from the
   training file, before any model is built;
2. model: `build_model` (`BertClassifier.from_preset` with a new head,
   under the run's `--strategy`);
3. `run`: `finetune` on the raw strings, tokenized and batched by the model's
   preprocessor (AdamW, `--warmup_proportion` 10% warm-up, linear decay over the counted steps,
   TensorBoard logs in `model_dir/logs`), scoring the validation file after every epoch (accuracy and macro F1;
   multi-label: micro and macro F1 and subset accuracy; or Pearson and Spearman: `val_accuracy`, ... in the
   history and TensorBoard), keeping the best epoch's weights by the first of them (`--early_stopping_patience`
   stops after that many epochs without a better one), and write `dev_results.json` (the best epoch's scores),
   `model.keras` and `test_predictions.tsv`.

A fine-tuned `model.keras` of an earlier run as `preset` (`--init_checkpoint`)
keeps its head, labels and preprocessor: it trains further on a training
file of the same labels, or, with `epochs=0`, only labels `test_file` (and
scores `validation_file`): no training file, nothing retrained.

With `--strategy multiworker` (TensorFlow workers, `torchrun`, JAX processes)
every process builds the same batches and trains on its rows of each, and
process 0 alone writes `model_dir` (`finetuning_processes.config_of_this_process`).

Example:
>>> from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig
>>> TableClassificationConfig("train.csv", "dev.csv", "text", "label", "out").sequence_length
128
"""

import dataclasses
import math
import os
import time
import types
from typing import NamedTuple, Optional

from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.tasks.flags import (
    check_epochs, check_numbers, check_training_scores_kept, is_fine_tuned_model, learning_rate_or_default,
)
from keras_bert_impl.tasks.old_keywords import old_field_names
from keras_bert_impl.tasks.starting_point import fine_tuned_config


@old_field_names(train_limit="max_train_samples")
@dataclasses.dataclass
class TableClassificationConfig:
    """The flags of `recipes/finetune_classifier.py` (see its `--help`)."""

    train_file: Optional[str]  # None with epochs=0 (a fine-tuned model predicts only)
    validation_file: Optional[str]  # optional with epochs=0
    text_column: str
    label_column: Optional[str]  # needed to read labels: training, or scoring a validation file
    model_dir: str
    test_file: Optional[str] = None
    text_pair_column: Optional[str] = None
    regression: bool = False
    multi_label: bool = False  # each row has any number of labels, joined by `label_separator` (JSON Lines: a list)
    label_separator: str = ","
    preset: str = "all_minilm_l6_v2_en"  # or a fine-tuned model.keras (its head, labels and preprocessor kept)
    sequence_length: int = 128
    batch_size: int = 32
    epochs: int = 3  # 0: predict only, with a fine-tuned model.keras as `preset`
    learning_rate: float = None  # 2e-5, or 5e-4 with lora_rank (learning_rate_or_default)
    warmup_proportion: float = 0.1
    early_stopping_patience: Optional[int] = None
    seed: int = 42
    max_train_samples: Optional[int] = None  # train on the first N rows only (old name: train_limit)
    max_eval_samples: Optional[int] = None  # score the first N rows of the validation file only
    mixed_precision: Optional[str] = "auto"
    strategy: str = "auto"
    lora_rank: Optional[int] = None

    def __post_init__(self):
        self.learning_rate = learning_rate_or_default(self.learning_rate, self.lora_rank, 2e-5)



def check_flags(config):
    """Refuses numbers out of range, and files missing for what the run does, in one line naming the flag (`run`
    calls it first).

    Training (`epochs >= 1`) reads `train_file`, `validation_file` and `label_column`; `epochs=0` predicts only,
    with a fine-tuned `model.keras` as `preset`, and needs `test_file` or `validation_file` (a validation file
    with its `label_column`), and no `train_file`.

    Example:
    >>> check_flags(TableClassificationConfig("train.csv", "dev.csv", "text", "label", "out", batch_size=0))
    Traceback (most recent call last):
    ...
    ValueError: --batch_size=0: must be an integer >= 1
    >>> check_flags(TableClassificationConfig(None, None, "text", None, "out", preset="run/model.keras", epochs=0))
    Traceback (most recent call last):
    ...
    ValueError: --epochs 0 predicts only: give --test_file (texts to label) or --validation_file (labelled texts to score)
    """
    fine_tuned = is_fine_tuned_model(config.preset)
    check_epochs(types.SimpleNamespace(epochs=config.epochs, preset=config.preset,
                                       init_checkpoint=config.preset if fine_tuned else None), "classification head")
    check_numbers(config, integers={"batch_size": 1, "sequence_length": 2, "early_stopping_patience": 1,
                                    "max_train_samples": 1, "max_eval_samples": 1},
                  positive=["learning_rate"], fractions={"warmup_proportion": (0, 1, False)})
    missing = missing_file_flags(config.epochs, config.train_file, config.validation_file, config.test_file,
                                 config.label_column)
    if missing:
        raise ValueError(missing)
    check_training_scores_kept(config, ["dev_results.json"] if config.validation_file else [])


def missing_file_flags(epochs, train_file, validation_file, test_file, label_column):
    """What a run of `epochs` lacks among its files and label column, as one line (None when nothing is missing).

    `recipes/finetune_classifier.py` refuses the training case's missing flags itself, before TensorFlow is
    imported; this check (run by `check_flags`) also covers a config built in Python.

    Example:
    >>> missing_file_flags(3, "train.csv", None, None, None)
    '--epochs 3 trains: give --validation_file and --label_column too'
    >>> missing_file_flags(0, "train.csv", None, "new.csv", None)
    '--epochs 0 predicts only and reads no --train_file: leave it out, or pass --epochs 1 or more to train further'
    >>> missing_file_flags(0, None, None, "new.csv", None) is None
    True
    """
    if epochs != 0:
        absent = [flag for flag, value in (("--train_file", train_file), ("--validation_file", validation_file),
                                           ("--label_column", label_column)) if value is None]
        return f"--epochs {epochs} trains: give {' and '.join(absent)} too" if absent else None
    if train_file is not None:
        return ("--epochs 0 predicts only and reads no --train_file: leave it out, or pass --epochs 1 or more to "
                "train further")
    if test_file is None and validation_file is None:
        return ("--epochs 0 predicts only: give --test_file (texts to label) or --validation_file (labelled texts to "
                "score)")
    if validation_file is not None and label_column is None:
        return "--validation_file is scored against its labels: give --label_column too"
    return None


class TableInputs(NamedTuple):
    """What `read_inputs` returns: the run's tables, read and checked before any model is built."""

    train: object  # `table_files.LabelledTable` (its first `max_train_samples` rows when given); None with epochs=0
    validation: object  # `LabelledTable` (its first `max_eval_samples` rows when given), or None
    test: object  # `LabelledTable` without labels, or None
    label_names: Optional[list]  # the training file's labels, sorted (a fine-tuned model's: its own); None: regression
    regression: bool = False  # scores, not labels: the flag, or the fine-tuned model's head
    multi_label: bool = False  # several labels a row: the flag, or the fine-tuned model's head


def fine_tuned_head(config):
    """`(label_names, regression, multi_label)` of a fine-tuned `model.keras` given as `config.preset`, read from
    the file without building the model (None for a preset or checkpoint directory: a new head).

    A flag that says what the labels are (`regression`, `multi_label`) must agree with the model; one left unset
    follows the model.
    """
    path = config.preset
    if not is_fine_tuned_model(path):
        return None
    head = fine_tuned_config(path, "BertClassifier", "finetune_classifier.py")
    label_names, regression, multi_label = head.get("label_names"), head.get("num_classes") == 1, \
        bool(head.get("multi_label"))
    what = ("a regressor (one score)" if regression else f"a {'multi-label ' if multi_label else ''}classifier of the "
            f"labels {label_names}")
    if config.regression and not regression or config.multi_label and not multi_label:
        flag = "--regression" if config.regression else "--multi_label"
        raise ValueError(f"{flag}, but --init_checkpoint {path} is {what}: leave {flag} out")
    if not regression and label_names is None:
        raise ValueError(f"--init_checkpoint {path}: a classifier without label names, so the labels of the tables "
                         "cannot be matched to its classes; save it with `BertClassifier(label_names=[...])`")
    return label_names, regression, multi_label


def read_inputs(config):
    """Reads and checks all input files: a `TableInputs` (train, validation, test or None, label names or None).

    Example: two labels of STS-B's similarity score written as JSON Lines (tests/data/slices/glue), is the pair
    a paraphrase (score >= 4)?

    >>> import json, os, pathlib, tempfile, keras_bert_impl
    >>> from keras_bert_impl.tasks.classification.reading import read_split
    >>> stsb = read_split("stsb", pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue", "train")
    >>> table = os.path.join(tempfile.mkdtemp(), "pairs.jsonl")
    >>> with open(table, "w", encoding="utf-8") as f:
    ...     for text, pair, score in zip(stsb.text_a, stsb.text_b, stsb.labels):
    ...         label = "paraphrase" if score >= 4 else "other"
    ...         print(json.dumps({"text": text, "pair": pair, "label": label}), file=f)
    >>> inputs = read_inputs(TableClassificationConfig(table, table, "text", "label", "unused", text_pair_column="pair",
    ...                                                max_eval_samples=10))
    >>> len(inputs.train), len(inputs.validation), inputs.test, inputs.label_names
    (100, 10, None, ['other', 'paraphrase'])
    """
    from keras_bert_impl.tasks.classification.table_files import label_vocabulary, read_table

    head = fine_tuned_head(config)
    for flag, path in (("train_file", config.train_file), ("validation_file", config.validation_file),
                       ("test_file", config.test_file)):
        if path is not None:  # (was the bare "[Errno 2] No such file or directory")
            check_input_file(path, f"--{flag}", "a .csv, .tsv or .jsonl table")
    label_names, regression, multi_label = head or (None, config.regression, config.multi_label)
    columns = dict(text_column=config.text_column, text_pair_column=config.text_pair_column)
    labels = dict(label_column=config.label_column, regression=regression,
                  label_separator=config.label_separator if multi_label else None)
    source = "training labels" if head is None else "fine-tuned model's labels"  # what may bind the tables' labels
    train = None
    if config.train_file is not None:
        train = read_table(config.train_file, **labels, known_labels=label_names, known_labels_source=source,
                           **columns)
        if head is None and not regression:
            label_names = label_vocabulary(train)
            scores = [name for name in label_names if _fractional_number(name)]
            if scores and not multi_label:  # (was a classifier of one class per distinct score, or a dev label "not
                # among the training labels" without a word about --regression)
                raise ValueError(f"{config.train_file}: column {config.label_column!r} holds numbers with decimals "
                                 f"(e.g. {scores[0]!r}), {len(label_names)} distinct values read as as many classes: "
                                 "add --regression for scores")
        if label_names is not None and len(label_names) < 2:
            raise ValueError(f"{config.train_file}: column {config.label_column!r} has "
                             + (f"one label only, {label_names[0]!r}" if label_names else "no labels")
                             + "; a classifier needs two or more (or use --regression for scores)")
        train = train.head(config.max_train_samples)
    validation = None
    if config.validation_file is not None:
        validation = read_table(config.validation_file, **labels, known_labels=label_names,
                                known_labels_source=source, **columns).head(config.max_eval_samples)
    test = None if config.test_file is None else read_table(config.test_file, **columns)
    return TableInputs(train, validation, test, label_names, regression, multi_label)


def build_model(config, inputs, strategy=None):
    """Seeds and sets the dtype policy (`setup_finetuning`), then `BertClassifier.from_preset` with a new head, or
    the fine-tuned `model.keras` that `config.preset` names.

    A new head has one output for regression, else one per label name of `inputs` (one sigmoid each with
    `multi_label`), with the preset's preprocessor at `config.sequence_length`; a fine-tuned model keeps its head
    and its preprocessor (and that preprocessor's `sequence_length`). Built under `strategy` (a
    `training.strategy.get_strategy` result; None: `config.strategy`'s). With `lora_rank`, the backbone gets LoRA
    factors.

    Returns:
        `(model, tokenizer)`.
    """
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.tasks.starting_point import fine_tuned_model
    from keras_bert_impl.training.finetuning import setup_finetuning
    from keras_bert_impl.training.strategy import get_strategy

    # Before the model is built: the seed and the dtype policy.
    setup_finetuning(seed=config.seed, mixed_precision=config.mixed_precision, strategy_name=config.strategy)
    strategy = strategy or get_strategy(config.strategy)
    label_names = inputs.label_names
    with strategy.scope():
        if is_fine_tuned_model(config.preset):
            classifier, _ = fine_tuned_model(config.preset)
        else:
            classifier = BertClassifier.from_preset(
                config.preset, num_classes=1 if inputs.regression else len(label_names),
                label_names=label_names, multi_label=inputs.multi_label, sequence_length=config.sequence_length)
        if config.lora_rank:
            classifier.backbone.enable_lora(config.lora_rank)
    return classifier, classifier.preprocessor.tokenizer


def run(config, inputs=None):
    """Reads the files (unless `inputs` are given), fine-tunes, scores and writes the outputs; returns the results.

    The steps of every task's story: `check_flags` -> `read_inputs` (every file, before any model) ->
    `build_model` -> `finetune` (scoring the validation file after every epoch) -> predict and write the outputs.
    With `epochs=0` (a fine-tuned `model.keras` as `preset`) nothing is trained: the validation file is scored
    (`dev_results.json`) and the test file labelled (`test_predictions.tsv`); `model.keras` is not rewritten.
    """
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_json, atomic_write_text, save_model_atomically
    from keras_bert_impl.tasks.classification.evaluation import score_outputs
    from keras_bert_impl.tasks.classification.table_files import label_targets
    from keras_bert_impl.training.finetuning import finetune
    from keras_bert_impl.training.finetuning_processes import config_of_this_process
    from keras_bert_impl.training.finetuning_resume import data_digest
    from keras_bert_impl.training.strategy import get_strategy, predicting_everywhere

    check_flags(config)
    inputs = inputs or read_inputs(config)  # every file, before any model
    train, validation, test, label_names, regression, multi_label = inputs
    strategy = get_strategy(config.strategy)
    shared_model_dir = config.model_dir  # fine-tuning checkpoints: process 0 writes, every process resumes
    config = config_of_this_process(config, strategy)  # several processes: one writer, an even split of each batch
    classifier, _ = build_model(config, inputs, strategy)

    def validation_scores():  # every process scores the whole file
        with predicting_everywhere(strategy):
            outputs = classifier.predict(validation.inputs, batch_size=config.batch_size, verbose=0)
        return score_outputs(validation, outputs, label_names)

    results, result = {}, None
    if config.epochs > 0:
        train_ds = classifier.preprocessor.make_dataset(train.inputs, label_targets(train, label_names),
                                                        batch_size=config.batch_size, shuffle=True, seed=config.seed)

        def eval_fn(_):  # the validation file's scores after every epoch, as `val_<score>` (Keras's validation names)
            return {f"val_{name}": float("nan") if value is None else value
                    for name, value in validation_scores().items()}

        result = finetune(classifier, train_ds, epochs=config.epochs, learning_rate=config.learning_rate,
                          warmup_proportion=config.warmup_proportion, eval_fn=eval_fn,
                          early_stopping_patience=config.early_stopping_patience,
                          model_dir=shared_model_dir, strategy=strategy, seed=config.seed,
                          verbose=2, keep_checkpoints=True,  # removed below, once the outputs are written
                          # A checkpoint of other data, labels or starting point is refused, never resumed.
                          run_identity={"starting_point": config.preset, "label_names": repr(label_names),
                                        "sequence_length": config.sequence_length,
                                        "train_data": data_digest(train.inputs, label_targets(train, label_names))})
        results.update({
            "best_epoch": result.best_epoch,
            "validation_history": {name: values for name, values in result.history.items()
                                   if name.startswith("val_")},
            "train_examples": len(train), "final_train_loss": result.history["loss"][-1],
            "train_steps_per_epoch": result.train_steps,
            "train_seconds": round(float(sum(result.epoch_seconds)), 2),
            "epoch_seconds": [round(float(t), 2) for t in result.epoch_seconds],
            "train_file": os.path.abspath(config.train_file),
        })
    start = time.perf_counter()
    if validation is not None:  # the best epoch's weights
        results = {**validation_scores(), **results, "validation_examples": len(validation),
                   "eval_seconds": round(time.perf_counter() - start, 2),
                   "validation_file": os.path.abspath(config.validation_file)}
    results.update({
        "label_names": label_names, "regression": regression, "multi_label": multi_label, "epochs": config.epochs,
        **{k: getattr(config, k) for k in ("preset", "batch_size", "learning_rate", "warmup_proportion",
                                           "early_stopping_patience", "seed", "strategy")},
        "sequence_length": classifier.preprocessor.sequence_length,  # a fine-tuned model's: its preprocessor's
        # What the model computes in (set by `setup_finetuning` when it was built): None for float32.
        "mixed_precision": None if classifier.dtype_policy.name == "float32" else classifier.dtype_policy.name,
    })
    os.makedirs(config.model_dir, exist_ok=True)
    if config.epochs > 0:  # (with epochs=0 the model is unchanged: its file is `preset`)
        save_model_atomically(classifier, os.path.join(config.model_dir, "model.keras"))
    predictions_path = os.path.join(config.model_dir, "test_predictions.tsv")
    if test is None and os.path.exists(predictions_path):  # an earlier run's, of another model: not beside this one's
        os.remove(predictions_path)
    if test is not None:
        with predicting_everywhere(strategy):
            predictions = classifier.predict_labels(test.inputs, batch_size=config.batch_size)
        if multi_label:
            predictions = [config.label_separator.join(labels) for labels in predictions]
        lines = [f"{i}\t{p:.6g}" if regression else f"{i}\t{p}" for i, p in enumerate(predictions)]
        atomic_write_text(predictions_path, "\n".join(["index\tprediction", *lines]) + "\n")
        results["test_examples"] = len(test)
        # Where the job's file is (process 0 writes it; every process says the same path).
        results["test_predictions"] = os.path.abspath(os.path.join(shared_model_dir, "test_predictions.tsv"))
    if validation is not None:
        atomic_write_json(os.path.join(config.model_dir, "dev_results.json"), results)
    if result is not None:
        result.remove_checkpoints()
    return results


def _fractional_number(text):
    """Whether a label reads as a finite number that is not whole (`"2.615"`: a score, not a class)."""
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and not value.is_integer()
