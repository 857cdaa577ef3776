"""CoNLL-2003 NER benchmark: keras_bert_impl vs Hugging Face BertForTokenClassification (torch, CPU).

Fine-tunes the same checkpoint (`all_minilm_l6_v2_en`, the real
sentence-transformers/all-MiniLM-L6-v2 weights) both ways with the same
setup: first-WordPiece labels (others ignored), IOB2 tags from the original
IOB1 files, AdamW (weight decay 0.01 except LayerNorm/bias), linear warm-up
over 10% of the steps then linear decay, global clip-norm 1.0, dropout 0.1,
batch size, learning rate, epochs, the same (optionally truncated) training
and evaluation sentences. Both are scored with `keras_bert_impl.metrics.conll`
(conlleval rules). Prints one JSON line: dev/test entity F1, training wall
time and training sequences per second for each.

Differences kept on purpose (each side's usual practice): keras_bert_impl pads
batches to the length boundary (32/48/64/96/128) of their longest sentence (random batches, not
grouped by length) and splits sentences longer than the window
into several windows; Hugging Face pads each batch to its longest sentence and
truncates at 128 pieces (words cut off are predicted "O").

    nice python benchmarks/conll.py --train_sentences 2000 --eval_sentences 1000 --epochs 1

On a busy shared CPU use a subset (documented in the output: `train_sentences`,
`eval_sentences`); the full protocol is `--train_sentences 0 --eval_sentences 0
--epochs 3`. `--seeds 0,1,2` repeats both sides per seed and adds the means.

On a GPU host without TensorFlow (KERAS_BACKEND=jax; tensorflow-text is what
our tokenizer needs): encode here with `--export_inputs DIR` (our WordPiece
windows and first-piece labels, `conll.npz`), then run there with
`--inputs DIR`: ours trains on `LengthBucketedBatches` (the same random,
bucket-padded batches as `conll.make_dataset`) and the reference tokenizes
with its own fast tokenizer as usual:

    python benchmarks/conll.py --train_sentences 0 --eval_sentences 0 --export_inputs .gpu_inputs
    KERAS_BACKEND=jax python benchmarks/conll.py --train_sentences 0 --eval_sentences 0 --epochs 3 \
        --inputs .gpu_inputs --preset path/to/all-MiniLM-L6-v2 --torch_device cuda --seeds 0,1,2
"""

import argparse
import json
import os
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "conll2003"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--train_sentences", type=int, default=2000, help="first N training sentences (0: all 14,041)")
    parser.add_argument("--eval_sentences", type=int, default=1000, help="first N dev and test sentences (0: all)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--seeds", default="42", help="comma-separated seeds; each runs both sides")
    parser.add_argument("--threads", type=int, default=0, help="torch/TF intra-op threads (0: library default)")
    parser.add_argument("--skip", choices=("keras", "hf"), default=None)
    parser.add_argument("--export_inputs", default=None, metavar="DIR",
                        help="write our encoded windows to DIR/conll.npz and stop")
    parser.add_argument("--inputs", default=None, metavar="DIR",
                        help="ours from DIR/conll.npz (no TensorFlow needed)")
    parser.add_argument("--torch_device", default="cpu", help="device of the reference (cpu, cuda)")
    parser.add_argument("--boundaries", default=None,
                        help="comma-separated length buckets for ours (default TAGGING_BUCKETS: 32,48,64,96,max)")
    parser.add_argument("--packing", action="store_true",
                        help="ours trains on packed rows (several sentences per row, batch_size sentences per step "
                             "on average; tagging.make_packed_dataset)")
    parser.add_argument("--jit_compile", default="auto", choices=["auto", "true", "false"],
                        help="XLA for ours (auto: Keras's choice, off on a CPU-only TensorFlow machine)")
    args = parser.parse_args(argv)
    args.seed_list = [int(x) for x in args.seeds.split(",") if x.strip()]
    if args.boundaries:
        from keras_bert_impl.batching.boundaries import check_boundaries

        args.boundaries = check_boundaries([int(x) for x in args.boundaries.split(",") if x.strip()])
        if args.boundaries[-1] != args.max_seq_length:
            parser.error(f"--boundaries must end at --max_seq_length ({args.max_seq_length}), got {args.boundaries}")
    return args


