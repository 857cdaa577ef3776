"""CoNLL-2003 entity-level precision, recall and F1, computed as `conlleval` computes them.

Pure Python (no TensorFlow, no NumPy needed). Tags are strings such as
`"B-PER"`, `"I-LOC"`, `"O"`; the IOBES prefixes `E-` and `S-` are understood too.

Chunking follows `conlleval` (the Perl script of the CoNLL-2000/2003 shared
tasks), which reads IOB1 and IOB2 alike:

- an entity starts at `B-X`, at `S-X`, at an `I-X` or `E-X` that follows `O`
  (IOB1: "I- starting an entity"; in IOB2 this is ill-formed and conlleval
  repairs it the same way), and at any tag whose type differs from the
  previous token's type;
- an entity ends before `B-`, `S-` and `O`, after `E-` and `S-`, and where the
  type changes. So `I-PER I-PER B-PER` is two PER entities (IOB1 adjacent
  entities of one type), and `B-PER I-LOC` is two entities.

An entity counts as correct when the gold and the predicted entity start at
the same token, end at the same token and have the same type. Sentence
boundaries end every entity (as the blank lines in conlleval's input do).
"""

import collections

_PREFIXES = ("B", "I", "E", "S")


def split_tag(tag):
    """Splits a tag into `(prefix, type)`: `"B-PER"` -> `("B", "PER")`, `"O"` -> `("O", "")`.

    Args:
        tag: str. `"O"` or `"<prefix>-<type>"` with prefix one of B, I, E, S.

    Raises:
        ValueError: the tag has another shape, naming the tag.

    Example:
    >>> split_tag("I-MISC")
    ('I', 'MISC')
    """
    if tag == "O":
        return "O", ""
    prefix, dash, entity_type = tag.partition("-")
    if dash != "-" or prefix not in _PREFIXES or not entity_type:
        raise ValueError(
            f"Unknown tag {tag!r}: expected 'O' or '<prefix>-<TYPE>' with prefix one of "
            f"{', '.join(_PREFIXES)} (e.g. 'B-PER', 'I-LOC')."
        )
    return prefix, entity_type


def _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
    """conlleval's endOfChunk: does the chunk that holds the previous token end before this one?"""
    if prev_prefix == "O":
        return False
    if prev_prefix in ("E", "S"):
        return True
    if prefix in ("B", "S", "O"):
        return True
    return prev_type != entity_type


def _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
    """conlleval's startOfChunk: does a chunk start at this token?"""
    if prefix == "O":
        return False
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("O", "E", "S"):
        return True
    return prev_type != entity_type


def extract_entities(tags):
    """Entities of one sentence as `(type, start, end)` with `end` exclusive, by conlleval's rules.

    Args:
        tags: sequence of tag strings of one sentence (IOB1, IOB2 or IOBES).

    Returns:
        list of `(type, start, end)` tuples in order of `start`.

    Example:
    >>> extract_entities(["I-PER", "I-PER", "B-PER", "O", "I-LOC"])
    [('PER', 0, 2), ('PER', 2, 3), ('LOC', 4, 5)]
    """
    entities = []
    prev_prefix, prev_type, start = "O", "", None
    for position, tag in enumerate(list(tags) + ["O"]):
        prefix, entity_type = split_tag(tag)
        if start is not None and _ends_chunk(prev_prefix, prefix, prev_type, entity_type):
            entities.append((prev_type, start, position))
            start = None
        if _starts_chunk(prev_prefix, prefix, prev_type, entity_type):
            start = position
        prev_prefix, prev_type = prefix, entity_type
    return entities


def _prf(correct, found_pred, found_gold):
    precision = correct / found_pred if found_pred else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "num_gold": found_gold,
        "num_predicted": found_pred,
        "num_correct": correct,
    }


def conll_entity_scores(gold_sentences, predicted_sentences):
    """Entity precision, recall and F1 (micro over all types, and per type) as conlleval reports them.

    Scores are fractions in [0, 1] (conlleval prints them times 100). A type
    that occurs only in the predictions gets precision 0 and recall 0.

    Args:
        gold_sentences: list of sentences, each a list of gold tag strings.
        predicted_sentences: list of sentences of predicted tags, same lengths.

    Returns:
        dict with `precision`, `recall`, `f1`, `accuracy` (token accuracy,
        conlleval's "accuracy"), `num_gold`, `num_predicted`, `num_correct`,
        `num_tokens`, and `per_type`: `{type: {precision, recall, f1, num_gold,
        num_predicted, num_correct}}`.

    Raises:
        ValueError: sentence counts or lengths differ (naming the sentence), or
            a tag is not a valid tag.

    Example:
    >>> gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> pred = [["B-PER", "I-PER", "O", "B-ORG"]]
    >>> scores = conll_entity_scores(gold, pred)
    >>> round(scores["f1"], 3), scores["per_type"]["PER"]["f1"]
    (0.5, 1.0)
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError(
            f"Got {len(gold_sentences)} gold sentences but {len(predicted_sentences)} predicted ones."
        )
    correct = collections.Counter()
    found_gold = collections.Counter()
    found_pred = collections.Counter()
    num_tokens = correct_tokens = 0
    for index, (gold, pred) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(pred):
            raise ValueError(
                f"Sentence {index}: {len(gold)} gold tags but {len(pred)} predicted tags."
            )
        gold_entities = set(extract_entities(gold))
        pred_entities = set(extract_entities(pred))
        for entity_type, _, _ in gold_entities:
            found_gold[entity_type] += 1
        for entity_type, _, _ in pred_entities:
            found_pred[entity_type] += 1
        for entity_type, _, _ in gold_entities & pred_entities:
            correct[entity_type] += 1
        num_tokens += len(gold)
        correct_tokens += sum(g == p for g, p in zip(gold, pred))
    scores = _prf(sum(correct.values()), sum(found_pred.values()), sum(found_gold.values()))
    scores["accuracy"] = correct_tokens / num_tokens if num_tokens else 0.0
    scores["num_tokens"] = num_tokens
    types = sorted(set(found_gold) | set(found_pred))
    scores["per_type"] = {t: _prf(correct[t], found_pred[t], found_gold[t]) for t in types}
    return scores


def format_conlleval_report(scores):
    """The scores as conlleval prints them (percentages, two decimals).

    Example:
    >>> print(format_conlleval_report(conll_entity_scores([["B-PER"]], [["B-PER"]])))
    processed 1 tokens with 1 phrases; found: 1 phrases; correct: 1.
    accuracy: 100.00%; precision: 100.00%; recall: 100.00%; FB1: 100.00
                  PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1
    """
    lines = [
        f"processed {scores['num_tokens']} tokens with {scores['num_gold']} phrases; "
        f"found: {scores['num_predicted']} phrases; correct: {scores['num_correct']}.",
        f"accuracy: {100 * scores['accuracy']:6.2f}%; precision: {100 * scores['precision']:6.2f}%; "
        f"recall: {100 * scores['recall']:6.2f}%; FB1: {100 * scores['f1']:6.2f}",
    ]
    for entity_type, s in scores["per_type"].items():
        lines.append(
            f"{entity_type:>17}: precision: {100 * s['precision']:6.2f}%; recall: {100 * s['recall']:6.2f}%; "
            f"FB1: {100 * s['f1']:6.2f}  {s['num_predicted']}"
        )
    return "\n".join(lines)
