"""The `loss` that `evaluate` (and `fit`) reports is the mean over the real examples, filler rows not counted.

Raw strings become length-bucketed batches filled to one size with filler rows
(weight 0 or label -1). The reference here is computed apart from Keras's
trackers: every batch of the same dataset through `predict_on_batch`, the
per-example (per-token) cross-entropy in float64 NumPy, summed and divided by
the real examples' weights (the labelled tokens). Real data: SST-2 dev sentences,
CoNLL-2003 testa sentences and SQuAD dev questions; the real all-MiniLM-L6-v2 backbone with a new head.
"""

import csv
import gzip
import json

import keras
import numpy as np
import pytest

from keras_bert_impl import BertClassifier, BertSpanExtractor, BertTokenClassifier

pytestmark = pytest.mark.multibackend

PRESET = "all_minilm_l6_v2_en"
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


def _spread_out(task):
    """Scales the new head's kernel up 100x: an untrained head's losses all sit near ln(classes), which would make any
    weighing of the batches give nearly the same mean."""
    head = task.get_layer("logits")
    head.kernel.assign(head.kernel * 100.0)
    return task


def _cross_entropy(logits, labels):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_probabilities, np.maximum(labels, 0)[..., None], axis=-1)[..., 0]


def _batches(dataset):
    return [keras.tree.map_structure(np.asarray, batch) for batch in dataset.as_numpy_iterator()]


@pytest.mark.slow
def test_a_classifiers_evaluate_loss_is_the_weighted_mean_over_the_real_examples(shared_data):
    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:41]
    texts, labels = [row[0] for row in rows], np.array([int(row[1]) for row in rows])
    weights = np.linspace(0.5, 2.0, len(texts))
    keras.utils.set_random_seed(0)
    classifier = _spread_out(BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32))

    batches = _batches(classifier.preprocessor.make_dataset(texts, labels, weights, batch_size=16))
    assert sum(len(w) for _, _, w in batches) > len(texts)  # the buckets' last batches hold filler rows
    total = sum(float((w * _cross_entropy(classifier.predict_on_batch(x), y)).sum()) for x, y, w in batches)
    expected = total / weights.sum()

    reported = classifier.evaluate(texts, labels, sample_weight=weights, batch_size=16, verbose=0,
                                   return_dict=True)["loss"]
    assert reported == pytest.approx(expected, abs=1e-5)

    # Keras's own tracker weighs each batch by its rows, filler rows included: visibly not the same number.
    classifier.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                       reduction="mean_with_sample_weight"))
    by_rows = classifier.evaluate(texts, labels, sample_weight=weights, batch_size=16, verbose=0,
                                  return_dict=True)["loss"]
    assert abs(by_rows - expected) > 1e-3, (by_rows, expected)


@pytest.mark.slow
def test_a_taggers_evaluate_loss_is_the_mean_over_the_labelled_words(shared_data):
    sentences, words = [], []
    with open(shared_data / "conll2003" / "eng.testa", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                if words:
                    sentences.append(words)
                words = []
            else:
                words.append((parts[0], parts[-1]))
            if len(sentences) == 20:
                break
    tokens = [[word for word, _ in sentence] for sentence in sentences]
    tags = [[tag for _, tag in sentence] for sentence in sentences]
    keras.utils.set_random_seed(0)
    tagger = _spread_out(BertTokenClassifier.from_preset(PRESET, label_names=CONLL_TAGS, sequence_length=32))

    label_ids = [[CONLL_TAGS.index(tag) for tag in sentence] for sentence in tags]
    batches = _batches(tagger.preprocessor.make_dataset(tokens, label_ids, batch_size=8))
    total, labelled = 0.0, 0
    for batch in batches:
        x, y = batch[0], batch[1]
        total += float((_cross_entropy(tagger.predict_on_batch(x), y) * (y != -1)).sum())
        labelled += int((y != -1).sum())
    assert sum(len(batch[1]) for batch in batches) % 8 == 0  # filled batches (the last rows of some are filler)

    reported = tagger.evaluate(tokens, tags, batch_size=8, verbose=0, return_dict=True)["loss"]
    assert reported == pytest.approx(total / labelled, abs=1e-5)


@pytest.mark.slow
def test_a_span_extractors_evaluate_loss_is_the_mean_over_the_real_windows(data_slices):
    with gzip.open(data_slices / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        paragraphs = [p for article in json.load(f)["data"] for p in article["paragraphs"]]
    questions, contexts, answers = [], [], []
    for paragraph in paragraphs[:6]:
        for qa in paragraph["qas"][:2]:
            questions.append(qa["question"])
            contexts.append(paragraph["context"])
            answers.append({"text": qa["answers"][0]["text"], "start": qa["answers"][0]["answer_start"]})
    keras.utils.set_random_seed(0)
    extractor = BertSpanExtractor.from_preset(PRESET, sequence_length=64, doc_stride=24)

    batches = _batches(extractor.preprocessor.make_dataset((questions, contexts), answers, batch_size=8))
    total, windows = 0.0, 0
    for x, y, w in batches:
        logits = extractor.predict_on_batch(x)
        real = y["start_logits"] >= 0
        for name in ("start_logits", "end_logits"):  # half the cross-entropy of each boundary
            total += float((0.5 * w * _cross_entropy(logits[name], y[name]) * real).sum())
        windows += int(real.sum())
    assert sum(len(w) for _, _, w in batches) > windows  # the last batch holds filler rows

    reported = extractor.evaluate((questions, contexts), answers, batch_size=8, verbose=0,
                                  return_dict=True)["loss"]
    assert reported == pytest.approx(total / windows, abs=1e-4)


@pytest.mark.slow
def test_finetune_keeps_the_tasks_reported_loss(shared_data):
    """`finetune` re-compiles with its optimizer; a task compiled with `loss="auto"` keeps it, so `val_loss` (the
    default `monitor` of the best epoch) is also the mean over the real examples."""
    from keras_bert_impl.training.finetuning import finetune

    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:41]
    texts, labels = [row[0] for row in rows], np.array([int(row[1]) for row in rows])
    keras.utils.set_random_seed(0)
    classifier = _spread_out(BertClassifier.from_preset(PRESET, num_classes=2, sequence_length=32))
    dev = classifier.preprocessor.make_dataset(texts, labels, batch_size=16)
    batches = _batches(dev)
    expected = sum(float((w * _cross_entropy(classifier.predict_on_batch(x), y)).sum()) for x, y, w in batches)
    expected /= len(texts)

    result = finetune(classifier, classifier.preprocessor.make_dataset(texts[:16], labels[:16], batch_size=16),
                      epochs=1, learning_rate=1e-12, validation_ds=dev, verbose=0)
    assert result.history["val_loss"][-1] == pytest.approx(expected, abs=1e-5)
    assert classifier.compiled_with_default_loss
