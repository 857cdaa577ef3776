"""benchmarks/padding_fraction.py (issue 18): first-fit-decreasing packing and the padding arithmetic.

Pure Python/NumPy on hand-checkable lengths: no data, no TensorFlow, no network.
"""

import numpy as np
import pytest
from repo_scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/padding_fraction.py")


def test_ffd_two_rows(bench):
    # Longest first: 100 -> row 0 (28 free), 60 -> row 1 (68 free), 40 -> row 1 (28 free), 28 -> row 0 (full).
    assert bench.pack_first_fit_decreasing([40, 100, 28, 60], 128) == [128, 100]


def test_ffd_needs_three_rows_when_no_pair_fits(bench):
    # 230 tokens would fit 2 rows of 128 by count, but 100 + 30 > 128 and 60 + 40 + 30 > 128: 3 rows.
    loads = bench.pack_first_fit_decreasing([100, 60, 40, 30], 128)
    assert loads == [100, 100, 30]
    assert len(loads) == 3


def test_ffd_first_fit_takes_the_lowest_row(bench):
    # 60 -> row 0 (40 free), 45 -> row 1 (55 free), 42 -> row 1 (13 free; row 0 is too full),
    # 12 -> row 0 (the first row with room), where best fit would take row 1 (1 left).
    assert bench.pack_first_fit_decreasing([12, 42, 45, 60], 100) == [72, 87]
    # sorted 64, 50, 50, 14, 14 into rows of 64: [64], [50, 14], [50, 14].
    assert bench.pack_first_fit_decreasing([14, 50, 64, 14, 50], 64) == [64, 64, 64]


def test_ffd_conserves_tokens_and_respects_capacity(bench):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 129, size=2000)
    loads = bench.pack_first_fit_decreasing(lengths, 128)
    assert sum(loads) == int(lengths.sum())
    assert max(loads) <= 128
    assert len(loads) >= -(-int(lengths.sum()) // 128)
    assert bench.pack_first_fit_decreasing([], 128) == []


def _naive_ffd(lengths, capacity):
    loads = []
    for x in sorted(lengths, reverse=True):
        row = next((i for i, load in enumerate(loads) if load + x <= capacity), None)
        if row is None:
            loads.append(x)
        else:
            loads[row] += x
    return loads


def test_ffd_tree_equals_the_plain_scan(bench):
    rng = np.random.default_rng(1)
    for capacity, size in ((16, 37), (64, 200), (128, 513), (384, 300)):
        lengths = rng.integers(1, capacity + 1, size=size).tolist()
        assert bench.pack_first_fit_decreasing(lengths, capacity) == _naive_ffd(lengths, capacity)


def test_ffd_refuses_bad_lengths(bench):
    with pytest.raises(ValueError):
        bench.pack_first_fit_decreasing([129], 128)
    with pytest.raises(ValueError):
        bench.pack_first_fit_decreasing([0, 5], 128)
    with pytest.raises(ValueError):
        bench.pack_first_fit_decreasing([5], 0)


def test_fractions(bench):
    lengths = [100, 60, 40, 28]  # 228 real tokens
    fixed = bench.fixed_padding(lengths, 128)
    assert fixed == {"tokens": 512, "real_tokens": 228, "padding_fraction": round(284 / 512, 4)}
    assert bench.padding_fraction(228, 512) == 284 / 512
    packed = bench.packed_padding(lengths, 128, fixed_tokens=512, recipe_tokens=384)
    assert packed["rows"] == 2 and packed["rows_lower_bound"] == 2
    assert packed["tokens"] == 256
    assert packed["padding_fraction"] == round(28 / 256, 4)
    assert packed["speedup_bound_vs_fixed"] == 2.0
    assert packed["speedup_bound_vs_recipe_batching"] == 1.5
    assert bench.padding_fraction(7, 7) == 0.0
    with pytest.raises(ValueError):
        bench.padding_fraction(8, 7)
    stats = bench.length_stats([10, 20, 30, 40])
    assert stats["mean"] == 25.0 and stats["median"] == 25.0 and stats["max"] == 40 and stats["min"] == 10
