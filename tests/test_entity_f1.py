"""EntityF1 (a tagger's `metrics=["f1"]`) equals conlleval's F1 (`conll_entity_scores`) on the same words.

Real CoNLL-2003 dev sentences: their gold tags, and predictions made by corrupting them (a tag changed, an
I- turned to B-, an entity cut short, a type swapped), laid out as the tagger sees them: [CLS], each word's
first WordPiece labelled and its later pieces -1, [SEP], padding, several sentences a batch, several batches.
IOB2 as read, and the IOB1 tags of the file (I- starting entities), on every backend.
"""

import keras
import numpy as np
import pytest

from keras_bert_impl.metrics.conll import conll_entity_scores
from keras_bert_impl.models.entity_f1 import EntityF1

pytestmark = pytest.mark.multibackend

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


def _sentences(path, count):
    sentences, words = [], []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(words)
                words = []
            continue
        words.append(line.split()[-1])
    return sentences[:count]


def _iob2(tags):
    out, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def _corrupt(tags, rng):
    tags = list(tags)
    for i in range(len(tags)):
        roll = rng.random()
        if roll < 0.04:
            tags[i] = TAGS[rng.integers(len(TAGS))]
        elif roll < 0.07 and tags[i].startswith("I-"):
            tags[i] = "B-" + tags[i][2:]
        elif roll < 0.10 and tags[i] != "O":
            tags[i] = tags[i][:2] + ["PER", "LOC", "ORG", "MISC"][rng.integers(4)]
    return tags


def _batches(gold, predicted, rng, batch_size=16, length=128):
    """(labels, logits) per batch: [CLS] pieces [SEP] padding, a word's first piece labelled, the rest -1."""
    for start in range(0, len(gold), batch_size):
        labels = np.full((batch_size, length), -1, "int32")
        logits = rng.normal(size=(batch_size, length, len(TAGS))).astype("float32")  # noise where nothing is read
        for row, (tags, guesses) in enumerate(zip(gold[start:start + batch_size], predicted[start:start + batch_size])):
            position = 1
            for tag, guess in zip(tags, guesses):
                labels[row, position] = TAGS.index(tag)
                logits[row, position] = -5.0
                logits[row, position, TAGS.index(guess)] = 5.0
                position += 1 + int(rng.integers(3))  # 0-2 later pieces of the word
        yield labels, logits


@pytest.mark.parametrize("scheme", ["iob1", "iob2"])
def test_entity_f1_is_conllevals_f1_on_real_conll_sentences(real_data, scheme):
    rng = np.random.default_rng(0)
    gold = [tags for tags in _sentences(real_data / "conll2003" / "eng.testa", 160) if len(tags) <= 40]
    if scheme == "iob2":
        gold = [_iob2(tags) for tags in gold]
    predicted = [_corrupt(tags, rng) for tags in gold]
    expected = conll_entity_scores(gold, predicted)
    assert 0.5 < expected["f1"] < 0.95 and expected["num_gold"] > 150  # the corruption leaves a real task

    metric = EntityF1(TAGS)
    for labels, logits in _batches(gold, predicted, rng):
        metric.update_state(labels, logits)
    assert float(metric.result()) == pytest.approx(expected["f1"], abs=1e-6)
    counts = [int(keras.ops.convert_to_numpy(v)) for v in (metric.correct, metric.gold, metric.predicted)]
    assert counts == [expected["num_correct"], expected["num_gold"], expected["num_predicted"]]
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_filler_rows_of_weight_zero_are_not_read():
    labels = np.array([[-1, 1, 2, -1], [-1, 1, 0, -1]], "int32")
    logits = np.eye(len(TAGS), dtype="float32")[[[0, 1, 2, 0], [0, 3, 0, 0]]]
    metric = EntityF1(TAGS)
    metric.update_state(labels, logits, sample_weight=np.array([1.0, 0.0], "float32"))
    assert float(metric.result()) == 1.0  # the second row (a wrong guess) is filler
    restored = EntityF1.from_config(metric.get_config())
    assert restored.label_names == TAGS and restored.name == "f1"
