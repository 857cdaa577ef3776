"""The CoNLL-2003 fine-tuning story over one `TaggingConfig`: the library side of `recipes/finetune_conll.py`.

`run(config)` reads the split files (`reading`), labels each word on its
first WordPiece (`features`), fine-tunes a `BertTokenClassifier` with
`keras_bert_impl.training.finetuning.finetune` on length-bucketed `batches`,
scores conlleval's entity F1 on dev (and test) after every epoch
(`evaluation`), keeps the best epoch, and writes (`outputs`)
`dev_results.json`, `test_results.json`, `dev_predictions.txt`,
`test_predictions.txt`, `model.keras`, `labels.json` to `config.model_dir`.
With `predict_text` it also tags raw text (`prediction`).

Example:
>>> summary = run(TaggingConfig(model_dir="/tmp/conll", data_dir="../shared/data/conll2003",
...                             preset="all_minilm_l6_v2_en"))  # doctest: +SKIP
>>> summary["dev_f1"]  # doctest: +SKIP
"""

import dataclasses
import json
import os
from typing import NamedTuple

from keras_bert_impl.batching.boundaries import TAGGING_BUCKETS, default_boundaries
from keras_bert_impl.checkpoints.atomic_files import atomic_write_json, save_model_atomically
from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.models.token_classifier import BertTokenClassifier
from keras_bert_impl.tasks.flags import (
    check_epochs, check_numbers, check_starting_point, check_training_scores_kept, is_fine_tuned_model,
    learning_rate_or_default,
)
from keras_bert_impl.tasks.old_keywords import old_field_names
from keras_bert_impl.tasks.starting_point import fine_tuned_config, fine_tuned_model, pretrained_backbone
from keras_bert_impl.tasks.tagging.batches import make_dataset, make_packed_dataset
from keras_bert_impl.tasks.tagging.evaluation import ConllEpochEvaluator, ConllSplit, evaluate_conll
from keras_bert_impl.tasks.tagging.features import encode_examples
from keras_bert_impl.tasks.tagging.outputs import write_conll_outputs
from keras_bert_impl.tasks.tagging.reading import (
    CONLL_FILE,
    TAG_SCHEMES,
    check_known_tags,
    find_split_files,
    label_vocabulary,
    read_conll,
)
from keras_bert_impl.text.token_classifier_preprocessor import BertTokenClassifierPreprocessor
from keras_bert_impl.training.finetuning import finetune, setup_finetuning
from keras_bert_impl.training.finetuning_processes import config_of_this_process
from keras_bert_impl.training.finetuning_resume import data_digest
from keras_bert_impl.training.precision import resolve_mixed_precision
from keras_bert_impl.training.strategy import get_strategy, predicting_everywhere


@old_field_names(max_train_sentences="max_train_samples", max_eval_sentences="max_eval_samples")
@dataclasses.dataclass
class TaggingConfig:
    """Everything one CoNLL fine-tuning run needs (the flags of `recipes/finetune_conll.py`).

    Attributes:
        model_dir: output folder.
        data_dir: folder with eng.train/eng.testa/eng.testb or train/dev/test.txt
            (may be None with `epochs=0`, or when the files are given one by one).
        train_file, validation_file, test_file: CoNLL-format files (any tag
            set); each given file replaces the one found in `data_dir`.
        tag_column: index of the tag column (0-based, negative from the end; -1 = last).
        tag_scheme: the files' tag scheme, "iob1" (CoNLL-2003), "iob2" or "iobes";
            tags are IOB2 inside the model and in the prediction files.
        preset: backbone preset name or directory; or
        init_checkpoint: a fine-tuned `BertTokenClassifier` `.keras` file (its
            label names and preprocessor inside, or `labels.json` beside it), or a preset directory.
        tokenizer: tokenizer preset/directory (default: the backbone's, or the
            `.keras` model's own).
        sequence_length: packed window length, special tokens included.
        batch_size, predict_batch_size, learning_rate, epochs, warmup_proportion,
            dropout: optimisation.
        document_context: fill each window with neighbouring sentences of the
            document (labels on the centre one).
        static_shapes: pad every batch to `sequence_length` (TPU) instead of
            length buckets (`TAGGING_BUCKETS`).
        packing: train on rows of `sequence_length` tokens that each hold
            several windows (`batches.make_packed_dataset`): almost no padding,
            static shapes, the same loss as unpacked batches. Dev and test
            are predicted unpacked.
        max_train_samples: train on the first N training sentences only (old name: `max_train_sentences`).
        max_eval_samples: score the first N sentences of dev and of test only (old name: `max_eval_sentences`).
        no_test_each_epoch: score test only at the end.
        strategy, mixed_precision, seed: as for every run.
        predict_text: raw texts to tag after training.
    """

    model_dir: str
    data_dir: str = None
    train_file: str = None
    validation_file: str = None
    test_file: str = None
    tag_column: int = -1
    tag_scheme: str = "iob1"
    preset: str = None
    init_checkpoint: str = None
    tokenizer: str = None
    sequence_length: int = 128
    batch_size: int = 32
    predict_batch_size: int = 64
    learning_rate: float = None  # 5e-5, or 5e-4 with lora_rank (learning_rate_or_default)
    epochs: int = 3
    warmup_proportion: float = 0.1
    dropout: float = 0.1
    document_context: bool = False
    static_shapes: bool = False
    packing: bool = False
    max_train_samples: int = None
    max_eval_samples: int = None
    no_test_each_epoch: bool = False
    strategy: str = "auto"
    mixed_precision: str = "auto"
    seed: int = 42
    predict_text: list = dataclasses.field(default_factory=list)
    lora_rank: int = None

    def __post_init__(self):
        self.learning_rate = learning_rate_or_default(self.learning_rate, self.lora_rank, 5e-5)


