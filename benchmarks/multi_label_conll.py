"""Multi-label fine-tuning: keras_bert_impl's recipe vs Hugging Face transformers (torch CPU), same checkpoint.

The task is real multi-label data: each CoNLL-2003 sentence (../shared/data/conll2003) is labelled with the entity
types it mentions, none, one or several of LOC, MISC, ORG, PER (eng.train for training, eng.testa to score).

- `ours`: `recipes/finetune_classifier.py --multi_label`'s story (`tasks.classification.table_run.run`) on a JSON
  Lines file of the sentences and their label lists: `BertClassifier(multi_label=True)` from the preset, raw strings,
  binary cross-entropy, BERT's AdamW, 10% warm-up then linear decay, clipping 1.0.
- `transformers`: `BertForSequenceClassification(problem_type="multi_label_classification")` from the same files, a
  plain torch loop with the same hyper-parameters. `--reference_batches ours` (default): it trains on the very batches
  our recipe trains on (the same seeded tf.data stream, filler rows left out) from our head's initial values, so the two
  runs differ only in their dropout masks and the comparison measures the implementations. `--reference_batches own`:
  transformers' usual pipeline instead, a NumPy permutation each epoch, batches padded to their longest sentence, its
  own head draw. On this small task the order of the batches alone moves micro F1 by several points (docs/benchmarks.md).

Both are scored by `keras_bert_impl.metrics.multi_label.multi_label_scores` (micro and macro F1, subset accuracy) on
the same dev sentences, a class predicted where its sigmoid is above 0.5. Prints one JSON line.

    python benchmarks/multi_label_conll.py --max_train_samples 4000 --epochs 2
"""

import argparse
import json
import os
import platform
import tempfile
import time

import numpy as np

LABELS = ["LOC", "MISC", "ORG", "PER"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                           "conll2003"))
    parser.add_argument("--preset", default="all_minilm_l6_v2_en")
    parser.add_argument("--max_train_samples", "--train_limit", dest="train_limit", type=int, default=4000, help="the first N sentences of eng.train")
    parser.add_argument("--max_eval_samples", "--dev_limit", dest="dev_limit", type=int, default=None, help="the first N sentences of eng.testa")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--reference_batches", choices=("ours", "own"), default="ours",
                        help="ours: transformers trains on our recipe's batches from our initial head (they differ only "
                             "in dropout masks); own: its usual random batches and head draw")
    parser.add_argument("--skip_reference", action="store_true")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    return parser.parse_args(argv)


def entity_type_rows(path, limit):
    """`[(sentence text, [entity types it mentions])]`, `-DOCSTART-` lines left out (as the reader does)."""
    from keras_bert_impl.tasks.tagging.reading import read_conll

    sentences = read_conll(path)[:limit]
    return [(" ".join(s.words), [name for name in LABELS if any(tag[2:] == name for tag in s.tags)])
            for s in sentences]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": text, "types": types}) + "\n" for text, types in rows)


def recipe_config(args, train_file, dev_file, model_dir):
    """`recipes/finetune_classifier.py --multi_label`'s settings for this benchmark."""
    from keras_bert_impl.tasks.classification.table_run import TableClassificationConfig

    return TableClassificationConfig(
        train_file, dev_file, "text", "types", model_dir, multi_label=True, preset=args.preset,
        sequence_length=args.sequence_length, batch_size=args.batch_size, epochs=args.epochs,
        learning_rate=args.learning_rate, seed=args.seed, mixed_precision=None, strategy="cpu")


def recipe_batches_and_head(config):
    """What our recipe's run starts from: its training batches (the seeded tf.data stream `table_run.run` builds,
    one epoch of it), the initial (kernel, bias) of its new head, drawn as `run` draws them, and the label names."""
    from keras_bert_impl.tasks.classification.table_files import label_targets
    from keras_bert_impl.tasks.classification.table_run import build_model, read_inputs

    inputs = read_inputs(config)
    train, label_names = inputs.train, inputs.label_names
    classifier, _ = build_model(config, inputs)  # seeds, then draws the head, as `run` does
    kernel, bias = classifier.get_layer("logits").get_weights()
    batches = classifier.preprocessor.make_dataset(train.inputs, label_targets(train, label_names),
                                                   batch_size=config.batch_size, shuffle=True, seed=config.seed)
    return batches, kernel, bias, label_names


def run_ours(config):
    from keras_bert_impl.tasks.classification.table_run import run

    results = run(config)
    return {key: results[key] for key in ("micro_f1", "macro_f1", "subset_accuracy", "hamming_accuracy",
                                          "epoch_seconds", "final_train_loss", "label_names")}


