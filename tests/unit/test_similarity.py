"""Similarity scores that do not depend on where a vector sits (core/algorithms/similarity.py): equal vectors score
equal wherever they are in a matrix, so a tie falls to the strategies' id rule, in every process."""

from __future__ import annotations

import numpy as np

from core.algorithms.similarity import cross_dots, dot, dots, row_dots
from core.graph.view import GraphView


def _cases(n=60, dim=384, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield rng.standard_normal(dim).astype(np.float32), rng.standard_normal(dim).astype(np.float32)


def test_a_vector_scores_the_same_at_every_row_of_a_matrix_and_alone():
    for v, q in _cases():
        m = np.tile(v, (17, 1))  # a float32 matrix-vector product gave different last bits by row for most pairs
        got = set(dots(m, q).tolist()) | {dot(v, q)} | set(row_dots(m, np.tile(q, (17, 1))).tolist())
        got |= set(cross_dots(m[:5], q[None, :]).ravel().tolist())
        buf = np.zeros(400, dtype=np.float32)
        for off in range(8):  # and at any alignment
            w = buf[off : off + 384]
            w[:] = v
            got.add(dot(w, q))
        assert len(got) == 1, "one score for one pair of vectors"
        assert abs(got.pop() - float(v.astype(np.float64) @ q.astype(np.float64))) < 1e-8


def test_entities_with_equal_vectors_tie_exactly_and_fall_to_their_ids():
    """GraphView.similarity scores the rows it is asked for; an entity's score must not depend on its position
    in that request, nor differ from another entity with the same vector."""
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((40, 384)).astype(np.float32)
    vecs[7] = vecs[23] = vecs[31]  # three entities with one text
    ids = [f"e{i:02d}" for i in range(40)]
    view = GraphView.__new__(GraphView)
    view.entity_vecs, view.entity_vec_row = vecs, {e: r for r, e in enumerate(ids)}
    q = rng.standard_normal(384).astype(np.float32)
    for order in (ids, ids[::-1], ids[20:] + ids[:20]):
        sims = view.similarity(q, order)
        assert sims["e07"] == sims["e23"] == sims["e31"]
        ranked = sorted(sims, key=lambda e: (-sims[e], e))
        tied = [e for e in ranked if e in ("e07", "e23", "e31")]
        assert tied == ["e07", "e23", "e31"], "a tie falls to the ids"
    assert view.similarity(q, ["e07"])["e07"] == view.similarity(q, ids)["e07"]
