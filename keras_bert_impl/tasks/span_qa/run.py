"""The SQuAD fine-tuning story over one `SpanQaConfig`: the library side of `recipes/finetune_squad.py`.

`run(config)` reads the train and predict files (`reading`), cuts every
question + context into sliding windows (`features`), fine-tunes a
`BertSpanExtractor` with `keras_bert_impl.training.finetuning.finetune` on
length-bucketed `batches`, predicts the predict file and scores it with the
official EM/F1 (`prediction`, `evaluation`), and writes (`outputs`)
`predictions.json` (and `null_odds.json` for v2.0), `eval.json` and
`model.keras`, which holds its `BertSpanExtractorPreprocessor`:
`keras.saving.load_model(path).answer(question, context)` after `import keras_bert_impl`.

Example:
>>> results = run(SpanQaConfig(model_dir="/tmp/squad", predict_file="dev-v1.1.json",
...                              train_file="train-v1.1.json", preset="bert_base_en_uncased"))  # doctest: +SKIP
"""

import dataclasses
import os
from typing import NamedTuple, Optional

from keras_bert_impl.checkpoints.atomic_files import save_model_atomically
from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.models.head_building import is_packable
from keras_bert_impl.models.span_extractor import BertSpanExtractor
from keras_bert_impl.tasks.old_keywords import old_field_names
from keras_bert_impl.tasks.span_qa.batches import make_packed_dataset
from keras_bert_impl.tasks.span_qa.evaluation import predict_squad
from keras_bert_impl.tasks.span_qa.features import encode_examples
from keras_bert_impl.tasks.span_qa.outputs import write_squad_outputs
from keras_bert_impl.tasks.flags import (
    check_epochs, check_numbers, check_starting_point, check_training_scores_kept, is_fine_tuned_model,
    learning_rate_or_default,
)
from keras_bert_impl.tasks.span_qa.reading import (
    SQUAD_FILE,
    ReadStats,
    load_squad_json,
    read_squad_examples,
    select_questions,
    squad_version,
)
from keras_bert_impl.tasks.starting_point import fine_tuned_config, fine_tuned_model, pretrained_backbone
from keras_bert_impl.text.span_extractor_preprocessor import BertSpanExtractorPreprocessor
from keras_bert_impl.training.finetuning import finetune, setup_finetuning
from keras_bert_impl.training.finetuning_processes import config_of_this_process
from keras_bert_impl.training.finetuning_resume import data_digest
from keras_bert_impl.training.precision import resolve_mixed_precision
from keras_bert_impl.training.strategy import get_strategy, predicting_everywhere


