"""Fine-tunes BERT for named-entity recognition (CoNLL-2003 or your own CoNLL files), reports entity F1 (conlleval).

Reads `--data_dir` (the original `eng.train`, `eng.testa`, `eng.testb`, or
`train.txt`, `dev.txt`/`valid.txt`, `test.txt`) or any CoNLL-format files
given by `--train_file`, `--validation_file`, `--test_file` (word in the first
column, the tag in `--tag_column`, tags in `--tag_scheme` iob1, iob2 or
iobes, any entity types; the labels come from the training file). Every file
is read and checked first: a bad line stops the run with one line,
`error: <file>, line <n>, column <c>: <problem>`, and exit code 2 (`--debug`
shows the traceback). Labels each word on its first
WordPiece (BERT paper section 4.3), fine-tunes a `BertTokenClassifier` with
BERT's AdamW (warm-up then linear decay), prints dev and test entity F1 after
every epoch, keeps the epoch best on dev, and writes to `--model_dir`:
`dev_results.json`, `test_results.json` (precision, recall, f1 overall and per
type), `dev_predictions.txt`, `test_predictions.txt` (`word gold predicted`, for
conlleval), `model.keras` (with its preprocessor and label names:
`keras.saving.load_model(path).predict_entities(["John lives in Paris."])`
after `import keras_bert_impl`), `labels.json`, `best.weights.h5`, TensorBoard `logs/`.

Example (the paper's setup with a small checkpoint):

    python recipes/finetune_conll.py --data_dir ../shared/data/conll2003 \
        --preset all_minilm_l6_v2_en --model_dir /tmp/conll

Your own files (two columns, `word tag`, IOBES tags):

    python recipes/finetune_conll.py --train_file train.bioes --validation_file dev.bioes \
        --tag_scheme iobes --preset all_minilm_l6_v2_en --model_dir /tmp/my_ner

Tag raw text with the fine-tuned model (no training; `--epochs 0` needs a fine-tuned `.keras` model):

    python recipes/finetune_conll.py --init_checkpoint /tmp/conll/model.keras \
        --epochs 0 --model_dir /tmp/conll \
        --predict_text "EU rejects German call to boycott British lamb."
"""

import json

from command_line import (
    OneLineParser, add_lora_argument, add_predict_batch_size_argument, add_subset_arguments, add_run_arguments, run_recipe,
)
from interruption import one_line_on_ctrl_c
from native_logs import quiet_native_logs


def parse_args(argv=None):
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", help="folder with eng.train/eng.testa/eng.testb or train/dev/test.txt")
    parser.add_argument("--train_file", help="CoNLL-format training file (replaces the one in --data_dir)")
    parser.add_argument("--validation_file", help="CoNLL-format dev file, scored each epoch (replaces --data_dir's)")
    parser.add_argument("--test_file", help="CoNLL-format test file (replaces --data_dir's)")
    parser.add_argument("--tag_column", type=int, default=-1,
                        help="index of the column with the tag (0-based, negative from the end; default -1: last)")
    parser.add_argument("--tag_scheme", choices=("iob1", "iob2", "iobes"), default="iob1",
                        help="tag scheme of the files (default iob1, as CoNLL-2003's); IOB2 inside the model")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="backbone preset name, Hugging Face Hub id (hf://owner/name) or directory (BertBackbone.from_preset)")
    source.add_argument("--init_checkpoint", help="a fine-tuned BertTokenClassifier .keras file, or a preset directory")
    parser.add_argument("--tokenizer", help="tokenizer preset/directory (default: the backbone's)")
    parser.add_argument("--sequence_length", "--max_seq_length", "--seq_length", dest="sequence_length", type=int,
                        default=128, help="packed length, special tokens included (aliases: --max_seq_length, --seq_length)")
    parser.add_argument("--batch_size", type=int, default=32)
    add_predict_batch_size_argument(parser)
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="default 5e-5, or 5e-4 with --lora_rank")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--document_context", action="store_true",
                        help="fill each window with neighbouring sentences of the document (labels on the centre one)")
    parser.add_argument("--static_shapes", action="store_true",
                        help="pad every batch to --sequence_length (TPU) instead of length buckets 32/64/.../max")
    parser.add_argument("--packing", action="store_true",
                        help="train on rows of --sequence_length tokens that each hold several sentences "
                             "(almost no padding; the same loss; docs/finetuning.md)")
    add_subset_arguments(parser, "sentences", "dev and of test",
                         old_names=("--max_train_sentences", "--max_eval_sentences"))
    parser.add_argument("--no_test_each_epoch", action="store_true", help="score test only at the end")
    parser.add_argument("--predict_text", action="append", default=[],
                        help="raw text to tag after training; prints its entity spans (repeatable)")
    add_lora_argument(parser)
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    if args.epochs > 0 and not (args.data_dir or (args.train_file and args.validation_file)):
        parser.error("--data_dir (or --train_file and --validation_file) is required unless --epochs 0")
    if args.tag_column == 0:
        parser.error("--tag_column 0 is the word column; the tag is in another column (default -1: the last)")
    return args


def main(argv=None):
    """Runs the recipe; returns the run's results (`run`'s summary), or exits with code 2 and one `error: ...` line on a user error."""
    args = parse_args(argv)
    from keras_bert_impl.tasks.tagging.run import TaggingConfig, run

    summary = run_recipe(args, run, TaggingConfig)
    for text, entities in zip(args.predict_text or (), summary.get("entities") or ()):  # one readable line a text
        found = ", ".join(f"{span['text']} ({span['type']})" for span in entities) or "no entities"
        print(f"{text!r}: {found}")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    quiet_native_logs()  # TensorFlow's start-up log lines off stderr (--debug: all of them)
    one_line_on_ctrl_c()  # before main imports Keras and TensorFlow (seconds): Ctrl-C then is one line too
    main()
