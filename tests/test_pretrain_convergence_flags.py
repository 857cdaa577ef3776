"""benchmarks/pretrain_convergence.py: the flags of a GPU run without TensorFlow.

`--token_arrays DIR` draws the batches on the fly with the NumPy pipeline; every run (each
implementation, precision and model seed) must see the same batches, and a bad flag is one line.
"""


import numpy as np
import pytest
from repo_scripts import load_script

from keras_bert_impl.data import corpus
from keras_bert_impl.data.array_pretraining import write_document_arrays
from keras_bert_impl.data.document_records import tokenize_documents
from keras_bert_impl.text.tokenizer import BertTokenizer


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/pretrain_convergence.py")


@pytest.fixture(scope="module")
def token_arrays(tmp_path_factory):
    """The bundled corpus's held-out split as both train.npz and valid.npz (small and real)."""
    paths = corpus.bundled_corpus()
    tokenizer = BertTokenizer(paths["vocab"])
    directory = tmp_path_factory.mktemp("token_arrays")
    documents = list(tokenize_documents(paths["valid"], tokenizer))
    for split in ("train", "valid"):
        write_document_arrays(documents, tokenizer.get_vocabulary(), str(directory / f"{split}.npz"))
    return str(directory)


def test_every_slice_of_the_array_batches_draws_the_same_batches(bench, token_arrays):
    args = type("Args", (), dict(token_arrays=token_arrays, sequence_length=64, max_predictions_per_seq=10,
                                 batch_size=8, seed=0, steps=6, eval_batches=2))()
    train, valid, vocab_size = bench.array_data(args)
    assert len(train) == 6 and len(valid) == 2 and vocab_size == BertTokenizer(corpus.bundled_corpus()["vocab"]).vocabulary_size()
    whole = list(train[0:])
    assert len(whole) == 6
    later = list(train[2:])  # the timed part of a run starts after the compiled warm-up steps
    for a, b in zip(whole[2:], later):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(whole[0]["token_ids"], whole[1]["token_ids"])
    with pytest.raises(TypeError, match=r"^the batches are a stream: take them as batches\[first:last\]$"):
        train[3]


@pytest.mark.parametrize("flags, message", [
    (["--mixed_precision", "fp8"], "--mixed_precision='fp8': expected auto, none, bf16 or fp16"),
    (["--steps_per_execution", "0"], "--steps_per_execution must be >= 1, got 0"),
    (["--steps", "30", "--steps_per_execution", "20"],
     "--steps 30 must be a multiple of --steps_per_execution 20: Keras runs whole executions"),
    (["--steps", "20", "--steps_per_execution", "20"],
     "--steps 20: at least two --steps_per_execution (20) are needed: the first call compiles, outside the timing"),
    (["--load_batches", "x.npz", "--token_arrays", "d"],
     "--load_batches and --token_arrays are two sources of batches: pass one"),
    (["--token_arrays", "/nonexistent/arrays"],
     "--token_arrays /nonexistent/arrays: no train.npz or valid.npz there (write them with --save_token_arrays on a "
     "host with TensorFlow)"),
])
def test_a_bad_flag_is_one_line(bench, capsys, flags, message):
    with pytest.raises(SystemExit):
        bench.main(flags)
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_prefetching_thread_passes_batches_in_order_and_errors_through(bench):
    assert list(bench._prefetched(iter(range(20)), depth=3)) == list(range(20))

    def failing():
        yield 1
        raise ValueError("train.npz: broken")

    stream = bench._prefetched(failing())
    assert next(stream) == 1
    with pytest.raises(ValueError, match="^train.npz: broken$"):
        next(stream)
