"""GLUE fine-tuning benchmark: keras_bert_impl vs Hugging Face transformers (torch CPU), same checkpoint and recipe.

For each task, fine-tunes the real all-MiniLM-L6-v2 checkpoint with
`keras_bert_impl.tasks.classification.run.run` and, with
`--reference`, Hugging Face `BertForSequenceClassification` (torch, CPU)
from the same files, with the same hyper-parameters: AdamW (eps 1e-6,
weight decay 0.01 except biases and LayerNorm), peak learning rate, 10%
linear warm-up then linear decay, global-norm clipping 1.0, dropout 0.1,
batch size, max length, `longest_first` pair truncation, epochs, best epoch
on dev, seeds 0..n-1. Batches: ours are length-bucketed (32/64/128);
the reference pads each shuffled batch to its longest example
(`DataCollatorWithPadding`, the usual HF setup).

Prints one JSON line: per task and implementation, the dev metric(s) of the
best epoch (mean over seeds and each seed), training seconds per epoch and
training sequences per second. `--max_train_samples N` trains on the first N
examples (a documented subset, the same for both).

    nice python benchmarks/glue.py --tasks rte,mrpc,stsb,cola,sst2 --reference --seeds 1

On a GPU host without TensorFlow (`KERAS_BACKEND=jax`, torch for the
reference): tokenize here with `--export_inputs DIR` (our WordPiece, the
token ids of every train/dev example in `DIR/glue_<task>.npz`), then run
there with `--inputs DIR --torch_device cuda`: ours trains from those ids
through `keras_bert_impl.batching.array_batches.LengthBucketedBatches` (the
same buckets and batch filling as the tf.data pipeline), the reference
tokenizes the same TSV files with its own tokenizer.

    python benchmarks/glue.py --tasks cola,stsb --export_inputs .gpu_inputs
    KERAS_BACKEND=jax python benchmarks/glue.py --tasks cola,stsb --inputs .gpu_inputs \
        --preset path/to/all-MiniLM-L6-v2 --reference --torch_device cuda --seeds 3
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="rte,mrpc,stsb,cola,sst2")
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "glue"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=2e-5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..n-1; metrics averaged")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", default=None,
                        help="N, or task=N,task=N: train on the first N examples (same subset for both)")
    parser.add_argument("--max_eval_samples", "--dev_limit", dest="dev_limit", type=int, default=None, help="evaluate on the first N dev examples only")
    parser.add_argument("--reference", action="store_true", help="also run Hugging Face transformers (torch CPU)")
    parser.add_argument("--skip_ours", action="store_true")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads for both implementations")
    parser.add_argument("--output", default=None, help="also append each run as a JSON line to this file")
    parser.add_argument("--export_inputs", default=None,
                        help="only tokenize each task's train/dev splits (ours) into DIR/glue_<task>.npz and exit")
    parser.add_argument("--inputs", default=None,
                        help="train ours from the token ids in DIR/glue_<task>.npz (no TensorFlow needed)")
    parser.add_argument("--torch_device", default="cpu", help="device of the reference (cpu, cuda)")
    parser.add_argument("--jit_compile", default="auto", choices=["auto", "true", "false"],
                        help="XLA for ours (auto: Keras's choice, off on a CPU-only TensorFlow machine)")
    return parser.parse_args(argv)


def _jit(args):
    return {"auto": "auto", "true": True, "false": False}[args.jit_compile]


def _limits(spec, tasks):
    if spec is None:
        return {t: None for t in tasks}
    if "=" not in spec:
        return {t: int(spec) for t in tasks}
    limits = {t: None for t in tasks}
    for item in spec.split(","):
        task, value = item.split("=")
        limits[task] = int(value)
    return limits


def run_ours(task, args, seed, train_limit):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    from keras_bert_impl.tasks.classification.run import ClassificationConfig, run

    with tempfile.TemporaryDirectory() as model_dir:
        results = run(ClassificationConfig(
            task, args.data_dir, model_dir, preset=args.preset, sequence_length=args.max_seq_length,
            batch_size=args.batch_size, learning_rate=args.learning_rate, epochs=args.epochs, seed=seed,
            max_train_samples=train_limit, max_eval_samples=args.dev_limit, predict_test=False, verbose=0,
            jit_compile=_jit(args),
        ))
    return {
        "best": results["best"],
        "best_epoch": results["best_epoch"],
        "seconds_per_epoch": results["seconds_per_epoch"],
        "epoch_seconds": results["epoch_seconds"],
        "train_sequences_per_second": results["train_sequences_per_second"],
        "train_examples": results["train_examples"],
    }


def export_inputs(task_name, args):
    """Tokenizes the train and dev splits with our preprocessor into `args.export_inputs/glue_<task>.npz`."""
    from keras_bert_impl.tasks import classification as glue
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer

    task = glue.get_task(task_name)
    preprocessor = ClassifierPreprocessor(BertTokenizer.from_preset(args.preset), sequence_length=args.max_seq_length,
                                          truncate="longest_first")
    arrays = {}
    for split_name in ("train", *task.dev_splits):
        split = glue.read_split(task, args.data_dir, split_name)
        texts = (split.text_a,) if split.text_b is None else (split.text_a, split.text_b)
        token_ids, segment_ids = [], []
        for start in range(0, len(split), 1024):
            chunk = [list(t[start : start + 1024]) for t in texts]
            features = preprocessor.unpadded(tuple(chunk) if len(chunk) > 1 else chunk[0])  # (texts_a, texts_b)
            token_ids.extend(features["token_ids"].to_list())
            segment_ids.extend(features["segment_ids"].to_list())
        arrays[f"{split_name}_token_ids"] = np.concatenate([np.asarray(x, np.int32) for x in token_ids])
        arrays[f"{split_name}_segment_ids"] = np.concatenate([np.asarray(x, np.int8) for x in segment_ids])
        arrays[f"{split_name}_offsets"] = np.cumsum([0] + [len(x) for x in token_ids])
        arrays[f"{split_name}_labels"] = np.asarray(split.labels)
    os.makedirs(args.export_inputs, exist_ok=True)
    path = os.path.join(args.export_inputs, f"glue_{task.name}.npz")
    np.savez_compressed(path, **arrays)
    return path


def _array_batches(inputs, split_name, limit, **kwargs):
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches

    offsets = inputs[f"{split_name}_offsets"]
    count = len(offsets) - 1 if limit is None else min(limit, len(offsets) - 1)
    offsets = offsets[: count + 1]
    token_ids = inputs[f"{split_name}_token_ids"]
    flat = {"token_ids": token_ids, "segment_ids": inputs[f"{split_name}_segment_ids"].astype(np.int32),
            "padding_mask": np.ones_like(token_ids)}
    return LengthBucketedBatches.from_flat(flat, offsets, labels=inputs[f"{split_name}_labels"][:count], **kwargs)


def run_ours_arrays(task_name, args, seed, train_limit):
    """Ours without TensorFlow: token ids from `--inputs`, `finetune` on `LengthBucketedBatches`."""
    from keras_bert_impl.tasks import classification as glue
    from keras_bert_impl.metrics.glue import glue_metrics
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.batching.boundaries import CLASSIFICATION_BUCKETS, default_boundaries
    from keras_bert_impl.tasks.classification.evaluation import evaluate_metric_names

    task = glue.get_task(task_name)
    inputs = np.load(os.path.join(args.inputs, f"glue_{task.name}.npz"))
    boundaries = default_boundaries(args.max_seq_length, **CLASSIFICATION_BUCKETS)
    setup_finetuning(seed=seed)
    model = BertClassifier(BertBackbone.from_preset(args.preset), num_classes=task.num_classes, dropout=0.1)
    train = _array_batches(inputs, "train", train_limit, batch_size=args.batch_size, boundaries=boundaries,
                           shuffle=True, seed=seed)
    devs = [(s, _array_batches(inputs, s, args.dev_limit, batch_size=64, boundaries=boundaries)) for s in task.dev_splits]

    def eval_fn(m):
        metrics = {}
        for split_name, batches in devs:
            logits = np.asarray(m.predict(batches, verbose=0))[: batches.num_examples]
            predictions = logits[:, 0] if task.is_regression else logits.argmax(-1)
            prefix = "" if len(devs) == 1 else split_name.replace("dev_", "") + "_"
            metrics.update({prefix + k: v for k, v in glue_metrics(task.name, batches.labels, predictions).items()})
        return metrics

    names = evaluate_metric_names(task, task.dev_splits)
    result = finetune(model, train, epochs=args.epochs, learning_rate=args.learning_rate, eval_fn=eval_fn,
                      monitor=names[0], seed=seed, verbose=0, jit_compile=_jit(args))
    seconds = float(np.mean(result.epoch_seconds))
    return {
        "best": {k: result.best_metrics[k] for k in names},
        "best_epoch": result.best_epoch,
        "seconds_per_epoch": seconds,
        "epoch_seconds": [float(x) for x in result.epoch_seconds],
        "train_sequences_per_second": train.num_examples / seconds,
        "train_examples": train.num_examples,
    }


def run_reference(task_name, args, seed, train_limit):
    """Hugging Face BertForSequenceClassification, a plain torch loop (what Trainer does, minus its extras)."""
    import torch
    from hf_reference import apply_gradients, bert_adamw
    import transformers

    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets  # noqa: F401 (same files as ours)
    from keras_bert_impl.tasks import classification as glue
    from keras_bert_impl.metrics.glue import glue_metrics

    torch.set_num_threads(args.threads)
    model_dir = _checkpoint_dir(args.preset)
    task = glue.get_task(task_name)
    train = glue.read_split(task, args.data_dir, "train")
    if train_limit is not None:
        train = train.take(train_limit)
    devs = [glue.read_split(task, args.data_dir, s) for s in task.dev_splits]
    if args.dev_limit is not None:
        devs = [d.take(args.dev_limit) for d in devs]

    transformers.set_seed(seed)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    device = torch.device(args.torch_device)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=task.num_classes, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1
    ).to(device)

    def encode(split):
        texts = (split.text_a,) if split.text_b is None else (split.text_a, split.text_b)
        return tokenizer(*texts, truncation="longest_first", max_length=args.max_seq_length)

    def batches(encoded, labels, order, batch_size):
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            features = tokenizer.pad({k: [encoded[k][i] for i in index] for k in encoded}, return_tensors="pt")
            features = {k: v.to(device) for k, v in features.items()}
            label = None
            if labels is not None:
                label = torch.tensor(labels[index], dtype=torch.float32 if task.is_regression else torch.long,
                                     device=device)
            yield features, label

    train_encoded = encode(train)
    steps_per_epoch = -(-len(train) // args.batch_size)
    total_steps = steps_per_epoch * args.epochs
    optimizer = bert_adamw(model, args.learning_rate)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, int(round(0.1 * total_steps)), total_steps)
    generator = np.random.default_rng(seed)
    history, epoch_seconds = [], []
    for _ in range(args.epochs):
        model.train()
        start = time.perf_counter()
        for features, labels in batches(train_encoded, train.labels, generator.permutation(len(train)), args.batch_size):
            apply_gradients(model(**features, labels=labels).loss, model, optimizer, scheduler)
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_seconds.append(time.perf_counter() - start)
        model.eval()
        metrics = {}
        for dev in devs:
            encoded = encode(dev)
            outputs = []
            with torch.no_grad():
                for features, _ in batches(encoded, None, np.arange(len(dev)), 64):
                    outputs.append(model(**features).logits.float().cpu().numpy())
            logits = np.concatenate(outputs)
            predictions = logits[:, 0] if task.is_regression else logits.argmax(-1)
            prefix = "" if len(devs) == 1 else dev.split.replace("dev_", "") + "_"
            metrics.update({prefix + k: v for k, v in glue_metrics(task.name, dev.labels, predictions).items()})
        history.append(metrics)
    monitor = next(iter(history[0]))
    best_index = int(np.argmax([m[monitor] for m in history]))
    seconds = float(np.mean(epoch_seconds))
    return {
        "best": history[best_index],
        "best_epoch": best_index + 1,
        "seconds_per_epoch": seconds,
        "epoch_seconds": epoch_seconds,
        "train_sequences_per_second": len(train) / seconds,
        "train_examples": len(train),
    }


def _checkpoint_dir(preset):
    if os.path.isdir(preset):
        return preset
    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets

    return os.path.dirname(resolve_tokenizer_assets(preset)["vocabulary"])


def summarize(runs):
    keys = list(runs[0]["best"])
    return {
        "dev": {k: float(np.mean([r["best"][k] for r in runs])) for k in keys},
        "dev_per_seed": [r["best"] for r in runs],
        "best_epoch_per_seed": [r["best_epoch"] for r in runs],
        "seconds_per_epoch": float(np.mean([r["seconds_per_epoch"] for r in runs])),
        # Epochs after the first: without one-off compilation (XLA) costs.
        "seconds_per_later_epoch": float(np.mean([np.mean(r["epoch_seconds"][1:] or r["epoch_seconds"]) for r in runs])),
        "train_sequences_per_second": float(np.mean([r["train_sequences_per_second"] for r in runs])),
        "train_examples": runs[0]["train_examples"],
    }


def main(argv=None):
    args = parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    limits = _limits(args.train_limit, tasks)
    report = {"benchmark": "glue_finetuning", "preset": args.preset, "max_seq_length": args.max_seq_length,
              "batch_size": args.batch_size, "learning_rate": args.learning_rate, "epochs": args.epochs,
              "seeds": args.seeds, "threads": args.threads, "dev_limit": args.dev_limit, "jit_compile": args.jit_compile,
              "keras_backend": os.environ.get("KERAS_BACKEND", "tensorflow"), "torch_device": args.torch_device,
              "tasks": {}}
    if args.export_inputs:
        for task in tasks:
            print(export_inputs(task, args), flush=True)
        return 0
    ours = run_ours_arrays if args.inputs else run_ours
    impls = ([] if args.skip_ours else [("keras_bert_impl", ours)]) + (
        [("hf_transformers_torch", run_reference)] if args.reference else [])
    for task in tasks:
        report["tasks"][task] = {"train_limit": limits[task]}
        for name, function in impls:
            runs = []
            for seed in range(args.seeds):
                run = function(task, args, seed, limits[task])
                runs.append(run)
                if args.output:
                    with open(args.output, "a") as f:
                        f.write(json.dumps({"task": task, "impl": name, "seed": seed, **run}) + "\n")
            report["tasks"][task][name] = summarize(runs)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
