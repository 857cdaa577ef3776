"""CoNLL entity metrics: conlleval chunking rules and scores against hand-computed values."""

import pytest

from keras_bert_impl.metrics.conll import (
    conll_entity_scores,
    extract_entities,
    format_conlleval_report,
    split_tag,
)


@pytest.mark.parametrize(
    "tags, entities",
    [
        # IOB1: I- starts an entity; B- separates adjacent entities of one type.
        (["I-PER", "I-PER", "B-PER", "O", "I-LOC"], [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]),
        # IOB2 of the same sentence.
        (["B-PER", "I-PER", "B-PER", "O", "B-LOC"], [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]),
        # Type change without B-: two entities (IOB1 adjacent entities of different types).
        (["I-PER", "I-ORG", "I-ORG"], [("PER", 0, 1), ("ORG", 1, 3)]),
        # Ill-formed IOB2: I- of another type after B- starts a new entity (conlleval's repair).
        (["B-PER", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),
        # I- after O starts an entity; an entity at the sentence end is closed.
        (["O", "I-MISC", "O", "B-ORG", "I-ORG"], [("MISC", 1, 2), ("ORG", 3, 5)]),
        # Two adjacent single-token B- entities of one type.
        (["B-LOC", "B-LOC"], [("LOC", 0, 1), ("LOC", 1, 2)]),
        # IOBES is understood too.
        (["S-PER", "B-LOC", "E-LOC", "O"], [("PER", 0, 1), ("LOC", 1, 3)]),
        ([], []),
        (["O", "O"], []),
    ],
)
def test_extract_entities(tags, entities):
    assert extract_entities(tags) == entities


def test_scores_hand_computed_iob1():
    gold = [
        ["I-PER", "I-PER", "B-PER", "O", "I-LOC"],  # PER(0,2) PER(2,3) LOC(4,5)
        ["I-ORG", "O", "I-MISC", "I-MISC"],  # ORG(0,1) MISC(2,4)
    ]
    pred = [
        ["I-PER", "I-PER", "I-PER", "O", "I-LOC"],  # PER(0,3) wrong (merged), LOC right
        ["I-ORG", "O", "I-MISC", "B-MISC"],  # ORG right, MISC(2,3) MISC(3,4) both wrong
    ]
    scores = conll_entity_scores(gold, pred)
    # gold 5 entities, predicted 5, correct 2 (LOC, ORG)
    assert (scores["num_gold"], scores["num_predicted"], scores["num_correct"]) == (5, 5, 2)
    assert scores["precision"] == pytest.approx(2 / 5)
    assert scores["recall"] == pytest.approx(2 / 5)
    assert scores["f1"] == pytest.approx(2 / 5)
    # 9 tokens, 1 differs (B-PER vs I-PER) ... and 1 (I-MISC vs B-MISC): 7/9
    assert scores["accuracy"] == pytest.approx(7 / 9)
    per = scores["per_type"]
    assert per["PER"] == pytest.approx(
        {"precision": 0.0, "recall": 0.0, "f1": 0.0, "num_gold": 2, "num_predicted": 1, "num_correct": 0}
    )
    assert per["LOC"]["f1"] == 1.0 and per["ORG"]["f1"] == 1.0
    assert (per["MISC"]["num_gold"], per["MISC"]["num_predicted"], per["MISC"]["num_correct"]) == (1, 2, 0)


def test_scores_unequal_precision_recall():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "O", "O"]]
    scores = conll_entity_scores(gold, pred)
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 * 1.0 * (2 / 3) / (1.0 + 2 / 3))  # 0.8
    assert scores["per_type"]["ORG"]["recall"] == 0.0


def test_type_only_predicted_and_empty_predictions():
    scores = conll_entity_scores([["O", "B-PER"]], [["B-MISC", "O"]])
    assert scores["per_type"]["MISC"] == pytest.approx(
        {"precision": 0.0, "recall": 0.0, "f1": 0.0, "num_gold": 0, "num_predicted": 1, "num_correct": 0}
    )
    empty = conll_entity_scores([["B-PER"]], [["O"]])
    assert (empty["precision"], empty["recall"], empty["f1"]) == (0.0, 0.0, 0.0)


def test_entity_boundaries_do_not_cross_sentences():
    # The same tags as one sentence would be one PER entity; as two sentences they are two.
    assert conll_entity_scores([["I-PER"], ["I-PER"]], [["I-PER"], ["I-PER"]])["num_gold"] == 2
    assert conll_entity_scores([["I-PER", "I-PER"]], [["I-PER", "I-PER"]])["num_gold"] == 1


def test_report_format():
    report = format_conlleval_report(conll_entity_scores([["B-PER", "O"]], [["B-PER", "B-LOC"]]))
    assert report.splitlines()[0] == "processed 2 tokens with 1 phrases; found: 2 phrases; correct: 1."
    assert "precision:  50.00%; recall: 100.00%; FB1:  66.67" in report


@pytest.mark.parametrize("tag", ["PER", "X-PER", "B-", "b-PER", ""])
def test_bad_tag(tag):
    with pytest.raises(ValueError, match=r"Unknown tag .*expected 'O' or '<prefix>-<TYPE>'"):
        split_tag(tag)


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="Sentence 1: 2 gold tags but 1 predicted tags"):
        conll_entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="Got 1 gold sentences but 2 predicted ones"):
        conll_entity_scores([["O"]], [["O"], ["O"]])
