"""GLUE readers on the real files: official counts, quirks, label maps, bad input, submission files."""

import os

import numpy as np
import pytest

from keras_bert_impl.batching.boundaries import CLASSIFICATION_BUCKETS, default_boundaries
from keras_bert_impl.tasks import classification as glue
from keras_bert_impl.tasks.classification import GlueFormatError, read_split, write_submission

# GLUE's official example counts for the splits present in shared/data/glue.
OFFICIAL_COUNTS = {
    ("cola", "train"): 8551, ("cola", "dev"): 1043, ("cola", "test"): 1063,
    ("sst2", "train"): 67349, ("sst2", "dev"): 872, ("sst2", "test"): 1821,
    ("mrpc", "train"): 3668, ("mrpc", "dev"): 408, ("mrpc", "test"): 1725,
    ("stsb", "train"): 5749, ("stsb", "dev"): 1500, ("stsb", "test"): 1379,
    ("rte", "train"): 2490, ("rte", "dev"): 277, ("rte", "test"): 3000,
    ("qnli", "dev"): 5463, ("qnli", "test"): 5463,
}


@pytest.fixture(scope="module")
def glue_dir(shared_data):
    return shared_data / "glue"


@pytest.mark.parametrize("task,split", sorted(OFFICIAL_COUNTS))
def test_official_counts(glue_dir, task, split):
    data = read_split(task, glue_dir, split)
    assert len(data) == OFFICIAL_COUNTS[(task, split)]
    assert len(data.ids) == len(data.line_numbers) == len(data)
    if split == "test":
        assert data.labels is None
        assert data.ids[:2] == ["0", "1"]
    else:
        assert len(data.labels) == len(data)
    assert (data.text_b is None) == (task in ("cola", "sst2"))
    assert data.skipped_rows == 0


def test_label_distributions_match_readmes(glue_dir):
    # Counts from each folder's README.
    assert np.bincount(read_split("cola", glue_dir, "dev").labels).tolist() == [322, 721]
    assert np.bincount(read_split("sst2", glue_dir, "train").labels).tolist() == [29780, 37569]
    assert np.bincount(read_split("mrpc", glue_dir, "train").labels).tolist() == [1194, 2474]
    assert np.bincount(read_split("rte", glue_dir, "dev").labels).tolist() == [146, 131]  # entailment first
    assert np.bincount(read_split("qnli", glue_dir, "dev").labels).tolist() == [2702, 2761]
    stsb = read_split("stsb", glue_dir, "dev")
    assert stsb.labels.dtype == np.float32 and stsb.labels[0] == 5.0 and 0 <= stsb.labels.min() <= stsb.labels.max() <= 5


def test_real_file_quirks(glue_dir):
    # MRPC: UTF-8 BOM before the header; quotes kept as they are.
    mrpc = read_split("mrpc", glue_dir, "train")
    assert mrpc.text_a[0] == 'Amrozi accused his brother, whom he called "the witness", of deliberately distorting his evidence.'
    # SST-2: trailing space before the tab removed.
    sst2 = read_split("sst2", glue_dir, "train")
    assert sst2.text_a[0] == "hide new secretions from the parental units"
    # CoLA: no header (line 1 is an example), no final newline in dev.
    cola = read_split("cola", glue_dir, "dev")
    assert cola.line_numbers[0] == 1 and cola.text_a[-1] == "John talked to Bill about himself."
    # CRLF line ends (SST-2 labelled test copy) via the task folder as data_dir.
    lines = list(glue.read_tsv_lines(glue_dir / "SST-2" / "test-labeled.tsv"))
    assert lines[0] == (1, ["sentence", "label"]) and len(lines) == 1822
    assert not any(f[-1].endswith("\r") for _, f in lines)
    # The task's own folder works as data_dir too.
    assert len(read_split("rte", glue_dir / "RTE", "dev")) == 277


def test_task_lookup():
    assert glue.get_task("SST-2") is glue.TASKS["sst2"]
    assert glue.get_task("mnli").splits == ("train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched")
    assert glue.get_task("stsb").num_classes == 1 and glue.get_task("mnli").num_classes == 3
    with pytest.raises(ValueError, match="Unknown GLUE task 'mnlim': valid tasks are mnli, qqp, qnli, sst2, cola, stsb, mrpc, rte, wnli"):
        glue.get_task("mnlim")


def _copy_task(glue_dir, tmp_path, folder, name, head=5):
    """A task folder whose `name` file holds the first `head` lines of the real one."""
    task_dir = tmp_path / folder
    task_dir.mkdir(exist_ok=True)
    with open(glue_dir / folder / name, "rb") as f:
        lines = f.read().split(b"\n")[:head]
    (task_dir / name).write_bytes(b"\n".join(lines) + b"\n")
    return task_dir


