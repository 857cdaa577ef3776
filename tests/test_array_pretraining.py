"""The NumPy pretraining pipeline (`data/array_*`) against the TensorFlow one it twins.

Pairing and masking are compared number for number: the NumPy functions take
their random numbers from a `draws` object, and `_TensorflowDraws` hands them the
numbers TensorFlow's stateless ops draw for the same seed, so both pipelines
must build identical examples and masks from the bundled corpus's documents.
The batch iterator is checked for shapes, reproducibility, fresh masks every
pass, the 15% / 80-10-10 rates and the IsNext/NotNext balance, and the modules
are imported in a subprocess where TensorFlow cannot be imported.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_impl.data import array_masking, array_sentence_pairs, corpus, sentence_pairs
from keras_bert_impl.text import masking
from keras_bert_impl.data.array_pretraining import (ArrayPretrainingBatches, read_document_arrays,
                                                    write_document_arrays)
from keras_bert_impl.data.document_records import tokenize_documents
from keras_bert_impl.text.tokenizer import BertTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIR_DRAWS = {  # name -> (index of the seed in stateless_split(seed, 8), dtype): sentence_pairs' draws
    "document_short": (0, tf.float32), "short_length": (1, tf.int64), "phase": (2, tf.float32),
    "cut": (3, tf.float64), "is_random": (4, tf.float32), "other_document": (5, tf.float64),
    "other_sentence": (6, tf.float64),
}


class _TensorflowDraws:
    """The random numbers `sentence_pairs.documents_to_examples` / `masking.mask_batch` draw for `seed`."""

    def __init__(self, seed, kind):
        seed = tf.constant(seed, tf.int64)
        if kind == "pairs":
            seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 8))
            self.seeds = {name: (seeds[i], dtype) for name, (i, dtype) in PAIR_DRAWS.items()}
        else:
            select, values = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
            key, count = tf.unstack(tf.random.experimental.stateless_split(select, 2))
            choice, random = tf.unstack(tf.random.experimental.stateless_split(values, 2))
            self.seeds = {"mask_order": (key, tf.float32), "mask_count": (count, tf.float32),
                          "mask_value": (choice, tf.float32), "random_token": (random, tf.int32)}
        self.used = set()

    def uniform(self, name, size, dtype):
        seed, tf_dtype = self.seeds[name]
        assert np.dtype(dtype) == np.dtype(tf_dtype.as_numpy_dtype), name
        self.used.add(name)
        return tf.random.stateless_uniform([size], seed, dtype=tf_dtype).numpy()

    def integers(self, name, low, high, size, dtype=np.int64):
        seed, tf_dtype = self.seeds[name]
        assert np.dtype(dtype) == np.dtype(tf_dtype.as_numpy_dtype), name
        self.used.add(name)
        return tf.random.stateless_uniform([size], seed, minval=low, maxval=high, dtype=tf_dtype).numpy()


@pytest.fixture(scope="module")
def documents():
    """The bundled corpus's held-out documents, tokenised (lists of sentences of ids)."""
    paths = corpus.bundled_corpus()
    tokenizer = BertTokenizer(paths["vocab"])
    return list(tokenize_documents(paths["valid"], tokenizer)), tokenizer


def _group(documents, indices):
    sentences = [s for d in indices for s in documents[d]]
    return {
        "token_ids": np.array([t for s in sentences for t in s], np.int32),
        "sentence_lengths": np.array([len(s) for s in sentences], np.int64),
        "sentence_documents": np.repeat(np.arange(len(indices)), [len(documents[d]) for d in indices]),
        "document_ids": np.array(indices, np.int64),
    }


def _both_pairings(group, seed, **options):
    tf_out = sentence_pairs.documents_to_examples(
        tf.RaggedTensor.from_row_lengths(group["token_ids"], group["sentence_lengths"]),
        tf.constant(group["sentence_documents"], tf.int64), tf.constant(group["document_ids"]),
        tf.constant(seed, tf.int64), **options)
    draws = _TensorflowDraws(seed, "pairs")
    np_out = array_sentence_pairs.documents_to_examples(
        group["token_ids"], group["sentence_lengths"], group["sentence_documents"], group["document_ids"], draws,
        **options)
    return {k: v.numpy() for k, v in tf_out.items()}, np_out, draws


SPECIAL = dict(cls_token_id=2, sep_token_id=3, pad_token_id=0)


