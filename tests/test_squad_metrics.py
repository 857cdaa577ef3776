"""SQuAD EM/F1: official normalisation and v2.0 logic, on hand-checked predictions."""

import gzip
import json

import pytest

from keras_bert_impl.metrics import squad as squad_metrics


@pytest.fixture(scope="module")
def first_paragraph(data_slices):
    with gzip.open(data_slices / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        data = json.load(f)["data"]
    paragraph = dict(data[0]["paragraphs"][0])
    paragraph["qas"] = paragraph["qas"][:6]
    return [{"title": data[0]["title"], "paragraphs": [paragraph]}]


def test_normalize_answer_official_rules():
    assert squad_metrics.normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert squad_metrics.normalize_answer("an apple, a pear") == "apple pear"
    assert squad_metrics.normalize_answer("Levi's Stadium") == "levis stadium"
    # Articles only as whole words.
    assert squad_metrics.normalize_answer("Theater anthem") == "theater anthem"


def test_hand_checked_predictions_on_real_dev_questions(first_paragraph):
    # Hand-computed against the official evaluate-v1.1.py rules:
    #   1 "the Denver Broncos!"  vs "Denver Broncos": EM 1, F1 1
    #   2 "Panthers"             vs "Carolina Panthers": EM 0, F1 2*(1*.5)/1.5 = 2/3
    #   3 "Levi's Stadium in the Bay Area" (5 tokens after normalisation): best gold is the
    #     third (11 tokens, 5 shared): P 1, R 5/11 -> F1 10/16 (vs "Levi's Stadium": 4/7)
    #   4 "Broncos"              vs "Denver Broncos": EM 0, F1 2/3
    #   5 "golden"               vs "gold": EM 0, F1 0
    #   6 "golden anniversary"   vs '"golden anniversary"': EM 1, F1 1
    ids = [qa["id"] for qa in first_paragraph[0]["paragraphs"][0]["qas"]]
    texts = ["the Denver Broncos!", "Panthers", "Levi's Stadium in the Bay Area", "Broncos", "golden", "golden anniversary"]
    result = squad_metrics.evaluate_v1(first_paragraph, dict(zip(ids, texts)))
    assert result["exact_match"] == pytest.approx(100 * 2 / 6)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 10 / 16 + 2 / 3 + 0 + 1) / 6)
    assert squad_metrics.f1_score(texts[2], "Levi's Stadium") == pytest.approx(4 / 7)


def test_missing_prediction_scores_zero(first_paragraph, caplog):
    qas = first_paragraph[0]["paragraphs"][0]["qas"]
    result = squad_metrics.evaluate_v1(first_paragraph, {qas[0]["id"]: "Denver Broncos"})
    assert result == {"exact_match": pytest.approx(100 / 6), "f1": pytest.approx(100 / 6)}
    assert "5 unanswered question(s) receive score 0" in caplog.text


def test_f1_empty_strings_v1_versus_v2():
    assert squad_metrics.f1_score("", "") == 0.0
    assert squad_metrics.f1_score("", "", version="2.0") == 1.0
    assert squad_metrics.f1_score("the", "", version="2.0") == 1.0  # "the" normalises to nothing
    assert squad_metrics.f1_score("cat", "", version="2.0") == 0.0


def _v2_dataset():
    qas = [
        {"id": "a", "question": "?", "answers": [{"text": "red car", "answer_start": 0}]},
        {"id": "b", "question": "?", "answers": [{"text": "blue", "answer_start": 0}]},
        {"id": "c", "question": "?", "answers": [], "is_impossible": True},
        {"id": "d", "question": "?", "answers": [], "is_impossible": True},
    ]
    return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "red car blue", "qas": qas}]}]}


def test_v2_breakdown_and_best_threshold():
    data = _v2_dataset()
    predictions = {"a": "car", "b": "blue", "c": "", "d": "blue"}
    # F1: a 2/3, b 1, c 1 (both empty), d 0. EM: 0, 1, 1, 0.
    result = squad_metrics.evaluate_v2(data, predictions)
    assert result["total"] == 4
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (2 / 3 + 1 + 1 + 0) / 4)
    assert result["HasAns_total"] == 2 and result["HasAns_exact"] == pytest.approx(50.0)
    assert result["HasAns_f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert result["NoAns_total"] == 2 and result["NoAns_exact"] == pytest.approx(50.0)

    # na_probs: d is the most confidently "no answer"; with threshold 0.5 d becomes "" (correct).
    na_probs = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.9}
    thresholded = squad_metrics.evaluate_v2(data, predictions, na_probs=na_probs, na_prob_threshold=0.5)
    assert thresholded["exact"] == pytest.approx(75.0)
    # Official find_best_thresh: start from "all no-answer" = 2 of 4 and walk up the sorted probs:
    # a +2/3, b +1, c 0 (already ""), d -1 -> best 2 + 5/3, reached at b's 0.2 (c at 0.3 adds nothing).
    assert thresholded["best_f1"] == pytest.approx(100 * (2 + 5 / 3) / 4)
    assert thresholded["best_f1_thresh"] == pytest.approx(0.2)
    assert thresholded["best_exact"] == pytest.approx(100 * 3 / 4)
    assert thresholded["best_exact_thresh"] == pytest.approx(0.2)


def test_v2_na_probs_must_cover_every_prediction():
    with pytest.raises(ValueError, match=r"`na_probs` has no value for 1 question\(s\), e.g. 'd'"):
        squad_metrics.evaluate_v2(_v2_dataset(), {"a": "", "b": "", "c": "", "d": ""}, na_probs={"a": 0, "b": 0, "c": 0})
