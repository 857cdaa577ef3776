"""Step 5, outputs: `<name>_results.json` (entity P/R/F1) and `<name>_predictions.txt` (conlleval's input).

- `write_conll_predictions(path, sentences, predicted_tags)`: `word gold
  predicted` lines that conlleval reads.
- `write_conll_outputs(model_dir, name, split, evaluation)`: both files, atomically.
"""

import os

from keras_bert_impl.checkpoints.atomic_files import atomic_write_json, atomic_write_text
from keras_bert_impl.metrics.conll import format_conlleval_report
from keras_bert_impl.tasks.tagging.reading import ConllSentence  # noqa: F401 (doctest)


def write_conll_predictions(path, sentences, predicted_tags):
    """Writes `word gold predicted` lines (blank line between sentences), atomically; conlleval reads it.

    Args:
        path: output file.
        sentences: `ConllSentence`s (gold tags).
        predicted_tags: list of lists of tag strings, one per word.

    Example:
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "pred.txt")
    >>> write_conll_predictions(p, [ConllSentence(["EU"], ["B-ORG"])], [["B-ORG"]])
    >>> open(p).read()
    'EU B-ORG B-ORG\\n\\n'
    """
    if len(sentences) != len(predicted_tags):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted_tags)} predictions.")
    lines = []
    for s, tags in zip(sentences, predicted_tags):
        if len(tags) != len(s.words):
            raise ValueError(f"{s.location()}: {len(s.words)} words but {len(tags)} predicted tags.")
        lines.extend(f"{w} {g} {p}" for w, g, p in zip(s.words, s.tags, tags))
        lines.append("")
    atomic_write_text(path, "\n".join(lines) + "\n")


def write_conll_outputs(model_dir, name, split, evaluation, extra=None):
    """Writes `<name>_results.json` and `<name>_predictions.txt` into `model_dir`, atomically.

    The JSON holds `precision`, `recall`, `f1`, `accuracy`, counts, `per_type`
    and the conlleval-style `report` text, plus `extra`.
    """
    os.makedirs(model_dir, exist_ok=True)
    results = dict(evaluation.scores)
    results["report"] = format_conlleval_report(evaluation.scores)
    results["file"] = split.path
    results["num_sentences"] = len(split.sentences)
    results["predict_seconds"] = evaluation.predict_seconds
    results.update(extra or {})
    atomic_write_json(os.path.join(model_dir, f"{name}_results.json"), results)
    write_conll_predictions(
        os.path.join(model_dir, f"{name}_predictions.txt"), split.sentences, evaluation.predicted_tags
    )
    return results


# Step 5's name in every task (`classification.write_outputs`, `tagging.write_outputs`, `span_qa.write_outputs`; docs/architecture.md).
write_outputs = write_conll_outputs
