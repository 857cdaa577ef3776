"""SQuAD reading, windows, answer mapping and post-processing on the real dev file."""

import gzip
import json
import logging

import numpy as np
import pytest

from keras_bert_impl.metrics.squad import evaluate_v1
from keras_bert_impl.tasks import span_qa as squad
from keras_bert_impl.tasks.span_qa.evaluation import tune_null_threshold
from keras_bert_impl.tasks.span_qa.prediction import apply_null_threshold, postprocess_predictions


@pytest.fixture(scope="module")
def tokenizer():
    from keras_bert_impl.text.tokenizer import BertTokenizer

    return BertTokenizer.from_preset("all_minilm_l6_v2_en")


@pytest.fixture(scope="module")
def dev_path(shared_data):
    return shared_data / "squad" / "dev-v1.1.json.gz"


@pytest.fixture(scope="module")
def dev_examples(dev_path):
    examples, stats = squad.read_squad_examples(dev_path)
    return examples, stats


@pytest.fixture(scope="module")
def dev_contexts(tokenizer, dev_examples):
    contexts = list(dict.fromkeys(e.context for e in dev_examples[0]))
    return dict(zip(contexts, squad.tokenize_texts(tokenizer, contexts)))


def test_read_real_dev_file(dev_path, dev_examples):
    examples, stats = dev_examples
    assert stats.questions == len(examples) == 10570
    assert stats.mismatched_answers == 0 and stats.skipped_questions == 0
    assert sum(len(e.answers) for e in examples) == 34726
    assert examples[0].qas_id == "56be4db0acb8001400a502ec"
    assert examples[0].answers[0] == ("Denver Broncos", 177)
    assert squad.squad_version(squad.load_squad_json(dev_path)) == "1.1"


def test_every_dev_answer_maps_to_a_token_span(tokenizer, dev_examples, dev_contexts):
    """All 34,726 gold answers: the token span's detokenised text equals the normalised answer.

    "Normalised" is the tokenizer's own normalisation (lower case, accents
    stripped, control/format characters dropped) with white space removed,
    since WordPiece detokenisation puts spaces around punctuation.
    """
    import tensorflow as tf

    examples, _ = dev_examples
    spans, answers, cuts = [], [], []
    for example in examples:
        tokens = dev_contexts[example.context]
        for text, start in example.answers:
            span = squad.char_span_to_token_span(tokens, start, start + len(text))
            assert span is not None, (example.qas_id, text)
            first, last = span
            spans.append(tokens.ids[first : last + 1])
            answers.append(text)
            cuts.append(example.context[tokens.char_starts[first] : tokens.char_ends[last]])
    assert len(answers) == 34726
    detokenized = tokenizer.detokenize(tf.ragged.constant(spans)).numpy()
    normalized = tokenizer.normalize(tf.constant(answers)).numpy()
    squash = lambda b: "".join(b.decode("utf-8").split())  # noqa: E731
    failures = [i for i in range(len(answers)) if squash(detokenized[i]) != squash(normalized[i])]
    fraction = 1 - len(failures) / len(answers)
    print(f"\nanswer -> token span -> detokenised == normalised gold: {len(answers) - len(failures)}/{len(answers)} = {fraction:.4%}")
    assert fraction >= 0.995
    # Every failure has one of two causes:
    inside_token = [i for i in failures if answers[i] in cuts[i] and cuts[i] != answers[i]]
    unknown = [i for i in failures if "[UNK]" in detokenized[i].decode("utf-8")]
    print(f"answer boundary inside a WordPiece token (e.g. 'gold' in 'golden'): {len(inside_token)}; "
          f"[UNK] token (characters outside the vocabulary): {len(unknown)}")
    assert sorted(inside_token + unknown) == failures
    # The text cut from the context by character offsets is the exact gold answer otherwise.
    exact_cuts = sum(c == a for c, a in zip(cuts, answers))
    assert exact_cuts / len(answers) >= 0.997


