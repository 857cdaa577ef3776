"""Fine-tunes a BERT classifier (one label a row, several with --multi_label, or a score with --regression) on your
own CSV, TSV or JSON Lines files.

Reads and checks every input file first (a bad row stops the run with one
line, `error: <file>, line <n>, column <c>: <problem>`, and exit code 2),
takes the label names from the training file (the story is
`keras_bert_impl.tasks.classification.table_run`), fine-tunes
`BertClassifier.from_preset` on the raw strings (batched by length by its
preprocessor; AdamW, 10% warm-up, linear decay), scores the validation file
and writes to `--model_dir` (alias `--output_dir`): `dev_results.json`
(accuracy and macro F1; micro and macro F1 and subset accuracy with
`--multi_label`; or Pearson and Spearman), `model.keras` (inference
model with its preprocessor and label names:
`keras.saving.load_model(...).predict_labels(texts)`), `logs/` (TensorBoard)
and, with `--test_file`, `test_predictions.tsv` (`index<TAB>prediction`).

A run's `model.keras` as `--init_checkpoint` keeps its head, labels and
preprocessor: with `--epochs 0` it labels new rows (and scores a labelled
file) without training; with `--epochs 1` or more it trains further on a
table of the same labels.

Example:

    python recipes/finetune_classifier.py --train_file train.csv --validation_file dev.csv \
        --text_column text --label_column label --model_dir /tmp/my_classifier

Labelling new rows with that model, nothing trained:

    python recipes/finetune_classifier.py --init_checkpoint /tmp/my_classifier/model.keras --epochs 0 \
        --test_file new_rows.csv --text_column text --model_dir /tmp/my_classifier

On the GPUs of one machine (PyTorch; JAX and TensorFlow workers take the
same `--strategy multiworker`, docs/finetuning.md):

    KERAS_BACKEND=torch torchrun --nproc_per_node 8 recipes/finetune_classifier.py ... --strategy multiworker
"""

import json

from command_line import (
    OneLineParser, add_lora_argument, add_subset_arguments, add_run_arguments, config_from_args, epochs_value,
    positive, run_recipe,
)
from interruption import one_line_on_ctrl_c
from native_logs import quiet_native_logs


def parse_flags(argv=None):
    """The command line as parsed flags; a bad flag fails here, before TensorFlow is imported."""
    p = OneLineParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train_file", help=".csv, .tsv or .jsonl file with a header / keys (not with --epochs 0)")
    p.add_argument("--validation_file",
                   help="same columns as --train_file; scored after every epoch (val_accuracy, ...), the best "
                        "epoch's weights kept (optional with --epochs 0)")
    p.add_argument("--test_file", default=None, help="texts to label; writes test_predictions.tsv")
    p.add_argument("--text_column", required=True)
    p.add_argument("--text_pair_column", default=None, help="second text of a pair (e.g. a hypothesis)")
    p.add_argument("--label_column", help="the column of the labels (or scores): needed to train, and to score "
                                          "--validation_file")
    p.add_argument("--regression", action="store_true", help="labels are numbers: one output, mean squared error")
    p.add_argument("--multi_label", action="store_true",
                   help="each row has any number of labels, joined by --label_separator (JSON Lines: a list); "
                        "one sigmoid per label, binary cross-entropy")
    p.add_argument("--label_separator", default=",", help="between the labels of a --multi_label row (default ',')")
    p.add_argument("--preset", "--init_checkpoint", dest="preset", default="all_minilm_l6_v2_en",
                   help="preset name, Hugging Face Hub id (hf://owner/name) or checkpoint directory, such as the "
                        "export of a pretraining run (recipes/pretrain.py's <model_dir>/export), or the model.keras "
                        "of an earlier run: its head, labels and preprocessor kept (alias: --init_checkpoint, as in "
                        "the other recipes)")
    p.add_argument("--sequence_length", "--max_seq_length", "--seq_length", dest="sequence_length",
                   type=positive(int), default=128, help="packed length (aliases: --max_seq_length, --seq_length)")
    p.add_argument("--batch_size", type=positive(int), default=32,
                   help="global batch: with --strategy multiworker, each process trains on its equal part")
    p.add_argument("--epochs", type=epochs_value, default=3,
                   help="passes over --train_file (default 3); 0 with a fine-tuned --init_checkpoint model.keras: "
                        "label --test_file and score --validation_file without training")
    p.add_argument("--learning_rate", type=positive(float), default=None,
                   help="default 2e-5, or 5e-4 with --lora_rank")
    p.add_argument("--warmup_proportion", type=float, default=0.1,
                   help="the share of the steps whose learning rate rises linearly to --learning_rate, in [0, 1) "
                        "(default 0.1); then it decays linearly to 0")
    p.add_argument("--early_stopping_patience", type=positive(int), default=None,
                   help="stop after this many epochs without a better validation score (default: train every epoch)")
    add_subset_arguments(p, "rows", "--validation_file", old_names=("--train_limit",))
    add_lora_argument(p)
    add_run_arguments(p, model_dir_aliases=("--output_dir",))  # --strategy, --seed, --model_dir, ...
    args = p.parse_args(argv)
    if args.multi_label and args.regression:
        p.error("--multi_label and --regression exclude each other (labels are names, or one score)")
    # What training reads, checked before TensorFlow is imported (with --epochs 0, table_run.check_flags says what
    # predicting needs).
    absent = [f"--{name}" for name in ("train_file", "validation_file", "label_column")
              if args.epochs and getattr(args, name) is None]
    if absent:
        p.error(f"--epochs {args.epochs} trains: give {' and '.join(absent)} too")
    return args


def parse_args(argv=None):
    """The command line as a `TableClassificationConfig`."""
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig

    return config_from_args(parse_flags(argv), TableClassificationConfig)


def main(argv=None):
    args = parse_flags(argv)
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig, run

    # Every input file is read and checked before the model is built; a user error is one line and exit status 2.
    results = run_recipe(args, run, TableClassificationConfig)
    scores = ("accuracy", "micro_f1", "macro_f1", "subset_accuracy", "pearson", "spearman", "test_predictions")
    print(json.dumps({k: results[k] for k in scores if k in results}))
    return results


if __name__ == "__main__":
    quiet_native_logs()  # TensorFlow's start-up log lines off stderr (--debug: all of them)
    one_line_on_ctrl_c()  # before main imports Keras and TensorFlow (seconds): Ctrl-C then is one line too
    main()
