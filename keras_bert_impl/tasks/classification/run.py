"""The GLUE fine-tuning story over one `ClassificationConfig`: the library side of `recipes/finetune_glue.py`.

`run(config)` reads the task's files (`reading`), builds a `BertClassifier`
on a preset or a checkpoint, fine-tunes it with
`keras_bert_impl.training.finetuning.finetune` (AdamW, 10% warm-up, linear
decay, length-bucketed `batches`), scores the official metric(s) on dev after
every epoch (`evaluation`), keeps the best epoch, and writes (`outputs`)
`model_dir/dev_results.json` and, for the test split(s), GLUE submission
files under `model_dir/submission/`.

Example:
>>> config = ClassificationConfig(task="rte", data_dir="../shared/data/glue", model_dir="/tmp/rte",
...                               preset="all_minilm_l6_v2_en", epochs=3)
>>> results = run(config)  # doctest: +SKIP
>>> results["best"]["accuracy"]  # doctest: +SKIP
"""

import dataclasses
import os
import time
from typing import NamedTuple, Optional

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.classifier import POOLINGS, BertClassifier
from keras_bert_impl.tasks.classification.batches import make_dataset, make_packed_dataset
from keras_bert_impl.tasks.classification.evaluation import evaluate_metric_names, evaluate_splits, glue_score
from keras_bert_impl.tasks.classification.outputs import (
    DEV_RESULTS_NAME, save_model_atomically, write_dev_results, write_submission,
)
from keras_bert_impl.tasks.classification.prediction import predict_split
from keras_bert_impl.tasks.classification.reading import GlueSplit, GlueTask, get_task, read_split
from keras_bert_impl.tasks.flags import (
    check_epochs, check_numbers, check_training_scores_kept, check_vocabulary, is_fine_tuned_model,
    learning_rate_or_default,
)
from keras_bert_impl.tasks.starting_point import fine_tuned_config, fine_tuned_model
from keras_bert_impl.tasks.old_keywords import old_field_names
from keras_bert_impl.text.classifier_preprocessor import BertClassifierPreprocessor
from keras_bert_impl.text.tokenizer import BertTokenizer
from keras_bert_impl.training.finetuning import FinetuneResult, finetune, setup_finetuning
from keras_bert_impl.training.finetuning_processes import config_of_this_process
from keras_bert_impl.training.finetuning_resume import data_digest
from keras_bert_impl.training.precision import resolve_mixed_precision
from keras_bert_impl.training.strategy import get_strategy, predicting_everywhere


@old_field_names(eval_batch_size="predict_batch_size", train_limit="max_train_samples",
                 dev_limit="max_eval_samples")
@dataclasses.dataclass
class ClassificationConfig:
    """Everything one GLUE fine-tuning run needs.

    Attributes:
        task: GLUE task name (`cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli`).
        data_dir: the GLUE root (with the task folder) or the task folder.
        model_dir: output directory (created): `dev_results.json`,
            `best.weights.h5`, TensorBoard `logs/`, `submission/`.
        preset: preset name or checkpoint directory for the backbone and the
            tokenizer (ignored for the backbone when `init_checkpoint` is set).
        init_checkpoint: optional checkpoint directory (any format
            `BertBackbone.from_preset` reads, e.g. a pretraining export); its
            vocabulary is used when it has one.
        sequence_length: longest packed sequence (special tokens included).
        batch_size: the training batch; predict_batch_size: the batch of dev evaluation and test prediction
            (old name: `eval_batch_size`).
        learning_rate, epochs, warmup_proportion, weight_decay: optimisation.
        dropout: classifier dropout (the backbone keeps its configured dropout).
        pooling: what the head reads: `"pooled"` (BERT's [CLS] pooler) or `"mean"`
            (the mean token vector); see `BertClassifier`.
        packing: train on packed rows (several examples per row, `batches.make_packed_dataset`,
            through `BertClassifier.packed_training_model()`); dev and test are read unpacked.
        truncate: pair truncation (`longest_first` as original BERT).
        strategy: name for `keras_bert_impl.training.strategy.get_strategy`.
        seed: seeds weights of the head, dropout and shuffling.
        mixed_precision: "auto" (bf16 on a TPU or a bf16 GPU, else float32), None/"none", "bf16" or "fp16".
        early_stopping_patience: None or epochs without dev improvement.
        max_train_samples: train on the first N training examples only (documented subsets; old name:
            `train_limit`).
        max_eval_samples: evaluate on the first N examples of each dev split only (old name: `dev_limit`).
        predict_test: write submission files for the test split(s).
        save_model: also save the best model (with its preprocessor) as
            `model_dir/model.keras`, which `keras.saving.load_model` reads
            and whose `predict_labels` takes raw strings.
        verbose: `model.fit` verbosity.
        jit_compile: XLA for the train/eval steps (`finetune`'s argument);
            `"auto"` leaves it off on a CPU-only TensorFlow machine.
    """

    task: str
    data_dir: str
    model_dir: str
    preset: str = "all_minilm_l6_v2_en"
    init_checkpoint: str = None
    sequence_length: int = 128
    batch_size: int = 32
    predict_batch_size: int = 64
    learning_rate: float = None  # 2e-5, or 5e-4 with lora_rank (learning_rate_or_default)
    epochs: int = 3
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    dropout: float = 0.1
    pooling: str = "pooled"
    packing: bool = False
    truncate: str = "longest_first"
    strategy: str = "auto"
    seed: int = 42
    mixed_precision: str = "auto"
    early_stopping_patience: int = None
    max_train_samples: int = None
    max_eval_samples: int = None
    predict_test: bool = True
    save_model: bool = False
    verbose: object = "auto"
    jit_compile: object = "auto"
    lora_rank: int = None

    def __post_init__(self):
        self.learning_rate = learning_rate_or_default(self.learning_rate, self.lora_rank, 2e-5)


