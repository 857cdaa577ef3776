"""Fine-tunes BERT on SQuAD v1.1 or v2.0 and writes official-format predictions.

Reads the train and predict files (`.json` or `.json.gz`), cuts every
question + context into sliding windows, fine-tunes a `BertSpanExtractor`
with BERT's AdamW (warm-up then linear decay), predicts the predict file and
writes to `--model_dir`: `predictions.json` (and `null_odds.json` for v2.0)
in the official formats, `eval.json` with the official EM/F1 (v2.0: also
HasAns/NoAns and the null-score threshold tuned on the predict file), and
`best.weights.h5` / TensorBoard `logs/`.

Example (the official protocol):

    python recipes/finetune_squad.py --version 1.1 \
        --train_file train-v1.1.json --predict_file dev-v1.1.json \
        --preset bert_base_en_uncased --model_dir /tmp/squad11

Without training (`--epochs 0`) it only predicts, with a fine-tuned
`--init_checkpoint model.keras` (its tokenizer is inside); `--epochs 0` with
a backbone alone is refused (its span head would be random). The saved
`model.keras` holds its preprocessor: `keras.saving.load_model(path).answer(question, context)`.

A bad file or flag stops the run with one line, `error: <message>`, and exit
code 2; `--debug` shows the traceback.
"""

import argparse
import json

from command_line import (
    OneLineParser, add_lora_argument, add_predict_batch_size_argument, add_subset_arguments, add_run_arguments, run_recipe,
)
from interruption import one_line_on_ctrl_c
from native_logs import quiet_native_logs


def parse_args(argv=None):
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", choices=("1.1", "2.0"), default="1.1")
    parser.add_argument("--train_file", help="SQuAD training file (.json or .json.gz)")
    parser.add_argument("--predict_file", required=True, help="SQuAD file to predict (and evaluate if it has answers)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="backbone preset name, Hugging Face Hub id (hf://owner/name) or directory (BertBackbone.from_preset)")
    source.add_argument("--init_checkpoint", help="a fine-tuned BertSpanExtractor .keras file, or a preset directory")
    parser.add_argument("--tokenizer", help="tokenizer preset/directory (default: the backbone's)")
    parser.add_argument("--sequence_length", "--max_seq_length", "--seq_length", dest="sequence_length", type=int,
                        default=384, help="packed length, special tokens included (aliases: --max_seq_length, --seq_length)")
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_question_length", "--max_query_length", dest="max_question_length", type=int, default=64,
                        help="question pieces kept (default 64; --max_query_length: its name in BERT's run_squad.py)")
    parser.add_argument("--max_answer_length", type=int, default=30)
    parser.add_argument("--n_best_size", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=32)
    add_predict_batch_size_argument(parser)
    parser.add_argument("--packing", action="store_true",
                        help="train on rows that each hold several windows (almost no padding; the same loss)")
    parser.add_argument("--predict_packing", action=argparse.BooleanOptionalAction, default=True,
                        help="predict several windows a row of --sequence_length (the same logits within float "
                             "rounding, one compiled shape, almost no padding; --no-predict_packing: one window "
                             "a row, in length buckets)")
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="default 3e-5, or 5e-4 with --lora_rank")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--null_score_diff_threshold", type=float, default=None,
                        help="v2.0: fixed threshold (default: tuned for F1 on the predict file, as the BERT paper)")
    add_subset_arguments(parser, "questions", "--predict_file")
    add_lora_argument(parser)
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    if args.epochs > 0 and not args.train_file:
        parser.error("--train_file is required unless --epochs 0")
    return args


def main(argv=None):
    """Runs the recipe; returns the run's results (what `eval.json` holds), or exits with code 2 and one `error: ...`
    line on a user error."""
    args = parse_args(argv)
    from keras_bert_impl.tasks.span_qa.run import SpanQaConfig, run

    results = run_recipe(args, run, SpanQaConfig)
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    quiet_native_logs()  # TensorFlow's start-up log lines off stderr (--debug: all of them)
    one_line_on_ctrl_c()  # before main imports Keras and TensorFlow (seconds): Ctrl-C then is one line too
    main()
