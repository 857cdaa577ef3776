"""Fine-tunes BERT for CoNLL-2003 named-entity recognition and reports entity F1 (conlleval) on dev and test.

Reads `--data_dir` (the original `eng.train`, `eng.testa`, `eng.testb`, or
`train.txt`, `dev.txt`/`valid.txt`, `test.txt`), labels each word on its first
WordPiece (BERT paper section 4.3), fine-tunes a `BertTokenClassifier` with
BERT's AdamW (warm-up then linear decay), prints dev and test entity F1 after
every epoch, keeps the epoch best on dev, and writes to `--model_dir`:
`dev_results.json`, `test_results.json` (precision, recall, f1 overall and per
type), `dev_predictions.txt`, `test_predictions.txt` (`word gold predicted`, for
conlleval), `model.keras`, `labels.json`, `best.weights.h5`, TensorBoard `logs/`.

Example (the paper's setup with a small checkpoint):

    python recipes/finetune_conll.py --data_dir ../shared/data/conll2003 \
        --preset all_minilm_l6_v2_en --model_dir /tmp/conll

Tag raw text with the fine-tuned model (no training):

    python recipes/finetune_conll.py --init_checkpoint /tmp/conll/model.keras \
        --tokenizer all_minilm_l6_v2_en --epochs 0 --model_dir /tmp/conll \
        --predict_text "EU rejects German call to boycott British lamb."
"""

import argparse
import dataclasses
import json
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", help="folder with eng.train/eng.testa/eng.testb or train/dev/test.txt")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="backbone preset name or directory (BertBackbone.from_preset)")
    source.add_argument("--init_checkpoint", help="a fine-tuned BertTokenClassifier .keras file, or a preset directory")
    parser.add_argument("--tokenizer", help="tokenizer preset/directory (default: the backbone's)")
    parser.add_argument("--sequence_length", "--max_seq_length", "--seq_length", dest="sequence_length", type=int,
                        default=128, help="packed length, special tokens included (aliases: --max_seq_length, --seq_length)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--document_context", action="store_true",
                        help="fill each window with neighbouring sentences of the document (labels on the centre one)")
    parser.add_argument("--static_shapes", action="store_true",
                        help="pad every batch to --sequence_length (TPU) instead of length buckets 32/64/.../max")
    parser.add_argument("--max_train_sentences", type=int, default=None,
                        help="train on the first N training sentences only (a documented subset)")
    parser.add_argument("--max_eval_sentences", type=int, default=None,
                        help="score only the first N dev and test sentences (a documented subset, for quick runs)")
    parser.add_argument("--no_test_each_epoch", action="store_true", help="score test only at the end")
    parser.add_argument("--strategy", default="auto", help="auto, cpu, gpu, mirrored, multiworker, tpu")
    parser.add_argument("--mixed_precision", default=None, help="mixed_float16 or mixed_bfloat16")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--predict_text", action="append", default=[],
                        help="raw text to tag after training; prints its entity spans (repeatable)")
    parser.add_argument("--model_dir", required=True)
    args = parser.parse_args(argv)
    if args.epochs > 0 and not args.data_dir:
        parser.error("--data_dir is required unless --epochs 0")
    if args.init_checkpoint and args.init_checkpoint.endswith(".keras") and not args.tokenizer:
        parser.error("with a .keras --init_checkpoint pass --tokenizer (preset or directory)")
    return args


def config_from_args(args):
    """The flags as a `TaggingConfig`."""
    from keras_bert_impl.tasks.tagging.run import TaggingConfig

    fields = {f.name for f in dataclasses.fields(TaggingConfig)}
    return TaggingConfig(**{k: v for k, v in vars(args).items() if k in fields})


def main(argv=None):
    from keras_bert_impl.tasks.tagging.run import run

    summary = run(config_from_args(parse_args(argv)))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