@pytest.mark.parametrize("case, indices, options", [
    ("twelve documents", list(range(12)), dict(sequence_length=128, short_seq_prob=0.1, nsp=True)),
    ("short targets, seq 64", list(range(3, 15)), dict(sequence_length=64, short_seq_prob=0.5, nsp=True)),
    ("a document twice (the stream wrapped)", [4, 5, 4, 6], dict(sequence_length=128, short_seq_prob=0.1, nsp=True)),
    ("one document (NotNext from far in it)", [7], dict(sequence_length=64, short_seq_prob=0.1, nsp=True)),
    ("sentences longer than the budget", [0, 1], dict(sequence_length=8, short_seq_prob=0.0, nsp=True)),
    ("MLM only", list(range(8)), dict(sequence_length=128, short_seq_prob=0.1, nsp=False)),
])
def test_pairs_equal_tensorflow_given_the_same_random_numbers(documents, case, indices, options):
    docs, _ = documents
    for seed in ([1, 2], [7, 3], [123, 456]):
        expected, actual, draws = _both_pairings(_group(docs, indices), seed, **options, **SPECIAL)
        assert sorted(actual) == sorted(expected), case
        assert len(expected["lengths"]) > 0, case
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key], err_msg=f"{case}, seed {seed}: {key}")
            assert actual[key].dtype == expected[key].dtype, key
    if options["nsp"]:
        assert draws.used == set(PAIR_DRAWS), draws.used  # every random decision came from TensorFlow's numbers
        labels = expected["next_sentence_labels"]
        assert 0 < labels.mean() < 1, case


@pytest.mark.parametrize("masking_rate, max_predictions", [(0.15, 20), (0.5, 5), (1.0, 128)])
def test_masks_equal_tensorflow_given_the_same_random_numbers(documents, masking_rate, max_predictions):
    docs, tokenizer = documents
    examples, _, _ = _both_pairings(_group(docs, list(range(12))), [5, 6], sequence_length=128,
                                    short_seq_prob=0.1, nsp=True, cls_token_id=tokenizer.cls_token_id,
                                    sep_token_id=tokenizer.sep_token_id, pad_token_id=tokenizer.pad_token_id)
    options = dict(max_predictions_per_seq=max_predictions, masking_rate=masking_rate,
                   vocab_size=tokenizer.vocabulary_size(), mask_token_id=tokenizer.mask_token_id,
                   special_token_ids=[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id],
                   pad_token_id=tokenizer.pad_token_id)
    for seed in ([1, 2], [9, 9]):
        expected = masking.mask_batch(tf.constant(examples["token_ids"]), tf.constant(examples["lengths"]),
                                      tf.constant(seed, tf.int64), **options)
        draws = _TensorflowDraws(seed, "masks")
        actual = array_masking.mask_batch(examples["token_ids"], examples["lengths"], draws, **options)
        assert draws.used == {"mask_order", "mask_count", "mask_value", "random_token"}
        assert sorted(actual) == sorted(expected)
        for key in expected:
            np.testing.assert_array_equal(actual[key], expected[key].numpy(), err_msg=f"seed {seed}: {key}")
        assert actual["mask_weights"].sum() > 0


@pytest.fixture(scope="module")
def array_file(documents, tmp_path_factory):
    docs, tokenizer = documents
    path = str(tmp_path_factory.mktemp("arrays") / "valid.npz")
    stats = write_document_arrays(docs, tokenizer.get_vocabulary(), path)
    assert stats == {"file": path, "documents": len(docs), "sentences": sum(len(d) for d in docs),
                     "tokens": sum(len(s) for d in docs for s in d)}
    return path, tokenizer


def test_the_array_file_round_trips_the_documents_and_the_vocabulary(documents, array_file):
    docs, tokenizer = documents
    arrays = read_document_arrays(array_file[0])
    assert arrays["token_ids"].dtype == np.uint16  # 30,522 ids fit
    assert list(arrays["document_sentences"]) == [len(d) for d in docs]
    assert list(arrays["sentence_lengths"]) == [len(s) for d in docs for s in d]
    assert arrays["token_ids"].tolist() == [t for d in docs for s in d for t in s]
    assert list(arrays["vocabulary"]) == tokenizer.get_vocabulary()


