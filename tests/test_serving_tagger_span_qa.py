"""`export()` of the tagger and the span extractor: `serve` takes raw strings and gives what `predict_entities` and
`answer` give, on the TensorFlow backend and on JAX (the model converted with jax2tf).

The real all-MiniLM-L6-v2 checkpoint (a new head), real CoNLL-2003 sentences (raw text joined from the files) and
real SQuAD v1.1 dev questions. The SavedModels are served in a fresh process that imports only TensorFlow and
tensorflow-text (keras_bert_impl made unimportable), as a server runs them.
"""

import gzip
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_impl import BertBackbone, BertSpanExtractor, BertTokenClassifier

pytestmark = [pytest.mark.multibackend,
              pytest.mark.skipif(keras.backend.backend() == "torch",
                                 reason="Keras writes SavedModels from TensorFlow and JAX only")]
PRESET = "all_minilm_l6_v2_en"
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]

# Serves SavedModels in a process without keras_bert_impl: argv[1] = JSON [[directory, inputs], ...] (`serve`).
_SERVE = """
import json, sys
sys.modules["keras_bert_impl"] = None
import tensorflow as tf
import tensorflow_text  # registers the WordPiece ops the graph holds
def plain(value):
    return [plain(v) for v in value] if isinstance(value, list) else value.decode() if isinstance(value, bytes) else value
results = []
for path, inputs in json.loads(sys.argv[1]):
    outputs = tf.saved_model.load(path).signatures["serve"](**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    results.append({name: plain(value.numpy().tolist()) for name, value in outputs.items()})
print(json.dumps(results))
"""
_STRINGS = {"words", "tag", "entity_text", "entity_type", "answer"}