def check_flags(config):
    """Refuses `epochs=0` without a fine-tuned `.keras` `init_checkpoint` (dev scores and submissions from a new,
    random head), a non-positive length, batch size, patience or learning rate, or `--max_train_samples` /
    `--max_eval_samples` below 1, and a warm-up, weight decay or dropout outside its range. A split file with a
    header only is refused when the files are read, naming the file.

    Example:
    >>> check_flags(ClassificationConfig(task="rte", data_dir="glue", model_dir="m", epochs=0))
    Traceback (most recent call last):
    ...
    ValueError: --epochs=0 predicts without training, but --preset all_minilm_l6_v2_en has no trained classification \
head: the predictions would come from a random classification head. Pass --epochs 1 or more (with training data), or \
--init_checkpoint a fine-tuned model.keras to predict only
    """
    check_epochs(config, "classification head")
    check_training_scores_kept(config, [DEV_RESULTS_NAME])
    check_numbers(
        config,
        integers=dict(sequence_length=3, batch_size=1, predict_batch_size=1, early_stopping_patience=1,
                      lora_rank=1, max_train_samples=1, max_eval_samples=1),
        positive=["learning_rate"],
        fractions={"warmup_proportion": (0, 1, True), "weight_decay": (0, 1, True), "dropout": (0, 1, False)},
    )
    if config.pooling not in POOLINGS:
        raise ValueError(f"--pooling={config.pooling!r}: must be one of {', '.join(POOLINGS)}")
    if config.packing and config.pooling != "pooled":
        raise ValueError(f"--packing needs --pooling pooled (each example's [CLS]); --pooling={config.pooling!r} "
                         "averages a whole row")


class GlueInputs(NamedTuple):
    """What `read_inputs` returns: the task and its split files, read and checked before any model is built."""

    task: GlueTask
    train: Optional[GlueSplit]  # None with `epochs=0` (a fine-tuned model predicts only)
    dev_splits: list  # of GlueSplit, `task.dev_splits` (MNLI: matched and mismatched)
    test_splits: list  # of GlueSplit, `task.test_splits`; empty without `predict_test`


def read_inputs(config):
    """Reads and checks every split file of the run before any model is built.

    The training split (unless `epochs=0`) and the dev split(s) (their first
    `max_train_samples` / `max_eval_samples` examples when given) and, with
    `predict_test`, the test split(s). A missing or malformed file is one error naming the file and
    line; a split with a header only is refused.

    Example: the STS-B slice of the tests (tests/data/slices/glue: 100 train, 375 dev, 100 test pairs):

    >>> import pathlib, keras_bert_impl
    >>> glue = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/glue"
    >>> inputs = read_inputs(ClassificationConfig(task="stsb", data_dir=str(glue), model_dir="unused",
    ...                                           max_eval_samples=3))
    >>> inputs.task.name, len(inputs.train), [(s.split, len(s)) for s in inputs.dev_splits + inputs.test_splits]
    ('stsb', 100, [('dev', 3), ('test', 100)])
    """
    c = config
    task = get_task(c.task)
    if is_fine_tuned_model(c.init_checkpoint):  # another task's model, or one of other classes: before any file
        _check_num_classes(c.init_checkpoint, fine_tuned_config(c.init_checkpoint, "BertClassifier",
                                                                "finetune_glue.py").get("num_classes"), task)
    train = read_split(task, c.data_dir, "train") if c.epochs > 0 else None
    if train is not None and c.max_train_samples is not None:
        train = train.take(c.max_train_samples)
    dev_splits = [read_split(task, c.data_dir, s) for s in task.dev_splits]
    if c.max_eval_samples is not None:
        dev_splits = [s.take(c.max_eval_samples) for s in dev_splits]
    test_splits = [read_split(task, c.data_dir, s) for s in task.test_splits] if c.predict_test else []
    if train is not None and len(train) == 0:
        raise ValueError(f"{train.path}: no training examples (it has a header only); a classifier trained on nothing would "
                         "write a dev score and submission files from an untrained head")
    for split in dev_splits:
        if len(split) == 0:
            raise ValueError(f"{split.path}: no examples to evaluate on (a header only)")
    return GlueInputs(task, train, dev_splits, test_splits)


