"""Span QA on raw strings: `BertSpanExtractor.fit(x=(questions, contexts), y=answers)`, on every backend.

The reference for the labels is the SQuAD features path (`tasks/span_qa/features.py`, google-research/bert's
windows, whose dev scores match the official script): on every question of the real SQuAD v1.1 dev slice
(tests/data/slices, its first two articles) the raw-text windows are the same rows with the same labels.
"""

import gzip
import json

import keras
import numpy as np
import pytest

import keras_bert_impl
from keras_bert_impl import BertSpanExtractor, BertSpanExtractorPreprocessor
from keras_bert_impl.tasks import span_qa
from keras_bert_impl.text.span_extractor_preprocessor import answer_character_spans

PRESET = "all_minilm_l6_v2_en"


@pytest.fixture(scope="module")
def squad_slice(data_slices):
    return data_slices / "squad" / "dev-v1.1.json.gz"


def _paragraphs(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [p for article in json.load(f)["data"] for p in article["paragraphs"]]


@pytest.mark.parametrize("sequence_length, doc_stride", [(384, 128), (96, 32)])
def test_raw_text_windows_are_the_squad_features_with_the_same_labels(squad_slice, sequence_length, doc_stride):
    examples, _ = span_qa.read_squad_examples(squad_slice, is_training=True)
    preprocessor = BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=sequence_length, doc_stride=doc_stride, max_question_length=64)
    reference = span_qa.encode_examples(
        examples, preprocessor.tokenizer, sequence_length=sequence_length, doc_stride=doc_stride,
        max_question_length=64, is_training=True)
    answers = [{"text": e.answers[0][0], "start": e.answers[0][1]} for e in examples]
    windows = preprocessor.windows([e.question for e in examples], [e.context for e in examples], answers)

    assert len(windows.example) == len(reference) > len(examples)  # long contexts give several windows
    np.testing.assert_array_equal(windows.example, reference.example_index)
    for key, value in reference.inputs().items():
        np.testing.assert_array_equal(windows.features[key], value, err_msg=key)
    np.testing.assert_array_equal(windows.lengths, reference.lengths)
    np.testing.assert_array_equal(windows.labels["start_logits"], reference.start_positions)
    np.testing.assert_array_equal(windows.labels["end_logits"], reference.end_positions)
    # The labelled tokens cover the gold answer's characters (whole tokens: "gold" is labelled "golden").
    labelled = np.nonzero(windows.labels["start_logits"])[0]
    assert len(labelled) >= len(examples)
    for w in labelled:
        i, first = windows.example[w], windows.context_start[w]
        start = windows.char_starts[i][windows.token_index[w][windows.labels["start_logits"][w] - first]]
        end = windows.char_ends[i][windows.token_index[w][windows.labels["end_logits"][w] - first]]
        text, answer_start = examples[i].answers[0]
        assert start <= answer_start < end and answer_start + len(text) <= end
        assert text.lower() in examples[i].context[start:end].lower()


def test_every_answer_form_gives_the_same_labels():
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=24, doc_stride=6)
    question = "Where did Zoë open her café?"
    context = "In 2019 Zoë opened a café in Tōkyō, near the station; a second one followed in Ōsaka in 2021."
    start = context.index("Tōkyō")
    forms = ["Tōkyō", {"text": "Tōkyō", "start": start}, {"text": ["Tōkyō", "in Tōkyō"], "answer_start": [start, 0]},
             ("Tōkyō", start), {"text": "Tōkyō", "answer_start": start},
             [{"text": "Tōkyō", "answer_start": start}, {"text": "in Tōkyō", "answer_start": start - 3}]]
    labels = [preprocessor.windows([question], [context], [form]).labels for form in forms]
    starts = labels[0]["start_logits"]
    assert len(starts) > 1 and (starts > 0).sum() >= 1  # several windows, and the answer lies in at least one
    for other in labels[1:]:
        np.testing.assert_array_equal(other["start_logits"], starts)
        np.testing.assert_array_equal(other["end_logits"], labels[0]["end_logits"])
    # An offset read from a CSV file is a string of digits: read as the number (as a class id "1" is).
    from_csv = preprocessor.windows([question], [context], [{"text": "Tōkyō", "answer_start": str(start)}]).labels
    np.testing.assert_array_equal(from_csv["start_logits"], labels[0]["start_logits"])
    for no_answer in ("", None, {"text": [], "answer_start": []}, []):
        empty = preprocessor.windows([question], [context], [no_answer]).labels
        assert not empty["start_logits"].any() and not empty["end_logits"].any()  # [CLS] in every window