def _edit_line(path, number, transform):
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = transform(lines[number - 1])
    path.write_bytes(b"\n".join(lines))


def test_missing_column_is_an_error(glue_dir, tmp_path):
    task_dir = _copy_task(glue_dir, tmp_path, "RTE", "dev.tsv")
    _edit_line(task_dir / "dev.tsv", 3, lambda l: l.rsplit(b"\t", 1)[0])
    with pytest.raises(GlueFormatError, match=r"dev.tsv, line 3: 3 fields \(a missing field\); expected 4 tab-separated fields"):
        read_split("rte", tmp_path, "dev")


def test_extra_tab_is_an_error(glue_dir, tmp_path):
    task_dir = _copy_task(glue_dir, tmp_path, "CoLA", "train.tsv")
    _edit_line(task_dir / "train.tsv", 4, lambda l: l + b"\textra")
    with pytest.raises(GlueFormatError, match=r"train.tsv, line 4: 5 fields \(an extra tab\); expected 4 tab-separated fields \(source, label"):
        read_split("cola", tmp_path, "train")


def test_wrong_header_is_an_error(data_slices, tmp_path):
    task_dir = _copy_task(data_slices / "glue", tmp_path, "STS-B", "train.tsv")
    _edit_line(task_dir / "train.tsv", 1, lambda l: l.replace(b"sentence2", b"sentence_2"))
    with pytest.raises(GlueFormatError, match=r"train.tsv, line 1: header .* lacks column\(s\) \['sentence2'\]"):
        read_split("stsb", tmp_path, "train")


def test_label_outside_the_set_is_an_error(glue_dir, tmp_path):
    task_dir = _copy_task(glue_dir, tmp_path, "MRPC", "dev.tsv")
    _edit_line(task_dir / "dev.tsv", 2, lambda l: b"2" + l[1:])
    with pytest.raises(GlueFormatError, match=r"dev.tsv, line 2: label '2' is not one of \['0', '1'\]"):
        read_split("mrpc", tmp_path, "dev")
    task_dir = _copy_task(glue_dir, tmp_path, "STS-B", "dev.tsv")
    _edit_line(task_dir / "dev.tsv", 3, lambda l: l.rsplit(b"\t", 1)[0] + b"\t7.5")
    with pytest.raises(GlueFormatError, match=r"dev.tsv, line 3: score '7.5' is not a number in \[0, 5\]"):
        read_split("stsb", tmp_path, "dev")


def test_empty_sentence_is_an_error(glue_dir, tmp_path):
    task_dir = _copy_task(glue_dir, tmp_path, "SST-2", "dev.tsv")
    _edit_line(task_dir / "dev.tsv", 5, lambda l: b" \t" + l.split(b"\t")[1])
    with pytest.raises(GlueFormatError, match=r"dev.tsv, line 5: empty sentence in column 1"):
        read_split("sst2", tmp_path, "dev")


def test_invalid_utf8_is_an_error(glue_dir, tmp_path):
    task_dir = _copy_task(glue_dir, tmp_path, "RTE", "train.tsv")
    _edit_line(task_dir / "train.tsv", 2, lambda l: l.replace(b"Iraq", b"Ir\xe4q", 1))
    data = (task_dir / "train.tsv").read_bytes()
    offset = data.index(b"\xe4")
    column = len(data[data.rfind(b"\n", 0, offset) + 1 : offset].decode("utf-8")) + 1  # in characters
    with pytest.raises(GlueFormatError) as error:
        read_split("rte", tmp_path, "train")
    assert str(error.value).endswith(
        f"train.tsv, line 2, column {column}: byte 0xe4 at byte offset {offset} of the file is not valid UTF-8; the "
        "file looks like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
        "train.tsv > utf8_train.tsv")


def test_missing_file_is_named(glue_dir, tmp_path):
    _copy_task(glue_dir, tmp_path, "RTE", "dev.tsv")
    with pytest.raises(FileNotFoundError, match=r"rte: missing file .*RTE/train.tsv \(the train split\).*train.tsv, dev.tsv, test.tsv"):
        read_split("rte", tmp_path, "train")
    with pytest.raises(FileNotFoundError, match=r"mnli: missing file .*dev_matched.tsv"):
        read_split("mnli", tmp_path, "dev_matched")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_split("rte", tmp_path / "nowhere", "dev")


