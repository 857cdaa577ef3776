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

With `--strategy multiworker` (TensorFlow workers, `torchrun`, JAX processes)
every process builds the same batches and trains on its rows of each, and
process 0 alone writes `model_dir` (`finetuning.config_of_this_process`).

Example:
>>> from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig
>>> TableClassificationConfig("train.csv", "dev.csv", "text", "label", "out").sequence_length
128
"""

import dataclasses
import os
import time
from typing import NamedTuple, Optional

from keras_bert_impl.tasks.flags import check_numbers, learning_rate_or_default
from keras_bert_impl.tasks.old_keywords import old_field_names


@old_field_names(train_limit="max_train_samples")
@dataclasses.dataclass
class TableClassificationConfig:
    """The flags of `recipes/finetune_classifier.py` (see its `--help`)."""

    train_file: str
    validation_file: str
    text_column: str
    label_column: str
    model_dir: str
    test_file: Optional[str] = None
    text_pair_column: Optional[str] = None
    regression: bool = False
    multi_label: bool = False  # each row has any number of labels, joined by `label_separator` (JSON Lines: a list)
    label_separator: str = ","
    preset: str = "all_minilm_l6_v2_en"
    sequence_length: int = 128
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = None  # 2e-5, or 5e-4 with lora_rank (learning_rate_or_default)
    warmup_proportion: float = 0.1
    early_stopping_patience: Optional[int] = None
    seed: int = 0
    max_train_samples: Optional[int] = None  # train on the first N rows only (old name: train_limit)
    max_eval_samples: Optional[int] = None  # score the first N rows of the validation file only
    mixed_precision: Optional[str] = "auto"
    strategy: str = "auto"
    lora_rank: Optional[int] = None

    def __post_init__(self):
        self.learning_rate = learning_rate_or_default(self.learning_rate, self.lora_rank, 2e-5)



def check_flags(config):
    """Refuses numbers out of range in one line naming the flag (`run` calls it first).

    Example:
    >>> check_flags(TableClassificationConfig("train.csv", "dev.csv", "text", "label", "out", batch_size=0))
    Traceback (most recent call last):
    ...
    ValueError: --batch_size=0: must be an integer >= 1
    """
    check_numbers(config, integers={"epochs": 1, "batch_size": 1, "sequence_length": 2, "early_stopping_patience": 1,
                                    "max_train_samples": 1, "max_eval_samples": 1},
                  positive=["learning_rate"], fractions={"warmup_proportion": (0, 1, False)})


class TableInputs(NamedTuple):
    """What `read_inputs` returns: the run's tables, read and checked before any model is built."""

    train: object  # `table_files.LabelledTable` (its first `max_train_samples` rows when given)
    validation: object  # `LabelledTable` (its first `max_eval_samples` rows when given)
    test: object  # `LabelledTable` without labels, or None
    label_names: Optional[list]  # the training file's labels, sorted; None for regression


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

    for flag, path in (("train_file", config.train_file), ("validation_file", config.validation_file),
                       ("test_file", config.test_file)):
        if path is not None and not os.path.isfile(path):  # (was the bare "[Errno 2] No such file or directory")
            what = "a directory" if os.path.isdir(path) else "no such file"
            raise FileNotFoundError(f"--{flag} {path}: {what}; expected a .csv, .tsv or .jsonl table")
    columns = dict(text_column=config.text_column, text_pair_column=config.text_pair_column)
    labels = dict(label_column=config.label_column, regression=config.regression,
                  label_separator=config.label_separator if config.multi_label else None)
    train = read_table(config.train_file, **labels, **columns)
    label_names = None if config.regression else label_vocabulary(train)
    if label_names is not None and len(label_names) < 2:
        raise ValueError(f"{config.train_file}: column {config.label_column!r} has "
                         + (f"one label only, {label_names[0]!r}" if label_names else "no labels")
                         + "; a classifier needs two or more (or use --regression for scores)")
    validation = read_table(config.validation_file, **labels, known_labels=label_names, **columns)
    test = None if config.test_file is None else read_table(config.test_file, **columns)
    return TableInputs(train.head(config.max_train_samples), validation.head(config.max_eval_samples), test,
                       label_names)


def build_model(config, inputs, strategy=None):
    """Seeds and sets the dtype policy (`setup_finetuning`), then `BertClassifier.from_preset` with a new head.

    One output for regression, else one per label name of `inputs` (one sigmoid each with `multi_label`), with the
    preset's preprocessor at `config.sequence_length`; built under `strategy` (a `training.strategy.get_strategy`
    result; None: `config.strategy`'s). With `lora_rank`, the backbone gets LoRA factors.

    Returns:
        `(model, tokenizer)`.
    """
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.finetuning import setup_finetuning
    from keras_bert_impl.training.strategy import get_strategy

    # Before the model is built: the seed and the dtype policy.
    setup_finetuning(seed=config.seed, mixed_precision=config.mixed_precision, strategy_name=config.strategy)
    strategy = strategy or get_strategy(config.strategy)
    label_names = inputs.label_names
    with strategy.scope():
        classifier = BertClassifier.from_preset(
            config.preset, num_classes=1 if config.regression else len(label_names),
            label_names=label_names, multi_label=config.multi_label, sequence_length=config.sequence_length)
        if config.lora_rank:
            classifier.backbone.enable_lora(config.lora_rank)
    return classifier, classifier.preprocessor.tokenizer


