"""Step 4, evaluation: conlleval's entity P/R/F1 on a split (the scorer is `keras_bert_impl.metrics.conll`).

- `load_conll_split(path, tokenizer, label_names, ...)`: read + encode one file (a `ConllSplit`).
- `evaluate_conll(model, split, label_names)`: predicted tags of every word
  and conlleval's entity P/R/F1 (micro and per type).
- `ConllEpochEvaluator(splits, label_names)`: an `eval_fn` for
  `keras_bert_impl.training.finetuning.finetune` that scores dev (and test)
  after every epoch (`dev_f1`, `dev_precision`, `dev_recall`, `test_f1`, ...)
  and keeps the predictions of every epoch.

Example:
>>> dev = load_conll_split("eng.testa", tokenizer, labels)  # doctest: +SKIP
>>> evaluate_conll(model, dev, labels).scores["f1"]  # doctest: +SKIP
0.95
"""

import dataclasses
import os
import time

from keras_bert_impl.metrics.conll import conll_entity_scores
from keras_bert_impl.tasks.tagging.features import encode_examples
from keras_bert_impl.tasks.tagging.prediction import predict_word_tags
from keras_bert_impl.tasks.tagging.reading import label_vocabulary, num_documents, read_conll


@dataclasses.dataclass
class ConllSplit:
    """Sentences of one file and their model windows.

    Attributes:
        path: the file.
        sentences: list of `ConllSentence` (IOB2 tags).
        features: `ConllFeatures`.
    """

    path: str
    sentences: list
    features: object

    @property
    def num_documents(self):
        return num_documents(self.sentences)


@dataclasses.dataclass
class ConllEvaluation:
    """Predictions and conlleval scores of one split.

    Attributes:
        scores: `conll_entity_scores` output (fractions; per type under `per_type`).
        predicted_tags: list of lists of tags, one per word.
        predict_seconds: wall time of prediction.
    """

    scores: dict
    predicted_tags: list
    predict_seconds: float


def load_conll_split(
    path,
    tokenizer,
    label_names=None,
    sequence_length=128,
    document_context=False,
    max_sentences=None,
    tag_scheme="iob1",
):
    """Reads a CoNLL file and encodes its windows.

    Args:
        path: CoNLL column file.
        tokenizer: `BertTokenizer`.
        label_names: tags; None means `label_vocabulary` of this file.
        sequence_length: window size.
        document_context: fill windows with neighbouring sentences of the document.
        max_sentences: None, or keep only the first N sentences (a documented subset).
        tag_scheme: `"iob1"` (the original files) or `"iob2"`.

    Returns:
        `ConllSplit`.
    """
    sentences = read_conll(path, tag_scheme=tag_scheme)
    if max_sentences is not None:
        sentences = sentences[:max_sentences]
    if label_names is None:
        label_names = label_vocabulary(sentences)
    features = encode_examples(
        sentences, tokenizer, label_names, sequence_length, document_context=document_context
    )
    return ConllSplit(os.fspath(path), sentences, features)


def evaluate_conll(model, split, label_names, batch_size=64, boundaries=None):
    """Predicts every word of `split` and scores the entities with conlleval's rules.

    Returns:
        `ConllEvaluation`.
    """
    start = time.perf_counter()
    predicted = predict_word_tags(
        model, split.features, split.sentences, label_names, batch_size=batch_size, boundaries=boundaries
    )
    seconds = time.perf_counter() - start
    scores = conll_entity_scores([s.tags for s in split.sentences], predicted)
    return ConllEvaluation(scores, predicted, seconds)


class ConllEpochEvaluator:
    """An `eval_fn(model)` for `finetune`: entity P/R/F1 on each named split after every epoch.

    Returns `{"<name>_f1", "<name>_precision", "<name>_recall"}` to `finetune`
    (use `monitor="dev_f1"`) and keeps each epoch's `ConllEvaluation`s in
    `evaluations` (a dict epoch -> {name: evaluation}), so the best
    epoch's predictions need not be computed again.

    Args:
        splits: dict name -> `ConllSplit`, e.g. `{"dev": dev, "test": test}`.
        label_names: tags.
        batch_size, boundaries: prediction batching (see `predict_word_tags`).
        on_epoch: optional callable `on_epoch(results_dict)` (e.g. print).

    Example:
    >>> evaluator = ConllEpochEvaluator({"dev": dev}, labels)  # doctest: +SKIP
    >>> finetune(model, train_ds, epochs=3, learning_rate=5e-5, eval_fn=evaluator, monitor="dev_f1")  # doctest: +SKIP
    """

    def __init__(self, splits, label_names, batch_size=64, boundaries=None, on_epoch=None):
        self.splits = dict(splits)
        self.label_names = list(label_names)
        self.batch_size = batch_size
        self.boundaries = boundaries
        self.on_epoch = on_epoch
        self.evaluations = {}  # epoch (counted from the run's start) -> {name: ConllEvaluation}

    def of_epoch(self, epoch):
        """The `{name: ConllEvaluation}` of `epoch` (counted from the run's start), or `{}` where this evaluator did
        not run it (a resumed run's earlier epochs: their predictions are made again from the restored weights)."""
        return self.evaluations.get(epoch, {})

    def __call__(self, model, epoch=None):
        """Scores `model` after `epoch` (`finetune` says which; counted on from the last one alone)."""
        epoch = epoch if epoch is not None else max(self.evaluations, default=0) + 1
        results, evaluations = {}, {}
        for name, split in self.splits.items():
            evaluation = evaluate_conll(model, split, self.label_names, self.batch_size, self.boundaries)
            evaluations[name] = evaluation
            results[f"{name}_f1"] = evaluation.scores["f1"]
            results[f"{name}_precision"] = evaluation.scores["precision"]
            results[f"{name}_recall"] = evaluation.scores["recall"]
        self.evaluations[epoch] = evaluations
        if self.on_epoch is not None:
            self.on_epoch(dict(results, epoch=epoch))
        return results


# Step 4's name in every task (`classification.evaluate`, `tagging.evaluate`, `span_qa.evaluate`; docs/architecture.md).
evaluate = evaluate_conll
