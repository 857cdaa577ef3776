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

import keras

from keras_bert_impl.batching.boundaries import TAGGING_BUCKETS, default_boundaries
from keras_bert_impl.checkpoints.atomic_files import atomic_write_json
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.token_classifier import BertTokenClassifier
from keras_bert_impl.tasks.tagging.batches import make_dataset
from keras_bert_impl.tasks.tagging.evaluation import ConllEpochEvaluator, evaluate_conll, load_conll_split
from keras_bert_impl.tasks.tagging.outputs import write_conll_outputs
from keras_bert_impl.tasks.tagging.prediction import predict_entities
from keras_bert_impl.tasks.tagging.reading import find_split_files, label_vocabulary, read_conll
from keras_bert_impl.text.tokenizer import BertTokenizer
from keras_bert_impl.training.finetuning import finetune, setup_finetuning
from keras_bert_impl.training.strategy import get_strategy


@dataclasses.dataclass
class TaggingConfig:
    """Everything one CoNLL fine-tuning run needs (the flags of `recipes/finetune_conll.py`).

    Attributes:
        model_dir: output folder.
        data_dir: folder with eng.train/eng.testa/eng.testb or train/dev/test.txt
            (may be None with `epochs=0`).
        preset: backbone preset name or directory; or
        init_checkpoint: a fine-tuned `BertTokenClassifier` `.keras` file (its
            folder holds `labels.json`), or a preset directory.
        tokenizer: tokenizer preset/directory (default: the backbone's).
        sequence_length: packed window length, special tokens included.
        batch_size, predict_batch_size, learning_rate, epochs, warmup_proportion,
            dropout: optimisation.
        document_context: fill each window with neighbouring sentences of the
            document (labels on the centre one).
        static_shapes: pad every batch to `sequence_length` (TPU) instead of
            length buckets (`TAGGING_BUCKETS`).
        max_train_sentences, max_eval_sentences: documented subsets.
        no_test_each_epoch: score test only at the end.
        strategy, mixed_precision, seed: as for every run.
        predict_text: raw texts to tag after training.
    """

    model_dir: str
    data_dir: str = None
    preset: str = None
    init_checkpoint: str = None
    tokenizer: str = None
    sequence_length: int = 128
    batch_size: int = 32
    predict_batch_size: int = 64
    learning_rate: float = 5e-5
    epochs: int = 3
    warmup_proportion: float = 0.1
    dropout: float = 0.1
    document_context: bool = False
    static_shapes: bool = False
    max_train_sentences: int = None
    max_eval_sentences: int = None
    no_test_each_epoch: bool = False
    strategy: str = "auto"
    mixed_precision: str = None
    seed: int = 42
    predict_text: list = dataclasses.field(default_factory=list)


def run(config):
    """Fine-tunes (unless `epochs=0`), scores dev and test, writes the outputs; returns the summary dict."""
    c = config
    setup_finetuning(seed=c.seed, mixed_precision=c.mixed_precision)
    fine_tuned = bool(c.init_checkpoint and c.init_checkpoint.endswith(".keras"))
    tokenizer = BertTokenizer.from_preset(c.tokenizer or c.preset or c.init_checkpoint)
    boundaries = None if c.static_shapes else default_boundaries(c.sequence_length, **TAGGING_BUCKETS)
    window = dict(sequence_length=c.sequence_length, document_context=c.document_context)

    files = find_split_files(c.data_dir) if c.data_dir else {}
    if fine_tuned:
        labels_path = os.path.join(os.path.dirname(os.path.abspath(c.init_checkpoint)), "labels.json")
        label_names = json.load(open(labels_path, encoding="utf-8"))
    else:
        label_names = label_vocabulary(read_conll(files["train"]))
    splits = {
        name: load_conll_split(files[name], tokenizer, label_names, max_sentences=c.max_eval_sentences, **window)
        for name in ("dev", "test") if name in files
    }

    strategy = get_strategy(c.strategy)
    with strategy.scope():
        if fine_tuned:
            model = keras.models.load_model(c.init_checkpoint)
        else:
            backbone = BertBackbone.from_preset(c.preset or c.init_checkpoint)
            model = BertTokenClassifier(backbone, len(label_names), dropout=c.dropout)

    summary = {"labels": label_names, "document_context": c.document_context}
    if c.epochs > 0:
        train = load_conll_split(files["train"], tokenizer, label_names, max_sentences=c.max_train_sentences, **window)
        train_ds = make_dataset(train.features, c.batch_size, shuffle=True, seed=c.seed, boundaries=boundaries)
        evaluated = splits if not c.no_test_each_epoch else {"dev": splits["dev"]}
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
            model_dir=c.model_dir,
            strategy=strategy,
            seed=c.seed,
            verbose=2,
        )
        train_sentences = len(train.sentences)
        summary.update(
            train_sentences=train_sentences,
            train_windows=len(train.features),
            best_epoch=fit.best_epoch,
            epoch_seconds=fit.epoch_seconds,
            train_sequences_per_second=len(train.features) * len(fit.epoch_seconds) / sum(fit.epoch_seconds),
            history={k: v for k, v in fit.history.items()},
        )
        model.save(os.path.join(c.model_dir, "model.keras"))
        atomic_write_json(os.path.join(c.model_dir, "labels.json"), label_names)

    best = evaluator.evaluations[fit.best_epoch - 1] if c.epochs > 0 else {}
    for name, split in splits.items():
        # The best epoch's weights are restored: reuse its predictions where it made them.
        evaluation = best.get(name) or evaluate_conll(model, split, label_names, c.predict_batch_size, boundaries)
        write_conll_outputs(c.model_dir, name, split, evaluation)
        summary[f"{name}_f1"] = evaluation.scores["f1"]
        summary[f"{name}_precision"] = evaluation.scores["precision"]
        summary[f"{name}_recall"] = evaluation.scores["recall"]
        summary[f"{name}_predict_seconds"] = evaluation.predict_seconds
    if c.predict_text:
        summary["entities"] = predict_entities(model, tokenizer, c.predict_text, label_names, c.sequence_length)
    return summary