def test_offsets_are_characters_of_the_original_non_ascii_context(tokenizer):
    context = "Beyoncé Giselle Knowles-Carter (/biːˈjɒnseɪ/) sold 2,000 copies in Zürich."
    (tokens,) = squad.tokenize_texts(tokenizer, [context])
    pieces = [context[s:e] for s, e in zip(tokens.char_starts, tokens.char_ends)]
    assert pieces[0] == "Beyoncé"
    assert "".join(pieces) == "".join(context.split())  # every character but white space, in order
    start = context.index("Zürich")
    first, last = squad.char_span_to_token_span(tokens, start, start + len("Zürich"))
    assert context[tokens.char_starts[first] : tokens.char_ends[last]] == "Zürich"


@pytest.fixture(scope="module")
def first_articles(data_slices):
    data = squad.load_squad_json(data_slices / "squad" / "dev-v1.1.json.gz")
    return {"version": "1.1", "data": data["data"][:2]}


def test_windows_cover_every_context_token_once_with_max_context(tokenizer, first_articles):
    examples, _ = squad.read_squad_examples(first_articles)
    features = squad.encode_examples(examples, tokenizer, sequence_length=96, doc_stride=32)
    assert len(features) > 2 * len(examples)  # short windows: many per example
    contexts = {}
    for example in examples:
        if example.context not in contexts:
            (contexts[example.context],) = squad.tokenize_texts(tokenizer, [example.context])
    for index, example in enumerate(examples):
        windows = np.flatnonzero(features.example_index == index)
        covered, max_context = {}, {}
        for w in windows:
            in_context = features.token_char_start[w] >= 0
            assert features.lengths[w] <= 96
            for start, is_max in zip(features.token_char_start[w][in_context], features.token_is_max_context[w][in_context]):
                covered[start] = covered.get(start, 0) + 1
                max_context[start] = max_context.get(start, 0) + int(is_max)
        expected = set(contexts[example.context].char_starts.tolist())
        assert set(covered) == expected, example.qas_id
        assert set(max_context.values()) == {1}, example.qas_id
        # Layout: [CLS] question [SEP] context [SEP], segment 1 from the context on.
        w = windows[0]
        length = features.lengths[w]
        assert features.token_ids[w, 0] == tokenizer.cls_token_id
        assert features.token_ids[w, length - 1] == tokenizer.sep_token_id
        assert features.padding_mask[w].sum() == length
        first_context = np.flatnonzero(features.token_char_start[w] >= 0)[0]
        assert features.token_ids[w, first_context - 1] == tokenizer.sep_token_id
        assert features.segment_ids[w, first_context:length].tolist() == [1] * (length - first_context)
        assert features.segment_ids[w, :first_context].tolist() == [0] * first_context


def test_training_labels_and_oracle_postprocessing_return_gold(tokenizer, first_articles):
    examples, _ = squad.read_squad_examples(first_articles, is_training=True)
    features = squad.encode_examples(examples, tokenizer, sequence_length=128, doc_stride=48, is_training=True)
    has_answer = features.start_positions > 0
    assert 0 < has_answer.sum() < len(features)  # some windows miss the answer and point at [CLS]
    assert (features.end_positions[~has_answer] == 0).all()
    # Oracle logits: high at the labelled start/end of every window that holds the answer.
    start_logits = np.full(features.token_ids.shape, -5.0, np.float32)
    end_logits = start_logits.copy()
    for w in np.flatnonzero(has_answer):
        start_logits[w, features.start_positions[w]] = 5.0
        end_logits[w, features.end_positions[w]] = 5.0
        assert features.token_char_start[w, features.start_positions[w]] >= 0
    result = postprocess_predictions(features, start_logits, end_logits)
    first_answers = {e.qas_id: e.answers[0][0] for e in examples}
    mismatches = {q: (text, result.predictions[q]) for q, text in first_answers.items() if result.predictions[q] != text}
    # The only misses: answers that end inside a WordPiece token ("gold" of "golden", "8" of "18"),
    # where the prediction is the whole token around the answer.
    assert all(gold in predicted and len(predicted) > len(gold) for gold, predicted in mismatches.values()), mismatches
    assert len(mismatches) / len(first_answers) <= 0.02
    gold_first = {"data": [{"paragraphs": [{"qas": [{"id": e.qas_id, "answers": [{"text": e.answers[0][0]}]} for e in examples]}]}]}
    assert evaluate_v1(gold_first, result.predictions)["exact_match"] >= 98.0


