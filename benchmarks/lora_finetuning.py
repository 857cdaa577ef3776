"""LoRA against full fine-tuning: SST-2 dev accuracy, trainable weights, seconds per epoch, bytes to keep.

Each row builds `BertClassifier.from_preset(preset, num_classes=2)` with the
same seed, trains on the same first `--max_train_samples` SST-2 training sentences
(raw strings, `fit`), and scores the whole dev set:

- `full`: every weight trains (the task's "auto" optimizer, AdamW 5e-5);
- `lora_qkv`: `backbone.enable_lora(rank)` on each block's query/key/value
  projection (AdamW 5e-4, the "auto" optimizer with LoRA);
- `lora_qkv_ffn`: LoRA also on the feed-forward projections
  (`target_layer_names=["qkv", "intermediate", "output"]`).

Prints one JSON line per row: dev accuracy, trainable weights, seconds of each
epoch, and the bytes that must be kept to restore the tuned model (`full`: the
whole `.keras` file; LoRA: the `.lora.h5` file plus the head's weights).

    python benchmarks/lora_finetuning.py --max_train_samples 8000 --epochs 3
"""

import argparse
import json
import os
import platform
import tempfile

import numpy as np

ROWS = {
    "full": None,
    "lora_qkv": ["qkv"],
    "lora_qkv_ffn": ["qkv", "intermediate", "output"],
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "glue"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", type=int, default=8000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"which of {list(ROWS)}, in this order")
    parser.add_argument("--output", default=None, help="also append the JSON lines to this file")
    return parser.parse_args(argv)


def read_sst2(data_dir, split, limit=None):
    """SST-2 sentences and labels through the GLUE recipe's reader (file:line errors)."""
    from keras_bert_impl.tasks.classification.reading import read_split

    rows = read_split("sst2", data_dir, split)
    rows = rows.take(limit) if limit else rows
    return rows.text_a, rows.labels


def run_row(name, args, train, dev):
    import keras

    import keras_bert_impl
    from keras_bert_impl.training.finetuning import EpochTimer

    keras.utils.set_random_seed(args.seed)
    classifier = keras_bert_impl.BertClassifier.from_preset(
        args.preset, num_classes=2, sequence_length=args.sequence_length
    )
    if ROWS[name] is not None:
        classifier.backbone.enable_lora(args.rank, target_layer_names=ROWS[name])
    timer = EpochTimer()
    history = classifier.fit(*train, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed, verbose=0,
                             callbacks=[timer])
    dev_accuracy = classifier.evaluate(*dev, batch_size=64, verbose=0, return_dict=True)["accuracy"]
    with tempfile.TemporaryDirectory() as directory:
        if ROWS[name] is None:
            classifier.save(os.path.join(directory, "model.keras"))
        else:
            classifier.backbone.save_lora_weights(os.path.join(directory, "adapter.lora.h5"))
            head = classifier.get_layer("logits").get_weights()
            np.savez(os.path.join(directory, "head.npz"), *head)
        kept = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    return {
        "benchmark": "lora_finetuning",
        "row": name,
        "preset": args.preset,
        "task": "sst2",
        "train_examples": len(train[0]),
        "dev_examples": len(dev[0]),
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "rank": None if ROWS[name] is None else args.rank,
        "target_layer_names": ROWS[name],
        "learning_rate": float(f"{float(keras.ops.convert_to_numpy(classifier.optimizer.learning_rate)):.6g}"),
        "trainable_weights": int(sum(np.prod(v.shape) for v in classifier.trainable_variables)),
        "all_weights": int(classifier.count_params()),
        "train_loss": [round(x, 4) for x in history.history["loss"]],
        "dev_accuracy": round(float(dev_accuracy), 4),
        "epoch_seconds": [round(seconds, 2) for seconds in timer.epoch_seconds],
        "bytes_to_keep": kept,
        "backend": keras.backend.backend(),
        "host": platform.node(),
    }


def main(argv=None):
    args = parse_args(argv)
    names = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = [name for name in names if name not in ROWS]
    if unknown:
        raise SystemExit(f"error: --rows: unknown row {unknown[0]!r}; expected some of {list(ROWS)}")
    train = read_sst2(args.data_dir, "train", args.train_limit)
    dev = read_sst2(args.data_dir, "dev")
    for name in names:
        line = json.dumps(run_row(name, args, train, dev))
        print(line, flush=True)
        if args.output:
            with open(args.output, "a", encoding="utf-8") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    main()