_FEATURE_FIELDS = ("token_ids", "segment_ids", "padding_mask", "labels", "sentence_index", "word_index", "lengths")


def export_inputs(args, label_names, splits):
    """Our windows of every split to `args.export_inputs/conll.npz` (with the limits, checked on load)."""
    import numpy as np

    from keras_bert_impl.tasks import tagging as conll
    from keras_bert_impl.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer.from_preset(args.preset)
    arrays = {"label_names": np.array(label_names),
              "limits": np.array([args.train_sentences, args.eval_sentences, args.max_seq_length])}
    for name, sentences in splits.items():
        features = conll.encode_examples(sentences, tokenizer, label_names, args.max_seq_length)
        for field in _FEATURE_FIELDS:
            arrays[f"{name}_{field}"] = getattr(features, field)
    os.makedirs(args.export_inputs, exist_ok=True)
    path = os.path.join(args.export_inputs, "conll.npz")
    np.savez_compressed(path, **arrays)
    return path


def load_inputs(args, label_names):
    """The `ConllFeatures` of each split from `--inputs`, after checking they were made with these settings."""
    import numpy as np

    from keras_bert_impl.tasks import tagging as conll

    path = os.path.join(args.inputs, "conll.npz")
    data = np.load(path)
    limits = [args.train_sentences, args.eval_sentences, args.max_seq_length]
    if data["limits"].tolist() != limits or data["label_names"].tolist() != list(label_names):
        raise ValueError(
            f"{path} was exported with train_sentences, eval_sentences, max_seq_length = {data['limits'].tolist()} "
            f"and labels {data['label_names'].tolist()}; this run has {limits} and {list(label_names)}: export again."
        )
    return {
        name: conll.ConllFeatures(**{field: data[f"{name}_{field}"] for field in _FEATURE_FIELDS})
        for name in ("train", "dev", "test")
    }


def _array_batches(features, batch_size, boundaries, shuffle=False, seed=0):
    from keras_bert_impl.batching.array_batches import LengthBucketedBatches

    def rows(array):
        return [array[i, : features.lengths[i]] for i in range(len(features))]

    inputs = {k: rows(getattr(features, k)) for k in ("token_ids", "segment_ids", "padding_mask")}
    return LengthBucketedBatches(inputs, rows(features.labels), batch_size=batch_size, boundaries=boundaries,
                                 shuffle=shuffle, seed=seed, group_by_length=False, label_fill_value=-1)


def _limit(sentences, n):
    return sentences if not n else sentences[:n]


def run_keras(args, label_names, train, dev, test, seed, encoded=None):
    """Ours; `encoded` (from `--inputs`) trains on `LengthBucketedBatches` instead of tf.data."""
    import numpy as np

    from keras_bert_impl import BertBackbone, BertTokenClassifier
    from keras_bert_impl.batching.boundaries import TAGGING_BUCKETS, default_boundaries
    from keras_bert_impl.metrics.conll import conll_entity_scores
    from keras_bert_impl.tasks import tagging as conll
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning

    setup_finetuning(seed=seed)
    boundaries = args.boundaries or default_boundaries(args.max_seq_length, **TAGGING_BUCKETS)
    if encoded is None:
        from keras_bert_impl.text.tokenizer import BertTokenizer

        tokenizer = BertTokenizer.from_preset(args.preset)
        encoded = {
            name: conll.encode_examples(sentences, tokenizer, label_names, args.max_seq_length)
            for name, sentences in (("train", train), ("dev", dev), ("test", test))
        }
        if args.packing:
            train_ds = conll.make_packed_dataset(encoded["train"], args.batch_size, training=True, seed=seed)
        else:
            train_ds = conll.make_dataset(encoded["train"], args.batch_size, training=True, seed=seed,
                                          boundaries=boundaries)
    elif args.packing:
        train_ds = conll.make_array_batches(encoded["train"], args.batch_size, training=True, seed=seed, packing=True)
    else:
        train_ds = _array_batches(encoded["train"], args.batch_size, boundaries, shuffle=True, seed=seed)
    model = BertTokenClassifier(BertBackbone.from_preset(args.preset), len(label_names))
    start = time.perf_counter()
    jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    fit = finetune(model, train_ds, epochs=args.epochs, learning_rate=args.learning_rate, seed=seed, verbose=0,
                   jit_compile=jit_compile)
    wall = time.perf_counter() - start

    scores = {}
    for name, sentences in (("dev", dev), ("test", test)):
        features = encoded[name]
        if args.inputs:  # no tf.data: padded batches in order, filler rows dropped
            token_label_ids = []
            for batch in _array_batches(features, 64, boundaries):
                logits = np.asarray(model.predict_on_batch(batch[0]))
                token_label_ids.extend(logits.argmax(-1)[: len(features) - len(token_label_ids)])
            word_ids = conll.word_label_ids(features, token_label_ids, sentences)
            predicted = [[label_names[i] for i in ids] for ids in word_ids]
        else:
            from keras_bert_impl.tasks.tagging.prediction import predict_word_tags

            predicted = predict_word_tags(model, features, sentences, label_names, 64, boundaries)
        scores[name] = conll_entity_scores([s.tags for s in sentences], predicted)["f1"]
    train_seconds = sum(fit.epoch_seconds)
    return {
        "dev_f1": scores["dev"],
        "test_f1": scores["test"],
        "train_wall_seconds": wall,
        "train_seconds": train_seconds,
        "epoch_seconds": list(fit.epoch_seconds),
        "train_sequences_per_second": len(encoded["train"]) * args.epochs / train_seconds,
        "seconds_per_epoch": train_seconds / args.epochs,
        "packing": args.packing,
        "train_batches": len(train_ds),
    }