@pytest.mark.parametrize(
    "answers, message",
    [
        (["Paris"], "answer 0 'Paris' is not in its context: 'It opened in Tōkyō in 2019.'"),
        ([{"text": "Tōkyō", "start": 3}], "answer 0: characters 3-8 of its context are 'opene', not the answer 'Tōkyō'."),
        ([{"text": "Tōkyō", "start": "13th"}], "answer 0: its start must be a character offset (int), got '13th'."),
        (["tōkyō"], "answer 0 'tōkyō' is not in its context: 'It opened in Tōkyō in 2019.' The context has it in other "
                    "letter case at character 13, 'Tōkyō': answers are cut from the context exactly as it is written."),
        ([7], "answer 0 is 7: give the answer text, {'text': ..., 'start': character offset}, a (text, start) pair, "
              "[{'text': ..., 'answer_start': ...}, ...] (a SQuAD JSON file's answers), {'text': [...], "
              "'answer_start': [...]} (Hugging Face datasets' answers), or '' / None for no answer."),
        ([[{"text": "Tōkyō", "answer_start": 3}]],
         "answer 0: characters 3-8 of its context are 'opene', not the answer 'Tōkyō'."),
        ([(" ", 2)], "answer 0 ' ' (characters 2-3) covers no token of its context: it is only white space or "
                      "characters the tokenizer drops."),
        (["Tōkyō", "2019"], "1 questions but 2 answers: give one answer per question."),
    ],
)
def test_a_bad_answer_is_one_line_naming_it(answers, message):
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=32)
    with pytest.raises(ValueError) as error:
        preprocessor.make_dataset((["Where?"], ["It opened in Tōkyō in 2019."]), answers)
    assert str(error.value) == message


def test_a_list_of_question_context_tuples_reads_as_the_two_lists():
    # Before: a list of exactly two (question, context) tuples was read as (questions, contexts), i.e. the first
    # pair as the questions and the second as the contexts; a list of any other length was refused.
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=64, doc_stride=32)
    questions = ["Who wrote it?", "When?", "Where?"]
    contexts = ["It was written by Ada Lovelace.", "She wrote it in 1843.", "She lived in London."]
    answers = ["Ada Lovelace", "1843", "London"]
    for count in (1, 2, 3):
        pairs = list(zip(questions[:count], contexts[:count]))
        assert preprocessor.is_raw_text(pairs) and preprocessor.count_examples(pairs) == count
        assert preprocessor.as_columns(pairs) == (questions[:count], contexts[:count])
        as_pairs = [batch for batch in preprocessor.make_dataset(pairs, answers[:count], batch_size=4)]
        as_lists = [batch for batch in preprocessor.make_dataset((questions[:count], contexts[:count]),
                                                                  answers[:count], batch_size=4)]
        for (x_pairs, y_pairs, _), (x_lists, y_lists, _) in zip(as_pairs, as_lists):
            for key in x_lists:
                np.testing.assert_array_equal(x_pairs[key], x_lists[key])
            for key in y_lists:
                np.testing.assert_array_equal(y_pairs[key], y_lists[key])
    with pytest.raises(ValueError) as error:
        preprocessor.as_columns("Who wrote it?")
    assert str(error.value) == ("Span extraction reads (questions, contexts): a tuple of two lists of strings, or a "
                                "list of (question, context) tuples, got str.")


def test_answer_character_spans_of_squad_answers_are_their_offsets(squad_slice):
    paragraphs = _paragraphs(squad_slice)
    questions = [(p["context"], q["answers"][0]) for p in paragraphs for q in p["qas"]]
    spans = answer_character_spans([{"text": a["text"], "start": a["answer_start"]} for _, a in questions],
                                   [c for c, _ in questions])
    assert all(c[s:e] == a["text"] for (c, a), (s, e) in zip(questions, spans))