def run(config, inputs=None):
    """Reads the files (unless `inputs` are given), fine-tunes, scores and writes the outputs; returns the results.

    The steps of every task's story: `check_flags` -> `read_inputs` (every file, before any model) ->
    `build_model` -> `finetune` (scoring the validation file after every epoch) -> predict and write the outputs.
    """
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_json, atomic_write_text, save_model_atomically
    from keras_bert_impl.tasks.classification.table_files import label_targets, score_outputs
    from keras_bert_impl.training.finetuning import config_of_this_process, finetune
    from keras_bert_impl.training.finetuning_resume import data_digest
    from keras_bert_impl.training.strategy import get_strategy, predicting_everywhere

    check_flags(config)
    inputs = inputs or read_inputs(config)  # every file, before any model
    train, validation, test, label_names = inputs
    strategy = get_strategy(config.strategy)
    shared_model_dir = config.model_dir  # fine-tuning checkpoints: process 0 writes, every process resumes
    config = config_of_this_process(config, strategy)  # several processes: one writer, an even split of each batch
    classifier, _ = build_model(config, inputs, strategy)
    train_ds = classifier.preprocessor.make_dataset(train.inputs, label_targets(train, label_names),
                                                    batch_size=config.batch_size, shuffle=True, seed=config.seed)
    def eval_fn(_):  # the validation file's scores after every epoch, as `val_<score>` (Keras's validation names)
        with predicting_everywhere(strategy):  # every process scores the whole file
            outputs = classifier.predict(validation.inputs, batch_size=config.batch_size, verbose=0)
        return {f"val_{name}": float("nan") if value is None else value
                for name, value in score_outputs(validation, outputs, label_names).items()}

    result = finetune(classifier, train_ds, epochs=config.epochs, learning_rate=config.learning_rate,
                      warmup_proportion=config.warmup_proportion, eval_fn=eval_fn,
                      early_stopping_patience=config.early_stopping_patience,
                      model_dir=shared_model_dir, strategy=strategy, seed=config.seed,
                      verbose=2, keep_checkpoints=True,  # removed below, once the outputs are written
                      # A checkpoint of other data, labels or starting point is refused, never resumed.
                      run_identity={"starting_point": config.preset, "label_names": repr(label_names),
                                    "sequence_length": config.sequence_length,
                                    "train_data": data_digest(train.inputs, label_targets(train, label_names))})
    train_seconds = float(sum(result.epoch_seconds))
    start = time.perf_counter()
    with predicting_everywhere(strategy):  # every process scores the whole file (the best epoch's weights)
        outputs = classifier.predict(validation.inputs, batch_size=config.batch_size, verbose=0)
    results = {
        **score_outputs(validation, outputs, label_names),
        "best_epoch": result.best_epoch,
        "validation_history": {name: values for name, values in result.history.items() if name.startswith("val_")},
        "validation_examples": len(validation), "train_examples": len(train), "label_names": label_names,
        "regression": config.regression, "multi_label": config.multi_label, "epochs": config.epochs,
        "final_train_loss": result.history["loss"][-1], "train_steps_per_epoch": result.train_steps,
        "train_seconds": round(train_seconds, 2), "epoch_seconds": [round(float(t), 2) for t in result.epoch_seconds],
        "eval_seconds": round(time.perf_counter() - start, 2),
        **{k: getattr(config, k) for k in ("preset", "sequence_length", "batch_size", "learning_rate",
                                           "warmup_proportion", "early_stopping_patience", "seed", "strategy")},
        # What the model computes in (set by `setup_finetuning` when it was built): None for float32.
        "mixed_precision": None if classifier.dtype_policy.name == "float32" else classifier.dtype_policy.name,
        "train_file": os.path.abspath(config.train_file), "validation_file": os.path.abspath(config.validation_file),
    }
    os.makedirs(config.model_dir, exist_ok=True)
    save_model_atomically(classifier, os.path.join(config.model_dir, "model.keras"))
    stale = os.path.join(config.model_dir, "test_predictions.tsv")
    if test is None and os.path.exists(stale):  # an earlier run's, of another model: not beside this one's outputs
        os.remove(stale)
    if test is not None:
        with predicting_everywhere(strategy):
            predictions = classifier.predict_labels(test.inputs, batch_size=config.batch_size)
        if config.multi_label:
            predictions = [config.label_separator.join(labels) for labels in predictions]
        lines = [f"{i}\t{p:.6g}" if config.regression else f"{i}\t{p}" for i, p in enumerate(predictions)]
        atomic_write_text(os.path.join(config.model_dir, "test_predictions.tsv"),
                          "\n".join(["index\tprediction", *lines]) + "\n")
        results["test_examples"] = len(test)
    atomic_write_json(os.path.join(config.model_dir, "dev_results.json"), results)
    result.remove_checkpoints()
    return results
