"""SegmentPacker: truncation strategies against reference loops, packing layout, tf.data, errors."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.text.packer import SegmentPacker, truncated_lengths

CLS, SEP, PAD = 101, 102, 0


def _original_bert_truncate_seq_pair(a, b, budget):
    """google-research/bert run_classifier.py `_truncate_seq_pair`."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return len(a), len(b)


def _round_robin(a, b, budget):
    taken = [0, 0]
    lengths = [a, b]
    turn = 0
    while sum(taken) < budget and any(t < n for t, n in zip(taken, lengths)):
        if taken[turn] < lengths[turn]:
            taken[turn] += 1
        turn = 1 - turn
    return tuple(taken)


def _grid():
    return [(a, b, n) for a, b, n in itertools.product(range(13), range(13), range(1, 16))]


@pytest.mark.parametrize("truncate", ["round_robin", "waterfall", "longest_first"])
def test_truncated_lengths_match_reference_loops(truncate):
    grid = _grid()
    a = tf.constant([g[0] for g in grid], tf.int64)
    b = tf.constant([g[1] for g in grid], tf.int64)
    for budget in range(1, 16):
        rows = [i for i, g in enumerate(grid) if g[2] == budget]
        new_a, new_b = truncated_lengths(tf.gather(a, rows), tf.gather(b, rows), budget, truncate)
        got = list(zip(new_a.numpy().tolist(), new_b.numpy().tolist()))
        for (la, lb, _), result in zip([grid[i] for i in rows], got):
            if truncate == "longest_first":
                expected = _original_bert_truncate_seq_pair(range(la), range(lb), budget)
            elif truncate == "round_robin":
                expected = _round_robin(la, lb, budget)
            else:
                expected = (min(la, budget), min(lb, budget - min(la, budget)))
            assert result == expected, (truncate, la, lb, budget)


@pytest.mark.parametrize(
    "truncate, trimmer",
    [("round_robin", tf_text.RoundRobinTrimmer), ("waterfall", tf_text.WaterfallTrimmer)],
)
def test_truncation_agrees_with_tensorflow_text_trimmers(truncate, trimmer):
    rng = np.random.default_rng(0)
    a = tf.ragged.constant([list(range(n)) for n in rng.integers(0, 40, 200)], dtype=tf.int32)
    b = tf.ragged.constant([list(range(100, 100 + n)) for n in rng.integers(0, 40, 200)], dtype=tf.int32)
    packer = SegmentPacker(32, CLS, SEP, PAD, truncate=truncate, pad=False)
    packed = packer((a, b))["token_ids"]
    trimmed = trimmer(max_seq_length=29).trim([a, b])
    expected = tf.concat([tf.fill([200, 1], CLS), trimmed[0], tf.fill([200, 1], SEP), trimmed[1], tf.fill([200, 1], SEP)], 1)
    assert packed.to_list() == expected.to_list()


def test_pair_layout_and_padding():
    packer = SegmentPacker(10, CLS, SEP, PAD)
    out = packer((tf.ragged.constant([[1, 2, 3], [4]]), tf.ragged.constant([[5, 6], []])))
    assert out["token_ids"].numpy().tolist() == [
        [CLS, 1, 2, 3, SEP, 5, 6, SEP, PAD, PAD],
        [CLS, 4, SEP, SEP, PAD, PAD, PAD, PAD, PAD, PAD],
    ]
    assert out["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]]
    assert out["padding_mask"].numpy().tolist() == [[1] * 8 + [0] * 2, [1] * 4 + [0] * 6]
    assert all(v.dtype == tf.int32 and v.shape == (2, 10) for v in out.values())


def test_single_segment_is_cut_to_sequence_length():
    out = SegmentPacker(5, CLS, SEP, PAD)(tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7]]))
    assert out["token_ids"].numpy().tolist() == [[CLS, 1, 2, 3, SEP], [CLS, 7, SEP, PAD, PAD]]


