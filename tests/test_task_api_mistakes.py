"""Mistakes of the task API's arguments are one line naming the argument and what was expected, on every backend.

Each case was, before, a framework traceback (Keras's `KeyError: 'pop from an empty set'`, `'int' object is not
iterable`, an `Unrecognized data type` that printed every string), a misleading count (`4 questions but 2
answers` for Hugging Face's answer columns), or a silent mistake (a `.h5` file that no `load_model` reads back).
Real text: the SQuAD v1.1 dev slice and the STS-B slice of tests/data/slices.
"""

import csv
import gzip
import json

import keras
import numpy as np
import pytest

from keras_bert_impl import (
    BertBackbone,
    BertClassifier,
    BertClassifierPreprocessor,
    BertSpanExtractor,
    BertSpanExtractorPreprocessor,
    BertTokenClassifier,
    BertTokenClassifierPreprocessor,
)
from keras_bert_impl.text.span_extractor_preprocessor import answers_per_question

pytestmark = pytest.mark.multibackend
PRESET = "all_minilm_l6_v2_en"


def _tiny_backbone():
    return BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                        max_sequence_length=128)


@pytest.fixture(scope="module")
def squad_questions(data_slices):
    with gzip.open(data_slices / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        paragraphs = [p for article in json.load(f)["data"] for p in article["paragraphs"]][:4]
    questions = [p["qas"][0]["question"] for p in paragraphs]
    contexts = [p["context"] for p in paragraphs]
    answers = [p["qas"][0]["answers"][0] for p in paragraphs]
    return questions, contexts, answers


@pytest.fixture(scope="module")
def sentences(data_slices):
    with open(data_slices / "glue" / "STS-B" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:8]
    return [row["sentence1"] for row in rows]


@pytest.fixture(scope="module")
def qa():
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=128, doc_stride=64)
    return BertSpanExtractor(_tiny_backbone(), preprocessor=preprocessor)


@pytest.fixture(scope="module")
def classifier():
    return BertClassifier(_tiny_backbone(), num_classes=2,
                          preprocessor=BertClassifierPreprocessor.from_preset(PRESET, sequence_length=32))


