"""core/algorithms/pairs.py: the same values as numpy's np.unique, pairs once each and in order."""

from __future__ import annotations

import numpy as np
import pytest

from core.algorithms.pairs import code_pairs, pair_codes, sorted_unique, unique_pairs


@pytest.mark.parametrize("size,high", [(0, 5), (1, 5), (1000, 7), (20_000, 10**12), (5000, 2**40)])
def test_sorted_unique_is_np_unique(size, high):
    a = np.random.default_rng(size).integers(0, high, size=size)
    got = sorted_unique(a)
    assert got.dtype == a.dtype and np.array_equal(got, np.unique(a))


def test_unique_pairs_are_undirected_sorted_once_each_without_loops():
    rng = np.random.default_rng(3)
    n = 50
    a, b = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    got = unique_pairs(a, b, n)
    want = sorted({(min(x, y), max(x, y)) for x, y in zip(a.tolist(), b.tolist()) if x != y})
    assert got.dtype == np.int64 and got.tolist() == [list(p) for p in want]
    assert unique_pairs(np.zeros(0), np.zeros(0), n).shape == (0, 2)
    assert unique_pairs(np.array([4]), np.array([4]), n).shape == (0, 2)  # a loop alone
    assert code_pairs(pair_codes(np.array([9, 2]), np.array([3, 7]), n), n).tolist() == [[3, 9], [2, 7]]