def test_qqp_skips_malformed_rows_with_a_count(glue_dir, tmp_path, caplog):
    # QQP's official layout; rows built from real MRPC pairs (QQP itself is not in shared/data).
    mrpc = read_split("mrpc", glue_dir, "dev").take(4)
    rows = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    for i, (a, b, label) in enumerate(zip(mrpc.text_a, mrpc.text_b, mrpc.labels)):
        rows.append(f"{i}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\t{label}")
    rows.insert(3, "99\t7\tonly a question")  # a malformed row
    (tmp_path / "QQP").mkdir()
    (tmp_path / "QQP" / "dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING"):
        qqp = read_split("qqp", tmp_path, "dev")
    assert len(qqp) == 4 and qqp.skipped_rows == 1 and qqp.labels.tolist() == mrpc.labels.tolist()
    assert "skipped 1 malformed row" in caplog.text


def test_submission_files(glue_dir, tmp_path):
    for task in ("cola", "sst2", "mrpc", "stsb", "rte", "qnli"):
        test = read_split(task, glue_dir, "test")
        predictions = np.linspace(-1, 6, len(test)) if task == "stsb" else np.arange(len(test)) % 2
        path = write_submission(task, "test", test.ids, predictions, tmp_path)
        lines = open(path, encoding="utf-8").read().split("\n")
        assert os.path.basename(path) == glue.TASKS[task].submission_files["test"]
        assert lines[0] == "index\tprediction" and lines[-1] == ""
        assert len(lines) - 2 == OFFICIAL_COUNTS[(task, "test")]
        assert lines[1].split("\t")[0] == test.ids[0]
    names = sorted(os.listdir(tmp_path))
    assert names == ["CoLA.tsv", "MRPC.tsv", "QNLI.tsv", "RTE.tsv", "SST-2.tsv", "STS-B.tsv"]
    assert open(tmp_path / "RTE.tsv").read().split("\n")[1:3] == ["0\tentailment", "1\tnot_entailment"]
    assert open(tmp_path / "STS-B.tsv").read().split("\n")[1] == "0\t0.000"
    assert glue.TASKS["mnli"].submission_files == {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}
    with pytest.raises(ValueError, match="3 ids but 2 predictions"):
        write_submission("rte", "test", ["0", "1", "2"], [0, 1], tmp_path)
    with pytest.raises(ValueError, match=r"class ids in \[0, 2\)"):
        write_submission("rte", "test", ["0"], [2], tmp_path)


@pytest.mark.slow
def test_make_dataset_batches_are_fixed_size_with_zero_weight_fillers(shared_data):
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.tasks.classification.prediction import predict_split

    split = glue.read_split("rte", shared_data / "glue", "dev")
    preprocessor = ClassifierPreprocessor(BertTokenizer.from_preset("all_minilm_l6_v2_en"), sequence_length=128)
    assert len(split) % 32
    for training in (True, False):
        batches = list(glue.make_dataset(split, preprocessor, 32, training=training, seed=0))
        assert all(int(f["token_ids"].shape[0]) == 32 and int(w.shape[0]) == 32 for f, _, w in batches)
        assert sum(float(w.numpy().sum()) for _, _, w in batches) == len(split)
        if not training:  # order kept, real rows first: the labels read back in file order
            labels = np.concatenate([y.numpy()[w.numpy() > 0] for _, y, w in batches])
            np.testing.assert_array_equal(labels, split.labels)

    class FirstTokenModel:  # "predicts" class = first context token id parity, to check row alignment
        def predict(self, dataset, verbose=0):
            return np.concatenate([np.eye(2)[f["token_ids"].numpy()[:, 1] % 2] for f in dataset])

    eval_ds = glue.make_dataset(split, preprocessor, 32)
    unfilled = glue.make_dataset(split, preprocessor, 32, fixed_batch_size=False)
    expected = np.concatenate([f["token_ids"].numpy()[:, 1] % 2 for f, _ in unfilled])
    predicted = predict_split(FirstTokenModel(), eval_ds, len(split))
    np.testing.assert_array_equal(predicted, expected)


def test_default_boundaries_are_finer_for_short_sentences():
    assert default_boundaries(128, **CLASSIFICATION_BUCKETS) == [16, 32, 48, 64, 96, 128]
    assert default_boundaries(100, **CLASSIFICATION_BUCKETS) == [16, 32, 48, 64, 96, 100]
    assert default_boundaries(512, **CLASSIFICATION_BUCKETS)[-4:] == [192, 256, 384, 512]
    with pytest.raises(ValueError, match="sequence_length"):
        default_boundaries(0, **CLASSIFICATION_BUCKETS)


