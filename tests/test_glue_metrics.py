"""GLUE metrics equal scikit-learn / SciPy on fixed arrays (including real STS-B dev scores)."""

import csv

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from keras_bert_impl.metrics import glue

RNG = np.random.default_rng(1234)
BINARY_LABELS = RNG.integers(0, 2, size=500)
BINARY_PREDICTIONS = np.where(RNG.random(500) < 0.7, BINARY_LABELS, 1 - BINARY_LABELS)
THREE_CLASS_LABELS = RNG.integers(0, 3, size=300)
THREE_CLASS_PREDICTIONS = np.where(RNG.random(300) < 0.6, THREE_CLASS_LABELS, RNG.integers(0, 3, size=300))


def test_accuracy_f1_mcc_match_sklearn():
    assert glue.accuracy(BINARY_LABELS, BINARY_PREDICTIONS) == pytest.approx(
        sklearn.metrics.accuracy_score(BINARY_LABELS, BINARY_PREDICTIONS), abs=1e-12)
    assert glue.f1_score(BINARY_LABELS, BINARY_PREDICTIONS) == pytest.approx(
        sklearn.metrics.f1_score(BINARY_LABELS, BINARY_PREDICTIONS), abs=1e-12)
    assert glue.matthews_corrcoef(BINARY_LABELS, BINARY_PREDICTIONS) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(BINARY_LABELS, BINARY_PREDICTIONS), abs=1e-12)
    assert glue.matthews_corrcoef(THREE_CLASS_LABELS, THREE_CLASS_PREDICTIONS) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(THREE_CLASS_LABELS, THREE_CLASS_PREDICTIONS), abs=1e-12)


def test_degenerate_cases_match_sklearn():
    all_ones = np.ones(10, int)
    assert glue.matthews_corrcoef(all_ones, all_ones) == sklearn.metrics.matthews_corrcoef(all_ones, all_ones) == 0.0
    zeros = np.zeros(10, int)
    assert glue.f1_score(zeros, zeros) == sklearn.metrics.f1_score(zeros, zeros, zero_division=0.0) == 0.0
    assert np.isnan(glue.pearson(np.ones(5), np.arange(5.0)))


def test_pearson_spearman_match_scipy_on_real_stsb_scores(data_slices):
    with open(data_slices / "glue" / "STS-B" / "dev.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    scores = np.array([float(r[-1]) for r in rows])  # many ties (0.0, 5.0, ...)
    noisy = np.round(scores + RNG.normal(0, 1.0, size=scores.size), 1)
    assert glue.pearson(scores, noisy) == pytest.approx(scipy.stats.pearsonr(scores, noisy)[0], abs=1e-12)
    assert glue.spearman(scores, noisy) == pytest.approx(scipy.stats.spearmanr(scores, noisy)[0], abs=1e-12)
    np.testing.assert_allclose(glue.rankdata(noisy), scipy.stats.rankdata(noisy))


def test_task_metrics_and_score():
    metrics = glue.glue_metrics("mrpc", BINARY_LABELS, BINARY_PREDICTIONS)
    assert list(metrics) == ["f1", "accuracy"]
    assert glue.glue_score("mrpc", metrics) == pytest.approx((metrics["f1"] + metrics["accuracy"]) / 2)
    assert list(glue.glue_metrics("cola", BINARY_LABELS, BINARY_PREDICTIONS)) == ["matthews_corrcoef"]
    assert list(glue.glue_metrics("stsb", [0.0, 1.0, 2.0], [0.1, 0.9, 2.5])) == ["pearson", "spearman"]


def test_bad_input_messages():
    with pytest.raises(ValueError, match="Unknown GLUE task 'mnlii': expected one of"):
        glue.glue_metrics("mnlii", [1], [1])
    with pytest.raises(ValueError, match="differ in length: 2 vs 3"):
        glue.accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="empty"):
        glue.accuracy([], [])
    with pytest.raises(ValueError, match="must be 1-D"):
        glue.pearson([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="lack \\['spearman'\\]"):
        glue.glue_score("stsb", {"pearson": 0.9})
