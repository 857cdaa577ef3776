"""SQuAD prediction on the host (issue 18): where a prediction run's wall time goes, and post-processing before/after.

A SQuAD prediction run is four parts: the windows (`encode_examples`: WordPiece + sliding windows),
the model's forward passes (`predict_logits`: length-bucketed batches, `predict_on_batch`, the logits copied back
to the host), the post-processing (`postprocess_predictions`: logits -> n-best spans -> answer texts, v2.0's
null rule) and the writing (`write_squad_outputs`: `predictions.json`, `null_odds.json`, `eval.json`). This
script times each on seeded questions of the real SQuAD v1.1 dev file (the evaluation articles of the documented
article split, as `benchmarks/squad.py`), for a tiny random-weight model (2 layers, hidden 128, the real
vocabulary: the host's share shows) and for the real `all_minilm_l6_v2_en` backbone (random span head), and
reports milliseconds per window for each part.

It also times the post-processing as it was before issue 18's host work (`previous_postprocess_predictions`,
kept here verbatim as the reference: per-window NumPy calls, one Python tuple per candidate pair, a Python sort
per example) against the library's (`keras_bert_impl.tasks.span_qa.prediction.postprocess_predictions`: the
top-k starts and ends of every window by one partial sort, the k x k span scores and their masks as array ops,
one sort of the candidates that can be among each example's 2k best), with n-best lists and without them
(`nbest=False`, what `predict_squad` runs), v1.1 and v2.0 (null answers), and checks that they give identical
predictions, best answers, null odds and n-best lists (texts, scores, logits, offsets, probabilities). It also
times `BertSpanExtractor.answer`'s per-window search as it is (the count x count score matrix) against
`span_decoding.best_spans_in_window` (the band of spans up to `max_answer_length`), and checks the spans agree.
Each is timed `--repeats` times on the same logits; the fastest run counts. Exit status 1 if anything differs.

Prints one JSON line (`--output` also writes it to a file).

Example (docs/benchmarks.md, 2 shared CPU cores):

    KERAS_BACKEND=jax nice python benchmarks/squad_host.py --questions 400
"""

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import time

import numpy as np

DEFAULT_SQUAD = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "squad", "dev-v1.1.json.gz")


# === The post-processing before issue 18's host work (the reference) ===


def _previous_top_indices(logits, valid, k):
    candidates = np.flatnonzero(valid)
    if candidates.size > k:
        order = np.argpartition(-logits[candidates], k - 1)[:k]
        candidates = candidates[order]
    return candidates[np.argsort(-logits[candidates], kind="stable")]