def _check_num_classes(init_checkpoint, num_classes, task):
    """Refuses a fine-tuned classifier whose number of outputs is not `task`'s."""
    if num_classes != task.num_classes:
        what = ("regression (one output)" if task.num_classes == 1 else f"{task.num_classes} classes")
        raise ValueError(f"--init_checkpoint {init_checkpoint}: a model of {num_classes or '?'} output(s), but "
                         f"{task.name} is {what}: pass the model fine-tuned on {task.name}")


def build_model(config, inputs, strategy):
    """Seeds and sets the dtype policy (`setup_finetuning`), then builds a `BertClassifier` for `inputs.task`.

    A fine-tuned `.keras` `init_checkpoint` (a run's `model.keras`, saved with `save_model`) is loaded, its
    preprocessor and head included (`read_inputs` has checked its class and number of classes). Otherwise the backbone comes from `config.init_checkpoint` (when set) or `config.preset`, built under `strategy`'s
    scope; the tokenizer from the checkpoint when it holds a vocabulary, else from the preset; the model keeps its
    `BertClassifierPreprocessor` (saved with it). With `lora_rank`, the backbone gets LoRA factors.

    Returns:
        `(model, tokenizer)`.
    """
    c = config
    setup_finetuning(seed=c.seed, mixed_precision=c.mixed_precision, strategy_name=c.strategy)
    if is_fine_tuned_model(c.init_checkpoint):
        with strategy.scope():
            model, tokenizer = fine_tuned_model(c.init_checkpoint)
            if c.lora_rank:
                model.backbone.enable_lora(c.lora_rank)
        return model, tokenizer
    tokenizer_source = c.init_checkpoint if c.init_checkpoint and _has_vocabulary(c.init_checkpoint) else c.preset
    tokenizer = BertTokenizer.from_preset(tokenizer_source)
    preprocessor = BertClassifierPreprocessor(tokenizer, sequence_length=c.sequence_length, truncate=c.truncate)
    with strategy.scope():
        backbone = BertBackbone.from_preset(c.init_checkpoint or c.preset)
        flag = f"--init_checkpoint {c.init_checkpoint}" if c.init_checkpoint else f"--preset {c.preset}"
        check_vocabulary(backbone, tokenizer, flag, tokenizer_source)
        model = BertClassifier(
            backbone,
            num_classes=inputs.task.num_classes,
            dropout=c.dropout,
            preprocessor=preprocessor,
            label_names=inputs.task.label_names,
            pooling=c.pooling,
        )
        if c.lora_rank:
            model.backbone.enable_lora(c.lora_rank)  # under the strategy's scope, as every variable
    return model, tokenizer