def test_batches_keep_the_order_pad_to_a_bucket_fill_and_count():
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=128, doc_stride=64)
    assert preprocessor.default_boundaries() == [32, 64, 128]
    questions = ["Who?", "When?", "Where?"]
    contexts = ["Ada Lovelace wrote it.", "In 1843.", "In London, " + "a long sentence about the city. " * 20]
    windows = preprocessor.windows(questions, contexts)
    assert windows.lengths.tolist() == [11, 8, 128, 84]  # the long context gives two windows
    dataset = preprocessor.make_dataset((questions, contexts), ["Ada Lovelace", "1843", "London"],
                                        sample_weight=[1.0, 2.0, 0.5], batch_size=3)
    batches = list(dataset)
    assert len(batches) == int(dataset.cardinality()) == 2
    assert [tuple(features["token_ids"].shape) for features, _, _ in batches] == [(3, 128), (3, 128)]
    _, labels, weights = batches[0]
    # [CLS] who ? [SEP] ada love ##lace / [CLS] when ? [SEP] in 1843 / [CLS] where ? [SEP] in london
    assert labels["start_logits"].numpy().tolist() == [4, 5, 5]
    assert labels["end_logits"].numpy().tolist() == [6, 5, 5]
    assert weights.numpy().tolist() == [1.0, 2.0, 0.5]
    features, labels, weights = batches[1]
    assert labels["start_logits"].numpy().tolist() == [0, -1, -1]  # [CLS]: "London" is not in it; then filler rows
    assert weights.numpy().tolist()[0] == 0.5  # every window of a question takes its weight
    short = list(preprocessor.make_dataset((questions[:2], contexts[:2]), batch_size=2))
    assert [tuple(f["token_ids"].shape) for f in short] == [(2, 32)]  # no answers: features alone, bucketed


@pytest.mark.slow
@pytest.mark.multibackend
def test_fit_on_raw_questions_contexts_and_answers_learns_the_answers(squad_slice):
    """One real question per paragraph; after fitting on the raw strings, `answer` returns their gold answers."""
    paragraphs = _paragraphs(squad_slice)[:8]
    questions = [p["qas"][0]["question"] for p in paragraphs]
    contexts = [p["context"] for p in paragraphs]
    answers = [p["qas"][0]["answers"][0]["text"] for p in paragraphs]
    keras.utils.set_random_seed(0)
    qa = BertSpanExtractor.from_preset(
        PRESET, preprocessor=BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=128, doc_stride=64))
    qa.compile(optimizer=keras.optimizers.AdamW(3e-4))
    history = qa.fit(x=(questions, contexts), y=answers, batch_size=8, epochs=10, seed=0, verbose=0,
                     validation_data=((questions[:2], contexts[:2]), answers[:2])).history
    assert history["loss"][-1] < history["loss"][0] / 3
    assert len(history["val_loss"]) == 10
    found = [a["text"] for a in qa.answer(questions, contexts)]
    assert sum(f == a for f, a in zip(found, answers)) >= 6, list(zip(found, answers))
    loss = qa.evaluate((questions, contexts), answers, batch_size=8, verbose=0)
    assert loss[0] < history["loss"][0] / 3
    windows = qa.preprocessor.windows(questions[:2], contexts[:2])
    logits = qa.predict((questions[:2], contexts[:2]), verbose=0)  # one row per window
    assert logits["start_logits"].shape == (len(windows.example), 128)
    np.testing.assert_allclose(logits["start_logits"], qa.predict(windows.features, verbose=0)["start_logits"],
                               atol=1e-5)


@pytest.mark.slow
@pytest.mark.multibackend
def test_the_squad_json_answers_train_as_their_first_answer(squad_slice):
    """A SQuAD JSON file's own `answers` (a list of `{"text", "answer_start"}` dicts per question) are labelled as
    the first of them, as Hugging Face `datasets`' `{"text": [...], "answer_start": [...]}`. Before, the list was
    refused: `answer 0 is [{'answer_start': 177, 'text': 'Denver Broncos'}, ...: give the answer text, ...`."""
    qas = [(p["context"], q) for p in _paragraphs(squad_slice)[:3] for q in p["qas"]]
    questions, contexts = [q["question"] for _, q in qas], [c for c, _ in qas]
    answers = [q["answers"] for _, q in qas]  # the JSON's lists of dicts, as the file gives them
    assert any(len({a["answer_start"] for a in each}) > 1 for each in answers)  # some differ after the first
    preprocessor = BertSpanExtractorPreprocessor.from_preset(PRESET, sequence_length=128, doc_stride=64)
    as_given = preprocessor.windows(questions, contexts, answers).labels
    first = preprocessor.windows(questions, contexts, [each[0] for each in answers]).labels
    hugging_face = preprocessor.windows(questions, contexts, [
        {"text": [a["text"] for a in each], "answer_start": [a["answer_start"] for a in each]} for each in answers]).labels
    assert (first["start_logits"] > 0).sum() >= len(qas)
    for labels in (as_given, hugging_face):
        for key in ("start_logits", "end_logits"):
            np.testing.assert_array_equal(labels[key], first[key])
    backbone = keras_bert_impl.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=128)
    qa = BertSpanExtractor(backbone, preprocessor=preprocessor)
    history = qa.fit((questions[:8], contexts[:8]), answers[:8], batch_size=8, verbose=0).history
    assert np.isfinite(history["loss"][0])