def previous_postprocess_predictions(features, start_logits, end_logits, n_best_size=20, max_answer_length=30,
                                     version_2_with_negative=False, null_score_diff_threshold=0.0):
    """`postprocess_predictions` as it was before (commit be4cccb): one window at a time, Python candidate tuples."""
    from keras_bert_impl.models.probabilities import softmax
    from keras_bert_impl.models.span_decoding import is_no_answer, null_odds, null_score
    from keras_bert_impl.tasks.span_qa.prediction import SquadPredictions

    start_logits = np.asarray(start_logits, np.float32)
    end_logits = np.asarray(end_logits, np.float32)
    windows_of_example = collections.defaultdict(list)
    for window, example_index in enumerate(features.example_index):
        windows_of_example[int(example_index)].append(window)

    predictions, best_answers, nbest_all, all_null_odds = {}, {}, {}, {}
    for example_index, example in enumerate(features.examples):
        windows = windows_of_example.get(example_index, [])
        candidates = []
        example_null_score = null_score(start_logits, end_logits, windows)
        for w in windows:
            length = min(start_logits.shape[1], features.token_char_start.shape[1])
            starts = start_logits[w, :length]
            ends = end_logits[w, :length]
            char_start = features.token_char_start[w, :length]
            char_end = features.token_char_end[w, :length]
            in_context = char_start >= 0
            start_indexes = _previous_top_indices(starts, in_context & features.token_is_max_context[w, :length],
                                                  n_best_size)
            end_indexes = _previous_top_indices(ends, in_context, n_best_size)
            if start_indexes.size == 0 or end_indexes.size == 0:
                continue
            span_lengths = end_indexes[None, :] - start_indexes[:, None] + 1
            valid = (span_lengths >= 1) & (span_lengths <= max_answer_length)
            rows, cols = np.nonzero(valid)
            s_idx, e_idx = start_indexes[rows], end_indexes[cols]
            scores = starts[s_idx] + ends[e_idx]
            candidates.extend(zip(scores.tolist(), starts[s_idx].tolist(), ends[e_idx].tolist(),
                                  char_start[s_idx].tolist(), char_end[e_idx].tolist()))
        candidates.sort(key=lambda c: -c[0])
        nbest, seen = [], set()
        for score, s_logit, e_logit, c_start, c_end in candidates:
            text = example.context[c_start:c_end]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "score": score, "start_logit": s_logit, "end_logit": e_logit,
                          "start": c_start, "end": c_end})
            if len(nbest) >= n_best_size:
                break
        best_text = nbest[0]["text"] if nbest else ""
        best_score = nbest[0]["score"] if nbest else None
        if version_2_with_negative and example_null_score is not None:
            null_entry = {"text": "", "score": example_null_score, "start_logit": None, "end_logit": None,
                          "start": -1, "end": -1}
            nbest = sorted(nbest + [null_entry], key=lambda entry: -entry["score"])[: max(n_best_size, 1) + 1]
            odds = null_odds(example_null_score, best_score)
            all_null_odds[example.qas_id] = odds
            predictions[example.qas_id] = "" if is_no_answer(odds, null_score_diff_threshold) else best_text
        else:
            predictions[example.qas_id] = best_text
        for entry, probability in zip(nbest, softmax([entry["score"] for entry in nbest])):
            entry["probability"] = float(probability)
        best_answers[example.qas_id] = best_text
        nbest_all[example.qas_id] = nbest
    return SquadPredictions(predictions=predictions, best_answers=best_answers, nbest=nbest_all,
                            null_odds=all_null_odds)


# === The run ===


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad_file", default=DEFAULT_SQUAD)
    parser.add_argument("--num_train_articles", type=int, default=38,
                        help="the documented article split: the questions come from the articles after these")
    parser.add_argument("--questions", type=int, default=400, help="seeded questions of the evaluation articles")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="tiny,minilm",
                        help="tiny (2 layers, hidden 128, random weights, the real vocabulary) and/or minilm "
                             "(all_minilm_l6_v2_en, random span head)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5, help="post-processing runs on the same logits (fastest)")
    parser.add_argument("--output", default=None, help="also write the JSON line here")
    return parser.parse_args(argv)