def run(config):
    """Fine-tunes on `config.task`'s train split, picks the best epoch on dev, writes results and submissions.

    The steps of every task's story: `check_flags` -> `read_inputs` (every file, before any model) ->
    `build_model` -> `finetune` (scoring dev after every epoch) -> predict and write the outputs.

    Args:
        config: a `ClassificationConfig`.

    Returns:
        The dict written to `dev_results.json`.
    """
    c = config
    check_flags(c)
    inputs = read_inputs(c)  # a missing or malformed file fails before any training
    task, train, dev_splits, test_splits = inputs
    mixed_precision = resolve_mixed_precision(c.mixed_precision, c.strategy)
    distribution = get_strategy(c.strategy)
    shared_model_dir = c.model_dir  # fine-tuning checkpoints: process 0 writes, every process resumes
    c = config_of_this_process(c, distribution)  # several processes: one writer, an even split of each batch
    model, _ = build_model(c, inputs, distribution)
    preprocessor = model.preprocessor

    if c.epochs > 0 and c.packing:
        train_ds = make_packed_dataset(train, preprocessor, c.batch_size, training=True, seed=c.seed)
        with distribution.scope():
            trained_model = model.packed_training_model()  # trains `model`'s own weights
    elif c.epochs > 0:
        train_ds = make_dataset(train, preprocessor, c.batch_size, training=True, seed=c.seed)
        trained_model = model
    dev_datasets = [make_dataset(s, preprocessor, c.predict_batch_size) for s in dev_splits]
    eval_seconds = []

    def eval_fn(_):
        start = time.perf_counter()
        results = evaluate_splits(model, task, dev_splits, dev_datasets)
        eval_seconds.append(time.perf_counter() - start)
        return results

    monitor = next(iter(evaluate_metric_names(task, dev_splits)))
    start = time.perf_counter()
    if c.epochs == 0:  # a fine-tuned model.keras: its dev scores and submissions, no training
        with predicting_everywhere(distribution):
            metrics = eval_fn(None)
        result = FinetuneResult(history={}, best_epoch=None, best_metrics=metrics, best_weights_path=None,
                                epoch_seconds=[], train_steps=0, stopped_early=False)
    else:
        result = finetune(
            trained_model,
            train_ds,
            epochs=c.epochs,
            learning_rate=c.learning_rate,
            warmup_proportion=c.warmup_proportion,
            weight_decay=c.weight_decay,
            eval_fn=eval_fn,
            monitor=monitor,
            model_dir=shared_model_dir,
            strategy=distribution,
            seed=c.seed,
            early_stopping_patience=c.early_stopping_patience,
            verbose=c.verbose,
            jit_compile=c.jit_compile,
            # A checkpoint of another task, data subset or starting point is refused, never resumed.
            run_identity={"task": task.name, "starting_point": c.init_checkpoint or c.preset,
                          "sequence_length": c.sequence_length, "packing": c.packing,
                          "train_data": data_digest(train.text_a, train.text_b, train.labels)},
            keep_checkpoints=True,  # removed once the outputs below are written: a kill while writing them keeps training
        )
    total_seconds = time.perf_counter() - start

    submission_files = []
    for split in test_splits:
        test_ds = make_dataset(split, preprocessor, c.predict_batch_size)
        with predicting_everywhere(distribution):
            predictions = predict_split(model, test_ds, len(split.ids))
        path = write_submission(task, split.split, split.ids, predictions, os.path.join(c.model_dir, "submission"))
        submission_files.append(path)

    if c.save_model:
        save_model_atomically(model, os.path.join(c.model_dir, "model.keras"))

    train_seconds = float(sum(result.epoch_seconds))
    epochs_run = len(result.epoch_seconds)
    results = {
        "task": task.name,
        "metric": monitor,
        "best_epoch": result.best_epoch,
        "best": {k: result.best_metrics[k] for k in evaluate_metric_names(task, dev_splits) if k in result.best_metrics},
        "glue_score": glue_score(task, dev_splits, result.best_metrics),
        "history": result.history,
        "train_examples": len(train) if train is not None else 0,
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
        "model_file": os.path.join(c.model_dir, "model.keras") if c.save_model else None,
        "config": {
            "preset": c.preset,
            "init_checkpoint": c.init_checkpoint,
            "max_seq_length": preprocessor.sequence_length,  # the field name of earlier result files
            "batch_size": c.batch_size,
            "learning_rate": c.learning_rate,
            "epochs": c.epochs,
            "warmup_proportion": c.warmup_proportion,
            "weight_decay": c.weight_decay,
            "truncate": c.truncate,
            "pooling": c.pooling,
            "packing": c.packing,
            "seed": c.seed,
            "mixed_precision": mixed_precision,
            "max_train_samples": c.max_train_samples,
            "max_eval_samples": c.max_eval_samples,
            "strategy": c.strategy,
            "jit_compile": c.jit_compile,
        },
    }
    write_dev_results(c.model_dir, results)
    if c.epochs > 0:
        result.remove_checkpoints()
    return results


def run_glue(task, data_dir, model_dir, **options):
    """`run(ClassificationConfig(task, data_dir, model_dir, **options))`."""
    return run(ClassificationConfig(task, data_dir, model_dir, **options))


def _has_vocabulary(directory):
    return os.path.isdir(directory) and any(
        os.path.exists(os.path.join(directory, name)) for name in ("vocab.txt", "tokenizer.json", "assets")
    )
