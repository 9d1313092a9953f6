"""Similarity scores that rank the same in every process and on every machine.

The last bits of a float32 dot product depend on where its operands sit in memory: BLAS and numpy's SIMD loops sum
in an order that follows the operands' alignment and their row's place in a matrix (the same 384-d pair gives more
than one float32 dot over eight offsets for most random pairs). Two entities, statements or sentences with the same
text have the same vector, so their scores tie in theory; in practice the tie broke on memory addresses, which
differ between processes, and two evaluations of one build ranked a few queries differently (docs/BENCHMARKS.md).

So every similarity a strategy ranks by is summed in float64 (the product of two float32 is exact there, and a
different summation order moves only the last bits of 53) and rounded to SCORE_DECIMALS: equal vectors give equal
scores, and the strategies' own tie rules (by id) decide.
"""

from __future__ import annotations

import numpy as np

SCORE_DECIMALS = 9  # far below float32's resolution of a cosine (about 6e-8), far above float64's summation noise


def dots(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    """m · q for every row of m (float64, rounded); an empty m gives an empty array."""
    m = np.asarray(m)
    if m.size == 0:
        return np.zeros(len(m), dtype=np.float64)
    return np.round(np.einsum("ij,j->i", m, np.asarray(q), dtype=np.float64), SCORE_DECIMALS)


def dot(v: np.ndarray, q: np.ndarray) -> float:
    """v · q of two vectors (float64, rounded)."""
    return float(np.round(np.einsum("j,j->", np.asarray(v), np.asarray(q), dtype=np.float64), SCORE_DECIMALS))


def row_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a_i · b_i for every row pair (float64, rounded)."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.float64)
    return np.round(np.einsum("ij,ij->i", a, b, dtype=np.float64), SCORE_DECIMALS)


def cross_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a_i · b_j for every pair of rows (float64, rounded)."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    return np.round(np.einsum("ij,kj->ik", a, b, dtype=np.float64), SCORE_DECIMALS)
