"""A transformers checkpoint fine-tuned for a task loads with its trained head and its label names.

`BertForSequenceClassification`, `BertForTokenClassification` and `BertForQuestionAnswering` on the real
all-MiniLM-L6-v2 encoder, each with a seeded head moved far from its initialisation and real label names, saved by
`save_pretrained`: our task's `from_preset(directory)` reads the head (before: a new head, silently) and its outputs
equal transformers' on the same text (held-out lines of the public-domain corpus bundled in the package).
"""

import json
import pathlib
import shutil

import numpy as np
import pytest

from keras_bert_impl import BertClassifier, BertSpanExtractor, BertTokenClassifier

VALID = pathlib.Path(__file__).resolve().parents[1] / "keras_bert_impl" / "assets" / "corpus" / "valid.txt"
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]


@pytest.fixture(scope="module")
def lines():
    return [line.strip() for line in VALID.read_text(encoding="utf-8").splitlines() if 8 <= len(line.split()) <= 30][:6]


def save_fine_tuned(directory, minilm_dir, architecture, labels=None, **config):
    import torch
    import transformers

    torch.manual_seed(0)
    extra = {"id2label": dict(enumerate(labels)), "label2id": {v: i for i, v in enumerate(labels)}} if labels else {}
    model = getattr(transformers, architecture).from_pretrained(str(minilm_dir), **extra, **config).eval()
    head = model.classifier if hasattr(model, "classifier") else model.qa_outputs
    with torch.no_grad():
        for parameter in head.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    model.save_pretrained(str(directory), safe_serialization=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, directory / name)
    return getattr(transformers, architecture).from_pretrained(str(directory)).eval()  # the reference: as saved


@pytest.mark.slow
@pytest.mark.multibackend
def test_a_sequence_classification_checkpoint_predicts_as_transformers(tmp_path, minilm_dir, lines):
    import transformers

    directory = tmp_path / "sst"
    save_fine_tuned(directory, minilm_dir, "BertForSequenceClassification", ["negative", "positive"])
    classifier = BertClassifier.from_preset(str(directory))
    assert classifier.heads_loaded == ["classifier"]
    assert classifier.label_names == ["negative", "positive"] and classifier.num_classes == 2
    expected = transformers.pipeline("text-classification", model=str(directory))(lines)
    ours = classifier.predict_labels(lines, return_scores=True)
    assert [p["label"] for p in ours] == [p["label"] for p in expected]
    np.testing.assert_allclose([p["score"] for p in ours], [p["score"] for p in expected], rtol=1e-4)

    # keras-hub's habit, num_classes given: the same classes, so the trained head and its names.
    explicit = BertClassifier.from_preset(str(directory), num_classes=2)
    assert explicit.heads_loaded == ["classifier"] and explicit.label_names == ["negative", "positive"]
    # Other classes asked for: the backbone loads, the head is new.
    other = BertClassifier.from_preset(str(directory), num_classes=3)
    assert other.heads_loaded == [] and other.label_names is None
    # The names renamed, the same number of classes: the trained head, under the new names.
    renamed = BertClassifier.from_preset(str(directory), label_names=["neg", "pos"])
    assert renamed.heads_loaded == ["classifier"]
    assert renamed.predict_labels(lines[:2]) == [{"negative": "neg", "positive": "pos"}[p["label"]] for p in ours[:2]]


def test_a_regression_checkpoint_is_a_one_score_classifier(tmp_path, minilm_dir, lines):
    import torch
    from tokenizers import Tokenizer

    directory = tmp_path / "stsb"
    reference = save_fine_tuned(directory, minilm_dir, "BertForSequenceClassification", num_labels=1,
                                problem_type="regression")
    classifier = BertClassifier.from_preset(str(directory))
    assert classifier.num_classes == 1 and classifier.heads_loaded == ["classifier"]
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    with torch.no_grad():
        expected = [float(reference(torch.tensor([tokenizer.encode(line).ids])).logits[0, 0]) for line in lines]
    np.testing.assert_allclose(classifier.predict_labels(lines), expected, atol=1e-4)