@pytest.mark.slow
def test_make_dataset_training_tokenizes_once_and_reshuffles_each_epoch(shared_data):
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer

    split = glue.read_split("cola", shared_data / "glue", "dev").take(300)
    preprocessor = ClassifierPreprocessor(BertTokenizer.from_preset("all_minilm_l6_v2_en"), sequence_length=128)
    dataset = glue.make_dataset(split, preprocessor, 32, training=True, seed=0)

    def epoch():
        rows, widths = [], set()
        for features, _, weight in dataset:
            widths.add(int(features["token_ids"].shape[1]))
            keep = weight.numpy() > 0
            rows += [tuple(r[r > 0]) for r in features["token_ids"].numpy()[keep]]
        return rows, widths

    (first, widths), (second, _) = epoch(), epoch()
    expected = sorted(tuple(preprocessor.unpadded(t)["token_ids"].numpy()) for t in split.text_a)
    assert sorted(first) == sorted(second) == expected  # every example once per epoch, same token ids
    assert first != second  # reshuffled
    assert 16 in widths and widths <= set(default_boundaries(128, **CLASSIFICATION_BUCKETS))  # CoLA sentences fill the 16-token bucket


@pytest.mark.parametrize(
    "split_name, options",
    [
        ("dev", {"training": True, "shuffle_seed": 0}),
        ("dev", {"training": True, "seed": 0, "drop_remainder": True}),
        ("dev", {}),
        ("dev", {"fixed_batch_size": False}),
        ("test", {}),
    ],
)
def test_make_dataset_knows_its_number_of_batches(shared_data, split_name, options):
    """Keras progress bars read `len(dataset)`: the real number of steps, not 'Unknown'."""
    from keras_bert_impl.text.classifier_preprocessor import ClassifierPreprocessor
    from keras_bert_impl.text.tokenizer import BertTokenizer

    split = glue.read_split("rte", shared_data / "glue", split_name).take(150)
    preprocessor = ClassifierPreprocessor(BertTokenizer.from_preset("all_minilm_l6_v2_en"), sequence_length=128)
    dataset = glue.make_dataset(split, preprocessor, 16, **options)
    assert len(dataset) == sum(1 for _ in dataset) == sum(1 for _ in dataset)  # two epochs
    if options.get("training") and not options.get("drop_remainder"):
        assert len(dataset) > -(-150 // 16)  # one partial batch per length bucket


@pytest.mark.parametrize("ending", [b"\n\n", b"\r\n\r\n", b"\n\n\n"])
def test_empty_last_lines_are_ignored(glue_dir, tmp_path, ending):
    """A dev.tsv saved with an empty last line (BOM and CRLF too) was 'line 6: 1 fields (a missing field)'."""
    task_dir = _copy_task(glue_dir, tmp_path, "RTE", "dev.tsv")
    data = (task_dir / "dev.tsv").read_bytes().rstrip(b"\n")
    if ending.startswith(b"\r"):
        data = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    (task_dir / "dev.tsv").write_bytes(data + ending)
    assert len(read_split("rte", tmp_path, "dev").labels) == 4
    # A blank line before the last row is still a row with missing fields.
    (task_dir / "dev.tsv").write_bytes(data + ending + b"9999\ta\tb\tentailment\n")
    with pytest.raises(GlueFormatError, match=r"dev.tsv, line 6: 1 fields \(a missing field\); expected 4"):
        read_split("rte", tmp_path, "dev")


@pytest.mark.multibackend
def test_step_six_predict_on_encoded_examples_equals_predict_split_on_batches():
    """`classification.predict` takes step 2's features, as tagging's and span_qa's `predict` do (any backend, NumPy
    batches), and gives what `predict_split` gives on step 3's tf.data batches: same order, filler rows dropped."""
    import pathlib

    from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor

    split = read_split("stsb", pathlib.Path(__file__).parent / "data/slices/glue", "dev").take(37)
    preprocessor = BertClassifierPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=64)
    features = glue.encode_examples(split, preprocessor)
    backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    dataset = glue.make_dataset(split, preprocessor, 16)
    regressor = BertClassifier(backbone, num_classes=1, dropout=0.0)
    scores = glue.predict(regressor, features, batch_size=16)
    assert scores.shape == (37,) and scores.dtype == np.float32
    np.testing.assert_allclose(scores, glue.predict_split(regressor, dataset, len(split)), atol=1e-5)
    classifier = BertClassifier(backbone, num_classes=3)
    classes = glue.predict(classifier, features, batch_size=8, boundaries=[64])  # one shape, other batch size
    np.testing.assert_array_equal(classes, glue.predict_split(classifier, dataset, len(split)))
    with pytest.raises(ValueError, match="`features` has no examples"):
        glue.predict(classifier, {"token_ids": [], "segment_ids": []})
