"""EntityF1: a tagger's entity-level F1 as a Keras metric, counted as `conlleval` (and seqeval's default) counts it.

`BertTokenClassifier.compile(metrics=["f1"])` gives it, so `fit` and `evaluate`
report the CoNLL-2003 score each epoch, as a Hugging Face `Trainer` does with
seqeval in `compute_metrics`. It reads what the tagger trains on: per-token
labels with -1 where no word starts ([CLS], [SEP], a word's later WordPieces,
padding) and per-token logits. Each row's labelled tokens, in order, are one
sentence's words; the chunking rules are those of `metrics/conll.py` (IOB1,
IOB2 and IOBES alike), tabulated once for every pair of tags, so the count is
a few `keras.ops` gathers and sums, on every backend and inside a traced step.
An entity is correct when the gold and the predicted one start at the same
word, end at the same word and have the same type; the counts add up over
batches, so the result is exact over everything seen (`conll_entity_scores`
on the same words gives the same F1: tested).

Example:
>>> import numpy as np
>>> metric = EntityF1(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
>>> labels = np.array([[-1, 1, 2, -1, 0, 3, -1]])  # [CLS] Ada Lovelace ##s in Paris [SEP]
>>> logits = np.eye(5)[[0, 1, 2, 0, 0, 3, 0]][None] * 5.0  # the same entities predicted
>>> metric.update_state(labels, logits)
>>> float(metric.result())
1.0
"""

import keras
import numpy as np
from keras import ops

from keras_bert_impl.metrics.conll import _ends_chunk, _starts_chunk, split_tag


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class EntityF1(keras.metrics.Metric):
    """Entity-level F1 (micro over the entity types) of a tagger's logits against its word labels (-1: no word).

    Args:
        label_names: the tagger's tags in id order (`"O"`, `"B-PER"`, ...).
        name: the metric's name in the logs.

    Example (`John Smith visited Paris`: the person found, the place tagged `O`, so precision 1 and recall 1/2):
    >>> import numpy as np
    >>> metric = EntityF1(["O", "B-PER", "I-PER", "B-LOC"])
    >>> labels = np.array([[1, 2, 0, 3, -1]])
    >>> logits = np.eye(4)[[1, 2, 0, 0, 0]][None] * 5.0
    >>> metric.update_state(labels, logits); round(float(metric.result()), 4)
    0.6667
    """

    def __init__(self, label_names, name="f1", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.label_names = [str(tag) for tag in label_names]
        tags = [split_tag(tag) for tag in self.label_names] + [("O", "")]  # the last id: the edge of a sentence
        count = len(tags)
        starts = np.zeros((count, count), "int32")
        ends = np.zeros((count, count), "int32")
        for previous, (previous_prefix, previous_type) in enumerate(tags):
            for current, (prefix, entity_type) in enumerate(tags):
                starts[previous, current] = _starts_chunk(previous_prefix, prefix, previous_type, entity_type)
                ends[previous, current] = _ends_chunk(previous_prefix, prefix, previous_type, entity_type)
        types = sorted({entity_type for _, entity_type in tags if entity_type})
        self._edge = count - 1
        self._starts = starts.ravel()  # [previous * count + current]: a chunk starts at the current tag
        self._ends = ends.ravel()  # the chunk that holds the previous tag ends before the current one
        self._types = np.array([types.index(t) if t else -1 for _, t in tags], "int32")
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.gold = self.add_variable(shape=(), initializer="zeros", name="gold_entities")
        self.predicted = self.add_variable(shape=(), initializer="zeros", name="predicted_entities")

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = ops.cast(y_true, "int32")
        labels = ops.reshape(labels, (ops.shape(y_pred)[0], -1))
        predictions = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        words = labels >= 0
        if sample_weight is not None:  # filler rows (weight 0) hold no sentence
            weight = ops.reshape(ops.cast(sample_weight, "float32"), (ops.shape(labels)[0], -1))
            words = ops.logical_and(words, ops.broadcast_to(weight > 0, ops.shape(labels)))
        length = ops.shape(labels)[1]
        positions = ops.arange(length, dtype="int32")[None, :]
        # Each row's words first, in order; the other tokens after them, read as the sentence's edge.
        order = ops.argsort(ops.where(words, positions, positions + length), axis=-1)
        gold = ops.take_along_axis(ops.where(words, labels, self._edge), order, axis=1)
        predicted = ops.take_along_axis(ops.where(words, predictions, self._edge), order, axis=1)
        gold_starts, gold_ends = self._chunk_edges(gold)
        predicted_starts, predicted_ends = self._chunk_edges(predicted)
        # An entity starting at a word is correct when both start there with one type and both end at the first
        # word where either ends.
        either_ends = ops.logical_or(gold_ends, predicted_ends)
        both_end = ops.cast(ops.logical_and(gold_ends, predicted_ends), "int32")
        ends_before = ops.cumsum(ops.cast(either_ends, "int32"), axis=1) - ops.cast(either_ends, "int32")
        end_order = ops.argsort(ops.where(either_ends, positions, positions + length), axis=-1)
        first_end_agrees = ops.take_along_axis(ops.take_along_axis(both_end, end_order, axis=1),
                                               ops.minimum(ends_before, length - 1), axis=1) > 0
        same_type = ops.equal(ops.take(self._types, gold), ops.take(self._types, predicted))
        correct = ops.logical_and(ops.logical_and(gold_starts, predicted_starts),
                                  ops.logical_and(same_type, first_end_agrees))
        self.correct.assign_add(ops.sum(ops.cast(correct, "float32")))
        self.gold.assign_add(ops.sum(ops.cast(gold_starts, "float32")))
        self.predicted.assign_add(ops.sum(ops.cast(predicted_starts, "float32")))

    def _chunk_edges(self, tags):
        """Per word: whether an entity starts there, and whether the entity holding it ends there."""
        edge = ops.full((ops.shape(tags)[0], 1), self._edge, dtype="int32")
        padded = ops.concatenate([edge, tags, edge], axis=1)
        pairs = padded[:, :-1] * (self._edge + 1) + padded[:, 1:]  # (tag before, tag) from the first word on
        starts = ops.take(self._starts, pairs)[:, :-1] > 0
        ends = ops.take(self._ends, pairs)[:, 1:] > 0
        return starts, ends

    def result(self):
        found = self.gold + self.predicted
        return ops.where(found > 0, 2.0 * self.correct / ops.maximum(found, 1.0), 0.0)

    def reset_state(self):
        for variable in (self.correct, self.gold, self.predicted):
            variable.assign(0.0)

    def get_config(self):
        return {"label_names": self.label_names, "name": self.name, "dtype": self.dtype}
