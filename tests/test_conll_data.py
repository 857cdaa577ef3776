"""CoNLL-2003 reader, tag schemes, WordPiece alignment and windows, on the real shared-task files."""

import numpy as np
import pytest

from keras_bert_impl.tasks import tagging as conll

IRREGULAR_B_TAG_LINES = {"eng.train": [152428, 175436]}
SPLITS = {"eng.train": (14041, 946), "eng.testa": (3250, 216), "eng.testb": (3453, 231)}


@pytest.fixture(scope="module")
def conll_dir(shared_data):
    return shared_data / "conll2003"


@pytest.fixture(scope="module")
def dev_sentences(conll_dir):
    return conll.read_conll(conll_dir / "eng.testa")


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    from keras_bert_impl.text.tokenizer import BertTokenizer

    return BertTokenizer.from_preset(str(minilm_dir))


@pytest.fixture(scope="module")
def dev_pieces(tokenizer, dev_sentences):
    return conll.tokenize_words(tokenizer, [w for s in dev_sentences for w in s.words])


def _raw_sentences(path):
    """Original (word, tag) sentences by plain splitting, independent of the reader."""
    sentences, current = [], []
    for line in open(path, encoding="utf-8"):
        columns = line.split()
        if not columns or columns[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
            current = []
            continue
        current.append((columns[0], columns[-1]))
    if current:
        sentences.append(current)
    return sentences


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_official_counts_and_iob_round_trip(conll_dir, name):
    sentences = conll.read_conll(conll_dir / name)
    assert (len(sentences), conll.num_documents(sentences)) == SPLITS[name]
    raw = _raw_sentences(conll_dir / name)
    assert [s.words for s in sentences] == [[w for w, _ in r] for r in raw]
    # Reading converts IOB1 -> IOB2; converting back gives the file's tags, except on the
    # two ill-formed IOB1 tags of eng.train (a B-MISC after O, where IOB1 writes I-MISC).
    differing_lines = []
    for sentence, original in zip(sentences, raw):
        back = conll.iob2_to_iob1(sentence.tags)
        differing_lines += [line for line, a, (_, b) in zip(sentence.line_numbers, back, original) if a != b]
    assert differing_lines == IRREGULAR_B_TAG_LINES.get(name, [])
    for sentence in sentences:
        assert not any(t.startswith("I-") and (i == 0 or sentence.tags[i - 1][2:] != t[2:])
                       for i, t in enumerate(sentence.tags))


def test_label_vocabulary_from_data(dev_sentences):
    assert conll.label_vocabulary(dev_sentences) == [
        "O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"
    ]


def test_find_split_files(conll_dir, tmp_path):
    found = conll.find_split_files(conll_dir)
    assert {k: v.rsplit("/", 1)[1] for k, v in found.items()} == {
        "train": "eng.train", "dev": "eng.testa", "test": "eng.testb"
    }
    for name in ("train.txt", "valid.txt"):
        (tmp_path / name).write_text("EU NNP I-NP I-ORG\n\n")
    assert sorted(conll.find_split_files(tmp_path)) == ["dev", "train"]
    with pytest.raises(FileNotFoundError, match=r"no CoNLL file for train, dev \(looked for train: eng.train or train.txt"):
        conll.find_split_files(tmp_path / "missing")


# === Bad input ===


def _write(tmp_path, text, name="bad.conll"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_original_file_is_not_iob2(conll_dir):
    # eng.testa line 5: "LEICESTERSHIRE NNP I-NP I-ORG" starts an entity with I- (IOB1).
    with pytest.raises(ValueError, match=r"eng\.testa, line 5, column 4: tag 'I-ORG' follows 'O' \(or the sentence start\); in IOB2"):
        conll.read_conll(conll_dir / "eng.testa", tag_scheme="iob2")


def test_iob2_errors_and_iob1_repair(tmp_path):
    path = _write(tmp_path, "-DOCSTART- -X- O O\n\nEU NNP I-NP B-ORG\nrejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\n")
    with pytest.raises(ValueError, match=r"bad\.conll, line 5, column 4: tag 'I-MISC' follows 'O'.*tag_scheme='iob1'"):
        conll.read_conll(path, tag_scheme="iob2")
    assert conll.read_conll(path, tag_scheme="iob1")[0].tags == ["B-ORG", "O", "B-MISC"]
    after_other_type = _write(tmp_path, "EU NNP I-NP B-ORG\nGerman JJ I-NP I-MISC\n", "b.conll")
    with pytest.raises(ValueError, match=r"b\.conll, line 2, column 4: tag 'I-MISC' follows an entity of type ORG"):
        conll.read_conll(after_other_type, tag_scheme="iob2")


def test_wrong_column_count(tmp_path):
    path = _write(tmp_path, "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\nGerman I-MISC\n\n")
    with pytest.raises(ValueError, match=r"bad\.conll, line 3, column 3: expected 4 space-separated columns as on line 1, got 2: 'German I-MISC'"):
        conll.read_conll(path)
    with pytest.raises(ValueError, match=r"bad\.conll, line 1, column 4: expected 3 space-separated columns as requested, got 4"):
        conll.read_conll(path, num_columns=3)
    one_column = _write(tmp_path, "EU\n", "one.conll")
    with pytest.raises(ValueError, match=r"one\.conll, line 1: expected at least 2 space-separated columns"):
        conll.read_conll(one_column)


@pytest.mark.parametrize(
    "tag, message",
    [
        ("E-PER", r"bad\.conll, line 2, column 4: tag 'E-PER' has a prefix that IOB1 does not use .*--tag_scheme iobes"),
        ("X-PER", r"bad\.conll, line 2, column 4: Unknown tag 'X-PER'"),
        ("PER", r"bad\.conll, line 2, column 4: Unknown tag 'PER'"),
    ],
)
def test_unknown_tag_prefix(tmp_path, tag, message):
    path = _write(tmp_path, f"EU NNP I-NP I-ORG\nPeter NNP I-NP {tag}\n\n")
    with pytest.raises(ValueError, match=message):
        conll.read_conll(path)


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- O O\n\n"])
def test_empty_file(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"bad\.conll: no sentences found.*is the file empty"):
        conll.read_conll(path)


def test_bad_tag_scheme_argument(tmp_path):
    with pytest.raises(ValueError, match="`tag_scheme` must be one of iob1, iob2, iobes, got 'bio'"):
        conll.read_conll(_write(tmp_path, "EU NNP I-NP I-ORG\n"), tag_scheme="bio")


# === WordPiece alignment on all of the real dev set ===

LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


@pytest.mark.parametrize(
    "max_seq_length, document_context",
    [(128, False), (128, True), (12, False), (12, True)],
)
def test_alignment_round_trip_on_all_dev(tokenizer, dev_sentences, dev_pieces, max_seq_length, document_context):
    features = conll.encode_examples(
        dev_sentences, tokenizer, LABELS, max_seq_length,
        document_context=document_context, word_pieces=dev_pieces,
    )
    gold = [[LABELS.index(t) for t in s.tags] for s in dev_sentences]
    # word labels -> token labels -> word labels
    assert conll.word_label_ids(features, features.labels, dev_sentences) == gold
    # Every sentence is labelled, at least one window each; nothing dropped.
    assert set(features.sentence_index.tolist()) == set(range(len(dev_sentences)))
    assert int((features.labels >= 0).sum()) == sum(len(s.words) for s in dev_sentences)
    assert features.lengths.max() <= max_seq_length
    assert (features.token_ids[:, 0] == tokenizer.cls_token_id).all()
    rows = np.arange(len(features))
    assert (features.token_ids[rows, features.lengths - 1] == tokenizer.sep_token_id).all()
    assert (features.padding_mask.sum(axis=1) == features.lengths).all()
    # Three dev sentences (ruled tables of results) need more than 128 WordPieces: split, not dropped.
    assert features.num_split_sentences == (3 if max_seq_length == 128 else features.num_split_sentences)
    assert features.num_split_sentences > 0 and len(features) > len(dev_sentences)
    # '1,874-of-3,362' has 11 WordPieces, more than fit 12 tokens: cut, still labelled.
    assert features.num_truncated_words == (1 if max_seq_length == 12 else 0)
    if document_context:
        # Context fills windows: on average far more tokens than the sentence alone.
        assert features.lengths.mean() > 0.9 * max_seq_length


def test_document_context_stays_in_document_and_labels_only_centre(tokenizer, dev_sentences, dev_pieces):
    features = conll.encode_examples(dev_sentences[:40], tokenizer, LABELS, 64, document_context=True,
                                      word_pieces=dev_pieces[: sum(len(s.words) for s in dev_sentences[:40])])
    second_document = [i for i, s in enumerate(dev_sentences[:40]) if s.document_index == 1]
    row = int(np.nonzero(features.sentence_index == second_document[0])[0][0])
    # The first sentence of a document has no left context: its first word follows [CLS].
    assert features.word_index[row, 1] == 0
    labelled = features.word_index[row] >= 0
    assert int(labelled.sum()) == len(dev_sentences[second_document[0]].words)
    assert (features.labels[row][~labelled] == -1).all()


def test_long_word_error_names_file_and_line(tokenizer, conll_dir):
    sentences = conll.read_conll(conll_dir / "eng.train")  # ruled tables: '-----...' words
    longest = max(((s, i) for s in sentences for i in range(len(s.words))), key=lambda p: len(p[0].words[p[1]]))
    sentence, index = longest
    assert sentence.words[index].startswith("------")
    line = sentence.line_numbers[index]
    with pytest.raises(ValueError, match=rf"eng\.train, line {line}: the word '-+' has \d+ WordPieces, more than fit a window of sequence_length=16"):
        conll.encode_examples([sentence], tokenizer, LABELS, 16, long_word="error")
    features = conll.encode_examples([sentence], tokenizer, LABELS, 16)
    assert features.num_truncated_words >= 1
    assert conll.word_label_ids(features, features.labels, [sentence]) == [[LABELS.index(t) for t in sentence.tags]]


def test_unknown_label_is_an_error(tokenizer, tmp_path):
    sentences = conll.read_conll(_write(tmp_path, "Paris NNP I-NP I-LOC\n\n"))
    with pytest.raises(ValueError, match=r"bad\.conll, line 1: tag 'B-LOC' is not in the label set \['O', 'B-PER'"):
        conll.encode_examples(sentences, tokenizer, ["O", "B-PER", "I-PER"], 16)


def test_dataset_batches(tokenizer, dev_sentences, dev_pieces):
    sentences = dev_sentences[:50]
    features = conll.encode_examples(sentences, tokenizer, LABELS, 128,
                                      word_pieces=dev_pieces[: sum(len(s.words) for s in sentences)])
    fixed = list(conll.make_dataset(features, 16))
    assert [tuple(x["token_ids"].shape) for x, _ in fixed] == [(16, 128)] * 3 + [(2, 128)]
    bucketed = list(conll.make_dataset(features, 16, boundaries=[32, 64, 128]))
    widths = [int(x["token_ids"].shape[1]) for x, _ in bucketed]
    assert all(w in (32, 64, 128) for w in widths) and max(widths) < 128
    # Evaluation order is kept and padded labels are -1, so decoding works on bucketed predictions.
    # Every batch has 16 rows (one compiled shape per bucket); the last is filled up after the real windows.
    assert all(int(x["token_ids"].shape[0]) == 16 for x, _ in bucketed)
    labels = [y.numpy() for _, y in bucketed]
    rows = [row for batch in labels for row in batch]
    assert all((row == -1).all() for row in rows[len(features):])
    rows = rows[: len(features)]
    assert conll.word_label_ids(features, rows, sentences) == [[LABELS.index(t) for t in s.tags] for s in sentences]
    unfilled = list(conll.make_dataset(features, 16, boundaries=[32, 64, 128], fixed_batch_size=False))
    assert sum(int(x["token_ids"].shape[0]) for x, _ in unfilled) == len(features)
    shuffled = list(conll.make_dataset(features, 16, training=True, seed=0, boundaries=[32, 64, 128]))
    assert all(int(x["token_ids"].shape[0]) == 16 for x, _ in shuffled)
    # Each real window once per epoch; filler rows carry no label.
    assert sum(int((y.numpy() >= 0).any(axis=1).sum()) for _, y in shuffled) == len(features)

    class EchoModel:  # "logits" whose argmax is the token id modulo 9, to check that rows line up
        def predict_on_batch(self, inputs):
            return np.eye(9, dtype="float32")[inputs["token_ids"] % 9]

    from keras_bert_impl.tasks.tagging.prediction import predict_token_label_ids

    predicted = predict_token_label_ids(EchoModel(), features, batch_size=16, boundaries=[32, 64, 128])
    assert len(predicted) == len(features)
    for row, ids, length in zip(predicted, features.token_ids, features.lengths):
        np.testing.assert_array_equal(row[:length], ids[:length] % 9)


def test_write_predictions(tmp_path, dev_sentences):
    path = tmp_path / "predictions.txt"
    sentences = dev_sentences[:2]
    conll.write_conll_predictions(path, sentences, [s.tags for s in sentences])
    lines = path.read_text().split("\n")
    assert lines[0] == "CRICKET O O"
    assert lines[1] == "- O O"
    assert lines[2] == "LEICESTERSHIRE B-ORG B-ORG"
    with pytest.raises(ValueError, match=r"eng\.testa, line 3: 11 words but 1 predicted tags"):
        conll.write_conll_predictions(path, sentences[:1], [["O"]])


# === Any CoNLL file: tag column, IOBES, 2 columns, bad bytes (real slices) ===


def _slice(path, target, sentences):
    """Copies the first `sentences` sentences of a real CoNLL file, byte for byte, to `target`."""
    lines, count = [], 0
    with open(path, "rb") as f:
        for line in f:
            lines.append(line)
            if not line.strip() and len(lines) > 1 and lines[-2].strip() and not lines[-2].startswith(b"-DOCSTART-"):
                count += 1
                if count == sentences:
                    break
    target.write_bytes(b"".join(lines))
    return target


def test_iobes_converter_round_trips_a_real_slice(conll_dir, tmp_path):
    original = _slice(conll_dir / "eng.train", tmp_path / "train.iob1", 300)
    iobes = tmp_path / "train.iobes"
    conll.convert_conll_file(original, iobes, "iob1", "iobes")
    tags = {line.split()[-1][:2] for line in iobes.read_text().splitlines() if line.strip()}
    assert {"S-", "E-", "B-", "I-"} <= tags  # single-word and multi-word entities
    as_iob1 = conll.read_conll(original, tag_scheme="iob1")
    as_iobes = conll.read_conll(iobes, tag_scheme="iobes")
    assert len(as_iob1) == 300
    assert [(s.words, s.tags, s.line_numbers) for s in as_iobes] == [(s.words, s.tags, s.line_numbers) for s in as_iob1]
    # Converted back, the file is the original byte for byte (POS, chunk and -DOCSTART- lines kept).
    back = tmp_path / "back.iob1"
    conll.convert_conll_file(iobes, back, "iobes", "iob1")
    assert back.read_bytes() == original.read_bytes()
    # The entities are the same under conlleval's rules, whatever the scheme.
    from keras_bert_impl.metrics.conll import extract_entities

    for sentence in as_iobes:
        assert extract_entities(sentence.source_tags) == extract_entities(sentence.tags)


def test_two_column_file_and_tag_column(conll_dir, tmp_path):
    four = conll.read_conll(_slice(conll_dir / "eng.testa", tmp_path / "dev.txt", 100))
    two = tmp_path / "dev.2col"
    conll.write_conll(two, four, tag_scheme="iob2")
    assert two.read_text().splitlines()[:3] == ["CRICKET O", "- O", "LEICESTERSHIRE B-ORG"]
    read_back = conll.read_conll(two, tag_scheme="iob2")
    assert [(s.words, s.tags) for s in read_back] == [(s.words, s.tags) for s in four]
    assert conll.read_conll(two, tag_scheme="iob2", tag_column=1)[0].tags == four[0].tags
    assert [s.tags for s in conll.read_conll(tmp_path / "dev.txt", tag_column=3)] == [s.tags for s in four]
    # Column 2 of eng.testa holds POS tags: not entity tags.
    with pytest.raises(conll.ConllFormatError) as error:
        conll.read_conll(tmp_path / "dev.txt", tag_column=1)
    assert str(error.value) == (
        f"{tmp_path / 'dev.txt'}, line 3, column 2: Unknown tag 'NNP': expected 'O' or '<prefix>-<TYPE>' "
        "with prefix one of B, I, E, S (e.g. 'B-PER', 'I-LOC')."
    )
    with pytest.raises(conll.ConllFormatError, match=r"line 1: tag_column=4 \(--tag_column\) names no tag column"):
        conll.read_conll(tmp_path / "dev.txt", tag_column=4)


def test_any_tag_set(tmp_path):
    path = _write(tmp_path, "Aspirin S-Drug\nhelps O\nacute B-Disease\npain E-Disease\n\n")
    sentence = conll.read_conll(path, tag_scheme="iobes")[0]
    assert sentence.tags == ["B-Drug", "O", "B-Disease", "I-Disease"]
    assert conll.label_vocabulary([sentence]) == ["O", "B-Disease", "I-Disease", "B-Drug", "I-Drug"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("New B-LOC\nYork O\n\n", "line 1, column 2: tag 'B-LOC' is not followed by 'I-LOC' or 'E-LOC' (the next tag is 'O')"),
        ("New B-LOC\n\n", "line 1, column 2: tag 'B-LOC' ends the sentence; in IOBES an entity ends with 'E-LOC'"),
        ("in O\nYork E-LOC\n\n", "line 2, column 2: tag 'E-LOC' follows 'O' (or the sentence start); in IOBES"),
    ],
)
def test_ill_formed_iobes(tmp_path, text, message):
    with pytest.raises(conll.ConllFormatError) as error:
        conll.read_conll(_write(tmp_path, text), tag_scheme="iobes")
    assert str(error.value).startswith(f"{tmp_path / 'bad.conll'}, {message}")


def test_validation_tag_not_in_training(conll_dir, tmp_path):
    train = conll.read_conll(_slice(conll_dir / "eng.train", tmp_path / "train.txt", 50))
    labels = conll.label_vocabulary(train)
    dev = conll.read_conll(_write(tmp_path, "EU NNP I-NP I-ORG\nsays VBZ I-VP O\nAspirin NN I-NP I-DRUG\n\n"))
    with pytest.raises(conll.ConllFormatError) as error:
        conll.check_known_tags(dev, labels, "train.txt")
    assert str(error.value) == (
        f"{tmp_path / 'bad.conll'}, line 3, column 4: tag 'I-DRUG' (type 'DRUG') is not in the training file "
        "train.txt, whose entity types are ['LOC', 'MISC', 'ORG', 'PER']"
    )


def windows_1252_conll(shared_data, conll_dir, tmp_path):
    """A real dev slice followed by words of a real Windows-1252 text (curly apostrophe 0x92), one per line."""
    excerpt = (shared_data / "bad_input" / "pg1342_cp1252_excerpt.txt").read_bytes()
    line = next(l for l in excerpt.split(b"\r\n") if b"\x92" in l)
    path = _slice(conll_dir / "eng.testa", tmp_path / "dev_cp1252.txt", 2)
    path.write_bytes(path.read_bytes() + b"".join(w + b" NN I-NP O\n" for w in line.split()) + b"\n")
    return path


def test_windows_1252_byte_names_file_line_and_offset(shared_data, conll_dir, tmp_path):
    path = windows_1252_conll(shared_data, conll_dir, tmp_path)
    with pytest.raises(conll.ConllFormatError) as error:
        conll.read_conll(path)
    assert str(error.value) == (
        f"{path}, line 19, column 5: byte 0x92 at byte offset 267 of the file is not valid UTF-8; the file looks "
        "like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 dev_cp1252.txt > "
        "utf8_dev_cp1252.txt"
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"drop_remainder": True},
        {"boundaries": [32, 64, 128]},
        {"boundaries": [32, 64, 128], "fixed_batch_size": False},
        {"boundaries": [32, 64, 128], "shuffle": True, "seed": 0},
        {"boundaries": [32, 64, 128], "training": True, "seed": 0, "group_by_length": True},
    ],
)
def test_dataset_knows_its_number_of_batches(tokenizer, dev_sentences, dev_pieces, options):
    """Keras progress bars read `len(dataset)`: it must be the real number of batches (not 'Unknown')."""
    sentences = dev_sentences[:300]
    features = conll.encode_examples(sentences, tokenizer, LABELS, 128,
                                      word_pieces=dev_pieces[: sum(len(s.words) for s in sentences)])
    dataset = conll.make_dataset(features, 16, **options)
    assert len(dataset) == sum(1 for _ in dataset) == sum(1 for _ in dataset)  # two epochs
    if options.get("group_by_length"):
        assert len(dataset) > -(-len(features) // 16)  # a partial batch per bucket


def test_packed_batches_hold_every_labelled_word_once_in_static_rows(dev_sentences, tokenizer):
    """The real dev set packed (tf.data and NumPy twins): 2% padding or less, batch_size windows per step on average."""
    features = conll.encode_examples(dev_sentences, tokenizer, conll.label_vocabulary(dev_sentences), 128)
    labelled = int((features.labels >= 0).sum())
    unpacked_steps = -(-len(features) // 32)
    packed = list(conll.make_packed_dataset(features, 32, training=True, seed=1).as_numpy_iterator())
    # `make_dataset(packing=True)`, the earlier way to ask for them, gives the same batches.
    earlier = list(conll.make_dataset(features, 32, training=True, seed=1, packing=True).as_numpy_iterator())
    assert len(packed) == len(earlier)
    for (inputs, labels), (earlier_inputs, earlier_labels) in zip(packed, earlier):
        np.testing.assert_array_equal(labels, earlier_labels)
        for key in inputs:
            np.testing.assert_array_equal(inputs[key], earlier_inputs[key])
    for batches in (
        packed,
        [conll.make_array_batches(features, 32, training=True, seed=1, packing=True)[i] for i in range(
            len(conll.make_array_batches(features, 32, training=True, seed=1, packing=True)))],
    ):
        shapes = {inputs["token_ids"].shape for inputs, _ in batches}
        assert len(shapes) == 1 and next(iter(shapes))[1] == 128, shapes
        assert abs(len(batches) - unpacked_steps) <= 0.1 * unpacked_steps, (len(batches), unpacked_steps)
        real = sum(int((inputs["padding_mask"] > 0).sum()) for inputs, _ in batches[:-1])
        total = sum(inputs["padding_mask"].size for inputs, _ in batches[:-1])
        assert 1 - real / total < 0.02
        # The last batch may repeat rows to fill it, with labels -1: every labelled word is seen exactly once.
        assert sum(int((labels >= 0).sum()) for _, labels in batches) == labelled
        assert max(int(inputs["padding_mask"].max()) for inputs, _ in batches) >= 5


def test_fit_on_word_lists_encodes_as_the_recipe_encodes(tokenizer, dev_sentences):
    """The recipe's step 2 (`tagging.encode_examples`) and the model's `fit(words, tags)`
    (`BertTokenClassifierPreprocessor.encode_words`) build their windows with one builder (`text/word_windows.py`).
    On every real dev sentence that fits one window they give the same token ids and the same labels."""
    from keras_bert_impl.text.token_classifier_preprocessor import BertTokenClassifierPreprocessor

    sentences = dev_sentences[:300]
    label_names = conll.label_vocabulary(dev_sentences)
    features = conll.encode_examples(sentences, tokenizer, label_names, sequence_length=64)
    one_window = [i for i in range(len(sentences)) if np.sum(features.sentence_index == i) == 1]
    assert len(one_window) > 290  # (the longer ones: `test_fit_on_long_sentences_labels_every_word_once`)
    rows = [int(np.flatnonzero(features.sentence_index == i)[0]) for i in one_window]
    preprocessor = BertTokenClassifierPreprocessor(tokenizer, sequence_length=64)
    inputs, labels = preprocessor.encode_words([sentences[i].words for i in one_window],
                                               [[label_names.index(t) for t in sentences[i].tags] for i in one_window])
    np.testing.assert_array_equal(inputs["token_ids"], features.token_ids[rows])
    np.testing.assert_array_equal(inputs["padding_mask"], features.padding_mask[rows])
    np.testing.assert_array_equal(labels, features.labels[rows])


def test_fit_on_long_sentences_labels_every_word_once(tokenizer, dev_sentences):
    """Before: `fit(words, tags)` cut a sentence longer than `sequence_length` to one row, so the tags of its later
    words were never learnt (at sequence_length=16, 98 of the first 300 real dev sentences lost words). Now, as
    the recipe does, such a sentence takes several rows: every word is labelled once, on the same first WordPiece,
    in the same order, as in the recipe's windows (which also carry unlabelled context, so whole rows differ)."""
    from keras_bert_impl.text.token_classifier_preprocessor import BertTokenClassifierPreprocessor

    sentences = dev_sentences[:300]
    label_names = conll.label_vocabulary(dev_sentences)
    words = [s.words for s in sentences]
    tags = [[label_names.index(t) for t in s.tags] for s in sentences]
    preprocessor = BertTokenClassifierPreprocessor(tokenizer, sequence_length=16)
    inputs, labels = preprocessor.encode_words(words, tags, every_word=True)
    recipe = conll.encode_examples(sentences, tokenizer, label_names, sequence_length=16)
    assert int((labels >= 0).sum()) == sum(map(len, words)) == int((recipe.labels >= 0).sum())
    np.testing.assert_array_equal(inputs["token_ids"][labels >= 0], recipe.token_ids[recipe.labels >= 0])
    np.testing.assert_array_equal(labels[labels >= 0], recipe.labels[recipe.labels >= 0])
    assert len(labels) == len(recipe) > len(sentences)
    one_row, _ = preprocessor.encode_words(words, tags)  # `call` and `predict`: one row per sentence, cut
    assert len(one_row["token_ids"]) == len(sentences)
    batches = list(preprocessor.make_dataset(words, tags, batch_size=8, shuffle=True, seed=0))
    assert sum(int((y.numpy() >= 0).sum()) for _, y in batches) == sum(map(len, words))
