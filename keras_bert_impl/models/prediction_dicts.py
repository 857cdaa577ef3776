"""The dicts that `predict_entities` and `answer` give: plain dicts whose Hugging Face key names ours.

transformers' pipelines call an entity's type `entity_group` and its text
`word`, and an answer's text `answer`; ours say `type` and `text` (one name
for the text of a span in every task). Reading the pipeline's key from one
of ours is a `KeyError` that names ours, instead of the bare key.
"""


class PredictionDict(dict):
    """A dict of one prediction; a missing key that is the pipeline's name of one of ours names ours.

    Example:
    >>> entity = EntityDict(text="Paris", type="LOC", start=14, end=19, score=0.99)
    >>> entity == {"text": "Paris", "type": "LOC", "start": 14, "end": 19, "score": 0.99}
    True
    >>> entity["entity_group"]  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    KeyError: "'entity_group' is the key of Hugging Face's pipeline; this entity's is 'type' (its keys: 'text',
    'type', 'start', 'end', 'score')"
    """

    kind = "prediction"
    hugging_face_keys = {}  # the pipeline's key -> ours

    def __missing__(self, key):
        ours = self.hugging_face_keys.get(key)
        if ours is None:
            raise KeyError(key)
        raise KeyError(f"{key!r} is the key of Hugging Face's pipeline; this {self.kind}'s is {ours!r} (its keys: "
                       f"{', '.join(map(repr, self))})")


class EntityDict(PredictionDict):
    """One entity of `BertTokenClassifier.predict_entities`: `text`, `type`, `start`, `end`, `score`."""

    kind = "entity"
    hugging_face_keys = {"entity_group": "type", "entity": "type", "word": "text"}


class AnswerDict(PredictionDict):
    """One answer of `BertSpanExtractor.answer`: `text`, `start`, `end`, `score` (and `null_odds`)."""

    kind = "answer"
    hugging_face_keys = {"answer": "text"}