def _served(*calls):
    """`serve(**inputs)` of each `(directory, inputs)`, as TF Serving calls it: string outputs as lists of str,
    the others as NumPy arrays."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", _SERVE, json.dumps([(str(p), inputs) for p, inputs in calls])],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.splitlines()[-1])
    return [{name: value if name in _STRINGS else np.array(value) for name, value in result.items()}
            for result in results]


def _conll_texts(path, count):
    """The first `count` sentences of a CoNLL-2003 file as raw text: its words joined by spaces."""
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("-DOCSTART-"):
                if words:
                    sentences.append(" ".join(words))
                    words = []
                if len(sentences) == count:
                    break
                continue
            words.append(line.split()[0])
    return sentences


def _served_entities(served, index):
    mask = served["entity_mask"][index]
    return [{"text": served["entity_text"][index][j], "type": served["entity_type"][index][j],
             "start": int(served["entity_start"][index][j]), "end": int(served["entity_end"][index][j]),
             "score": float(served["entity_score"][index][j])} for j in range(len(mask)) if mask[j]]


@pytest.mark.slow
def test_a_tagger_serves_the_entities_of_predict_entities_on_conll_sentences(shared_data, tmp_path, capsys):
    keras.utils.set_random_seed(3)
    texts = _conll_texts(shared_data / "conll2003" / "eng.testb", 40)
    texts.append(" ".join(texts[:10]))  # longer than a row: the words go over several rows
    texts += ["Zoë met 东京's mayor in São Paulo -- the U.S. didn't pay 1,000 euros.", "", "  "]
    # A new head: its tags are many and mixed (I-, B-, types changing), every chunking rule at work.
    tagger = BertTokenClassifier.from_preset(PRESET, label_names=CONLL_TAGS, sequence_length=32)
    path = tmp_path / "conll_tagger"
    tagger.export(path)
    assert capsys.readouterr().out.strip() == (
        f"Saved BertTokenClassifier as a SavedModel at {path}: serve(text), serving_default(text), "
        "serve_features(token_ids, segment_ids, padding_mask).")
    _, placements = tagger.preprocessor.word_windows(tagger.preprocessor.as_word_lists(texts))
    assert sum(len({row for row, _ in filter(None, p)}) > 1 for p in placements) >= 5  # several rows per text

    (served,) = _served((path, {"text": texts}))
    assert sorted(served) == ["entity_end", "entity_mask", "entity_score", "entity_start", "entity_text",
                              "entity_type", "score", "tag", "tag_id", "word_end", "word_mask", "word_start", "words"]
    expected = tagger.predict_entities(texts)
    assert sum(map(len, expected)) > 100
    for index, (text, entities) in enumerate(zip(texts, expected)):
        got = _served_entities(served, index)
        assert [{k: e[k] for k in ("text", "type", "start", "end")} for e in got] == [
            {k: e[k] for k in ("text", "type", "start", "end")} for e in entities], text
        np.testing.assert_allclose([e["score"] for e in got], [e["score"] for e in entities], atol=1e-5)
        # The words: `split_words`, with their tags (a word's entity is its words' span).
        words = tagger.preprocessor.split_words(text)
        real = served["word_mask"][index].astype(bool)
        assert [served["words"][index][j] for j in np.flatnonzero(real)] == [w for w, _, _ in words]
        assert served["word_start"][index][real].tolist() == [s for _, s, _ in words]
        assert served["word_end"][index][real].tolist() == [e for _, _, e in words]
        tags = [served["tag"][index][j] for j in np.flatnonzero(real)]
        assert served["tag_id"][index][real].tolist() == [CONLL_TAGS.index(tag) for tag in tags]


@pytest.mark.slow
def test_the_graph_splits_words_as_split_words_on_every_conll_sentence(shared_data):
    import tensorflow as tf

    from keras_bert_impl.text.token_classifier_preprocessor import split_words
    from keras_bert_impl.text.token_classifier_serving import split_words_in_graph

    texts = _conll_texts(shared_data / "conll2003" / "eng.testa", 4000)  # all 3,250
    texts += ["a---", "--b...", "(+301) x's'd n't 's -12.5 .576 AA+ C$ ...'s?!", "x\u00a0y\u2003z\x1cw", "it's.",
              "U.S.'s", "....", "a....", "-.5", "+-3", "Mr. Smith--and", "O'Neill's", "Zoë met 东京's mayor 🙂."]
    starts, ends = tf.function(split_words_in_graph)(tf.constant(texts))
    for text, start, end in zip(texts, starts.to_list(), ends.to_list()):
        assert list(zip(start, end)) == [(s, e) for _, s, e in split_words(text)], text


def _squad_pairs(shared_data, count):
    """`count` SQuAD v1.1 dev (question, context) pairs, two per paragraph, and the first one with a non-ASCII
    context."""
    with gzip.open(shared_data / "squad" / "dev-v1.1.json.gz", "rt", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    pairs, non_ascii = [], None
    for article in articles:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"]
            if len(pairs) < count:
                pairs += [(qa["question"], context) for qa in paragraph["qas"][:2]]
            if non_ascii is None and not context.isascii():
                non_ascii = (paragraph["qas"][0]["question"], context)
    return pairs[:count] + [non_ascii]


@pytest.mark.slow
def test_a_span_extractor_serves_the_answers_of_answer_on_squad_windows_and_all(shared_data, tmp_path, capsys):
    keras.utils.set_random_seed(5)
    pairs = _squad_pairs(shared_data, 16)
    questions, contexts = [q for q, _ in pairs], [c for _, c in pairs]
    qa = BertSpanExtractor.from_preset(PRESET, sequence_length=96, doc_stride=32)
    path = tmp_path / "squad_extractor"
    qa.export(path)
    assert capsys.readouterr().out.strip() == (
        f"Saved BertSpanExtractor as a SavedModel at {path}: serve(question, context), "
        "serving_default(question, context), serve_features(token_ids, segment_ids, padding_mask).")
    windows = qa.preprocessor.windows(questions, contexts)
    counts = np.bincount(windows.example)

    (served,) = _served((path, {"question": questions, "context": contexts}))
    assert sorted(served) == ["answer", "end", "score", "start", "windows"]
    assert served["windows"].tolist() == counts.tolist()
    assert counts.max() >= 3 and (counts == 1).any()  # contexts of many windows, and of one
    expected = qa.answer(questions, contexts)
    assert served["answer"] == [a["text"] for a in expected]
    assert served["start"].tolist() == [a["start"] for a in expected]
    assert served["end"].tolist() == [a["end"] for a in expected]
    np.testing.assert_allclose(served["score"], [a["score"] for a in expected], atol=1e-5)
    assert all(contexts[i][a["start"]:a["end"]] == a["text"] for i, a in enumerate(expected))


@pytest.mark.slow
def test_without_a_preprocessor_or_tag_names_the_features_endpoint_alone_and_wrong_names_show_the_signature(
        tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the WordPiece ops of the graph)

    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=16)
    for name, model in [("extractor", BertSpanExtractor(backbone)),
                        ("tagger", BertTokenClassifier(backbone, num_classes=3)),
                        ("unnamed_tags", BertTokenClassifier.from_preset(PRESET, num_classes=3))]:
        from keras_bert_impl.text import saved_model_export

        assert saved_model_export.export_saved_model(model, tmp_path / name, verbose=False) == {
            "serve_features": ("token_ids", "segment_ids", "padding_mask")}
        assert sorted(tf.saved_model.load(str(tmp_path / name)).signatures) == ["serve_features", "serving_default"]

    tagger = BertTokenClassifier.from_preset(PRESET, label_names=CONLL_TAGS, sequence_length=16)
    qa = BertSpanExtractor.from_preset(PRESET, sequence_length=32)
    tagger.export(tmp_path / "tagger_text", verbose=False)
    qa.export(tmp_path / "qa_text", verbose=False)
    served_tagger = tf.saved_model.load(str(tmp_path / "tagger_text"))
    served_qa = tf.saved_model.load(str(tmp_path / "qa_text"))
    with pytest.raises(TypeError, match=r"missing a required argument: 'text'.*signature: \(.*text: TensorSpec"):
        served_tagger.signatures["serve"](sentence=tf.constant(["Peter lives in Berlin."]))
    with pytest.raises(TypeError, match=r"missing a required argument: 'context'.*context: TensorSpec.*question"):
        served_qa.signatures["serve"](question=tf.constant(["Who?"]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="takes as many questions as contexts"):
        served_qa.serve(question=tf.constant(["Who?", "Where?"]), context=tf.constant(["Ada wrote it."]))
