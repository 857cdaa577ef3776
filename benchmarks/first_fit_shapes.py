"""What length buckets cost a small dataset: `fit` on raw strings with the merged buckets (the default) against a
bucket for every boundary, same SST-2 sentences, same model, one fresh process per side.

Each bucket is one more compiled step shape (XLA / JAX), which on a small dataset costs more than the padding it
saves; `make_dataset`'s default merges buckets of fewer than `MIN_BATCHES_PER_BUCKET` batches into the next one up
(`batching.boundaries.merge_sparse_buckets`). Each side builds `BertClassifier.from_preset(preset,
num_classes=2)`, makes the first `--max_train_samples` SST-2 training sentences into batches with
`preprocessor.make_dataset(..., shuffle=True)` (`merged`: the default boundaries; `every_bucket`:
`boundaries=preprocessor.default_boundaries()`), and times `fit` on them `--fits` times: the first includes the
compilation of every shape.

Prints one JSON line per side (its step shapes and the seconds of each fit).

    KERAS_BACKEND=jax python benchmarks/first_fit_shapes.py --max_train_samples 32 --batch_size 8
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time

SIDES = ("merged", "every_bucket")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                           "glue"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_train_samples", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--fits", type=int, default=3)
    parser.add_argument("--side", choices=SIDES, help="run one side in this process (the default runs both, each "
                                                      "in a fresh process)")
    return parser.parse_args(argv)


def run_side(args):
    import numpy as np

    import keras_bert_impl

    with open(os.path.join(args.data_dir, "SST-2", "train.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:args.max_train_samples + 1]
    texts, labels = [row[0] for row in rows], np.array([int(row[1]) for row in rows])
    model = keras_bert_impl.BertClassifier.from_preset(args.preset, num_classes=2)
    preprocessor = model.preprocessor
    boundaries = preprocessor.default_boundaries() if args.side == "every_bucket" else None
    batches = preprocessor.make_dataset(texts, labels, batch_size=args.batch_size, shuffle=True, seed=0,
                                        boundaries=boundaries)
    shapes = sorted({int(features["token_ids"].shape[1]) for features, _, _ in batches})
    seconds = []
    for _ in range(args.fits):
        start = time.perf_counter()
        model.fit(batches, epochs=1, verbose=0)
        seconds.append(round(time.perf_counter() - start, 2))
    import keras

    return {"side": args.side, "backend": keras.backend.backend(), "examples": len(texts),
            "batch_size": args.batch_size, "step_shapes": shapes, "fit_seconds": seconds}


def main(argv=None):
    args = parse_args(argv)
    if args.side:
        print(json.dumps(run_side(args)), flush=True)
        return
    for side in SIDES:  # (a fresh process each: no compiled step carried over)
        command = [sys.executable, __file__, "--side", side, *(argv if argv is not None else sys.argv[1:])]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        print(output.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
