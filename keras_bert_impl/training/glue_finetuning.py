"""Fine-tune and evaluate a BertClassifier on one GLUE task: the library side of `recipes/finetune_glue.py`.

`run_glue(task, data_dir, model_dir, ...)` reads the task's files
(`keras_bert_impl.data.glue`), builds a `BertClassifier` on a preset or a
checkpoint, fine-tunes it with `keras_bert_impl.training.finetuning.finetune`
(AdamW, 10% warm-up, linear decay, length-bucketed batches), evaluates the
official metric(s) on dev after every epoch, keeps the best epoch, writes
`model_dir/dev_results.json` and, for the test split(s), GLUE submission
files under `model_dir/submission/`.

Example:
>>> results = run_glue("rte", "../shared/data/glue", "/tmp/rte",
...                    preset="all_minilm_l6_v2_en", epochs=3)  # doctest: +SKIP
>>> results["best"]["accuracy"]  # doctest: +SKIP
"""

import os
import time

import numpy as np

from keras_bert_impl.data import glue as glue_data
from keras_bert_impl.metrics import glue as glue_metrics


def predict_split(model, dataset, count=None):
    """Class ids (argmax) or regression scores of `model` on a batched features/labels dataset, in order.

    `count`: number of real examples; the filler rows of a fixed-size last
    batch (`make_dataset(fixed_batch_size=True)`) after them are dropped.
    """
    outputs = model.predict(dataset.map(lambda features, *rest: features), verbose=0)
    outputs = np.asarray(outputs)[:count]
    return outputs[:, 0] if outputs.shape[-1] == 1 else outputs.argmax(axis=-1)


def evaluate_splits(model, task, splits, datasets):
    """Official metrics on each labelled split; with several dev splits (MNLI) names get the split as prefix."""
    results = {}
    for split, dataset in zip(splits, datasets):
        metrics = glue_metrics.glue_metrics(task.name, split.labels, predict_split(model, dataset, len(split.labels)))
        prefix = "" if len(splits) == 1 else split.split.replace("dev_", "") + "_"
        results.update({prefix + name: value for name, value in metrics.items()})
    return results