def run_hf(args, label_names, train, dev, test, seed):
    import numpy as np
    import torch
    from hf_reference import apply_gradients, bert_adamw
    from transformers import AutoTokenizer, BertForTokenClassification, get_linear_schedule_with_warmup

    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets
    from keras_bert_impl.metrics.conll import conll_entity_scores

    torch.manual_seed(seed)
    device = torch.device(args.torch_device)
    if os.path.isdir(args.preset):
        model_dir = args.preset
    else:
        model_dir = os.path.dirname(resolve_tokenizer_assets(args.preset)["vocabulary"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    label_ids = {name: i for i, name in enumerate(label_names)}

    def encode(sentences):
        encoding = tokenizer([s.words for s in sentences], is_split_into_words=True, truncation=True,
                             max_length=args.max_seq_length)
        examples = []
        for i, s in enumerate(sentences):
            word_ids = encoding.word_ids(i)
            labels, previous = [], None
            for word in word_ids:
                labels.append(label_ids[s.tags[word]] if word is not None and word != previous else -100)
                previous = word
            examples.append((encoding["input_ids"][i], labels, word_ids))
        return examples

    def collate(batch):
        length = max(len(ids) for ids, _, _ in batch)
        input_ids = torch.zeros((len(batch), length), dtype=torch.long)
        attention = torch.zeros((len(batch), length), dtype=torch.long)
        labels = torch.full((len(batch), length), -100, dtype=torch.long)
        for row, (ids, labs, _) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            labels[row, : len(labs)] = torch.tensor(labs)
        return input_ids.to(device), attention.to(device), labels.to(device)

    train_examples = encode(train)
    model = BertForTokenClassification.from_pretrained(model_dir, num_labels=len(label_names)).to(device)
    optimizer = bert_adamw(model, args.learning_rate)
    steps_per_epoch = (len(train_examples) + args.batch_size - 1) // args.batch_size
    total = steps_per_epoch * args.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, int(round(0.1 * total)), total)
    generator = np.random.default_rng(seed)
    model.train()
    epoch_seconds = []
    for _ in range(args.epochs):
        start = time.perf_counter()
        order = generator.permutation(len(train_examples))
        for first in range(0, len(order), args.batch_size):
            input_ids, attention, labels = collate([train_examples[i] for i in order[first : first + args.batch_size]])
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            apply_gradients(loss, model, optimizer, scheduler)
        if device.type == "cuda":
            torch.cuda.synchronize()
        epoch_seconds.append(time.perf_counter() - start)
    train_seconds = sum(epoch_seconds)

    model.eval()
    scores = {}
    for name, sentences in (("dev", dev), ("test", test)):
        examples = encode(sentences)
        predicted = []
        with torch.no_grad():
            for first in range(0, len(examples), 64):
                batch = examples[first : first + 64]
                input_ids, attention, _ = collate(batch)
                logits = model(input_ids=input_ids, attention_mask=attention).logits.argmax(-1).cpu().numpy()
                for row, (_, _, word_ids) in enumerate(batch):
                    sentence = sentences[first + row]
                    tags, previous = ["O"] * len(sentence.words), None
                    for position, word in enumerate(word_ids):
                        if word is not None and word != previous:
                            tags[word] = label_names[logits[row, position]]
                        previous = word
                    predicted.append(tags)
        scores[name] = conll_entity_scores([s.tags for s in sentences], predicted)["f1"]
    return {
        "dev_f1": scores["dev"],
        "test_f1": scores["test"],
        "train_seconds": train_seconds,
        "epoch_seconds": epoch_seconds,
        "train_sequences_per_second": len(train_examples) * args.epochs / train_seconds,
        "seconds_per_epoch": train_seconds / args.epochs,
    }


def _mean(runs, key):
    import numpy as np

    return float(np.mean([r[key] for r in runs]))


def _later_epochs(runs):
    """Mean seconds of the epochs after the first (without one-off compilation)."""
    import numpy as np

    return float(np.mean([np.mean(r["epoch_seconds"][1:] or r["epoch_seconds"]) for r in runs]))


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(args.threads))
        import torch

        torch.set_num_threads(args.threads)
    from keras_bert_impl.tasks import tagging as conll

    files = conll.find_split_files(args.data_dir)
    train_all = conll.read_conll(files["train"])
    label_names = conll.label_vocabulary(train_all)
    train = _limit(train_all, args.train_sentences)
    dev = _limit(conll.read_conll(files["dev"]), args.eval_sentences)
    test = _limit(conll.read_conll(files["test"]), args.eval_sentences)
    if args.export_inputs:
        path = export_inputs(args, label_names, {"train": train, "dev": dev, "test": test})
        print(json.dumps({"exported": path}))
        return None
    encoded = load_inputs(args, label_names) if args.inputs else None
    result = {
        "benchmark": "conll2003_ner",
        "keras_backend": os.environ.get("KERAS_BACKEND", "tensorflow"),
        "torch_device": args.torch_device,
        "seeds": args.seed_list,
        "jit_compile": args.jit_compile,
        "boundaries": args.boundaries or "default",
        "preset": args.preset,
        "train_sentences": len(train),
        "eval_sentences": {"dev": len(dev), "test": len(test)},
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "max_seq_length": args.max_seq_length,
    }
    sides = []
    if args.skip != "keras":
        sides.append(("keras_bert_impl", lambda seed: run_keras(args, label_names, train, dev, test, seed, encoded)))
    if args.skip != "hf":
        sides.append(("huggingface_torch", lambda seed: run_hf(args, label_names, train, dev, test, seed)))
    for name, run in sides:
        runs = []
        for seed in args.seed_list:
            runs.append(dict(run(seed), seed=seed))
            print(json.dumps({"partial": name, **runs[-1]}), file=sys.stderr, flush=True)
        result[name] = {
            "dev_f1": _mean(runs, "dev_f1"),
            "test_f1": _mean(runs, "test_f1"),
            "seconds_per_epoch": _mean(runs, "seconds_per_epoch"),
            "seconds_per_later_epoch": _later_epochs(runs),
            "train_sequences_per_second": _mean(runs, "train_sequences_per_second"),
            "per_seed": runs,
        }
    if "keras_bert_impl" in result and "huggingface_torch" in result:
        ours, ref = result["keras_bert_impl"], result["huggingface_torch"]
        result["dev_f1_difference"] = ours["dev_f1"] - ref["dev_f1"]
        result["test_f1_difference"] = ours["test_f1"] - ref["test_f1"]
        result["speedup_per_epoch"] = ref["seconds_per_epoch"] / ours["seconds_per_epoch"]
        result["speedup_per_later_epoch"] = ref["seconds_per_later_epoch"] / ours["seconds_per_later_epoch"]
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