def test_batches_have_the_tensorflow_pipelines_keys_shapes_and_dtypes(array_file):
    path, tokenizer = array_file
    batches = ArrayPretrainingBatches(path, sequence_length=64, max_predictions_per_seq=10, batch_size=8, seed=0)
    reference = next(iter(__import__("keras_bert_impl.data.pretraining", fromlist=["x"]).pretraining_dataset(
        corpus.bundled_corpus()["valid"], tokenizer, sequence_length=64, max_predictions_per_seq=10,
        batch_size=8, seed=0)))
    batch = next(iter(batches))
    assert list(batch) == list(reference)
    for key, value in batch.items():
        assert value.shape == tuple(reference[key].shape) and value.dtype == np.int32, key
    assert batches.vocabulary_size() == tokenizer.vocabulary_size()
    assert batches.special_ids == {"cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id,
                                   "mask": tokenizer.mask_token_id, "pad": tokenizer.pad_token_id}
    tokens = batch["token_ids"]
    assert (tokens[:, 0] == tokenizer.cls_token_id).all()
    assert ((tokens == tokenizer.sep_token_id).sum(axis=1) >= 1).all()  # a [SEP] may be masked away
    lengths = batch["padding_mask"].sum(axis=1)
    assert (tokens[np.arange(64)[None, :] >= lengths[:, None]] == tokenizer.pad_token_id).all()


def test_the_same_seed_gives_the_same_batches_and_every_pass_new_ones(array_file):
    path, _ = array_file

    def first_two(batches):
        it = iter(batches)
        return [next(it), next(it)]

    options = dict(sequence_length=64, max_predictions_per_seq=10, batch_size=8)
    a, b = (first_two(ArrayPretrainingBatches(path, seed=3, **options)) for _ in range(2))
    for x, y in zip(a, b):
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    batches = ArrayPretrainingBatches(path, seed=3, shuffle=False, repeat=False, **options)
    first_pass, second_pass = next(iter(batches)), next(iter(batches))
    # Unshuffled: the same first examples, paired and masked anew.
    assert not np.array_equal(first_pass["mask_positions"], second_pass["mask_positions"])


def test_one_pass_covers_the_documents_and_the_rates_are_berts(array_file):
    path, tokenizer = array_file
    batches = ArrayPretrainingBatches(path, sequence_length=128, max_predictions_per_seq=40, batch_size=32, seed=1,
                                      repeat=False)
    seen = list(batches)
    assert len(seen) > 5
    stacked = {k: np.concatenate([b[k] for b in seen]) for k in seen[0]}
    labels = stacked["next_sentence_labels"]
    assert 0.4 < labels.mean() < 0.6, labels.mean()
    weights = stacked["mask_weights"].astype(bool)
    eligible = stacked["padding_mask"].sum() - 2 * len(labels) - len(labels)  # minus [CLS] and two [SEP]
    assert 0.14 < weights.sum() / eligible < 0.16  # max_predictions_per_seq is no cap at 128 / 40
    rows, slots = np.nonzero(weights)
    at_positions = stacked["token_ids"][rows, stacked["mask_positions"][rows, slots]]
    originals = stacked["mask_ids"][rows, slots]
    masked = (at_positions == tokenizer.mask_token_id).mean()
    unchanged = (at_positions == originals).mean()
    assert 0.77 < masked < 0.83 and 0.08 < unchanged < 0.12, (masked, unchanged)


@pytest.mark.parametrize("case, make, message", [
    ("no such file", lambda d: str(d / "missing.npz"), "{path}: no such file"),
    ("not an npz", lambda d: _write(d / "text.npz", b"hello"), "{path}: not a tokenised-document array file (.npz): not a zip archive"),
    ("other arrays", lambda d: _savez(d / "other.npz", x=np.zeros(3)),
     "{path}: not a tokenised-document array file (written by recipes/prepare_pretraining_data.py --output_format "
     "npz): no token_ids, sentence_lengths, document_sentences, vocabulary"),
    ("lengths off", lambda d: _savez(d / "off.npz", token_ids=np.zeros(5, np.uint16), sentence_lengths=np.array([3]),
                                     document_sentences=np.array([1]), vocabulary=np.array(["[PAD]"])),
     "{path}: inconsistent arrays: the sentence lengths add up to 3 tokens (the file holds 5) and the documents to 1 "
     "sentences (the file holds 1); write it again"),
])
def test_a_bad_array_file_is_one_line_naming_it(tmp_path, case, make, message):
    path = make(tmp_path)
    with pytest.raises((ValueError, FileNotFoundError)) as caught:
        ArrayPretrainingBatches(path)
    assert str(caught.value).startswith(message.format(path=path)), (case, str(caught.value))


