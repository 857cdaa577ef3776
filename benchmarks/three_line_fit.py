"""The three-line habit on both sides, same checkpoint, same SST-2 sentences: dev accuracy per seed.

Each row fine-tunes from the same pretrained weights (a new 2-class head), one pass of `--max_train_samples` SST-2
training sentences at batch 32, then scores the whole SST-2 dev set (872 sentences):

- `ours_auto`: `BertClassifier.from_preset(preset, num_classes=2)`, `fit(texts, labels, batch_size=32,
  epochs=1, seed=s)`, `predict(dev texts)`: the `"auto"` optimizer (`Task.default_optimizer`: the `Trainer`'s
  AdamW step at a constant 5e-5);
- `ours_keras_adamw`: the same with `compile(optimizer=keras.optimizers.AdamW(5e-5))`, the `"auto"` optimizer
  until session 33 (Keras's epsilon form and defaults, no clipping);
- `hf_trainer`: transformers' `Trainer` with its default `TrainingArguments` (AdamW 5e-5, epsilon 1e-8, no weight
  decay, `max_grad_norm` 1, linear decay to 0), `per_device_train_batch_size=32`, `num_train_epochs=1`, `seed=s`;
- `hf_trainer_constant`: the same with `lr_scheduler_type="constant"`, the schedule of `ours_auto`.

The sides draw different heads and shuffles from the same seed, so compare the spread over seeds, not one seed.
Prints one JSON line (every row's accuracy per seed, mean, standard deviation, seconds per run).

    pip install accelerate   # transformers' Trainer needs it
    python benchmarks/three_line_fit.py --max_train_samples 2000 --seeds 3
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np

ROWS = ("ours_auto", "ours_keras_adamw", "hf_trainer", "hf_trainer_constant")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                           "glue"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", type=int, default=2000, help="the first N training sentences")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 for every row")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    args = parser.parse_args(argv)
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(args.rows) - set(ROWS))
    if unknown:
        parser.error(f"--rows: unknown {', '.join(unknown)}; expected some of {', '.join(ROWS)}")
    return args


def read_sst2(data_dir, split, limit=None):
    """(sentences, labels) of an SST-2 split, read by the GLUE recipe's reader."""
    from keras_bert_impl.tasks import classification as glue

    examples = glue.read_split(glue.get_task("sst2"), data_dir, split)
    if limit is not None:
        examples = examples.take(limit)
    return list(examples.text_a), np.asarray(examples.labels)


def run_ours(row, args, seed, train, dev):
    import keras

    from keras_bert_impl import BertClassifier

    keras.utils.set_random_seed(seed)
    classifier = BertClassifier.from_preset(args.preset, num_classes=2)
    if row == "ours_keras_adamw":
        classifier.compile(optimizer=keras.optimizers.AdamW(5e-5))
    start = time.perf_counter()
    classifier.fit(train[0], train[1], batch_size=args.batch_size, epochs=args.epochs, seed=seed, verbose=0)
    seconds = time.perf_counter() - start
    predictions = np.argmax(classifier.predict(dev[0], batch_size=64, verbose=0), axis=-1)
    return float(np.mean(predictions == dev[1])), seconds


def run_hf(row, args, seed, train, dev):
    import torch
    import transformers

    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets

    model_dir = os.path.dirname(resolve_tokenizer_assets(args.preset)["vocabulary"])
    transformers.set_seed(seed)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)

    class Sentences(torch.utils.data.Dataset):
        def __init__(self, texts, labels):
            self.encoded = tokenizer(texts, truncation=True)
            self.labels = labels

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, index):
            return {**{k: v[index] for k, v in self.encoded.items()}, "labels": int(self.labels[index])}

    with tempfile.TemporaryDirectory() as output_dir:
        training_args = transformers.TrainingArguments(
            output_dir=output_dir, per_device_train_batch_size=args.batch_size, per_device_eval_batch_size=64,
            num_train_epochs=args.epochs, seed=seed, report_to=[], save_strategy="no", logging_strategy="no",
            disable_tqdm=True, **({"lr_scheduler_type": "constant"} if row == "hf_trainer_constant" else {}))
        trainer = transformers.Trainer(model=model, args=training_args, train_dataset=Sentences(*train),
                                       data_collator=transformers.DataCollatorWithPadding(tokenizer))
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
        logits = trainer.predict(Sentences(*dev)).predictions
    return float(np.mean(np.argmax(logits, axis=-1) == dev[1])), seconds


def main(argv=None):
    args = parse_args(argv)
    train = read_sst2(args.data_dir, "train", args.train_limit)
    dev = read_sst2(args.data_dir, "dev")
    results = {}
    for row in args.rows:
        runs = [(run_ours if row.startswith("ours") else run_hf)(row, args, seed, train, dev)
                for seed in range(args.seeds)]
        accuracies = [accuracy for accuracy, _ in runs]
        results[row] = {"accuracy_per_seed": accuracies, "accuracy_mean": float(np.mean(accuracies)),
                        "accuracy_std": float(np.std(accuracies)),
                        "train_seconds_per_seed": [round(seconds, 1) for _, seconds in runs]}
        print(f"{row}: accuracy {np.mean(accuracies):.4f} +- {np.std(accuracies):.4f} over seeds "
              f"{[round(a, 4) for a in accuracies]}", file=sys.stderr, flush=True)
    import keras

    line = json.dumps({"benchmark": "three_line_fit", "preset": args.preset, "train_examples": len(train[0]),
                       "dev_examples": len(dev[0]), "batch_size": args.batch_size, "epochs": args.epochs,
                       "seeds": args.seeds, "backend": keras.backend.backend(), "machine": platform.machine(),
                       "cpus": os.cpu_count(), "rows": results})
    print(line)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(line + "\n")


if __name__ == "__main__":
    main()