@old_field_names(max_query_length="max_question_length")
@dataclasses.dataclass
class SpanQaConfig:
    """Everything one SQuAD run needs (the flags of `recipes/finetune_squad.py`).

    Attributes:
        model_dir: output folder.
        predict_file: SQuAD file to predict (and evaluate if it has answers).
        train_file: SQuAD training file (needed unless `epochs=0`).
        version: "1.1" or "2.0".
        preset: backbone preset name or directory; or
        init_checkpoint: a fine-tuned `BertSpanExtractor` `.keras` file, or a preset directory.
        tokenizer: tokenizer preset/directory (default: the backbone's, or the `.keras` model's own).
        sequence_length, doc_stride, max_question_length: windows (question pieces kept: `max_question_length`, the
            preprocessor's name; old name `max_query_length`, BERT's `run_squad.py` flag).
        max_answer_length, n_best_size: post-processing.
        batch_size, predict_batch_size, learning_rate, epochs, warmup_proportion: optimisation.
        packing: train on packed rows (several windows a row, `batches.make_packed_dataset`, through
            `BertSpanExtractor.packed_training_model`): the same loss, almost no padding.
        predict_packing: predict several windows a row of `sequence_length` (`predict_logits(packing=True)`:
            the same logits within float rounding, one compiled shape, almost no padding); False: one window a
            row, in length buckets. Packing needs the attention padding as a mask (every preset's); a model
            built with `attention_padding="lengths"` predicts in buckets (`eval.json` says which ran).
        null_score_diff_threshold: v2.0 fixed threshold (None: tuned for F1 on the predict file).
        max_train_samples: train on the first N questions of `train_file` only (those with a usable answer).
        max_eval_samples: predict and score the first N questions of `predict_file` only (the official
            metrics over those questions).
        strategy, mixed_precision, seed: as for every run.
    """

    model_dir: str
    predict_file: str
    train_file: str = None
    version: str = "1.1"
    preset: str = None
    init_checkpoint: str = None
    tokenizer: str = None
    sequence_length: int = 384
    doc_stride: int = 128
    max_question_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    batch_size: int = 32
    predict_batch_size: int = 64
    predict_packing: bool = True
    packing: bool = False
    learning_rate: float = None  # 3e-5, or 5e-4 with lora_rank (learning_rate_or_default)
    epochs: int = 2
    warmup_proportion: float = 0.1
    null_score_diff_threshold: float = None
    max_train_samples: int = None
    max_eval_samples: int = None
    strategy: str = "auto"
    mixed_precision: str = "auto"
    seed: int = 42
    lora_rank: int = None

    def __post_init__(self):
        self.learning_rate = learning_rate_or_default(self.learning_rate, self.lora_rank, 3e-5)


def check_version(dataset, path, version):
    """Refuses a file whose content does not match `--version`, and a file without questions, naming the file.

    SQuAD v2.0 content (`"version": "v2.0"`, `is_impossible`, or answerable
    questions with an empty `answers` list) under `--version 1.1` would
    crash after training or drop questions silently.

    Example:
    >>> check_version({"version": "1.1", "data": []}, "dev.json", "1.1")
    Traceback (most recent call last):
    ...
    ValueError: dev.json: no questions ("data" is empty): expected SQuAD articles with paragraphs and qas
    """
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        return  # (`read_squad_examples` names what is missing: `no "data" key; expected "data": a list of articles`)
    questions = [
        qa
        for article in dataset["data"]
        for paragraph in (article.get("paragraphs", []) if isinstance(article, dict) else [])
        for qa in (paragraph.get("qas", []) if isinstance(paragraph, dict) else [])
    ]
    if not questions:
        raise ValueError(f'{path}: no questions ("data" is empty): expected SQuAD articles with paragraphs and qas')
    if version == "1.1":
        if squad_version(dataset) == "2.0":
            raise ValueError(f"{path} holds SQuAD v2.0 content (its version or is_impossible questions) but --version "
                             "is 1.1: pass --version 2.0")
        empty = [str(qa.get("id")) for qa in questions if isinstance(qa, dict) and qa.get("answers") == []]
        if empty:
            raise ValueError(f"{path}: {len(empty)} question(s) have no answers (first ids: {', '.join(empty[:3])}), "
                             "as in SQuAD v2.0, but --version is 1.1: pass --version 2.0")


def check_flags(config):
    """Refuses a non-positive window, batch or post-processing size, learning rate or warm-up outside [0, 1], and
    `epochs=0` without a fine-tuned `.keras` model (its predictions would come from a random span head).

    Example:
    >>> check_flags(SpanQaConfig(model_dir="m", predict_file="dev.json", preset="bert_tiny_en_uncased", doc_stride=0))
    Traceback (most recent call last):
    ...
    ValueError: --doc_stride=0: must be an integer >= 1
    """
    c = config
    check_numbers(
        c,
        integers=dict(sequence_length=5, doc_stride=1, max_question_length=1, max_answer_length=1, n_best_size=1,
                      batch_size=1, predict_batch_size=1, lora_rank=1,
                      max_train_samples=1, max_eval_samples=1),
        positive=["learning_rate"],
        fractions={"warmup_proportion": (0, 1, True)},
    )
    check_starting_point(c)
    check_epochs(c, "span head")
    check_training_scores_kept(c, ["eval.json"])


