"""What `quantize("int8")` / `quantize("int4")` keep and what they cost: all-MiniLM-L6-v2 on the STS-B dev split.

For each mode (float, then each quantized mode) the real checkpoint's `BertTextEmbedder` encodes the 1,500 STS-B
dev pairs' sentences (each alone, mean pooling, as sentence-transformers does), and the cosine similarity of each
pair is correlated (Spearman, Pearson) with the gold score: what quantization keeps of the checkpoint's accuracy.
Beside it: the `.keras` file's size, the encode time (sentences/s after a warm-up batch) and the largest difference
of the vectors from the float ones. The backend is `KERAS_BACKEND`'s.

    KERAS_BACKEND=jax python benchmarks/quantization.py [--preset all_minilm_l6_v2_en] [--modes int8 int4]

Prints one JSON line. Keras's quantized kernels target accelerators; the CPU times say what a CPU host pays.
"""

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))


def sts_dev_pairs():
    rows = (SHARED / "glue" / "STS-B" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    fields = [row.split("\t") for row in rows if row.strip()]
    return [f[7] for f in fields], [f[8] for f in fields], np.array([float(f[9]) for f in fields])


def measure(preset, mode, first, second, gold, batch_size, reference=None):
    import keras

    from keras_bert_impl import BertTextEmbedder
    from keras_bert_impl.metrics.glue import pearson, spearman

    embedder = BertTextEmbedder.from_preset(preset, sequence_length=128)
    if mode != "float":
        embedder.quantize(mode)
    embedder.encode(first[:batch_size], batch_size)  # compile
    start = time.perf_counter()
    a = embedder.encode(first, batch_size)
    b = embedder.encode(second, batch_size)
    seconds = time.perf_counter() - start
    scores = np.sum(a * b, axis=-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        embedder.save(path)
        size = os.path.getsize(path)
        loaded = keras.saving.load_model(path)
        reloaded_equal = bool(np.array_equal(loaded.encode(first[:64], batch_size), a[:64]))
    row = {"mode": mode, "spearman": round(float(spearman(gold, scores)), 4),
           "pearson": round(float(pearson(gold, scores)), 4), "keras_file_mb": round(size / 2**20, 2),
           "sentences_per_s": round(2 * len(first) / seconds, 1), "reloaded_equal": reloaded_equal}
    if reference is not None:
        row["max_vector_difference"] = float(np.abs(np.concatenate([a, b]) - reference).max())
    return row, np.concatenate([a, b])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--modes", nargs="+", default=["int8", "int4"])
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=None, help="the first N dev pairs (default: all 1,500)")
    args = parser.parse_args(argv)
    import keras

    first, second, gold = sts_dev_pairs()
    if args.pairs:
        first, second, gold = first[: args.pairs], second[: args.pairs], gold[: args.pairs]
    rows = []
    float_row, reference = measure(args.preset, "float", first, second, gold, args.batch_size)
    rows.append(float_row)
    for mode in args.modes:
        rows.append(measure(args.preset, mode, first, second, gold, args.batch_size, reference)[0])
    print(json.dumps({"backend": keras.backend.backend(), "preset": args.preset, "pairs": len(first),
                      "cpu_count": os.cpu_count(), "rows": rows}))


if __name__ == "__main__":
    main()