def test_unbatched_and_dense_inputs():
    packer = SegmentPacker(6, CLS, SEP, PAD, truncate="longest_first")
    single = packer((tf.constant([1, 2, 3, 4]), tf.constant([5, 6])))
    assert single["token_ids"].numpy().tolist() == [CLS, 1, 2, SEP, 5, SEP]
    dense = packer(tf.constant([[1, 2], [3, 4]], tf.int64))
    assert dense["token_ids"].numpy().tolist() == [[CLS, 1, 2, SEP, PAD, PAD], [CLS, 3, 4, SEP, PAD, PAD]]


def test_unpadded_and_untruncated_modes():
    a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7]])
    truncated = SegmentPacker(5, CLS, SEP, PAD, pad=False)(a)["token_ids"]
    assert truncated.to_list() == [[CLS, 1, 2, 3, SEP], [CLS, 7, SEP]]
    whole = SegmentPacker(None, CLS, SEP, PAD)(a)["token_ids"]
    assert whole.to_list() == [[CLS, 1, 2, 3, 4, 5, 6, SEP], [CLS, 7, SEP]]


def test_packs_real_sentence_pairs_in_tf_data(shared_data, minilm_dir):
    import csv

    from keras_bert_impl.text.tokenizer import BertTokenizer

    with open(shared_data / "glue" / "MRPC" / "dev.tsv", encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    first, second = [r[3] for r in rows], [r[4] for r in rows]
    tokenizer = BertTokenizer(minilm_dir / "vocab.txt")
    packer = SegmentPacker.from_tokenizer(tokenizer, 32, truncate="longest_first")
    dataset = tf.data.Dataset.from_tensor_slices((first, second)).batch(64).map(
        lambda a, b: packer((tokenizer(a), tokenizer(b)))
    )
    batches = list(dataset)
    token_ids = np.concatenate([b["token_ids"].numpy() for b in batches])
    segment_ids = np.concatenate([b["segment_ids"].numpy() for b in batches])
    assert token_ids.shape == (len(rows), 32)
    a_ids, b_ids = tokenizer(first).to_list(), tokenizer(second).to_list()
    for row, (a, b) in enumerate(zip(a_ids, b_ids)):
        la, lb = _original_bert_truncate_seq_pair(a, b, 29)
        expected = [CLS, *a[:la], SEP, *b[:lb], SEP]
        expected += [PAD] * (32 - len(expected))
        assert token_ids[row].tolist() == expected
        assert segment_ids[row].tolist() == [0] * (la + 2) + [1] * (lb + 1) + [0] * (32 - la - lb - 3)


def test_get_config_round_trip():
    packer = SegmentPacker(16, CLS, SEP, PAD, truncate="waterfall")
    clone = SegmentPacker.from_config(packer.get_config())
    segments = (tf.ragged.constant([[1] * 20]), tf.ragged.constant([[2] * 20]))
    assert clone(segments)["token_ids"].numpy().tolist() == packer(segments)["token_ids"].numpy().tolist()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sequence_length": 2}, "must be an int >= 3"),
        ({"sequence_length": 8.0}, "must be an int >= 3"),
        ({"truncate": "middle"}, "must be one of round_robin, waterfall, longest_first; got 'middle'"),
        ({"start_value": "[CLS]"}, "`start_value` must be an int token id"),
    ],
)
def test_constructor_errors(kwargs, message):
    arguments = {"sequence_length": 8, "start_value": CLS, "end_value": SEP, "pad_value": PAD, **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        SegmentPacker(**arguments)


def test_call_errors():
    a = tf.ragged.constant([[1, 2]])
    with pytest.raises(ValueError, match="one or two segments; got 3"):
        SegmentPacker(8, CLS, SEP)((a, a, a))
    with pytest.raises(ValueError, match="sequence_length=4 leaves no room for 2 segment"):
        SegmentPacker(4, CLS, SEP)((a, a))
    with pytest.raises(ValueError, match="integer token ids; got dtype string"):
        SegmentPacker(8, CLS, SEP)(tf.constant(["a"]))
    with pytest.raises(ValueError, match="all the same"):
        SegmentPacker(8, CLS, SEP)((a, tf.constant([1, 2])))