class SquadInputs(NamedTuple):
    """What `read_inputs` returns: the questions of the run, read and checked before any model is built."""

    gold: dict  # the predict file's SQuAD dict (its first `max_eval_samples` questions only when given)
    examples: list  # of `SquadExample`, the questions to predict
    train_examples: Optional[list]  # the usable training questions; None with `epochs=0`
    train_stats: Optional[ReadStats]  # what reading the training file skipped; None with `epochs=0`


def read_inputs(config):
    """Reads and checks the predict file and (unless `epochs=0`) the training file before any model is built; first,
    a fine-tuned `init_checkpoint` must hold a `BertSpanExtractor` (`fine_tuned_config`).

    Each file must match `config.version` (`check_version`); `max_eval_samples` keeps the predict file's first N
    questions (and restricts the gold to them, so the official metrics score those alone), `max_train_samples` the
    first N usable training questions.

    Example: the SQuAD v1.1 dev slice of the tests (tests/data/slices/squad, 1,057 questions), its first five:

    >>> import pathlib, keras_bert_impl
    >>> squad = pathlib.Path(keras_bert_impl.__file__).parents[1] / "tests/data/slices/squad"
    >>> inputs = read_inputs(SpanQaConfig(model_dir="unused", predict_file=str(squad / "dev-v1.1.json.gz"),
    ...                                   preset="bert_tiny_en_uncased", epochs=0, max_eval_samples=5))
    >>> len(inputs.examples), sum(len(p["qas"]) for a in inputs.gold["data"] for p in a["paragraphs"])
    (5, 5)
    >>> inputs.train_examples is None
    True
    """
    c = config
    if is_fine_tuned_model(c.init_checkpoint):  # another task's model: before any file is read (was an IndexError,
        fine_tuned_config(c.init_checkpoint, "BertSpanExtractor", "finetune_squad.py")  # then after SQuAD was read)
    # Every file is checked to exist before the first is read (was "[Errno 2] No such file or directory: ...").
    for flag, path in (("--predict_file", c.predict_file), ("--train_file", c.train_file if c.epochs > 0 else None)):
        if path is not None:
            check_input_file(path, flag, SQUAD_FILE)
    gold = load_squad_json(c.predict_file)
    check_version(gold, c.predict_file, c.version)
    examples, _ = read_squad_examples(gold, source=c.predict_file)
    if c.max_eval_samples is not None:
        examples = examples[:c.max_eval_samples]
        gold = select_questions(gold, {example.qas_id for example in examples})
    train_examples = train_stats = None
    if c.epochs > 0:
        train = load_squad_json(c.train_file)  # (read once: was read twice)
        check_version(train, c.train_file, c.version)
        train_examples, train_stats = read_squad_examples(train, is_training=True, source=c.train_file)
        train_examples = train_examples[:c.max_train_samples]
    return SquadInputs(gold, examples, train_examples, train_stats)