@pytest.mark.multibackend
def test_a_span_extractor_without_preprocessor_names_the_fix():
    backbone = keras_bert_impl.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=16)
    with pytest.raises(ValueError, match=r"has no `preprocessor`, so it cannot read raw strings"):
        BertSpanExtractor(backbone).fit(x=(["Who?"], ["Ada wrote it."]), y=["Ada"])


@pytest.mark.multibackend
def test_evaluate_answers_is_the_official_squad_score_of_answer_against_every_reference(squad_slice):
    """`evaluate_answers` scores `answer(...)` against all of each question's references, as the official v1.1 script
    does on the same predictions; the SQuAD JSON's answer lists and `datasets`' dict give the same score."""
    from keras_bert_impl.metrics.squad import evaluate_v1

    paragraphs = _paragraphs(squad_slice)[:2]
    qas = [(p["context"], q) for p in paragraphs for q in p["qas"]][:24]
    questions, contexts = [q["question"] for _, q in qas], [c for c, _ in qas]
    answers = [q["answers"] for _, q in qas]
    keras.utils.set_random_seed(0)
    backbone = keras_bert_impl.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=128)
    qa = BertSpanExtractor(backbone, preprocessor=BertSpanExtractorPreprocessor.from_preset(
        PRESET, sequence_length=128, doc_stride=64))
    predicted = {q["id"]: a["text"] for (_, q), a in zip(qas, qa.answer(questions, contexts))}
    official = evaluate_v1([{"paragraphs": [{"context": c, "qas": [q]} for c, q in qas]}], predicted)
    scores = qa.evaluate_answers((questions, contexts), answers)
    assert scores == pytest.approx(official, abs=1e-9) and scores["f1"] > 0, (scores, official)
    hugging_face = [{"text": [a["text"] for a in each], "answer_start": [a["answer_start"] for a in each]}
                    for each in answers]
    assert qa.evaluate_answers(list(zip(questions, contexts)), hugging_face) == scores
    # Every prediction right against a reference that is not the first: 100 (only the first is trained on).
    last = [[{"text": "unrelated", "answer_start": 0}, {"text": p, "answer_start": 0}] for p in predicted.values()]
    assert qa.evaluate_answers((questions, contexts), last) == {"exact_match": 100.0, "f1": 100.0}


@pytest.mark.multibackend
def test_metrics_in_compile_of_a_span_extractor_are_one_line_naming_evaluate_answers():
    backbone = keras_bert_impl.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=16)
    qa = BertSpanExtractor(backbone)
    with pytest.raises(ValueError) as error:
        qa.compile(metrics=["exact_match"])
    assert str(error.value) == (
        "metrics=['exact_match']: BertSpanExtractor's outputs are start and end logits over the tokens, and SQuAD "
        "scores whole answers: compile without metrics and call evaluate_answers((questions, contexts), answers) for "
        "the exact match and F1, or give metrics per output, {'start_logits': [...], 'end_logits': [...]}.")
    qa.compile(metrics={"start_logits": ["sparse_categorical_accuracy"], "end_logits": []})  # Keras's, per output


def test_evaluate_answers_of_one_question_and_of_a_dataframe():
    import pandas as pd

    backbone = keras_bert_impl.BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8,
                                            intermediate_dim=16, max_sequence_length=64)
    qa = BertSpanExtractor(backbone, preprocessor=BertSpanExtractorPreprocessor.from_preset(PRESET,
                                                                                            sequence_length=64))
    context = "Denver linebacker Von Miller was named Super Bowl MVP."
    predicted = qa.answer("Who was named MVP?", context)["text"]
    assert qa.evaluate_answers(("Who was named MVP?", context), predicted) == {"exact_match": 100.0, "f1": 100.0}
    table = pd.DataFrame({"question": ["Who was named MVP?"], "context": [context], "answer": [predicted]})
    assert qa.evaluate_answers(table[["question", "context"]], table["answer"]) == {"exact_match": 100.0,
                                                                                     "f1": 100.0}
    with pytest.raises(ValueError) as error:
        qa.evaluate_answers((["Who was named MVP?"], [context]), [predicted, "Von Miller"])
    assert str(error.value) == "1 questions but 2 answers: give one answer per question."
