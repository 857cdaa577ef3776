"""STS-B without fine-tuning: how much sentence similarity a checkpoint's vectors already hold.

For each STS-B pair of a GLUE split, the cosine similarity of the two sentences' vectors, each sentence encoded
alone, is correlated (Pearson, Spearman) with the gold score, for each `--checkpoints` entry and three
vectors (`BertTextEmbedder`: the mean of the last layer's token vectors, and its [CLS] vector; and the
mean of the token embeddings, no encoder). A word-overlap baseline (the Jaccard index of the two sentences'
lower-cased word sets) needs no model. Issue 17 uses it to ask whether pretraining at the CPU budget taught the
encoder anything about similarity beyond what random vectors of shared words already give.

    python benchmarks/sts_zero_shot.py --checkpoints PRETRAINED_EXPORT RANDOM_PRESET_DIR

Prints one JSON line.
"""

import argparse
import json
import os
import pathlib
import re
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))


def word_jaccard(a, b):
    """Jaccard index of the two texts' lower-cased word sets (letters and digits)."""
    x, y = set(re.findall(r"\w+", a.lower())), set(re.findall(r"\w+", b.lower()))
    return len(x & y) / max(1, len(x | y))


def correlations(scores, gold):
    from keras_bert_impl.metrics.glue import pearson, spearman

    return {"pearson": round(float(pearson(gold, scores)), 4), "spearman": round(float(spearman(gold, scores)), 4)}


def checkpoint_scores(path, first, second, sequence_length, batch_size, poolings=("mean", "cls")):
    """Cosine similarities of each pair under the vectors of checkpoint `path`: one per pooling, and the bag of
    token embeddings."""
    from keras_bert_impl import BertTextEmbedder

    def cosines(a, b):
        a = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
        return np.sum(a * b, axis=-1)

    out = {}
    for pooling in poolings:
        embedder = BertTextEmbedder.from_preset(path, pooling=pooling, sequence_length=sequence_length)
        out[f"{pooling}_cosine"] = cosines(embedder.encode(first, batch_size), embedder.encode(second, batch_size))
    # No encoder: the mean of the token embeddings of each sentence's real tokens.
    table = np.asarray(embedder.backbone.token_embedding.embeddings)

    def bag(texts):
        features = embedder.preprocessor(texts)
        ids, mask = np.asarray(features["token_ids"]), np.asarray(features["padding_mask"]).astype("float32")
        return (table[ids] * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)

    out["embedding_bag_cosine"] = cosines(bag(first), bag(second))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", nargs="+", required=True, help="preset names or directories")
    parser.add_argument("--data_dir", default=str(SHARED / "glue"), help="GLUE root (with STS-B/)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--poolings", default="mean,cls", help="the encoder's vectors: mean, cls or both")
    args = parser.parse_args(argv)

    from keras_bert_impl.tasks.classification.reading import get_task, read_split

    split = read_split(get_task("stsb"), args.data_dir, args.split)
    gold = np.asarray(split.labels, dtype="float64")
    report = {"benchmark": "sts_zero_shot", "split": args.split, "pairs": len(gold),
              "word_jaccard": correlations([word_jaccard(a, b) for a, b in zip(split.text_a, split.text_b)], gold)}
    for path in args.checkpoints:
        poolings = [p.strip() for p in args.poolings.split(",") if p.strip()]
        scores = checkpoint_scores(path, list(split.text_a), list(split.text_b), args.sequence_length,
                                   args.batch_size, poolings)
        report[path] = {name: correlations(values, gold) for name, values in scores.items()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