def build_model(config, inputs, strategy):
    """Seeds and sets the dtype policy (`setup_finetuning`), then builds or loads the `BertSpanExtractor`.

    A fine-tuned `.keras` `init_checkpoint` is loaded (its tokenizer: `config.tokenizer`, else the model's own
    preprocessor's); otherwise a new span head on the backbone of `config.preset` or `config.init_checkpoint`, with
    a `BertSpanExtractorPreprocessor` saved with it, so the `.keras` file answers raw questions alone. Built under
    `strategy`'s scope; with `lora_rank`, the backbone gets LoRA factors.

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
            preprocessor = BertSpanExtractorPreprocessor(
                tokenizer, sequence_length=c.sequence_length, doc_stride=c.doc_stride,
                max_question_length=c.max_question_length,
            )
            model = BertSpanExtractor(backbone, preprocessor=preprocessor, max_answer_length=c.max_answer_length)
        if c.lora_rank:
            model.backbone.enable_lora(c.lora_rank)
    return model, tokenizer


def run(config):
    """Fine-tunes (unless `epochs=0`), predicts and scores `predict_file`, writes the outputs.

    The steps of every task's story: `check_flags` -> `read_inputs` (every file, before any model) ->
    `build_model` -> `finetune` -> predict and score (`predict_squad`) -> write the outputs.

    Returns:
        The run's results, what `eval.json` holds: the official metrics (`exact_match`, `f1`; v2.0 also the
        tuned `null_score_diff_threshold`) and the run's summary (questions, windows, seconds, settings).
    """
    c = config
    check_flags(c)
    inputs = read_inputs(c)  # every input file, before any model
    gold, examples, train_examples, train_stats = inputs
    mixed_precision = resolve_mixed_precision(c.mixed_precision, c.strategy)
    window = dict(sequence_length=c.sequence_length, doc_stride=c.doc_stride,
                  max_question_length=c.max_question_length)
    strategy = get_strategy(c.strategy)
    shared_model_dir = c.model_dir  # fine-tuning checkpoints: process 0 writes, every process resumes
    c = config_of_this_process(c, strategy)  # several processes: one writer, an even split of each batch
    model, tokenizer = build_model(c, inputs, strategy)

    summary = {"version": c.version, "mixed_precision": mixed_precision}
    if c.epochs > 0:
        train_features = encode_examples(train_examples, tokenizer, is_training=True, **window)
        if c.packing:
            train_ds, examples_per_row = make_packed_dataset(train_features, c.batch_size, training=True, seed=c.seed)
            with strategy.scope():
                trained_model = model.packed_training_model(examples_per_row)  # trains `model`'s own weights
        else:
            train_ds = train_features.to_dataset(c.batch_size, training=True, seed=c.seed)
            trained_model = model
        fit = finetune(
            trained_model,
            train_ds,
            epochs=c.epochs,
            learning_rate=c.learning_rate,
            warmup_proportion=c.warmup_proportion,
            model_dir=shared_model_dir,
            strategy=strategy,
            seed=c.seed,
            # A checkpoint of other questions, windows or starting point is refused, never resumed.
            run_identity={"starting_point": c.init_checkpoint or c.preset, "windows": repr(sorted(window.items())),
                          "train_data": data_digest(train_examples), "packing": c.packing},
            keep_checkpoints=True,  # removed at the end, once every output is written
        )
        summary.update(
            train_questions=len(train_examples),
            train_windows=len(train_features),
            packing=c.packing,
            skipped_questions=train_stats.skipped_questions,
            mismatched_answers=train_stats.mismatched_answers,
            missing_answers=train_stats.missing_answers,
            train_seconds=sum(fit.epoch_seconds),
            train_loss=fit.history.get("loss"),
        )
        save_model_atomically(model, os.path.join(c.model_dir, "model.keras"))

    features = encode_examples(examples, tokenizer, **window)
    # Packed rows need the attention padding as a mask; a model saved with it as lengths predicts in buckets.
    packing = c.predict_packing and is_packable(model.backbone)
    with predicting_everywhere(strategy):  # several processes: each predicts every window
        result = predict_squad(
            model,
            features,
            gold=gold,
            version=c.version,
            batch_size=c.predict_batch_size,
            packing=packing,
            n_best_size=c.n_best_size,
            max_answer_length=c.max_answer_length,
            null_score_diff_threshold=c.null_score_diff_threshold,
        )
    summary.update(predict_questions=len(examples), predict_windows=len(features), predict_seconds=result.predict_seconds,
                   predict_packing=packing, predict_token_slots=result.predict_token_slots,
                   predict_real_tokens=result.predict_real_tokens)
    write_squad_outputs(c.model_dir, result, extra_eval=summary)
    if c.epochs > 0:
        fit.remove_checkpoints()
    return dict(result.metrics, **summary)