def _toy_examples():
    return [
        squad.SquadExample("a", "t", "What sat?", "The black cat sat on the mat.", (("black cat", 4),)),
        squad.SquadExample("b", "t", "Who flew?", "Nobody in this sentence did anything.", (), is_impossible=True),
    ]


def test_v2_null_answer_logic_with_constructed_logits(tokenizer):
    examples = _toy_examples()
    features = squad.encode_examples(examples, tokenizer, sequence_length=32, doc_stride=8)
    assert len(features) == 2
    start = np.full(features.token_ids.shape, -20.0, np.float32)
    end = start.copy()
    # Example a: span "black cat" scores 4 + 4 = 8, null 1 + 1 = 2 -> odds -6.
    a_start = np.flatnonzero(features.token_char_start[0] == 4)[0]
    a_end = np.flatnonzero(features.token_char_end[0] == 13)[0]
    start[0, a_start], end[0, a_end] = 4.0, 4.0
    start[0, 0], end[0, 0] = 1.0, 1.0
    # Example b: null 3 + 3 = 6, best span 2 + 1 = 3 -> odds 3.
    ctx = np.flatnonzero(features.token_char_start[1] >= 0)
    start[1, 0], end[1, 0] = 3.0, 3.0
    start[1, ctx[0]], end[1, ctx[0]] = 2.0, 1.0
    result = postprocess_predictions(features, start, end, version="2.0")
    assert result.null_odds == {"a": pytest.approx(-6.0), "b": pytest.approx(3.0)}
    assert result.predictions == {"a": "black cat", "b": ""}
    assert result.best_answers == {"a": "black cat", "b": "Nobody"}
    assert "" in [entry["text"] for entry in result.nbest["b"]]
    assert result.nbest["b"][0]["text"] == "" and result.nbest["b"][0]["probability"] > 0.9
    # A threshold above b's odds answers b with its best span.
    assert apply_null_threshold(result.best_answers, result.null_odds, 3.5) == {"a": "black cat", "b": "Nobody"}
    # Tuning on gold picks a threshold that makes both right.
    gold = {"version": "v2.0", "data": [{"paragraphs": [{"context": "", "qas": [
        {"id": "a", "answers": [{"text": "black cat", "answer_start": 4}]},
        {"id": "b", "answers": [], "is_impossible": True}]}]}]}
    threshold, evaluation = tune_null_threshold(gold, result.best_answers, result.null_odds)
    assert -6.0 <= threshold < 3.0
    assert evaluation["exact"] == 100.0 and evaluation["HasAns_exact"] == 100.0 and evaluation["NoAns_exact"] == 100.0
    # The null score is the minimum over the windows: with a second window of higher null score it does not change.
    features2 = squad.encode_examples(examples[1:], tokenizer, sequence_length=12, doc_stride=2)
    assert len(features2) > 1
    s2 = np.full(features2.token_ids.shape, -20.0, np.float32)
    e2 = s2.copy()
    s2[:, 0] = np.arange(len(features2)) + 1.0
    e2[:, 0] = 1.0
    null_only = postprocess_predictions(features2, s2, e2, version="2.0")
    assert null_only.nbest["b"][0]["text"] == "" and null_only.nbest["b"][0]["score"] == pytest.approx(2.0)


