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

Without training (`--epochs 0`) it only predicts, e.g. with a fine-tuned
`--init_checkpoint model.keras`.
"""

import argparse
import json
import os
import sys


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", choices=("1.1", "2.0"), default="1.1")
    parser.add_argument("--train_file", help="SQuAD training file (.json or .json.gz)")
    parser.add_argument("--predict_file", required=True, help="SQuAD file to predict (and evaluate if it has answers)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="backbone preset name or directory (BertBackbone.from_preset)")
    source.add_argument("--init_checkpoint", help="a fine-tuned BertSpanExtractor .keras file, or a preset directory")
    parser.add_argument("--tokenizer", help="tokenizer preset/directory (default: the backbone's)")
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--max_answer_length", type=int, default=30)
    parser.add_argument("--n_best_size", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=3e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--null_score_diff_threshold", type=float, default=None,
                        help="v2.0: fixed threshold (default: tuned for F1 on the predict file, as the BERT paper)")
    parser.add_argument("--strategy", default="auto", help="auto, cpu, gpu, mirrored, multiworker, tpu")
    parser.add_argument("--mixed_precision", default=None, help="mixed_float16 or mixed_bfloat16")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--model_dir", required=True)
    args = parser.parse_args(argv)
    if args.epochs > 0 and not args.train_file:
        parser.error("--train_file is required unless --epochs 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras

    from keras_bert_impl import BertBackbone, BertSpanExtractor
    from keras_bert_impl.data import squad
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.training.squad import predict_squad, write_squad_outputs
    from keras_bert_impl.training.strategy import get_strategy

    setup_finetuning(seed=args.seed, mixed_precision=args.mixed_precision)
    window = dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    fine_tuned = args.init_checkpoint and args.init_checkpoint.endswith(".keras")
    tokenizer = BertTokenizer.from_preset(args.tokenizer or args.preset or args.init_checkpoint)
    if fine_tuned and not args.tokenizer:
        sys.exit("finetune_squad: error: with a .keras --init_checkpoint pass --tokenizer (preset or directory)")

    strategy = get_strategy(args.strategy)
    with strategy.scope():
        if fine_tuned:
            model = keras.models.load_model(args.init_checkpoint)
        else:
            model = BertSpanExtractor(BertBackbone.from_preset(args.preset or args.init_checkpoint))

    summary = {"version": args.version}
    if args.epochs > 0:
        train_examples, train_stats = squad.read_squad_examples(args.train_file, is_training=True)
        train_features = squad.convert_examples_to_features(train_examples, tokenizer, is_training=True, **window)
        train_ds = train_features.to_dataset(args.batch_size, training=True, shuffle_seed=args.seed)
        fit = finetune(
            model,
            train_ds,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
            warmup_proportion=args.warmup_proportion,
            model_dir=args.model_dir,
            strategy=strategy,
            seed=args.seed,
        )
        summary.update(
            train_questions=len(train_examples),
            train_windows=len(train_features),
            skipped_questions=train_stats.skipped_questions,
            mismatched_answers=train_stats.mismatched_answers,
            train_seconds=sum(fit.epoch_seconds),
            train_loss=fit.history.get("loss"),
        )
        model.save(os.path.join(args.model_dir, "model.keras"))

    gold = squad.load_squad_json(args.predict_file)
    examples, _ = squad.read_squad_examples(gold, source=args.predict_file)
    features = squad.convert_examples_to_features(examples, tokenizer, **window)
    result = predict_squad(
        model,
        features,
        gold=gold,
        version=args.version,
        batch_size=args.predict_batch_size,
        n_best_size=args.n_best_size,
        max_answer_length=args.max_answer_length,
        null_score_diff_threshold=args.null_score_diff_threshold,
    )
    summary.update(predict_questions=len(examples), predict_windows=len(features), predict_seconds=result.predict_seconds)
    write_squad_outputs(args.model_dir, result, extra_eval=summary)
    print(json.dumps(dict(result.metrics, **summary)))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as error:  # bad files or flags: one clear line, no traceback
        sys.exit(f"finetune_squad: error: {error}")