@pytest.mark.slow
def test_a_token_classification_checkpoint_gives_transformers_logits(tmp_path, minilm_dir, lines, caplog):
    import torch
    import transformers
    from tokenizers import Tokenizer

    directory = tmp_path / "ner"
    reference = save_fine_tuned(directory, minilm_dir, "BertForTokenClassification", CONLL_TAGS)
    with caplog.at_level("WARNING"):
        tagger = BertTokenClassifier.from_preset(str(directory))
    # transformers saves a token classifier without a pooler, which a tagger never reads: nothing to warn of (it
    # warned "has no pooler (..., a BertForMaskedLM save)"). A classifier built on it reads it, and is told, once.
    ours = lambda: [r.getMessage() for r in caplog.records if r.name.startswith("keras_bert_impl")]  # noqa: E731
    assert not [message for message in ours() if "pooler" in message]
    BertClassifier(tagger.backbone, num_classes=2)
    BertClassifier(tagger.backbone, num_classes=3)
    assert [message for message in ours() if "pooler" in message] == [
        "The backbone's checkpoint has no pooler (pooler.dense.*): the pooled [CLS] output that this head reads "
        "starts from a new pooler, which training trains (as transformers does)."]
    assert tagger.heads_loaded == ["classifier"] and tagger.label_names == CONLL_TAGS
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    ours = tagger.predict(lines, verbose=0)
    for row, line in enumerate(lines):
        ids = tokenizer.encode(line).ids
        with torch.no_grad():
            expected = reference(torch.tensor([ids])).logits[0].numpy()
        np.testing.assert_allclose(np.asarray(ours[row][: len(ids)]), expected, atol=2e-4)
    # predict_entities is transformers' pipeline("ner", aggregation_strategy="first"): each word takes its first
    # piece's tag, and the same entities, offsets and scores come out, on text that both split into the same words.
    # (Where they differ we split as CoNLL-2003 writes its words: "Mrs." and "U.S." are one word, where the
    # pipeline's BERT pre-tokenizer makes "Mrs" "." and "U" "." "S" ".".)
    from tokenizers.pre_tokenizers import BertPreTokenizer

    pre_tokenizer = BertPreTokenizer()
    texts = [line.strip() for line in VALID.read_text(encoding="utf-8").splitlines() if 8 <= len(line.split()) <= 30]
    texts = [text for text in texts if [w for w, _ in pre_tokenizer.pre_tokenize_str(text)] == [
        w for w, _, _ in tagger.preprocessor.split_words(text)]][:6]
    # So are "average" (a word's pieces' mean probabilities) and "max" (its most confident piece).
    found = {}
    for strategy in ("first", "average", "max"):
        expected_entities = transformers.pipeline("ner", model=str(directory), aggregation_strategy=strategy)(texts)
        found[strategy] = tagger.predict_entities(texts, aggregation_strategy=strategy)
        for text, ours_found, expected_found in zip(texts, found[strategy], expected_entities):
            assert [(e["type"], e["start"], e["end"]) for e in ours_found] == [
                (e["entity_group"], e["start"], e["end"]) for e in expected_found]
            np.testing.assert_allclose([e["score"] for e in ours_found], [float(e["score"]) for e in expected_found],
                                       rtol=1e-4)
            assert all(e["text"] == text[e["start"]:e["end"]] for e in ours_found)
    assert found["first"] != found["average"] and found["first"] != found["max"]  # (words of several pieces differ)
    # And back: our export is a BertForTokenClassification with the same logits and tag names.
    tagger.save_huggingface(tmp_path / "exported")
    # Without the pooler, as transformers writes it: nothing unexpected or missing (transformers listed the pooler's
    # two tensors as unexpected).
    exported, loading = transformers.AutoModelForTokenClassification.from_pretrained(str(tmp_path / "exported"),
                                                                                     output_loading_info=True)
    exported.eval()
    assert not loading["unexpected_keys"] and not loading["missing_keys"]
    assert exported.config.id2label == dict(enumerate(CONLL_TAGS))
    ids = tokenizer.encode(lines[0]).ids
    with torch.no_grad():
        np.testing.assert_allclose(exported(torch.tensor([ids])).logits[0].numpy(),
                                   reference(torch.tensor([ids])).logits[0].numpy(), atol=1e-5)
    assert json.loads((tmp_path / "exported" / "config.json").read_text())["architectures"] == [
        "BertForTokenClassification"]


