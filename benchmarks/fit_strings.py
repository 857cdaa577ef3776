"""fit on raw strings vs the GLUE recipe's batches: one epoch each on the same SST-2 sentences, same model.

Both sides build `BertClassifier.from_preset(preset, num_classes=2)` with the
same initial weights and compile it the same way (AdamW 2e-5, the
classifier's default loss and metric); they differ only in the input:

- `recipe`: the GLUE recipe's dataset (tokenized once and cached,
  shuffled, length-bucketed, fixed-size batches with weight-0 filler rows);
- `fit_strings`: `classifier.fit(texts, labels, batch_size=...)` on the raw
  Python strings (the preprocessor layer tokenizes them once, then the same
  kind of buckets).

Prints one JSON line: seconds of each epoch for both, tokens per epoch
(padded), and the ratio of the later epochs (fit_strings / recipe; the first
epoch includes tracing and, for the recipe, tokenizing).

    python benchmarks/fit_strings.py --max_train_samples 8000 --epochs 2
"""

import argparse
import json
import os
import platform
import time

import numpy as np


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "glue"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", type=int, default=8000)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--order", default="recipe,fit_strings", help="which side runs first")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    return parser.parse_args(argv)


class EpochSeconds:
    def __init__(self):
        import keras

        class Callback(keras.callbacks.Callback):
            def on_epoch_begin(inner, epoch, logs=None):
                inner.start = time.perf_counter()

            def on_epoch_end(inner, epoch, logs=None):
                self.seconds.append(time.perf_counter() - inner.start)

        self.seconds = []
        self.callback = Callback()


def build(args):
    import keras

    from keras_bert_impl import BertClassifier

    keras.utils.set_random_seed(args.seed)
    classifier = BertClassifier.from_preset(args.preset, num_classes=2, sequence_length=args.sequence_length)
    classifier.compile(optimizer=keras.optimizers.AdamW(2e-5))
    return classifier


def recipe_dataset(args, classifier, split):
    try:  # the tasks layout
        from keras_bert_impl.tasks.classification.batches import make_dataset
    except ImportError:
        from keras_bert_impl.tasks.classification.batches import make_dataset
    return make_dataset(split, classifier.preprocessor, args.batch_size, training=True, seed=args.seed)


def read_split(args):
    try:
        from keras_bert_impl.tasks.classification.reading import read_split
    except ImportError:
        from keras_bert_impl.tasks.classification.reading import read_split
    split = read_split("sst2", os.path.join(args.data_dir, "SST-2"), "train")
    return split.take(args.train_limit)


def padded_tokens(dataset):
    total = 0
    for element in dataset:
        total += int(np.prod(element[0]["token_ids"].shape))
    return total


def main(argv=None):
    args = parse_args(argv)
    split = read_split(args)
    texts, labels = list(split.text_a), np.asarray(split.labels)
    result = {"benchmark": "fit_strings", "examples": len(texts), "batch_size": args.batch_size,
              "sequence_length": args.sequence_length, "epochs": args.epochs, "preset": args.preset,
              "host": platform.node(), "cpu_count": os.cpu_count()}
    import keras

    result["backend"] = keras.backend.backend()
    for side in args.order.split(","):
        classifier = build(args)
        timer = EpochSeconds()
        if side == "recipe":
            dataset = recipe_dataset(args, classifier, split)
            classifier.fit(dataset, epochs=args.epochs, callbacks=[timer.callback], verbose=0)
        else:
            dataset = classifier.preprocessor.make_dataset(texts, labels, batch_size=args.batch_size, shuffle=True,
                                                           seed=args.seed)
            start = time.perf_counter()
            classifier.fit(texts, labels, batch_size=args.batch_size, epochs=args.epochs, seed=args.seed,
                           callbacks=[timer.callback], verbose=0)
            result["fit_strings_total_seconds_including_tokenizing"] = round(time.perf_counter() - start, 2)
        result[f"{side}_epoch_seconds"] = [round(s, 2) for s in timer.seconds]
        result[f"{side}_padded_tokens_per_epoch"] = padded_tokens(dataset)
    later = slice(1, None) if args.epochs > 1 else slice(0, None)
    ratio = np.mean(result["fit_strings_epoch_seconds"][later]) / np.mean(result["recipe_epoch_seconds"][later])
    result["fit_strings_over_recipe_later_epochs"] = round(float(ratio), 3)
    line = json.dumps(result)
    print(line)
    if args.output:
        with open(args.output, "a", encoding="utf-8") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
