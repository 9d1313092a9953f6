"""Undirected node pairs as int64 codes, and the unique values of a large integer array.

A pair (i, j) with i < j of a graph of n nodes is the code i * n + j: sorted codes are the pairs in lexicographic
order, and one 1-D sort dedupes them (the graphs here are far below 3 · 10^9 nodes, so codes fit an int64).

`sorted_unique` is np.unique by a sort: numpy 2.4's np.unique, asked for the values alone, hashes integers first,
which took 1.2-4.4 s for 2-4M codes on this machine where the sort takes 0.02-0.05 s (the same values, ascending).
"""

from __future__ import annotations

import numpy as np


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of the 1-D array `a`, ascending (np.unique's result)."""
    a = np.sort(np.asarray(a).ravel())
    keep = np.empty(len(a), dtype=bool)
    keep[:1] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def pair_codes(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The codes of the undirected pairs (a[k], b[k]) (module doc); a self-loop's code is kept (drop it first)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    return np.minimum(a, b) * n + np.maximum(a, b)


def code_pairs(codes: np.ndarray, n: int) -> np.ndarray:
    """The (i, j) rows of `codes`, shape (len, 2) int64."""
    codes = np.asarray(codes, dtype=np.int64)
    return np.stack([codes // n, codes % n], axis=1) if len(codes) else np.zeros((0, 2), dtype=np.int64)


def unique_pairs(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The distinct undirected pairs (i < j) of the links a[k] - b[k], sorted; self-loops dropped."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    keep = a != b
    return code_pairs(sorted_unique(pair_codes(a[keep], b[keep], n)), n)
