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
import json
import os
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", help="folder with eng.train/eng.testa/eng.testb or train/dev/test.txt")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="backbone preset name or directory (BertBackbone.from_preset)")
    source.add_argument("--init_checkpoint", help="a fine-tuned BertTokenClassifier .keras file, or a preset directory")
    parser.add_argument("--tokenizer", help="tokenizer preset/directory (default: the backbone's)")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--document_context", action="store_true",
                        help="fill each window with neighbouring sentences of the document (labels on the centre one)")
    parser.add_argument("--static_shapes", action="store_true",
                        help="pad every batch to --max_seq_length (TPU) instead of length buckets 32/64/.../max")
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


def main(argv=None):
    args = parse_args(argv)
    import keras

    from keras_bert_impl import BertBackbone, BertTokenClassifier
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_json
    from keras_bert_impl.data import conll
    from keras_bert_impl.text.entity_prediction import predict_entities
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.conll import ConllEpochEvaluator, evaluate_conll, load_conll_split, write_conll_outputs
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.training.strategy import get_strategy

    setup_finetuning(seed=args.seed, mixed_precision=args.mixed_precision)
    fine_tuned = bool(args.init_checkpoint and args.init_checkpoint.endswith(".keras"))
    tokenizer = BertTokenizer.from_preset(args.tokenizer or args.preset or args.init_checkpoint)
    boundaries = None if args.static_shapes else conll.default_boundaries(args.max_seq_length)
    window = dict(max_seq_length=args.max_seq_length, document_context=args.document_context)

    files = conll.find_split_files(args.data_dir) if args.data_dir else {}
    if fine_tuned:
        labels_path = os.path.join(os.path.dirname(os.path.abspath(args.init_checkpoint)), "labels.json")
        label_names = json.load(open(labels_path, encoding="utf-8"))
    else:
        label_names = conll.label_vocabulary(conll.read_conll(files["train"]))
    splits = {
        name: load_conll_split(files[name], tokenizer, label_names, max_sentences=args.max_eval_sentences, **window)
        for name in ("dev", "test") if name in files
    }

    strategy = get_strategy(args.strategy)
    with strategy.scope():
        if fine_tuned:
            model = keras.models.load_model(args.init_checkpoint)
        else:
            backbone = BertBackbone.from_preset(args.preset or args.init_checkpoint)
            model = BertTokenClassifier(backbone, len(label_names), dropout=args.dropout)

    summary = {"labels": label_names, "document_context": args.document_context}
    if args.epochs > 0:
        train = load_conll_split(files["train"], tokenizer, label_names, max_sentences=args.max_train_sentences, **window)
        train_ds = conll.make_dataset(train.features, args.batch_size, shuffle=True, seed=args.seed, boundaries=boundaries)
        evaluated = splits if not args.no_test_each_epoch else {"dev": splits["dev"]}
        evaluator = ConllEpochEvaluator(
            evaluated, label_names, args.predict_batch_size, boundaries,
            on_epoch=lambda results: print(json.dumps(results), flush=True),
        )

        fit = finetune(
            model,
            train_ds,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
            warmup_proportion=args.warmup_proportion,
            eval_fn=evaluator,
            monitor="dev_f1",
            model_dir=args.model_dir,
            strategy=strategy,
            seed=args.seed,
            verbose=2,
        )
        train_sentences = len(train.sentences)
        summary.update(
            train_sentences=train_sentences,
            train_windows=len(train.features),
            best_epoch=fit.best_epoch,
            epoch_seconds=fit.epoch_seconds,
            train_sequences_per_second=len(train.features) * len(fit.epoch_seconds) / sum(fit.epoch_seconds),
            history={k: v for k, v in fit.history.items()},
        )
        model.save(os.path.join(args.model_dir, "model.keras"))
        atomic_write_json(os.path.join(args.model_dir, "labels.json"), label_names)

    best = evaluator.evaluations[fit.best_epoch - 1] if args.epochs > 0 else {}
    for name, split in splits.items():
        # The best epoch's weights are restored: reuse its predictions where it made them.
        evaluation = best.get(name) or evaluate_conll(model, split, label_names, args.predict_batch_size, boundaries)
        write_conll_outputs(args.model_dir, name, split, evaluation)
        summary[f"{name}_f1"] = evaluation.scores["f1"]
        summary[f"{name}_precision"] = evaluation.scores["precision"]
        summary[f"{name}_recall"] = evaluation.scores["recall"]
        summary[f"{name}_predict_seconds"] = evaluation.predict_seconds
    if args.predict_text:
        summary["entities"] = predict_entities(model, tokenizer, args.predict_text, label_names, args.max_seq_length)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