def _subset(dataset, num_questions, seed):
    ids = [qa["id"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    keep = set(random.Random(seed).sample(ids, min(num_questions, len(ids))))
    data = []
    for article in dataset["data"]:
        paragraphs = [dict(p, qas=[qa for qa in p["qas"] if qa["id"] in keep]) for p in article["paragraphs"]]
        paragraphs = [p for p in paragraphs if p["qas"]]
        if paragraphs:
            data.append(dict(article, paragraphs=paragraphs))
    return {"version": dataset.get("version"), "data": data}


def _build_model(name, tokenizer):
    import keras

    from keras_bert_impl import BertBackbone, BertSpanExtractor

    keras.utils.set_random_seed(0)
    if name == "tiny":
        backbone = BertBackbone(vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2,
                                hidden_dim=128, intermediate_dim=512, max_sequence_length=512)
    elif name == "minilm":
        backbone = BertBackbone.from_preset("all_minilm_l6_v2_en")
    else:
        raise ValueError(f"--models: unknown model {name!r} (tiny, minilm).")
    return BertSpanExtractor(backbone)


def _fastest(function, repeats):
    best, result = None, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return best, result


def _same(a, b):
    return (a.predictions == b.predictions and a.best_answers == b.best_answers and a.null_odds == b.null_odds
            and a.nbest == b.nbest)


def time_postprocessing(features, start_logits, end_logits, repeats):
    """Post-processing windows/s before and after (fastest of `repeats`), v1.1 and v2.0, and whether they agree.

    `after` builds the n-best lists as before (`postprocess_predictions`' default); `after_no_nbest` is what
    `predict_squad` runs (`nbest=False`: the same predictions, best answers and null odds, no n-best lists).
    """
    from keras_bert_impl.tasks.span_qa.prediction import postprocess_predictions

    n = len(features)
    report = {}
    for version, v2 in (("v1", False), ("v2", True)):
        before_s, before = _fastest(lambda: previous_postprocess_predictions(
            features, start_logits, end_logits, version_2_with_negative=v2), repeats)
        after_s, after = _fastest(lambda: postprocess_predictions(
            features, start_logits, end_logits, version="2.0" if v2 else "1.1"), repeats)
        alone_s, alone = _fastest(lambda: postprocess_predictions(
            features, start_logits, end_logits, version="2.0" if v2 else "1.1", nbest=False), repeats)
        report[version] = {
            "before_windows_per_s": round(n / before_s, 1), "after_windows_per_s": round(n / after_s, 1),
            "after_no_nbest_windows_per_s": round(n / alone_s, 1),
            "speedup": round(before_s / after_s, 2), "speedup_no_nbest": round(before_s / alone_s, 2),
            "identical": _same(before, after),
            "identical_no_nbest": (before.predictions, before.best_answers, before.null_odds)
            == (alone.predictions, alone.best_answers, alone.null_odds),
        }
    return report


def previous_answer_window_search(starts, ends, start_allowed, max_answer_length, top_k=1):
    """`BertSpanExtractor.answer`'s search of one window (span_extractor.py at be4cccb): the count x count matrix."""
    count = len(starts)
    scores = starts[:, None] + ends[None, :]
    offsets = np.arange(count)
    allowed = (offsets[None, :] >= offsets[:, None]) & (offsets[None, :] - offsets[:, None] < max_answer_length)
    allowed &= start_allowed[:, None]
    if not allowed.any():
        return []
    flat = np.where(allowed, scores, -np.inf).ravel()
    found = []
    for index in np.argsort(-flat, kind="stable")[: min(top_k, int(allowed.sum()))]:
        s, e = np.unravel_index(int(index), scores.shape)
        found.append((float(scores[s, e]), int(s), int(e)))
    return found


def time_answer_search(features, start_logits, end_logits, repeats, max_answer_length=30):
    """Windows/s of `answer`'s per-window search: the full score matrix against `best_spans_in_window`'s band."""
    from keras_bert_impl.models.span_decoding import best_spans_in_window

    windows = []
    for w in range(len(features)):
        context = np.flatnonzero(features.token_char_start[w] >= 0)
        first, count = int(context[0]), len(context)
        windows.append((start_logits[w, first : first + count].astype("float64"),
                        end_logits[w, first : first + count].astype("float64"),
                        features.token_is_max_context[w, first : first + count]))

    def band():
        found = []
        for starts, ends, allowed in windows:
            scores, s, e = best_spans_in_window(starts, ends, allowed, max_answer_length, 1)
            found.append(list(zip(scores.tolist(), s.tolist(), e.tolist())))
        return found

    before_s, before = _fastest(lambda: [previous_answer_window_search(*window, max_answer_length)
                                         for window in windows], repeats)
    after_s, after = _fastest(band, repeats)
    return {"before_windows_per_s": round(len(windows) / before_s, 1),
            "after_windows_per_s": round(len(windows) / after_s, 1), "speedup": round(before_s / after_s, 2),
            "identical": before == after}


def main(argv=None):
    args = parse_args(argv)
    import keras

    from keras_bert_impl.tasks import span_qa as squad
    from keras_bert_impl.tasks.span_qa.evaluation import predict_squad
    from keras_bert_impl.tasks.span_qa.outputs import write_squad_outputs
    from keras_bert_impl.tasks.span_qa.prediction import postprocess_predictions, predict_logits
    from keras_bert_impl.tasks.span_qa.batches import PredictionBatches
    from keras_bert_impl.tasks.span_qa.features import tokenize_texts
    from keras_bert_impl.text.tokenizer import BertTokenizer

    dataset = squad.load_squad_json(args.squad_file)
    _, evaluation = squad.split_articles(dataset, args.num_train_articles)
    gold = _subset(evaluation, args.questions, args.seed)
    examples, _ = squad.read_squad_examples(gold, source="eval")
    tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
    squad.encode_examples(examples[:4], tokenizer)  # warm the tokenizer
    features_s, features = _fastest(lambda: squad.encode_examples(
        examples, tokenizer, sequence_length=args.max_seq_length, doc_stride=args.doc_stride), 3)
    texts = list(dict.fromkeys(e.context for e in examples)) + [e.question for e in examples]
    tokenize_s, _ = _fastest(lambda: tokenize_texts(tokenizer, texts), 3)
    n = len(features)
    start = time.perf_counter()
    for _ in PredictionBatches(features, args.batch_size):
        pass
    batches_s = time.perf_counter() - start
    line = {"benchmark": "squad_host", "backend": keras.backend.backend(), "questions": len(examples),
            "windows": n, "batch_size": args.batch_size, "cpu_count": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "features_seconds": round(features_s, 3),
            "features_ms_per_window": {"all": round(1e3 * features_s / n, 3),
                                       "tokenize": round(1e3 * tokenize_s / n, 3),
                                       "windows": round(1e3 * (features_s - tokenize_s) / n, 3)},
            "prediction_batches_ms_per_window": round(1e3 * batches_s / n, 4),
            "models": {}}
    for name in [m for m in args.models.split(",") if m]:
        model = _build_model(name, tokenizer)
        start = time.perf_counter()
        predict_logits(model, features, batch_size=args.batch_size)  # first pass: compiles each shape
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        start_logits, end_logits = predict_logits(model, features, batch_size=args.batch_size)
        forward_s = time.perf_counter() - start
        before_s, before = _fastest(lambda: previous_postprocess_predictions(features, start_logits, end_logits),
                                    args.repeats)
        post_s, processed = _fastest(lambda: postprocess_predictions(features, start_logits, end_logits,
                                                                     nbest=False), args.repeats)
        result = predict_squad(model, features, gold=gold, version="1.1", batch_size=args.batch_size)
        assert result.predictions == processed.predictions == before.predictions
        with tempfile.TemporaryDirectory() as folder:
            write_s, _ = _fastest(lambda: write_squad_outputs(folder, result), args.repeats)
        parts = {"features": features_s, "forward": forward_s, "postprocess": post_s, "write": write_s}
        line["models"][name] = {
            "forward_first_pass_seconds": round(first_s, 3),
            "ms_per_window": dict({part: round(1e3 * seconds / n, 4) for part, seconds in parts.items()},
                                  postprocess_before=round(1e3 * before_s / n, 4)),
            "share": {part: round(seconds / sum(parts.values()), 4) for part, seconds in parts.items()},
            "share_before": {part: round(seconds / (sum(parts.values()) - post_s + before_s), 4)
                             for part, seconds in dict(parts, postprocess=before_s).items()},
            "predict_squad": {"predict_seconds": round(result.predict_seconds, 3),
                              "postprocess_seconds": round(result.postprocess_seconds, 4),
                              "exact_match": round(result.metrics["exact_match"], 2),
                              "f1": round(result.metrics["f1"], 2)},
            "postprocess_before_after": time_postprocessing(features, start_logits, end_logits, args.repeats),
            "answer_window_search": time_answer_search(features, start_logits, end_logits, args.repeats),
        }
    text = json.dumps(line)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    identical = all(report[key] for model in line["models"].values()
                    for report in model["postprocess_before_after"].values()
                    for key in ("identical", "identical_no_nbest")) and all(
        model["answer_window_search"]["identical"] for model in line["models"].values())
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
