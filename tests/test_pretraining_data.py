"""Tests of the pretraining tf.data pipeline on real text (the bundled Gutenberg corpus)."""

import collections
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data import corpus, pretraining_dataset
from keras_bert_impl.text.tokenizer import BertTokenizer

SEQ_LENGTH = 128
MAX_PREDICTIONS = 20


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return BertTokenizer(str(minilm_dir / "vocab.txt"), lowercase=True)


@pytest.fixture(scope="module")
def paths():
    return corpus.bundled_corpus()


def read_documents(path):
    """Documents of the file as lists of sentences (the pipeline's input format)."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    documents = [[]]
    for line in text.split("\n"):
        line = line.strip()
        if line:
            documents[-1].append(line)
        elif documents[-1]:
            documents.append([])
    return [d for d in documents if d]


def document_tokens(path, tokenizer):
    """Token ids of each document of a file: sentences tokenised one by one, concatenated."""
    documents = read_documents(path)
    sentences = [s for d in documents for s in d]
    ids = tokenizer(tf.constant(sentences)).to_list()
    out, i = [], 0
    for document in documents:
        out.append(np.array([t for s in ids[i : i + len(document)] for t in s], np.int32))
        i += len(document)
    return out


class TokenIndex:
    """Finds where a token sequence occurs in a list of documents."""

    def __init__(self, documents, n=3):
        self.documents = documents
        self.n = n
        self.index = collections.defaultdict(list)
        for d, tokens in enumerate(documents):
            for p in range(len(tokens) - n + 1):
                self.index[tuple(tokens[p : p + n])].append((d, p))

    def find(self, tokens):
        """All (document, offset) where `tokens` (length >= n) occurs."""
        tokens = np.asarray(tokens)
        hits = []
        for d, p in self.index.get(tuple(tokens[: self.n]), []):
            if np.array_equal(self.documents[d][p : p + len(tokens)], tokens):
                hits.append((d, p))
        return hits


def unmasked(batch):
    """token_ids with the masked positions restored to their original ids."""
    tokens = batch["token_ids"].numpy().copy()
    positions = batch["mask_positions"].numpy()
    ids = batch["mask_ids"].numpy()
    weights = batch["mask_weights"].numpy()
    for r, w in zip(*np.nonzero(weights)):
        tokens[r, positions[r, w]] = ids[r, w]
    return tokens


def split_pair(tokens, tokenizer):
    """[CLS] A [SEP] B [SEP] pad... -> (A, B)."""
    seps = np.nonzero(tokens == tokenizer.sep_token_id)[0]
    return tokens[1 : seps[0]], tokens[seps[0] + 1 : seps[1]]


def take(dataset, n):
    return [b for b in dataset.take(n)]


@pytest.fixture(scope="module")
def many_batches(paths, tokenizer):
    """10,240 examples of seq 128 from the bundled training text."""
    dataset = pretraining_dataset(
        paths["train"], tokenizer, sequence_length=SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
        batch_size=64, seed=1,
    )
    return take(dataset, 160)


def test_shapes_and_dtypes(many_batches):
    batch = many_batches[0]
    assert sorted(batch) == sorted(
        ["token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights",
         "next_sentence_labels"]
    )
    for key in ("token_ids", "segment_ids", "padding_mask"):
        assert batch[key].shape == (64, SEQ_LENGTH) and batch[key].dtype == tf.int32
    for key in ("mask_positions", "mask_ids", "mask_weights"):
        assert batch[key].shape == (64, MAX_PREDICTIONS) and batch[key].dtype == tf.int32
    assert batch["next_sentence_labels"].shape == (64,)


def test_every_shape_is_static_for_xla_and_tpus(paths, tokenizer):
    """TPUs (and XLA's one compile per run) need fully defined batch shapes: drop_remainder, fixed lengths."""
    dataset = pretraining_dataset(paths["train"], tokenizer, sequence_length=SEQ_LENGTH,
                                  max_predictions_per_seq=MAX_PREDICTIONS, batch_size=8, seed=1)
    for key, spec in dataset.element_spec.items():
        assert spec.shape.is_fully_defined(), (key, spec.shape)
        assert spec.shape[0] == 8


def test_masking_statistics(many_batches, tokenizer):
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    eligible = masked = n_mask = n_random = n_same = examples = 0
    for batch in many_batches:
        original = unmasked(batch)
        token_ids = batch["token_ids"].numpy()
        padding = batch["padding_mask"].numpy()
        positions = batch["mask_positions"].numpy()
        ids = batch["mask_ids"].numpy()
        weights = batch["mask_weights"].numpy()
        lengths = padding.sum(1)
        examples += len(lengths)
        # padding_mask is a prefix of ones; the rest is [PAD]
        assert np.array_equal(padding, (np.arange(SEQ_LENGTH)[None] < lengths[:, None]).astype(np.int32))
        assert np.all(token_ids[padding == 0] == tokenizer.pad_token_id)
        eligible += int(np.sum(~np.isin(original, list(special)) & (padding == 1)))
        for r in range(len(lengths)):
            used = int(weights[r].sum())
            # weights: ones on the used slots, zero exactly on the unused ones
            assert np.array_equal(weights[r], (np.arange(MAX_PREDICTIONS) < used).astype(np.int32))
            assert np.all(positions[r, used:] == 0) and np.all(ids[r, used:] == 0)
            p = positions[r, :used]
            assert len(set(p.tolist())) == used and np.all(p < lengths[r])  # never padding
            assert not np.isin(original[r, p], list(special)).any()  # never [CLS]/[SEP]/[PAD]
            assert np.array_equal(original[r, p], ids[r, :used])
            masked += used
            replaced = token_ids[r, p]
            n_mask += int(np.sum(replaced == tokenizer.mask_token_id))
            n_same += int(np.sum(replaced == ids[r, :used]))
            n_random += int(np.sum((replaced != tokenizer.mask_token_id) & (replaced != ids[r, :used])))
    assert examples >= 10_000
    assert abs(masked / eligible - 0.15) <= 0.005, masked / eligible
    assert abs(n_mask / masked - 0.8) <= 0.015
    # a random replacement equal to the original counts as "same": 1 in 30522
    assert abs(n_random / masked - 0.1) <= 0.015
    assert abs(n_same / masked - 0.1) <= 0.015


def test_nsp_labels_balanced(many_batches):
    labels = np.concatenate([b["next_sentence_labels"].numpy() for b in many_batches])
    assert set(labels.tolist()) == {0, 1}
    assert abs(labels.mean() - 0.5) <= 0.02, labels.mean()


def test_segments_layout(many_batches, tokenizer):
    batch = many_batches[0]
    tokens = unmasked(batch)
    segment_ids = batch["segment_ids"].numpy()
    lengths = batch["padding_mask"].numpy().sum(1)
    for r in range(len(lengths)):
        row = tokens[r, : lengths[r]]
        assert row[0] == tokenizer.cls_token_id and row[-1] == tokenizer.sep_token_id
        seps = np.nonzero(row == tokenizer.sep_token_id)[0]
        assert len(seps) == 2 and seps[0] >= 2 and seps[1] - seps[0] >= 2  # A and B non-empty
        expected = np.zeros(SEQ_LENGTH, np.int32)
        expected[seps[0] + 1 : lengths[r]] = 1
        assert np.array_equal(segment_ids[r], expected)
        assert lengths[r] <= SEQ_LENGTH


def test_is_next_follows_and_not_next_from_other_document(many_batches, paths, tokenizer):
    index = TokenIndex(document_tokens(paths["train"], tokenizer))
    checked = {0: 0, 1: 0}
    for batch in many_batches[:12]:
        tokens = unmasked(batch)
        labels = batch["next_sentence_labels"].numpy()
        for row, label in zip(tokens, labels):
            a, b = split_pair(row, tokenizer)
            if len(a) < 8 or len(b) < 8:
                continue  # short segments occur in many places
            if label == 0:
                # IsNext: A immediately followed by B, in one document of the source
                assert index.find(np.concatenate([a, b])), "IsNext B does not follow A in the source"
            else:
                a_docs = {d for d, _ in index.find(a)}
                b_docs = {d for d, _ in index.find(b)}
                assert a_docs and b_docs, "segment not found in the source"
                assert b_docs - a_docs, "NotNext B comes from A's own document"
                assert not index.find(np.concatenate([a, b]))
            checked[int(label)] += 1
    assert checked[0] >= 200 and checked[1] >= 200, checked


def small_dataset(paths, tokenizer, **kwargs):
    options = dict(sequence_length=64, max_predictions_per_seq=10, batch_size=16, seed=3, shuffle_buffer_size=256)
    options.update(kwargs)
    return pretraining_dataset(paths["valid"], tokenizer, **options)


@pytest.mark.slow
def test_same_seed_same_batches_other_seed_different(paths, tokenizer):
    first = take(small_dataset(paths, tokenizer), 4)
    second = take(small_dataset(paths, tokenizer), 4)
    other = take(small_dataset(paths, tokenizer, seed=4), 4)
    for a, b in zip(first, second):
        for key in a:
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    assert not all(np.array_equal(a["token_ids"], c["token_ids"]) for a, c in zip(first, other))


def test_two_epochs_give_different_masks(paths, tokenizer, tmp_path):
    # Documents of one sentence shorter than sequence_length, no shuffling: both
    # passes build the same examples, only the masks are redrawn.
    sentences = [s for d in read_documents(paths["valid"]) for s in d if 12 <= len(s.split()) <= 30][:320]
    path = tmp_path / "sentences.txt"
    corpus.write_documents([[s] for s in sentences], path)
    dataset = pretraining_dataset(
        str(path), tokenizer, sequence_length=64, max_predictions_per_seq=10, batch_size=16, seed=3,
        nsp=False, shuffle=False, repeat=False, short_seq_prob=0.0,
    )
    epochs = [list(dataset), list(dataset)]
    assert len(epochs[0]) == len(epochs[1]) == 20
    same_mask = rows = 0
    for a, b in zip(*epochs):
        np.testing.assert_array_equal(unmasked(a), unmasked(b))
        for pa, pb in zip(a["mask_positions"].numpy(), b["mask_positions"].numpy()):
            rows += 1
            same_mask += np.array_equal(pa, pb)
    assert same_mask / rows < 0.05, same_mask / rows


def test_whole_word_masking_masks_whole_words(paths, tokenizer):
    vocab = tokenizer.get_vocabulary()
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    dataset = small_dataset(paths, tokenizer, whole_word_masking=True, sequence_length=128, max_predictions_per_seq=20)
    masked = eligible = continuation_masked = 0
    for batch in take(dataset, 20):
        original = unmasked(batch)
        positions = batch["mask_positions"].numpy()
        weights = batch["mask_weights"].numpy()
        lengths = batch["padding_mask"].numpy().sum(1)
        for r in range(len(lengths)):
            chosen = set(positions[r, : weights[r].sum()].tolist())
            masked += len(chosen)
            eligible += lengths[r] - 3
            for p in chosen:
                token = vocab[original[r, p]]
                previous = original[r, p - 1]
                if token.startswith("##") and previous not in special:
                    assert p - 1 in chosen, "a continuation piece was masked without its word start"
                    continuation_masked += 1
                following = original[r, p + 1]
                if following not in special and vocab[following].startswith("##"):
                    assert p + 1 in chosen, "a word start was masked without its continuation"
    assert continuation_masked > 20  # multi-piece words were masked, as whole words
    assert 0.12 < masked / eligible < 0.17


def test_mlm_only_mode_covers_documents_contiguously(paths, tokenizer):
    dataset = small_dataset(
        paths, tokenizer, nsp=False, shuffle=False, repeat=False, short_seq_prob=0.0, batch_size=1
    )
    documents = document_tokens(paths["valid"], tokenizer)
    total = sum(len(d) for d in documents)
    index = TokenIndex(documents)
    covered = 0
    for batch in dataset:
        row = unmasked(batch)[0]
        length = batch["padding_mask"].numpy().sum()
        assert row[0] == tokenizer.cls_token_id and row[length - 1] == tokenizer.sep_token_id
        assert not batch["segment_ids"].numpy().any()
        text = row[1 : length - 1]
        assert len(text) <= 62
        if len(text) >= 3:
            assert index.find(text)
        covered += len(text)
    assert covered == total  # every token exactly once per epoch


def shard_documents(paths, tokenizer, files, pipeline_id, index):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
    dataset = pretraining_dataset(
        files, tokenizer, sequence_length=64, max_predictions_per_seq=10, batch_size=1, nsp=False,
        shuffle=False, repeat=False, short_seq_prob=0.0, seed=5, input_context=context,
    )
    documents, tokens = set(), 0
    for batch in dataset:
        length = batch["padding_mask"].numpy().sum()
        text = unmasked(batch)[0, 1 : length - 1]
        tokens += len(text)
        if len(text) >= 30:
            hits = {d for d, _ in index.find(text)}
            assert len(hits) == 1
            documents |= hits
    return documents, tokens


@pytest.mark.parametrize("split_files", [False, True], ids=["by_document", "by_file"])
def test_two_input_pipelines_are_disjoint_and_cover_the_data(paths, tokenizer, tmp_path, split_files):
    documents = read_documents(paths["valid"])
    if split_files:  # two files for two pipelines: sharded by file
        files = []
        for i, part in enumerate((documents[::2], documents[1::2])):
            path = tmp_path / f"part{i}.txt"
            corpus.write_documents(part, path)
            files.append(str(path))
        path = tmp_path / "all.txt"
        corpus.write_documents(documents[::2] + documents[1::2], path)
        reference = str(path)
    else:  # one file: sharded by document
        files = reference = paths["valid"]
    doc_tokens = document_tokens(reference, tokenizer)
    index = TokenIndex(doc_tokens)
    docs0, tokens0 = shard_documents(paths, tokenizer, files, 0, index)
    docs1, tokens1 = shard_documents(paths, tokenizer, files, 1, index)
    assert docs0 and docs1 and not docs0 & docs1
    assert docs0 | docs1 == set(range(len(doc_tokens)))
    assert tokens0 + tokens1 == sum(len(d) for d in doc_tokens)


def test_single_document_corpus_draws_not_next_from_far_in_the_document(paths, tokenizer, tmp_path):
    document = max(read_documents(paths["valid"]), key=len)
    path = tmp_path / "one.txt"
    corpus.write_documents([document], path)
    (tokens,) = document_tokens(path, tokenizer)
    index = TokenIndex([tokens])
    batches = take(pretraining_dataset(str(path), tokenizer, sequence_length=64, batch_size=32, seed=2), 8)
    labels = np.concatenate([b["next_sentence_labels"].numpy() for b in batches])
    assert 0.3 < labels.mean() < 0.7
    for batch in batches:
        for row, label in zip(unmasked(batch), batch["next_sentence_labels"].numpy()):
            a, b = split_pair(row, tokenizer)
            if len(a) >= 3 and len(b) >= 3:
                assert index.find(a) and index.find(b)
                if label == 0:
                    assert index.find(np.concatenate([a, b]))


def test_one_sentence_documents(paths, tokenizer, tmp_path):
    sentences = [s for s in read_documents(paths["valid"])[0] if len(s.split()) >= 12][:60]
    path = tmp_path / "sentences.txt"
    corpus.write_documents([[s] for s in sentences], path)
    documents = document_tokens(path, tokenizer)
    index = TokenIndex(documents)
    batch = take(pretraining_dataset(str(path), tokenizer, sequence_length=64, batch_size=32, seed=0), 1)[0]
    for row, label in zip(unmasked(batch), batch["next_sentence_labels"].numpy()):
        a, b = split_pair(row, tokenizer)
        if label == 0 and len(a) + len(b) >= 3:  # a lone sentence is cut inside
            assert index.find(np.concatenate([a, b]))


def test_ten_megabyte_line_is_split_not_fatal(paths, tokenizer, tmp_path):
    text = " ".join(pathlib.Path(paths["train"]).read_text(encoding="utf-8").split())
    line = (text + " ") * (10_000_000 // len(text) + 1)
    path = tmp_path / "long_line.txt"
    path.write_text(line[:10_000_000] + "\n\nA second document. It is short.\n", encoding="utf-8")
    batches = take(
        pretraining_dataset(
            str(path), tokenizer, sequence_length=128, batch_size=64, seed=0, shuffle_buffer_size=64, repeat=False
        ),
        3,
    )
    assert all(b["token_ids"].shape == (64, 128) for b in batches)
    assert all(b["padding_mask"].numpy().sum(1).min() > 3 for b in batches)


def test_invalid_utf8_names_file_and_line(real_data, tokenizer):
    path = real_data / "bad_input" / "pg84_cp1252_excerpt.txt"
    data = path.read_bytes()
    first_bad = 1570  # the bad_input README: first invalid UTF-8 byte
    line = data.count(b"\n", 0, first_bad) + 1
    dataset = pretraining_dataset(str(path), tokenizer, sequence_length=64, batch_size=2, seed=0)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        next(iter(dataset))
    message = str(error.value)
    assert "invalid UTF-8" in message and str(path) in message and f"[at line] [{line}]" in message


def test_every_input_flag_reads_a_file_named_with_glob_characters_as_named(paths, tmp_path):
    # `shard[1].txt` as a pattern matches `shard1.txt`: beside one, training, the vocabulary, prepare_corpus and the
    # resume fingerprints silently took the other file; alone, it "matched no file".
    from keras_bert_impl.data.array_pretraining import _expand
    from keras_bert_impl.data.text_documents import expand_files
    from keras_bert_impl.file_patterns import expand_patterns
    from keras_bert_impl.text.vocabulary import expand_input_patterns
    from keras_bert_impl.training.pretraining_checks import training_file_fingerprints

    named, other = tmp_path / "shard[1].txt", tmp_path / "shard1.txt"
    named.write_text("The named file.\n")
    other.write_text("Another file, which a glob of the name matches.\n")
    for expand in (expand_files, expand_input_patterns, expand_patterns, _expand,
                   lambda pattern: list(training_file_fingerprints(pattern))):
        assert expand(str(named)) == [str(named)], expand
        assert expand(str(tmp_path / "shard?.txt")) == [str(other)], expand


def test_bad_arguments(paths, tokenizer, tmp_path):
    with pytest.raises(ValueError, match=r"no file matches '.*nothing-here-\*\.txt'"):
        pretraining_dataset(str(tmp_path / "nothing-here-*.txt"), tokenizer)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty.txt is empty"):
        pretraining_dataset(str(empty), tokenizer)
    with pytest.raises(ValueError, match=r"sequence_length=4 is too small for \[CLS\] A \[SEP\] B \[SEP\]"):
        pretraining_dataset(paths["valid"], tokenizer, sequence_length=4)
    with pytest.raises(ValueError, match=r"sequence_length=2 is too small for \[CLS\] A \[SEP\]"):
        pretraining_dataset(paths["valid"], tokenizer, sequence_length=2, nsp=False)
    with pytest.raises(ValueError, match="max_predictions_per_seq must be an integer in"):
        pretraining_dataset(paths["valid"], tokenizer, max_predictions_per_seq=0)
    with pytest.raises(ValueError, match="masking_rate must be in"):
        pretraining_dataset(paths["valid"], tokenizer, masking_rate=1.5)
    with pytest.raises(ValueError, match="short_seq_prob must be in"):
        pretraining_dataset(paths["valid"], tokenizer, short_seq_prob=-0.1)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        pretraining_dataset(paths["valid"], tokenizer, batch_size=0)


@pytest.mark.slow
def test_tfrecord_documents_give_the_same_batches_as_text(paths, tokenizer, tmp_path):
    from keras_bert_impl.data.document_records import write_document_records

    stats = write_document_records(paths["valid"], tokenizer, str(tmp_path / "records" / "valid"), num_shards=2)
    documents = document_tokens(paths["valid"], tokenizer)
    assert stats["documents"] == len(documents) and stats["tokens"] == sum(len(d) for d in documents)
    assert sorted(os.listdir(tmp_path / "records")) == [
        "valid-00000-of-00002.tfrecord", "valid-00001-of-00002.tfrecord"
    ]
    # Documents are dealt round-robin to the shards and read back alternately:
    # the same documents in the same order, so the same seed gives the same batches.
    options = dict(sequence_length=64, max_predictions_per_seq=10, batch_size=16, seed=7, shuffle=False,
                   repeat=False, whole_word_masking=True)
    from_text = list(pretraining_dataset(paths["valid"], tokenizer, **options))
    from_records = list(pretraining_dataset(str(tmp_path / "records" / "valid-*.tfrecord"), tokenizer, **options))
    assert len(from_text) == len(from_records) > 10
    for a, b in zip(from_text, from_records):
        for key in a:
            np.testing.assert_array_equal(a[key].numpy(), b[key].numpy())
    with pytest.raises(ValueError, match=r"mixes TFRecord shards of tokenised documents \(\*\.tfrecord\) and text"):
        pretraining_dataset([paths["valid"], stats["files"][0]], tokenizer)


DISTRIBUTED_SCRIPT = """
import json, sys
import tensorflow as tf
from keras_bert_impl.data import pretraining_dataset
from keras_bert_impl.text.tokenizer import BertTokenizer

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
tokenizer = BertTokenizer(sys.argv[2])
contexts = []

def dataset_fn(context):
    contexts.append((context.num_input_pipelines, context.input_pipeline_id, context.num_replicas_in_sync))
    return pretraining_dataset(sys.argv[1], tokenizer, sequence_length=32, max_predictions_per_seq=5,
                               batch_size=context.get_per_replica_batch_size(8), seed=1, input_context=context)

batch = next(iter(strategy.distribute_datasets_from_function(dataset_fn)))
shapes = {key: [list(t.shape) for t in strategy.experimental_local_results(value)] for key, value in batch.items()}
print(json.dumps({"contexts": contexts, "shapes": shapes}))
"""


@pytest.mark.slow
def test_distribute_datasets_from_function(paths, minilm_dir):
    # A fresh process: logical CPU devices must be set before TensorFlow starts.
    result = subprocess.run(
        [sys.executable, "-c", DISTRIBUTED_SCRIPT, paths["valid"], str(minilm_dir / "vocab.txt")],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["contexts"] == [[1, 0, 2]]  # one worker: one input pipeline for both replicas
    assert report["shapes"]["token_ids"] == [[4, 32], [4, 32]]
    assert report["shapes"]["mask_positions"] == [[4, 5], [4, 5]]
    assert report["shapes"]["next_sentence_labels"] == [[4], [4]]


def test_a_gutenberg_book_as_downloaded_is_named_with_the_command_that_prepares_it(shared_data, paths, tmp_path):
    """Before: a raw Project Gutenberg file trained as it was, licence header and wrapped lines included."""
    import warnings

    from keras_bert_impl.data.pretraining import check_pretraining_files

    book = tmp_path / "1184-0.txt"  # The Count of Monte Cristo's first 2,000 lines, as downloaded
    with open(shared_data / "corpus" / "gutenberg" / "1184-0.txt", encoding="utf-8-sig") as f:
        book.write_text("".join(line for _, line in zip(range(2000), f)), encoding="utf-8")
    with pytest.warns(UserWarning) as caught:
        check_pretraining_files([str(book)])
    assert [str(w.message) for w in caught] == [
        f"{book} is a Project Gutenberg book as downloaded: its licence header and footer would train as text, and "
        f"each wrapped line would be read as a sentence; python recipes/prepare_corpus.py --input {book} --output "
        "<file> writes it as pretraining text (documents, one sentence a line)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_pretraining_files(paths["valid"])  # prepared text: no warning


def test_check_pretraining_files_names_file_line_and_byte_before_any_iteration(real_data, paths, tmp_path):
    from keras_bert_impl.data.pretraining import check_pretraining_files

    assert check_pretraining_files(paths["valid"]) == [paths["valid"]]
    bad = os.path.join(real_data, "bad_input", "pg84_cp1252_excerpt.txt")
    if os.path.exists(bad):
        with pytest.raises(ValueError) as error:
            check_pretraining_files(bad)
        assert str(error.value).startswith(
            f"{bad}, line 25, column 17: byte 0x97 at byte offset 1570 of the file is not valid UTF-8; the file looks "
            "like Windows-1252 or Latin-1: re-encode it as UTF-8, e.g. iconv -f WINDOWS-1252 -t UTF-8 "
            "pg84_cp1252_excerpt.txt > utf8_pg84_cp1252_excerpt.txt, or prepare it with recipes/prepare_corpus.py "
            "--errors replace")
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes("One.\r\nTwo.\r\n\r\nThe caf\u00e9.\r\n".encode("cp1252"))
    with pytest.raises(ValueError, match=r"crlf.txt, line 4, column 8: byte 0xe9 at byte offset 21 of the file is not valid UTF-8"):
        check_pretraining_files(str(crlf))
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(ValueError, match=r"model.bin, line 1, column 1: a NUL byte \(at byte offset 0\)"):
        check_pretraining_files(str(binary))
    # An executable or an image has a byte that is not UTF-8 before its first NUL: it is named as a binary file, not
    # as Windows-1252 text with an iconv command that would turn it into garbage text.
    for name, head, where in (("tool", b"\x7fELF\x02\x01\x01\x00" + bytes(16) + b"\xd0\x11", "line 1, column 8: a NUL "
                               "byte (at byte offset 7)"),
                              ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "line 3, column 1: a NUL byte "
                               "(at byte offset 8)")):
        (tmp_path / name).write_bytes(head + b"\xff text\n" * 10)
        with pytest.raises(ValueError) as error:
            check_pretraining_files(str(tmp_path / name))
        assert str(error.value) == (f"{tmp_path / name}, {where}: this is a binary file, not UTF-8 text with one "
                                    "sentence a line")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n\t\n")
    with pytest.raises(ValueError, match="blank.txt holds only blank lines"):
        check_pretraining_files(str(blank))
    records = tmp_path / "shard.tfrecord"
    records.write_bytes(b"not a record file at all")
    with pytest.raises(ValueError, match="shard.tfrecord: not a TFRecord shard of tokenised documents"):
        check_pretraining_files(str(records))
    with pytest.raises(ValueError, match="mixes TFRecord shards"):
        check_pretraining_files([str(records), paths["valid"]])