def input_files(config):
    """The split files of a run: `data_dir`'s, replaced by `train_file`/`validation_file`/`test_file` if given."""
    c = config
    if c.data_dir and not os.path.isdir(c.data_dir):  # (was "no CoNLL file for train, dev" for a mistyped folder)
        what = "a file" if os.path.exists(c.data_dir) else "no such directory"
        raise (NotADirectoryError if os.path.exists(c.data_dir) else FileNotFoundError)(
            f"--data_dir {c.data_dir}: {what}; expected the folder of the CoNLL files (eng.train, eng.testa, "
            "eng.testb, or train.txt, dev.txt or valid.txt, test.txt)")
    files = find_split_files(c.data_dir) if c.data_dir else {}
    for name, path in (("train", c.train_file), ("dev", c.validation_file), ("test", c.test_file)):
        if path is not None:
            flag = {"train": "train_file", "dev": "validation_file", "test": "test_file"}[name]
            check_input_file(path, f"--{flag}", CONLL_FILE)  # (a directory was "no such file")
            files[name] = path
    if c.epochs > 0 and not {"train", "dev"} <= set(files):
        missing = [f"--{f}" for n, f in (("train", "train_file"), ("dev", "validation_file")) if n not in files]
        raise ValueError(f"training needs a training and a validation file: give {' and '.join(missing)} (or --data_dir)")
    return files


class ConllInputs(NamedTuple):
    """What `read_inputs` returns: the run's CoNLL files, read and checked before any model is built."""

    files: dict  # split name ("train", "dev", "test") -> path
    label_names: list  # the tags in id order: the training file's, or the fine-tuned model's
    sentences: dict  # split name -> list of `ConllSentence`


def read_inputs(config, label_names=None):
    """Reads and checks every input file before any model is built.

    Returns a `ConllInputs` `(files, label_names, sentences)`: the label names come from the
    training file (or are given, for a fine-tuned model: `fine_tuned_label_names`); a validation or
    test tag outside them is a `ConllFormatError` naming file, line and column. The sentences are
    the first `max_train_samples` / `max_eval_samples` of each file when given (the labels and the
    checks read every sentence).

    Example: the CoNLL-2003 files of ../shared/data (3,250 dev sentences, its first 100 kept):

    >>> import pathlib, keras_bert_impl
    >>> conll = pathlib.Path(keras_bert_impl.__file__).parents[2] / "shared/data/conll2003"
    >>> inputs = read_inputs(TaggingConfig(model_dir="unused", data_dir=str(conll), preset="bert_tiny_en_uncased",
    ...                                    max_eval_samples=100))  # doctest: +SKIP
    >>> sorted(inputs.files), inputs.label_names[:3], len(inputs.sentences["dev"])  # doctest: +SKIP
    (['dev', 'test', 'train'], ['O', 'B-LOC', 'I-LOC'], 100)
    """
    c = config
    if c.tag_scheme not in TAG_SCHEMES:
        raise ValueError(f"--tag_scheme must be one of {', '.join(TAG_SCHEMES)}, got {c.tag_scheme!r}")
    files = input_files(c)
    given_label_names = label_names
    read = dict(tag_scheme=c.tag_scheme, tag_column=c.tag_column)
    sentences = {}
    if c.epochs > 0 or label_names is None:
        if "train" not in files:
            raise ValueError("no training file to take the labels from: give --train_file or --data_dir")
        sentences["train"] = read_conll(files["train"], **read)
        if label_names is None:
            label_names = label_vocabulary(sentences["train"])
        else:  # a fine-tuned model trained further keeps its labels
            check_known_tags(sentences["train"], label_names, source="the fine-tuned model's labels")
    # The tags a validation or test file may use: the training file's, or (given) the fine-tuned model's.
    source = None if given_label_names is None else "the fine-tuned model's labels"
    for name in ("dev", "test"):
        if name in files:
            sentences[name] = read_conll(files[name], **read)
            check_known_tags(sentences[name], label_names, files.get("train"), source=source)
    # The documented subsets: the first N sentences (the label names and the tag checks above saw every sentence).
    limits = {"train": c.max_train_samples, "dev": c.max_eval_samples, "test": c.max_eval_samples}
    sentences = {name: found if limits[name] is None else found[:limits[name]] for name, found in sentences.items()}
    return ConllInputs(files, label_names, sentences)