def test_a_vocabulary_without_special_tokens_and_bad_arguments_are_named(tmp_path):
    path = str(tmp_path / "plain.npz")
    write_document_arrays([[[1, 2, 3], [4, 5]]], ["a", "b", "c", "d", "e", "f"], path)
    with pytest.raises(ValueError) as caught:
        ArrayPretrainingBatches(path)
    assert str(caught.value) == f"{path}: the vocabulary has no [CLS], [SEP], [MASK], [PAD] token"
    with pytest.raises(ValueError) as caught:
        write_document_arrays([[[1, 9]]], ["a", "b"], str(tmp_path / "ids.npz"))
    assert str(caught.value) == f"{tmp_path / 'ids.npz'}: token ids must be in [0, 2) (the vocabulary's size), got ids from 1 to 9"
    with pytest.raises(ValueError, match=r"^sequence_length=4 is too small for \[CLS\] A \[SEP\] B \[SEP\]"):
        ArrayPretrainingBatches(path, sequence_length=4)
    with pytest.raises(ValueError, match=r"^batch_size must be a positive integer, got 0$"):
        ArrayPretrainingBatches(path, batch_size=0)


def _write(path, data):
    path.write_bytes(data)
    return str(path)


def _savez(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_the_array_pipeline_runs_where_tensorflow_cannot_be_imported(array_file):
    pytest.importorskip("jax")  # the package imports Keras, which needs a backend other than TensorFlow there
    path, _ = array_file
    code = f"""
import sys, json
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
from keras_bert_impl.data.array_pretraining import ArrayPretrainingBatches
batch = next(iter(ArrayPretrainingBatches({path!r}, sequence_length=64, max_predictions_per_seq=10, batch_size=4)))
print(json.dumps({{k: list(v.shape) for k, v in batch.items()}}))
"""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["token_ids"] == [4, 64]


def test_the_recipe_writes_the_array_file_and_refuses_shards(tmp_path, capsys, documents):
    from repo_scripts import load_script

    recipe = load_script("recipes/prepare_pretraining_data.py")
    paths = corpus.bundled_corpus()
    recipe.main(["--input", paths["valid"], "--vocab", paths["vocab"], "--output_prefix", str(tmp_path / "valid"),
                 "--output_format", "npz"])
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["file"] == str(tmp_path / "valid.npz") and stats["documents"] == len(documents[0])
    assert read_document_arrays(stats["file"])["token_ids"].size == stats["tokens"]
    with pytest.raises(SystemExit):
        recipe.main(["--input", paths["valid"], "--vocab", paths["vocab"], "--output_prefix", str(tmp_path / "x"),
                     "--output_format", "npz", "--num_shards", "4"])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "--num_shards 4: --output_format npz writes one file; drop --num_shards")


def test_file_list_and_vocabulary_errors_name_the_file(tmp_path):
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    first, second, empty = (str(tmp_path / name) for name in ("first.npz", "second.npz", "empty.npz"))
    write_document_arrays([[[5, 6], [7]]], vocabulary, first)
    write_document_arrays([[[5, 6], [7]]], vocabulary[:-1] + ["z"], second)
    write_document_arrays([], vocabulary, empty)
    cases = [
        (lambda: ArrayPretrainingBatches([first, second]),
         f"{second}: written with another vocabulary than {first}; tokenise every file with the vocabulary of the "
         "model"),
        (lambda: ArrayPretrainingBatches(empty), f"{empty}: no tokens to pretrain on"),
        (lambda: ArrayPretrainingBatches([]), "files is empty: pass at least one .npz file of tokenised documents"),
        (lambda: ArrayPretrainingBatches(str(tmp_path / "shard-*.npz")),
         f"no file matches '{tmp_path / 'shard-*.npz'}'"),
        (lambda: write_document_arrays([[[5]]], vocabulary, str(tmp_path / "docs.npy")),
         f"{tmp_path / 'docs.npy'}: a document array file must end in .npz"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as caught:
            make()
        assert str(caught.value) == message
    assert len(list(ArrayPretrainingBatches(str(tmp_path / "first.npz"), sequence_length=8,
                                            max_predictions_per_seq=2, batch_size=1, repeat=False))) >= 1