def test_postprocess_respects_max_answer_length_and_order(tokenizer):
    examples = _toy_examples()[:1]
    features = squad.encode_examples(examples, tokenizer, sequence_length=32)
    start = np.full(features.token_ids.shape, -20.0, np.float32)
    end = start.copy()
    ctx = np.flatnonzero(features.token_char_start[0] >= 0)
    start[0, ctx[0]] = 9.0  # "The"
    end[0, ctx[-1]] = 9.0  # "."
    end[0, ctx[0]] = 1.0
    # The long span wins when allowed, and is excluded by max_answer_length.
    assert postprocess_predictions(features, start, end).predictions["a"] == "The black cat sat on the mat."
    assert postprocess_predictions(features, start, end, max_answer_length=3).predictions["a"] == "The"
    # End before start is never chosen.
    start2 = np.full(features.token_ids.shape, -20.0, np.float32)
    end2 = start2.copy()
    start2[0, ctx[3]], end2[0, ctx[1]], end2[0, ctx[4]] = 5.0, 9.0, 1.0
    assert postprocess_predictions(features, start2, end2).predictions["a"] == "sat on"
    with pytest.raises(ValueError, match="Got logits for 0/0 windows, but there are 1 windows"):
        postprocess_predictions(features, start[:0], end[:0])


# === Bad input ===