def fine_tuned_label_names(path):
    """The label names of a fine-tuned tagger's `.keras` file, read without building the model.

    From the model's saved config (`BertTokenClassifier(label_names=...)`), else (a model saved before it kept
    them) from `labels.json` beside the file, which every run writes.
    """
    # (another task's model was read on: a classifier's label names as tags, "Unknown tag '0'")
    model_config = fine_tuned_config(path, "BertTokenClassifier", "finetune_conll.py")
    label_names = model_config.get("label_names")
    if label_names is None:
        labels_path = os.path.join(os.path.dirname(os.path.abspath(path)), "labels.json")
        if not os.path.isfile(labels_path):
            raise FileNotFoundError(f"{path}: the model has no label names and {labels_path} does not exist")
        with open(labels_path, encoding="utf-8") as f:
            label_names = json.load(f)
    return list(label_names)


def check_flags(config):
    """Refuses a non-positive length, batch size, sentence limit or learning rate, a warm-up outside [0, 1] or a
    dropout outside [0, 1), and `epochs=0` without a fine-tuned `.keras` model (a random tagging head).

    Example:
    >>> check_flags(TaggingConfig(model_dir="m", preset="bert_tiny_en_uncased", data_dir="d", max_train_samples=0))
    Traceback (most recent call last):
    ...
    ValueError: --max_train_samples=0: must be an integer >= 1
    """
    check_numbers(
        config,
        integers=dict(sequence_length=3, batch_size=1, predict_batch_size=1, max_train_samples=1,
                      max_eval_samples=1, lora_rank=1),
        positive=["learning_rate"],
        fractions={"warmup_proportion": (0, 1, True), "dropout": (0, 1, False)},
    )
    check_starting_point(config)
    check_epochs(config, "tagging head")
    if config.epochs == 0:  # the splits it scores (a run that only tags --predict_text writes no score file)
        check_training_scores_kept(config, [f"{name}_results.json" for name in input_files(config) if name != "train"])


def build_model(config, inputs, strategy):
    """Seeds and sets the dtype policy (`setup_finetuning`), then builds or loads the `BertTokenClassifier`.

    A fine-tuned `.keras` `init_checkpoint` is loaded (its tokenizer: `config.tokenizer`, else the model's own
    preprocessor's); otherwise a new tagging head of `inputs.label_names` on the backbone of `config.preset` or
    `config.init_checkpoint`, with a `BertTokenClassifierPreprocessor` and the label names saved with it, so the
    `.keras` file tags raw text alone. Built under `strategy`'s scope; with `lora_rank`, the backbone gets LoRA
    factors.

    Returns:
        `(model, tokenizer)`.
    """
    c = config
    setup_finetuning(seed=c.seed, mixed_precision=c.mixed_precision, strategy_name=c.strategy)
    with strategy.scope():
        if is_fine_tuned_model(c.init_checkpoint):
            model, tokenizer = fine_tuned_model(c.init_checkpoint, c.tokenizer)
        else:
            backbone, tokenizer = pretrained_backbone(c)
            preprocessor = BertTokenClassifierPreprocessor(tokenizer, sequence_length=c.sequence_length)
            model = BertTokenClassifier(backbone, len(inputs.label_names), dropout=c.dropout,
                                        label_names=inputs.label_names, preprocessor=preprocessor)
        if c.lora_rank:
            model.backbone.enable_lora(c.lora_rank)  # (the factors are variables: under the strategy's scope)
    return model, tokenizer