def run_glue(
    task,
    data_dir,
    model_dir,
    preset="all_minilm_l6_v2_en",
    init_checkpoint=None,
    max_seq_length=128,
    batch_size=32,
    eval_batch_size=64,
    learning_rate=2e-5,
    epochs=3,
    warmup_proportion=0.1,
    weight_decay=0.01,
    dropout=0.1,
    truncate="longest_first",
    strategy="auto",
    seed=0,
    mixed_precision=None,
    early_stopping_patience=None,
    train_limit=None,
    dev_limit=None,
    predict_test=True,
    save_model=False,
    verbose="auto",
    jit_compile="auto",
):
    """Fine-tunes on `task`'s train split, picks the best epoch on dev, writes results and submissions.

    Args:
        task: GLUE task name (`cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli`).
        data_dir: the GLUE root (with the task folder) or the task folder.
        model_dir: output directory (created): `dev_results.json`,
            `best.weights.h5`, TensorBoard `logs/`, `submission/`.
        preset: preset name or checkpoint directory for the backbone and the
            tokenizer (ignored for the backbone when `init_checkpoint` is set).
        init_checkpoint: optional checkpoint directory (any format
            `BertBackbone.from_preset` reads, e.g. a pretraining export); its
            vocabulary is used when it has one.
        max_seq_length: longest packed sequence (special tokens included).
        batch_size, eval_batch_size: per-step batch sizes.
        learning_rate, epochs, warmup_proportion, weight_decay: optimisation.
        dropout: classifier dropout (the backbone keeps its configured dropout).
        truncate: pair truncation (`longest_first` as original BERT).
        strategy: name for `keras_bert_impl.training.strategy.get_strategy`.
        seed: seeds weights of the head, dropout and shuffling.
        mixed_precision: None, "bf16" or "fp16".
        early_stopping_patience: None or epochs without dev improvement.
        train_limit: use only the first N training examples (documented subsets).
        dev_limit: evaluate on the first N examples of each dev split only.
        predict_test: write submission files for the test split(s).
        save_model: also save the best model (with its preprocessor) as
            `model_dir/model.keras`, which `keras.saving.load_model` reads
            and whose `predict_labels` takes raw strings.
        verbose: `model.fit` verbosity.
        jit_compile: XLA for the train/eval steps (`finetune`'s argument);
            `"auto"` leaves it off on a CPU-only TensorFlow machine.

    Returns:
        The dict written to `dev_results.json`.
    """
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_json
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.classifier import BertClassifier
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training.finetuning import finetune, setup_finetuning
    from keras_bert_impl.training.strategy import get_strategy

    task = glue_data.get_task(task)
    # Read every file first: a missing or malformed file fails before any training.
    train = glue_data.read_split(task, data_dir, "train")
    if train_limit is not None:
        train = train.take(train_limit)
    dev_splits = [glue_data.read_split(task, data_dir, s) for s in task.dev_splits]
    if dev_limit is not None:
        dev_splits = [s.take(dev_limit) for s in dev_splits]
    test_splits = [glue_data.read_split(task, data_dir, s) for s in task.test_splits] if predict_test else []

    setup_finetuning(seed=seed, mixed_precision=mixed_precision)
    distribution = get_strategy(strategy)
    tokenizer_source = init_checkpoint if init_checkpoint and _has_vocabulary(init_checkpoint) else preset
    preprocessor = ClassifierPreprocessor(
        BertTokenizer.from_preset(tokenizer_source), sequence_length=max_seq_length, truncate=truncate
    )
    with distribution.scope():
        backbone = BertBackbone.from_preset(init_checkpoint or preset)
        if max_seq_length > backbone.max_sequence_length:
            raise ValueError(
                f"max_seq_length={max_seq_length} exceeds the backbone's {backbone.max_sequence_length} positions."
            )
        model = BertClassifier(
            backbone,
            num_classes=task.num_classes,
            dropout=dropout,
            preprocessor=preprocessor,
            label_names=task.label_names,
        )

    train_ds = glue_data.make_dataset(train, preprocessor, batch_size, training=True, shuffle_seed=seed)
    dev_datasets = [glue_data.make_dataset(s, preprocessor, eval_batch_size) for s in dev_splits]
    eval_seconds = []

    def eval_fn(m):
        start = time.perf_counter()
        results = evaluate_splits(m, task, dev_splits, dev_datasets)
        eval_seconds.append(time.perf_counter() - start)
        return results

    monitor = next(iter(evaluate_metric_names(task, dev_splits)))
    start = time.perf_counter()
    result = finetune(
        model,
        train_ds,
        epochs=epochs,
        learning_rate=learning_rate,
        warmup_proportion=warmup_proportion,
        weight_decay=weight_decay,
        eval_fn=eval_fn,
        monitor=monitor,
        model_dir=model_dir,
        strategy=distribution,
        seed=seed,
        early_stopping_patience=early_stopping_patience,
        verbose=verbose,
        jit_compile=jit_compile,
    )
    total_seconds = time.perf_counter() - start

    submission_files = []
    for split in test_splits:
        test_ds = glue_data.make_dataset(split, preprocessor, eval_batch_size)
        predictions = np.asarray(model.predict(test_ds, verbose=0))[: len(split.ids)]
        predictions = predictions[:, 0] if task.is_regression else predictions.argmax(axis=-1)
        path = glue_data.write_submission(task, split.split, split.ids, predictions, os.path.join(model_dir, "submission"))
        submission_files.append(path)

    if save_model:
        _save_model_atomically(model, os.path.join(model_dir, "model.keras"))

    train_seconds = float(sum(result.epoch_seconds))
    epochs_run = len(result.epoch_seconds)
    results = {
        "task": task.name,
        "metric": monitor,
        "best_epoch": result.best_epoch,
        "best": {k: result.best_metrics[k] for k in evaluate_metric_names(task, dev_splits) if k in result.best_metrics},
        "glue_score": _glue_score(task, dev_splits, result.best_metrics),
        "history": result.history,
        "train_examples": len(train),
        "dev_examples": {s.split: len(s) for s in dev_splits},
        "epochs_run": epochs_run,
        "stopped_early": result.stopped_early,
        "train_seconds": train_seconds,
        "seconds_per_epoch": train_seconds / max(1, epochs_run),
        "epoch_seconds": [float(x) for x in result.epoch_seconds],
        "train_sequences_per_second": len(train) * epochs_run / train_seconds if train_seconds else None,
        "eval_seconds": float(sum(eval_seconds)),
        "total_seconds": total_seconds,
        "submission_files": submission_files,
        "model_file": os.path.join(model_dir, "model.keras") if save_model else None,
        "config": {
            "preset": preset,
            "init_checkpoint": init_checkpoint,
            "max_seq_length": max_seq_length,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "epochs": epochs,
            "warmup_proportion": warmup_proportion,
            "weight_decay": weight_decay,
            "truncate": truncate,
            "seed": seed,
            "mixed_precision": mixed_precision,
            "train_limit": train_limit,
            "dev_limit": dev_limit,
            "strategy": strategy,
            "jit_compile": jit_compile,
        },
    }
    atomic_write_json(os.path.join(model_dir, "dev_results.json"), results)
    return results


def evaluate_metric_names(task, dev_splits):
    """Names `evaluate_splits` returns, in order (the first picks the best epoch).

    `dev_splits`: `GlueSplit`s or split names (e.g. `task.dev_splits`).
    """
    names = glue_metrics.TASK_METRICS[task.name]
    if len(dev_splits) == 1:
        return list(names)
    split_names = [s if isinstance(s, str) else s.split for s in dev_splits]
    return [s.replace("dev_", "") + "_" + n for s in split_names for n in names]


def _glue_score(task, dev_splits, metrics):
    names = evaluate_metric_names(task, dev_splits)
    if not all(n in metrics for n in names):
        return None
    return float(np.mean([metrics[n] for n in names]))


def _has_vocabulary(directory):
    return os.path.isdir(directory) and any(
        os.path.exists(os.path.join(directory, name)) for name in ("vocab.txt", "tokenizer.json", "assets")
    )


def _save_model_atomically(model, path):
    temp_path = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}.keras")
    try:
        model.save(temp_path)
        os.replace(temp_path, path)
    finally:
        if os.path.exists(temp_path):
            os.remove(temp_path)
