"""Fine-tunes BERT on one GLUE task, evaluates on dev each epoch and writes GLUE submission files.

Reads the task's GLUE TSV files from `--data_dir` (the GLUE root holding
`CoLA/`, `SST-2/`, ... or the task folder itself), fine-tunes a
`BertClassifier` (regression for STS-B) with BERT's AdamW (10% warm-up,
linear decay) on length-bucketed batches, scores the task's official
metric(s) on dev after every epoch, keeps the best epoch, and writes to
`--model_dir`: `dev_results.json`, `best.weights.h5`, `model.keras`,
TensorBoard `logs/`, and `submission/<Task>.tsv` (e.g. `RTE.tsv`,
`MNLI-m.tsv`) in the leaderboard's format. With `--init_checkpoint model.keras`
(a fine-tuned run's `--save_model`) and `--epochs 0` it only scores dev and
writes the submissions, as the CoNLL and SQuAD recipes do.

A bad file or flag stops the run with one line, `error: <message>`, and exit
code 2; `--debug` shows the traceback.

Example:

    python recipes/finetune_glue.py --task rte --data_dir ../shared/data/glue \
        --preset all_minilm_l6_v2_en --model_dir /tmp/glue_rte
"""

import json
import os

from command_line import (
    OneLineParser, add_lora_argument, add_predict_batch_size_argument, add_subset_arguments, add_run_arguments, run_recipe,
)
from interruption import one_line_on_ctrl_c
from native_logs import quiet_native_logs

TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")


def parse_args(argv=None):
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    parser.add_argument("--data_dir", required=True, help="GLUE root (with the task folder) or the task folder")
    parser.add_argument("--preset", default="all_minilm_l6_v2_en",
                        help="backbone + tokenizer preset name, Hugging Face Hub id (hf://owner/name) or checkpoint "
                             "directory")
    parser.add_argument("--init_checkpoint", default=None,
                        help="backbone checkpoint directory (e.g. a pretraining export; overrides --preset's weights), "
                             "or a fine-tuned model.keras (a run's --save_model; with --epochs 0 it scores dev and "
                             "writes the submissions without training)")
    parser.add_argument("--sequence_length", "--max_seq_length", "--seq_length", dest="sequence_length", type=int,
                        default=128, help="packed length, special tokens included (aliases: --max_seq_length, --seq_length)")
    parser.add_argument("--batch_size", type=int, default=32)
    add_predict_batch_size_argument(parser, old_name="--eval_batch_size")
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="default 2e-5, or 5e-4 with --lora_rank")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--pooling", default="pooled", choices=("pooled", "mean"),
                        help="what the classifier reads: pooled (BERT's [CLS] pooler, default) or mean (the mean "
                             "token vector; for checkpoints trained through mean pooling or a short pretraining)")
    parser.add_argument("--packing", action="store_true",
                        help="train on rows that each hold several examples (almost no padding, the same loss; "
                             "needs --pooling pooled; docs/finetuning.md)")
    parser.add_argument("--jit_compile", default="auto", choices=["auto", "true", "false"],
                        help="XLA-compile the steps (auto: Keras's choice, which is off on a CPU-only TensorFlow machine)")
    parser.add_argument("--early_stopping_patience", type=int, default=None)
    add_subset_arguments(parser, "examples", "each dev split", old_names=("--train_limit", "--dev_limit"))
    parser.add_argument("--no_predict_test", action="store_true", help="skip the test-set submission files")
    add_lora_argument(parser)
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    task = args.task.lower().replace("-", "")
    if task not in TASKS:
        parser.error(f"unknown --task {args.task!r}; valid tasks: {', '.join(TASKS)}")
    args.task = task
    return args


def config_from_args(args):
    """The flags as a `ClassificationConfig`."""
    from keras_bert_impl.tasks.classification.run import ClassificationConfig

    return ClassificationConfig(
        task=args.task,
        data_dir=args.data_dir,
        model_dir=args.model_dir,
        preset=args.preset,
        init_checkpoint=args.init_checkpoint,
        sequence_length=args.sequence_length,
        batch_size=args.batch_size,
        predict_batch_size=args.predict_batch_size,
        learning_rate=args.learning_rate,
        epochs=args.epochs,
        warmup_proportion=args.warmup_proportion,
        pooling=args.pooling,
        packing=args.packing,
        strategy=args.strategy,
        seed=args.seed,
        mixed_precision=args.mixed_precision,
        early_stopping_patience=args.early_stopping_patience,
        max_train_samples=args.max_train_samples,
        max_eval_samples=args.max_eval_samples,
        predict_test=not args.no_predict_test,
        save_model=True,
        jit_compile={"auto": "auto", "true": True, "false": False}[args.jit_compile],
        lora_rank=args.lora_rank,
    )


def main(argv=None):
    args = parse_args(argv)
    from keras_bert_impl.tasks.classification.run import run

    results = run_recipe(args, run, config_from_args)
    print(json.dumps({"task": results["task"], "best_epoch": results["best_epoch"], **results["best"],
                      "dev_results": os.path.join(args.model_dir, "dev_results.json"),
                      "submission_files": results["submission_files"]}))
    return results


if __name__ == "__main__":
    quiet_native_logs()  # TensorFlow's start-up log lines off stderr (--debug: all of them)
    one_line_on_ctrl_c()  # before main imports Keras and TensorFlow (seconds): Ctrl-C then is one line too
    main()