def run(config):
    """Fine-tunes (unless `epochs=0`), scores dev and test, writes the outputs; returns the summary dict.

    The steps of every task's story: `check_flags` -> `read_inputs` (every file, before any model) ->
    `build_model` -> `finetune` (scoring dev, and test, after every epoch) -> score and write the outputs.
    """
    c = config
    check_flags(c)
    fine_tuned = is_fine_tuned_model(c.init_checkpoint)
    # Every input file is read and checked before any model is built (a fine-tuned model's tags: from its file).
    inputs = read_inputs(c, fine_tuned_label_names(c.init_checkpoint) if fine_tuned else None)
    files, label_names, sentences = inputs
    mixed_precision = resolve_mixed_precision(c.mixed_precision, c.strategy)
    boundaries = None if c.static_shapes else default_boundaries(c.sequence_length, **TAGGING_BUCKETS)
    strategy = get_strategy(c.strategy)
    shared_model_dir = c.model_dir  # fine-tuning checkpoints: process 0 writes, every process resumes
    c = config_of_this_process(c, strategy)  # several processes: one writer, an even split of each batch
    model, tokenizer = build_model(c, inputs, strategy)

    def load_split(name):
        features = encode_examples(sentences[name], tokenizer, label_names, c.sequence_length,
                                    document_context=c.document_context)
        return ConllSplit(os.fspath(files[name]), sentences[name], features)

    splits = {name: load_split(name) for name in ("dev", "test") if name in sentences}
    train = load_split("train") if c.epochs > 0 else None

    summary = {"labels": label_names, "document_context": c.document_context, "tag_scheme": c.tag_scheme,
               "mixed_precision": mixed_precision}
    if c.epochs > 0:
        if c.packing:
            train_ds = make_packed_dataset(train.features, c.batch_size, training=True, seed=c.seed)
        else:
            train_ds = make_dataset(train.features, c.batch_size, training=True, seed=c.seed, boundaries=boundaries)
        evaluated = {"dev": splits["dev"]} if c.no_test_each_epoch else splits
        evaluator = ConllEpochEvaluator(
            evaluated, label_names, c.predict_batch_size, boundaries,
            on_epoch=lambda results: print(json.dumps(results), flush=True),
        )

        fit = finetune(
            model,
            train_ds,
            epochs=c.epochs,
            learning_rate=c.learning_rate,
            warmup_proportion=c.warmup_proportion,
            eval_fn=evaluator,
            monitor="dev_f1",
            model_dir=shared_model_dir,
            strategy=strategy,
            seed=c.seed,
            verbose=2,
            # A checkpoint of other sentences, tags, windows or starting point is refused, never resumed.
            run_identity={"starting_point": c.preset or c.init_checkpoint, "label_names": repr(label_names),
                          "sequence_length": c.sequence_length, "document_context": c.document_context,
                          "train_data": data_digest(train.sentences)},
            keep_checkpoints=True,  # removed at the end, once every output is written
        )
        train_sentences = len(train.sentences)
        summary.update(
            train_sentences=train_sentences,
            train_windows=len(train.features),
            packing=c.packing,
            train_batches=len(train_ds),
            best_epoch=fit.best_epoch,
            epoch_seconds=fit.epoch_seconds,
            train_sequences_per_second=len(train.features) * len(fit.epoch_seconds) / sum(fit.epoch_seconds),
            history={k: v for k, v in fit.history.items()},
        )
        save_model_atomically(model, os.path.join(c.model_dir, "model.keras"))
        atomic_write_json(os.path.join(c.model_dir, "labels.json"), label_names)

    # (a run resumed after its last epoch, or after its best one, evaluated none or not that one here: was an
    # IndexError at every rerun of a run stopped after its last epoch)
    best = evaluator.of_epoch(fit.best_epoch) if c.epochs > 0 and fit.best_epoch else {}
    for name, split in splits.items():
        # The best epoch's weights are restored: reuse its predictions where it made them.
        with predicting_everywhere(strategy):  # several processes: each predicts every sentence
            evaluation = best.get(name) or evaluate_conll(model, split, label_names, c.predict_batch_size,
                                                          boundaries)
        write_conll_outputs(c.model_dir, name, split, evaluation)
        summary[f"{name}_f1"] = evaluation.scores["f1"]
        summary[f"{name}_precision"] = evaluation.scores["precision"]
        summary[f"{name}_recall"] = evaluation.scores["recall"]
        summary[f"{name}_predict_seconds"] = evaluation.predict_seconds
    if c.predict_text:
        if model.preprocessor is None or model.label_names is None:  # a model saved before they were kept
            model.preprocessor = model.preprocessor or BertTokenClassifierPreprocessor(tokenizer, c.sequence_length)
            model.label_names = model.label_names or list(label_names)
        with predicting_everywhere(strategy):
            summary["entities"] = model.predict_entities(c.predict_text)
    if c.epochs > 0:
        fit.remove_checkpoints()
    return summary