def _write(tmp_path, obj, name="bad.json"):
    path = tmp_path / name
    text = obj if isinstance(obj, str) else json.dumps(obj)
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _file(qas, context="The cat sat."):
    return {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_answer_start_mismatch_is_skipped_with_counted_warning(tmp_path, caplog):
    qas = [
        {"id": "good", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "bad", "question": "Who?", "answers": [{"text": "cat", "answer_start": 3}]},
    ]
    path = _write(tmp_path, _file(qas), "train.json.gz")
    with caplog.at_level(logging.WARNING):
        examples, stats = squad.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["good"]
    assert stats.mismatched_answers == 1 and stats.skipped_questions == 1
    assert "1 answer(s) dropped because answer_start does not point at the answer text" in caplog.text
    assert "bad (data[0].paragraphs[0].qas[1].answers[0])" in caplog.text
    # For prediction the question is kept (its answers are only used for evaluation).
    examples, stats = squad.read_squad_examples(path, is_training=False)
    assert [e.qas_id for e in examples] == ["good", "bad"] and stats.unlabelled_questions == 1


@pytest.mark.parametrize(
    "obj, message",
    [
        (_file([{"id": "q", "question": "Who?", "answers": []}], context="   "),
         r"data\[0\]\.paragraphs\[0\]\.context: expected a non-empty context, got '   '"),
        (_file([{"id": "q", "question": " ", "answers": []}]),
         r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.question: expected a non-empty question, got ' '"),
        (_file([{"id": "q", "question": "Who?", "answers": [{"text": "cat", "answer_start": "4"}]}]),
         r"data\[0\]\.paragraphs\[0\]\.qas\[0\]\.answers\[0\]\.answer_start: expected a non-negative int "
         r"\(character offset into the context\), got '4'"),
        (_file([{"id": "q", "question": "Who?", "answers": [{"answer_start": 4}]}]),
         r'qas\[0\]\.answers\[0\]: no "text" key; expected "text": a string \(the answer\)'),
        (_file([{"question": "Who?", "answers": []}]), r'qas\[0\]: no "id" key; expected "id": a non-empty string'),
        ({"version": "1.1", "data": [{"title": "T", "paragraphs": {"context": "x"}}]},
         r"data\[0\]\.paragraphs: expected a list of paragraphs, got \{'context': 'x'\}"),
        ({"version": "1.1"}, r'no "data" key; expected "data": a list of articles'),
        ([1, 2], r"\$: expected a JSON object"),
    ],
)
def test_malformed_file_names_the_json_path(tmp_path, obj, message):
    path = _write(tmp_path, obj)
    with pytest.raises(squad.SquadFormatError, match=f"^{str(path)}: .*{message}"):
        squad.read_squad_examples(path)


def test_invalid_json_names_line_and_column(tmp_path):
    path = _write(tmp_path, '{"data": [\n  {"title": "T",, }\n]}')
    with pytest.raises(squad.SquadFormatError, match=rf"^{path}: not valid JSON at line 2 column 17: "):
        squad.load_squad_json(path)
    gz = tmp_path / "broken.json.gz"
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(squad.SquadFormatError, match=rf"^{gz}: not a valid gzip file"):
        squad.load_squad_json(gz)
    table = tmp_path / "train.csv"  # a table given as --predict_file: says what a SQuAD file is
    table.write_text("question,context\nWho?,Ada.\n", encoding="utf-8")
    with pytest.raises(squad.SquadFormatError) as error:
        squad.load_squad_json(table)
    assert str(error.value) == (
        f'{table}: not valid JSON at line 1 column 1: Expecting value (a SQuAD file is one JSON object, {{"version": '
        '..., "data": [{"title": ..., "paragraphs": [...]}]}, in a .json or .json.gz file).')


def test_question_longer_than_max_seq_length_allows(tokenizer):
    long_question = "Which " + "very " * 60 + "long question is this?"
    examples = [squad.SquadExample("long", "t", long_question, "The cat sat.", (("cat", 4),))]
    with pytest.raises(ValueError, match=r"Question 'long' has \d+ tokens: with \[CLS\] and two \[SEP\] it leaves no room "
                                         r"for context in sequence_length=64"):
        squad.encode_examples(examples, tokenizer, sequence_length=64, max_question_length=None)
    with pytest.raises(ValueError, match=r"Question 'long' has 64 tokens: .* set max_question_length to at most "
                                         r"sequence_length - 4 = 60 \(now 64\)"):
        squad.encode_examples(examples, tokenizer, sequence_length=64, max_question_length=64)
    with pytest.raises(ValueError, match=r"leaves no room for context"):  # the old keyword, None included: no cut
        squad.encode_examples(examples, tokenizer, sequence_length=64, max_query_length=None)
    # With the default truncation the question is cut and counted.
    features = squad.encode_examples(examples, tokenizer, sequence_length=64, max_question_length=16)
    assert features.truncated_questions == 1
    old = squad.encode_examples(examples, tokenizer, sequence_length=64, max_query_length=16)
    np.testing.assert_array_equal(old.token_ids, features.token_ids)  # BERT's run_squad.py name still works
    assert features.token_ids[0, 17] == tokenizer.sep_token_id and features.segment_ids[0, 18] == 1


def test_batches_have_a_fixed_size_and_filler_rows_are_dropped(tokenizer, first_articles):
    from keras_bert_impl.tasks.span_qa.prediction import predict_logits

    examples, _ = squad.read_squad_examples(first_articles, is_training=True)
    features = squad.encode_examples(examples, tokenizer, sequence_length=128, doc_stride=48, is_training=True)
    batch_size = 16
    assert len(features) % batch_size  # so that some batches need filling

    labelled = 0
    for inputs, labels in features.to_dataset(batch_size, training=True, seed=0):
        assert inputs["token_ids"].shape[0] == batch_size and labels["start_logits"].shape == (batch_size,)
        real = labels["start_logits"].numpy() >= 0
        assert (real == (labels["end_logits"].numpy() >= 0)).all()
        labelled += int(real.sum())
    assert labelled == len(features)  # every window once per epoch, none dropped

    class EchoModel:  # logits = the token ids, so each row shows which window it came from
        def predict_on_batch(self, batch):
            assert batch["token_ids"].shape[0] == batch_size  # the last batch is filled up too
            ids = np.asarray(batch["token_ids"]).astype("float32")
            return {"start_logits": ids, "end_logits": -ids}

    start, end = predict_logits(EchoModel(), features, batch_size=batch_size)
    width = features.token_ids.shape[1]
    np.testing.assert_array_equal(start[:, :width][features.padding_mask == 1], features.token_ids[features.padding_mask == 1])
    np.testing.assert_array_equal(end[:, :width][features.padding_mask == 1], -features.token_ids[features.padding_mask == 1])


def test_array_batches_are_the_tf_data_batches_without_tensorflow(tokenizer, first_articles):
    """`to_array_batches` (the JAX/PyTorch path) gives the windows, labels and widths `to_dataset` gives."""
    import collections

    from keras_bert_impl.tasks.span_qa.prediction import predict_logits

    examples, _ = squad.read_squad_examples(first_articles, is_training=True)
    features = squad.encode_examples(examples, tokenizer, sequence_length=128, doc_stride=48, is_training=True)

    def rows(inputs, labels):
        real = labels["start_logits"] >= 0
        return [(inputs["token_ids"].shape[1], tuple(inputs["token_ids"][i]), int(labels["start_logits"][i]),
                 int(labels["end_logits"][i])) for i in np.flatnonzero(real)]

    reference, ours = collections.Counter(), collections.Counter()
    for inputs, labels in features.to_dataset(16, training=True, seed=0):
        reference.update(rows({k: v.numpy() for k, v in inputs.items()}, {k: v.numpy() for k, v in labels.items()}))
    batches = features.to_array_batches(16, training=True, shuffle_seed=0)
    for i in range(len(batches)):
        inputs, labels = batches[i]
        assert inputs["token_ids"].shape[0] == 16 and set(labels) == {"start_logits", "end_logits"}
        ours.update(rows(inputs, labels))
    assert ours == reference and sum(ours.values()) == len(features)  # same windows, labels and bucket widths

    predicted = features.to_array_batches(16)
    for i, expected in enumerate(features.to_dataset(16, training=False)):
        (got,) = predicted[i]
        for name in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(got[name], expected[name].numpy())
    assert i + 1 == len(predicted)
    # PredictionBatches in input order (sort_by_length=False) are these batches too.
    for i, (rows, got) in enumerate(squad.PredictionBatches(features, 16, sort_by_length=False)):
        assert rows.tolist() == list(range(16 * i, min(16 * (i + 1), len(features))))
        for name in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(got[name], predicted[i][0][name])
    assert i + 1 == len(predicted)

    class EchoModel:
        def predict_on_batch(self, batch):
            ids = np.asarray(batch["token_ids"]).astype("float32")
            return {"start_logits": ids, "end_logits": -ids}

    # predict_logits' batches (grouped by length bucket) put every window's logits back in its own row, as the
    # input-order batches of to_array_batches / to_dataset do (the padding positions, which post-processing never
    # reads, are padded to other widths).
    real = features.padding_mask == 1
    reference_logits = predict_logits(EchoModel(), features, batch_size=16, sort_by_length=False)
    for got, expected in zip(predict_logits(EchoModel(), features, batch_size=16), reference_logits):
        np.testing.assert_array_equal(got[real], expected[real])


def test_windows_1252_byte_names_file_line_column_and_offset(data_slices, tmp_path):
    """The real dev slice written as UTF-8 JSON, but its first non-ASCII character in Windows-1252."""
    text = json.dumps(squad.load_squad_json(data_slices / "squad" / "dev-v1.1.json.gz"), ensure_ascii=False, indent=1)
    index = next(i for i, ch in enumerate(text) if ord(ch) > 127 and ch.encode("cp1252", errors="ignore"))
    bad = text[:index].encode("utf-8") + text[index].encode("cp1252") + text[index + 1 :].encode("utf-8")
    path = tmp_path / "dev-cp1252.json"
    path.write_bytes(bad)
    offset = len(text[:index].encode("utf-8"))
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    with pytest.raises(squad.SquadFormatError) as error:
        squad.read_squad_examples(path)
    assert str(error.value) == (
        f"{path}, line {line}, column {column}: byte 0x{bad[offset]:02x} at byte offset {offset} of the file is not "
        "valid UTF-8; the file looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 "
        "-t UTF-8 dev-cp1252.json > utf8_dev-cp1252.json"
    )


def test_a_gzip_file_named_json_is_named_as_gzip_with_the_name_that_reads_it(tmp_path):
    # Before: "byte 0x8b at byte offset 1 ... looks like Windows-1252", with an iconv command that makes garbage.
    path = tmp_path / "dev.json"
    path.write_bytes(gzip.compress(b'{"data": [], "version": "1.1"}'))
    with pytest.raises(squad.SquadFormatError) as error:
        squad.load_squad_json(path)
    assert str(error.value).endswith(
        "the file is gzip-compressed (it starts with the bytes 0x1f 0x8b), not text: decompress it first, e.g. "
        "gunzip -c dev.json > unzipped_dev.json, or name it dev.json.gz (this reader decompresses .gz files itself)")