@pytest.mark.slow
def test_span_answers_as_hugging_face_columns_are_one_answer_per_question(qa, squad_questions):
    questions, contexts, answers = squad_questions
    columns = {"text": [a["text"] for a in answers], "answer_start": [a["answer_start"] for a in answers]}
    as_columns = qa.preprocessor.windows(questions, contexts, answers_per_question(columns, len(questions))).labels
    as_list = qa.preprocessor.windows(questions, contexts, answers).labels
    for key in as_list:
        np.testing.assert_array_equal(as_columns[key], as_list[key])
    qa.compile(optimizer="adam")
    history = qa.fit(x=(questions, contexts), y=columns, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_span_answers_as_token_positions_or_uneven_columns_are_refused(qa, squad_questions):
    questions, contexts, _ = squad_questions
    with pytest.raises(ValueError) as error:
        qa.fit(x=(questions, contexts), y={"start_positions": [1, 2, 3, 4], "end_positions": [2, 3, 4, 5]})
    assert str(error.value).startswith("`y` holds token positions (end_positions, start_positions): raw text is "
                                       "labelled by its answers' text")
    with pytest.raises(ValueError) as error:
        qa.fit(x=(questions, contexts), y={"text": ["a", "b"], "answer_start": [0, 1]})
    assert str(error.value) == ("`y` is a dict of columns: each must hold one entry per question (4), got text: 2, "
                                "answer_start: 2.")


def test_questions_and_contexts_the_other_way_round_are_named(qa, squad_questions):
    questions, contexts, answers = squad_questions
    texts = [a["text"] for a in answers]
    with pytest.raises(ValueError) as error:
        qa.fit(x=(contexts, questions), y=texts, batch_size=4, epochs=1, verbose=0)
    message = str(error.value)
    assert message.startswith(f"answer 0 {texts[0]!r} is not in its context: ")
    assert message.endswith("It is in question 0: are the questions and the contexts the other way round? x is "
                            "(questions, contexts).")


def test_answer_with_a_context_that_is_not_text(qa, squad_questions):
    questions, _, _ = squad_questions
    with pytest.raises(TypeError) as error:
        qa.answer(questions[0], 5)
    assert str(error.value) == "answer(): `context` must be a string or a list of strings, got int 5."


def test_predict_none_and_save_h5_are_refused(classifier, tmp_path):
    with pytest.raises(ValueError) as error:
        classifier.predict(None)
    assert str(error.value).startswith("BertClassifier.predict: `x` is None; give the examples")
    path = tmp_path / "model.h5"
    with pytest.raises(ValueError) as error:
        classifier.save(str(path))
    assert str(error.value).startswith(f"BertClassifier.save({str(path)!r}): a task model is saved as a .keras file")
    assert not path.exists()


def test_classifier_argument_mistakes(classifier, sentences):
    classifier.compile(optimizer="adam")
    labels = [0, 1] * 4
    with pytest.raises(ValueError) as error:
        classifier.fit(sentences, labels, validation_data={"text": sentences, "label": labels}, verbose=0)
    assert str(error.value).startswith("`validation_data` is a dict with keys ['label', 'text']: raw text is a "
                                       "tuple (texts, labels)")
    with pytest.raises(ValueError) as error:
        classifier.fit(sentences[:3], [[0, 1], [1], [0]], verbose=0)
    assert str(error.value) == ("Example 0: label [0, 1] is not a class id (int) or a label name (str). Several "
                                "labels per example need a multi_label=True classifier.")
    with pytest.raises(ValueError) as error:
        classifier.fit(sentences[0], labels, verbose=0)
    assert str(error.value).endswith("`x` is one example (a single string): give the texts as a list.")
    # keras-hub refuses a tuple of two strings; ours reads it as one sentence pair, which the message now says (it
    # said only "`y` must hold one value ... per example (1), got shape (2,)").
    with pytest.raises(ValueError) as error:
        classifier.fit(("a fine film", "dull"), [1, 0], verbose=0)
    assert str(error.value) == (
        "`y` must hold one value (or one row of values) per example (1), got shape (2,). `x` is one example (a tuple "
        "of two strings is one sentence pair): give several texts as a list, [text, text], and several pairs as "
        "(texts_a, texts_b).")


def test_a_regression_on_labels_that_are_all_0_or_1_warns(sentences):
    regressor = BertClassifier(_tiny_backbone(), num_classes=1,
                               preprocessor=BertClassifierPreprocessor.from_preset(PRESET, sequence_length=32))
    with pytest.warns(UserWarning, match="num_classes=1 is regression .* build the classifier with num_classes=2"):
        regressor.label_ids([0, 1, 1, 0])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        regressor.label_ids([0.0, 1.0, 1.0])  # float scores are a regression's own: no warning
        regressor.label_ids([3.6, 0, 5])


def test_a_tagger_word_without_tokens_is_refused():
    preprocessor = BertTokenClassifierPreprocessor.from_preset(PRESET, sequence_length=32)
    tagger = BertTokenClassifier(_tiny_backbone(), num_classes=3, label_names=["O", "B-PER", "I-PER"],
                                 preprocessor=preprocessor)
    tagger.compile(optimizer="adam")
    words = [["Peyton", "", "Manning", "played"], ["Denver", "won"]]
    tags = [["B-PER", "O", "I-PER", "O"], ["O", "O"]]
    with pytest.raises(ValueError) as error:
        tagger.fit(words, tags, verbose=0)
    assert str(error.value) == ("Example 0: word 1 is '', which has no tokens, so its tag could not be learned: "
                                "leave the word and its tag out.")
    keras.utils.set_random_seed(0)
    # A word of a zero-width or control character has no tokens either (before: its tag was dropped, silently).
    with pytest.raises(ValueError) as error:
        tagger.fit([["Peyton", "\u200b", "Manning"]], [["B-PER", "O", "I-PER"]], verbose=0)
    assert str(error.value) == ("Example 0: word 1 is '\\u200b', which has no tokens, so its tag could not be "
                                "learned: leave the word and its tag out.")