def run_reference(args, train_rows, dev_rows, recipe_start=None):
    """transformers' run: on its own batches, or on `recipe_start` (`recipe_batches_and_head`'s result)."""
    import torch
    import transformers
    from hf_reference import apply_gradients, bert_adamw

    from keras_bert_impl.checkpoints.loading import resolve_tokenizer_assets
    from keras_bert_impl.metrics.multi_label import multi_label_scores

    torch.set_num_threads(args.threads)
    model_dir = args.preset if os.path.isdir(args.preset) else os.path.dirname(
        resolve_tokenizer_assets(args.preset)["vocabulary"])
    transformers.set_seed(args.seed)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(model_dir)
    model = transformers.BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=len(LABELS), problem_type="multi_label_classification",
        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})

    def multi_hot(rows):
        return np.array([[name in types for name in LABELS] for _, types in rows], "float32")

    def batches(rows, order, batch_size):
        targets = multi_hot(rows)
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            features = tokenizer([rows[i][0] for i in index], truncation=True, max_length=args.sequence_length,
                                 padding=True, return_tensors="pt")
            yield features, torch.tensor(targets[index])

    def recipe_batches(dataset):  # our batches as torch tensors, the weight-0 filler rows left out
        for features, labels, weights in dataset:
            real = weights.numpy() > 0
            yield ({"input_ids": torch.tensor(features["token_ids"].numpy()[real].astype("int64")),
                    "token_type_ids": torch.tensor(features["segment_ids"].numpy()[real].astype("int64")),
                    "attention_mask": torch.tensor(features["padding_mask"].numpy()[real].astype("int64"))},
                   torch.tensor(labels.numpy()[real].astype("float32")))

    stream = None
    if recipe_start is not None:
        dataset, kernel, bias, label_names = recipe_start
        if list(label_names) != LABELS:
            raise ValueError(f"the recipe's label order {label_names} is not {LABELS}")
        with torch.no_grad():  # our head's initial values (a Keras kernel is (in, out), torch's (out, in))
            model.classifier.weight.copy_(torch.tensor(kernel.T))
            model.classifier.bias.copy_(torch.tensor(bias))
        steps_per_epoch = int(dataset.cardinality())
        stream = recipe_batches(dataset.repeat(args.epochs))  # reshuffled each epoch, as `finetune` reads it
    else:
        steps_per_epoch = -(-len(train_rows) // args.batch_size)
    steps = steps_per_epoch * args.epochs
    optimizer = bert_adamw(model, args.learning_rate)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, int(round(0.1 * steps)), steps)
    generator = np.random.default_rng(args.seed)
    epoch_seconds, loss = [], None
    for _ in range(args.epochs):
        model.train()
        start = time.perf_counter()
        epoch = ([next(stream) for _ in range(steps_per_epoch)] if stream is not None
                 else batches(train_rows, generator.permutation(len(train_rows)), args.batch_size))
        for features, labels in epoch:
            loss = model(**features, labels=labels).loss
            apply_gradients(loss, model, optimizer, scheduler)
        epoch_seconds.append(round(time.perf_counter() - start, 2))
    model.eval()
    with torch.no_grad():
        logits = np.concatenate([model(**features).logits.numpy()
                                 for features, _ in batches(dev_rows, np.arange(len(dev_rows)), 64)])
    scores = multi_label_scores(multi_hot(dev_rows).astype("int32"), (logits > 0).astype("int32"))
    return {**scores, "epoch_seconds": epoch_seconds, "final_train_loss": float(loss)}


def main(argv=None):
    args = parse_args(argv)
    train_rows = entity_type_rows(os.path.join(args.data_dir, "eng.train"), args.train_limit)
    dev_rows = entity_type_rows(os.path.join(args.data_dir, "eng.testa"), args.dev_limit)
    with tempfile.TemporaryDirectory() as directory:
        train_file, dev_file = os.path.join(directory, "train.jsonl"), os.path.join(directory, "dev.jsonl")
        write_jsonl(train_file, train_rows)
        write_jsonl(dev_file, dev_rows)
        config = recipe_config(args, train_file, dev_file, os.path.join(directory, "model"))
        recipe_start = None
        if not args.skip_reference and args.reference_batches == "ours":
            recipe_start = recipe_batches_and_head(config)  # before our run, which re-seeds and draws the same
        ours = run_ours(config)
        reference = None if args.skip_reference else run_reference(args, train_rows, dev_rows, recipe_start)
    line = {
        "benchmark": "multi_label_conll", "train_examples": len(train_rows), "dev_examples": len(dev_rows),
        "labels_per_train_example": float(np.mean([len(t) for _, t in train_rows])),
        "ours": ours, **{k: getattr(args, k) for k in ("preset", "batch_size", "sequence_length", "learning_rate",
                                                        "epochs", "seed")},
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }
    if reference is not None:
        line["transformers"] = reference
        line["reference_batches"] = args.reference_batches
        # Epochs after the first: the first also compiles (ours) or warms up.
        later = slice(1, None) if args.epochs > 1 else slice(None)
        line["later_epoch_speed_ratio"] = round(
            float(np.mean(line["transformers"]["epoch_seconds"][later]) / np.mean(ours["epoch_seconds"][later])), 3)
    print(json.dumps(line))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
