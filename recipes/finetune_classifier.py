"""Fine-tunes a BERT classifier (or regressor) on your own CSV, TSV or JSON Lines files.

Reads and checks every input file first (a bad row stops the run with one
line, `error: <file>, line <n>, column <c>: <problem>`, and exit code 2),
takes the label names from the training file, fine-tunes
`BertClassifier.from_preset` with `fit` on the raw strings (AdamW, 10%
warm-up, linear decay), scores the validation file and writes to
`--output_dir`: `dev_results.json` (accuracy and macro F1, or Pearson and
Spearman), `model.keras` (inference model with its preprocessor and label
names: `keras.saving.load_model(...).predict_labels(texts)`), and with
`--test_file`, `test_predictions.tsv` (`index<TAB>prediction`).

Example:

    python recipes/finetune_classifier.py --train_file train.csv --validation_file dev.csv \
        --text_column text --label_column label --output_dir /tmp/my_classifier
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from typing import Optional


@dataclasses.dataclass
class FinetuneConfig:
    train_file: str
    validation_file: str
    text_column: str
    label_column: str
    output_dir: str
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


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2, as for bad files
        self.exit(2, f"error: {message} (see --help)\n")


def _positive(kind):
    def parse(text):
        if kind(text) <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return kind(text)
    return parse


def parse_args(argv=None):
    p = _Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train_file", required=True, help=".csv, .tsv or .jsonl file with a header / keys")
    p.add_argument("--validation_file", required=True, help="same columns as --train_file; scored after training")
    p.add_argument("--test_file", default=None, help="texts to label; writes test_predictions.tsv")
    p.add_argument("--text_column", required=True)
    p.add_argument("--text_pair_column", default=None, help="second text of a pair (e.g. a hypothesis)")
    p.add_argument("--label_column", required=True)
    p.add_argument("--regression", action="store_true", help="labels are numbers: one output, mean squared error")
    p.add_argument("--preset", default="all_minilm_l6_v2_en", help="preset name or checkpoint directory")
    p.add_argument("--output_dir", required=True)
    p.add_argument("--sequence_length", "--max_seq_length", type=_positive(int), default=128)
    p.add_argument("--batch_size", type=_positive(int), default=32)
    p.add_argument("--epochs", type=_positive(int), default=3)
    p.add_argument("--learning_rate", type=_positive(float), default=2e-5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train_limit", type=_positive(int), default=None, help="train on the first N rows only")
    return FinetuneConfig(**vars(p.parse_args(argv)))


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
    import keras

    from keras_bert_impl.models.classifier import BertClassifier

    keras.utils.set_random_seed(config.seed)
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
        "train_file": os.path.abspath(config.train_file), "validation_file": os.path.abspath(config.validation_file),
    }
    os.makedirs(config.output_dir, exist_ok=True)
    atomic_save(os.path.join(config.output_dir, "model.keras"), classifier.save)
    if test is not None:
        predictions = classifier.predict_labels(test.inputs, batch_size=config.batch_size)
        lines = [f"{i}\t{p:.6g}" if config.regression else f"{i}\t{p}" for i, p in enumerate(predictions)]
        atomic_write_text(os.path.join(config.output_dir, "test_predictions.tsv"),
                          "\n".join(["index\tprediction", *lines]) + "\n")
        results["test_examples"] = len(test)
    atomic_write_json(os.path.join(config.output_dir, "dev_results.json"), results)
    return results


def main(argv=None):
    config = parse_args(argv)
    try:  # all input files are read and checked before the model is built
        inputs = read_inputs(config)
        classifier = build_classifier(config, inputs[3])
    except (OSError, ValueError) as error:  # a missing or bad file, an unknown preset: one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    results = run(config, inputs, classifier)
    print(json.dumps({k: results[k] for k in ("accuracy", "macro_f1", "pearson", "spearman") if k in results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
