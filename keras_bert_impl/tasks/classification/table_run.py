"""Your own labelled table (CSV, TSV or JSON Lines) -> a fine-tuned `BertClassifier`: the story of
`recipes/finetune_classifier.py`, in the steps of the other tasks.

1. read: `read_inputs` reads and checks every file (`table_files.read_table`:
   file, line and column in each error) and takes the label names from the
   training file, before any model is built;
2. model: `build_classifier` (`BertClassifier.from_preset` with a new head);
3. `run`: `fit` on the raw strings (AdamW, 10% warm-up, linear decay), score
   the validation file (accuracy and macro F1, or Pearson and Spearman), write
   `dev_results.json`, `model.keras` and `test_predictions.tsv`.

Example:
>>> from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig
>>> TableClassificationConfig("train.csv", "dev.csv", "text", "label", "out").sequence_length
128
"""

import dataclasses
import math
import os
import time
from typing import Optional


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
    preset: str = "all_minilm_l6_v2_en"
    sequence_length: int = 128
    batch_size: int = 32
    epochs: int = 3
    learning_rate: float = 2e-5
    seed: int = 0
    train_limit: Optional[int] = None
    mixed_precision: Optional[str] = "auto"


def read_inputs(config):
    """Reads and checks all input files: (train, validation, test or None, label names or None)."""
    from keras_bert_impl.tasks.classification.table_files import label_vocabulary, read_table

    columns = dict(text_column=config.text_column, text_pair_column=config.text_pair_column)
    train = read_table(config.train_file, label_column=config.label_column, regression=config.regression, **columns)
    label_names = None if config.regression else label_vocabulary(train)
    if label_names is not None and len(label_names) < 2:
        raise ValueError(f"{config.train_file}: column {config.label_column!r} has one label only, "
                         f"{label_names[0]!r}; a classifier needs two or more (or use --regression for scores)")
    validation = read_table(config.validation_file, label_column=config.label_column,
                            regression=config.regression, known_labels=label_names, **columns)
    test = None if config.test_file is None else read_table(config.test_file, **columns)
    return train.head(config.train_limit), validation, test, label_names


def build_classifier(config, label_names):
    """`BertClassifier.from_preset` with a new head: one output for regression, else one per label name."""
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.finetuning import setup_finetuning

    setup_finetuning(seed=config.seed, mixed_precision=config.mixed_precision)  # before the model is built
    return BertClassifier.from_preset(
        config.preset, num_classes=1 if config.regression else len(label_names),
        label_names=label_names, sequence_length=config.sequence_length)


def run(config, inputs=None, classifier=None):
    """Fine-tunes, scores and writes the outputs (reading the files and building the model if not given)."""
    train, validation, test, label_names = inputs or read_inputs(config)
    classifier = classifier or build_classifier(config, label_names)
    from keras_bert_impl.checkpoints.atomic_files import atomic_save, atomic_write_json, atomic_write_text
    from keras_bert_impl.tasks.classification.table_files import label_targets, score_outputs
    from keras_bert_impl.training.optimizer import create_optimizer

    # Length buckets add up to one partial batch per bucket: an upper bound on the steps keeps the rate above 0.
    buckets = len(classifier.preprocessor.default_boundaries())
    steps = config.epochs * (math.ceil(len(train) / config.batch_size) + buckets)
    classifier.compile(optimizer=create_optimizer(config.learning_rate, steps, int(0.1 * steps)))
    start = time.perf_counter()
    history = classifier.fit(train.inputs, label_targets(train, label_names), batch_size=config.batch_size,
                             epochs=config.epochs, seed=config.seed, verbose=2)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    outputs = classifier.predict(validation.inputs, batch_size=config.batch_size, verbose=0)
    results = {
        **score_outputs(validation, outputs, label_names),
        "validation_examples": len(validation), "train_examples": len(train), "label_names": label_names,
        "regression": config.regression, "epochs": config.epochs,
        "final_train_loss": float(history.history["loss"][-1]),
        "train_seconds": round(train_seconds, 2), "eval_seconds": round(time.perf_counter() - start, 2),
        **{k: getattr(config, k) for k in ("preset", "sequence_length", "batch_size", "learning_rate", "seed")},
        # What the model computes in (set by `setup_finetuning` when it was built): None for float32.
        "mixed_precision": None if classifier.dtype_policy.name == "float32" else classifier.dtype_policy.name,
        "train_file": os.path.abspath(config.train_file), "validation_file": os.path.abspath(config.validation_file),
    }
    os.makedirs(config.model_dir, exist_ok=True)
    atomic_save(os.path.join(config.model_dir, "model.keras"), classifier.save)
    if test is not None:
        predictions = classifier.predict_labels(test.inputs, batch_size=config.batch_size)
        lines = [f"{i}\t{p:.6g}" if config.regression else f"{i}\t{p}" for i, p in enumerate(predictions)]
        atomic_write_text(os.path.join(config.model_dir, "test_predictions.tsv"),
                          "\n".join(["index\tprediction", *lines]) + "\n")
        results["test_examples"] = len(test)
    atomic_write_json(os.path.join(config.model_dir, "dev_results.json"), results)
    return results