def test_a_question_answering_checkpoint_gives_transformers_logits(tmp_path, minilm_dir, lines):
    import torch
    import transformers
    from tokenizers import Tokenizer

    directory = tmp_path / "qa"
    reference = save_fine_tuned(directory, minilm_dir, "BertForQuestionAnswering")
    extractor = BertSpanExtractor.from_preset(str(directory))
    assert extractor.heads_loaded == ["qa_outputs"]
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    encoding = tokenizer.encode("Who reached Netherfield soon after breakfast?", " ".join(lines[:3]))
    x = {"token_ids": np.array([encoding.ids], "int32"), "segment_ids": np.array([encoding.type_ids], "int32"),
         "padding_mask": np.ones((1, len(encoding.ids)), "int32")}
    outputs = extractor.predict(x, verbose=0)
    start, end = np.asarray(outputs["start_logits"])[0], np.asarray(outputs["end_logits"])[0]
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                             token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    # Our head keeps the answer to [CLS] and the context (the question's logits are masked): compare those.
    context = [0] + [i for i, s in enumerate(encoding.type_ids) if s == 1][:-1]
    np.testing.assert_allclose(start[context], expected.start_logits[0].numpy()[context], atol=2e-4)
    np.testing.assert_allclose(end[context], expected.end_logits[0].numpy()[context], atol=2e-4)
    # And back: our export is a BertForQuestionAnswering with the same logits.
    extractor.save_huggingface(tmp_path / "exported")
    exported, loading = transformers.AutoModelForQuestionAnswering.from_pretrained(str(tmp_path / "exported"),
                                                                                   output_loading_info=True)
    exported.eval()
    assert not loading["unexpected_keys"] and not loading["missing_keys"]
    with torch.no_grad():
        again = exported(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                         token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long))
    np.testing.assert_allclose(again.start_logits.numpy(), expected.start_logits.numpy(), atol=1e-5)
    np.testing.assert_allclose(again.end_logits.numpy(), expected.end_logits.numpy(), atol=1e-5)


@pytest.mark.slow
def test_a_classifier_saved_for_transformers_predicts_the_same_in_its_pipeline(tmp_path, lines):
    """Ours -> `save_huggingface` -> transformers' `pipeline("text-classification")`: the same labels and scores;
    a regression exports as one score (`problem_type: regression`); mean pooling has no transformers equivalent."""
    import transformers

    classifier = BertClassifier.from_preset("all_minilm_l6_v2_en", num_classes=3,
                                            label_names=["entailment", "neutral", "contradiction"])
    classifier.backbone.enable_lora(2)  # the export merges the factors
    classifier.save_huggingface(tmp_path / "nli")
    expected = transformers.pipeline("text-classification", model=str(tmp_path / "nli"))(lines)
    ours = classifier.predict_labels(lines, return_scores=True)
    assert [p["label"] for p in ours] == [p["label"] for p in expected]
    np.testing.assert_allclose([p["score"] for p in ours], [p["score"] for p in expected], rtol=1e-4)
    # One text with top_k: the pipeline's flat list of its classes (before, ours nested it in a list of one).
    pipeline = transformers.pipeline("text-classification", model=str(tmp_path / "nli"))
    for top_k in (2, None):
        ours = classifier.predict_labels(lines[0], top_k=top_k)
        expected = pipeline(lines[0], top_k=top_k)
        assert [p["label"] for p in ours] == [p["label"] for p in expected]
        np.testing.assert_allclose([p["score"] for p in ours], [p["score"] for p in expected], rtol=1e-4)

    scorer = BertClassifier.from_preset("all_minilm_l6_v2_en", num_classes=1)
    scorer.save_huggingface(tmp_path / "stsb")
    config = json.loads((tmp_path / "stsb" / "config.json").read_text())
    assert config["problem_type"] == "regression" and len(config["id2label"]) == 1
    assert BertClassifier.from_preset(str(tmp_path / "stsb")).heads_loaded == ["classifier"]

    mean = BertClassifier.from_preset("all_minilm_l6_v2_en", num_classes=2, pooling="mean")
    with pytest.raises(ValueError) as info:
        mean.save_huggingface(tmp_path / "mean")
    assert str(info.value) == ("pooling='mean' has no transformers equivalent (BertForSequenceClassification reads the "
                               "pooler's [CLS] output): save this classifier with save() or save_to_preset().")


def test_a_config_whose_id2label_is_not_ids_is_named(tmp_path):
    from keras_bert_impl.checkpoints.huggingface import read_task_head_config

    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"],
                                                      "id2label": {"first": "negative", "1": "positive"}}))
    with pytest.raises(ValueError) as info:
        read_task_head_config(tmp_path, ("BertForSequenceClassification",))
    assert str(info.value) == (
        f"{tmp_path / 'config.json'}: id2label must map label ids to names, got {{'first': 'negative', '1': "
        "'positive'} (invalid literal for int() with base 10: 'first').")
    assert read_task_head_config(tmp_path, ("BertForTokenClassification",)) is None  # another task's checkpoint
