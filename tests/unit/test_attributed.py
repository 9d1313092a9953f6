"""ArchRAG's LLM-based hierarchical clustering (archrag.txt Algorithm 1): KNN augmentation, cosine weights,
weighted Leiden, the community graph and the termination rules."""

from __future__ import annotations

import numpy as np

from core.algorithms.attributed import EPS, Hierarchy, community_links, run
from core.algorithms.chnsw import unit_rows
from core.config import ArchRAGSettings


def _mean_attributes(level, vecs):
    return unit_rows(np.vstack([vecs[g].mean(axis=0) for g in level.groups]))


def _two_clusters(rng, n_each=20, dim=24, noise=0.15):
    centres = np.zeros((2, dim), dtype=np.float32)
    centres[0, 0] = centres[1, 1] = 1.0  # orthogonal themes
    vecs = np.repeat(centres, n_each, axis=0) + noise * rng.standard_normal((2 * n_each, dim)).astype(np.float32)
    return unit_rows(vecs)


def test_knn_augmentation_adds_only_similar_pairs_with_cosine_weights():
    rng = np.random.default_rng(0)
    vecs = unit_rows(rng.standard_normal((60, 8)))
    rel = np.array([[0, 1], [2, 3], [4, 5]])  # relationship links stay, whatever their similarity
    cfg = ArchRAGSettings(knn=4, min_similarity=0.5)
    h = Hierarchy(rel, vecs, cfg)
    steps = list(h.augment())
    assert steps[-1] == (60, 60)
    sims = vecs @ vecs.T
    want = {tuple(p) for p in rel.tolist()}
    for i in range(60):
        order = [j for j in np.argsort(-sims[i]) if j != i][:4]
        want |= {(min(i, j), max(i, j)) for j in order if sims[i, j] >= 0.5}
    got = {tuple(p) for p in h.pairs.tolist()}
    assert got == want, "E' = E ∪ (each node's 4 nearest at or above min_similarity)"
    assert h.knn_added == len(want - {tuple(p) for p in rel.tolist()})
    for (a, b), w in zip(h.pairs.tolist(), h.weights.tolist()):
        assert abs(w - max(sims[a, b], EPS)) < 1e-5, "weight = attribute (cosine) similarity"
        if (a, b) not in {(0, 1), (2, 3), (4, 5)}:
            assert sims[a, b] >= 0.5 - 1e-6
    assert (h.weights > 0).all(), "weights stay positive for Leiden"


def test_two_separated_clusters_become_two_communities():
    rng = np.random.default_rng(1)
    vecs = _two_clusters(rng)
    # a few relationship links inside each theme and one across (it must not glue the two together)
    rel = np.array([[0, 1], [1, 2], [20, 21], [22, 23], [5, 30]])
    h = Hierarchy(rel, vecs, ArchRAGSettings(knn=5, min_similarity=0.3, seed=3))
    level = h.cluster()
    assert level is not None and level.layer == 1
    assert sorted(sorted(g.tolist()) for g in level.groups) == [list(range(20)), list(range(20, 40))]
    assert level.knn_added > 0 and level.n_links == len(h.pairs)
    # same seed, same graph: same communities
    again = Hierarchy(rel, vecs, ArchRAGSettings(knn=5, min_similarity=0.3, seed=3)).cluster()
    assert np.array_equal(again.membership, level.membership)


def test_communities_are_linked_iff_some_members_are_linked():
    rng = np.random.default_rng(2)
    membership = rng.integers(0, 6, size=40)
    pairs = np.unique(np.sort(rng.integers(0, 40, size=(25, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    got = {tuple(p) for p in community_links(membership, pairs).tolist()}
    want = set()
    for a in range(6):
        for b in range(a + 1, 6):
            if any({membership[x], membership[y]} == {a, b} for x, y in pairs.tolist()):
                want.add((a, b))
    assert got == want
    assert community_links(membership, np.zeros((0, 2), dtype=np.int64)).shape == (0, 2)


def test_hierarchy_levels_nest_and_stop_at_max_levels():
    rng = np.random.default_rng(4)
    centres = unit_rows(rng.standard_normal((16, 32)))
    vecs = unit_rows(np.repeat(centres, 12, axis=0) + 0.2 * rng.standard_normal((192, 32)))
    cfg = ArchRAGSettings(knn=6, min_similarity=0.2, max_levels=2, min_nodes=2, seed=5)
    h = run(np.zeros((0, 2), dtype=np.int64), vecs, cfg, _mean_attributes)
    assert len(h.levels) == 2 and h.stop_reason.startswith("reached max_levels")
    first, second = h.levels
    assert first.n_nodes == 192 and second.n_nodes == len(first.groups)
    assert sorted(np.concatenate(first.groups).tolist()) == list(range(192)), "a level partitions the layer below"
    assert len(second.groups) < len(first.groups) < 192
    assert len(h.knn_of) == 2 and h.knn_of[0].shape == (192, 6), "the kNN of each clustered graph is kept"


def test_termination_on_min_nodes_and_when_nothing_merges():
    rng = np.random.default_rng(6)
    vecs = _two_clusters(rng, n_each=10)
    small = Hierarchy(np.zeros((0, 2)), vecs[:3], ArchRAGSettings(min_nodes=4))
    assert small.done and "min_nodes" in small.stop_reason, "too few entities: no level at all"
    # two themes -> two communities; 2 < min_nodes 3 stops the loop after one level
    cfg = ArchRAGSettings(knn=5, min_similarity=0.3, min_nodes=3)
    h = run(np.zeros((0, 2), dtype=np.int64), vecs, cfg, _mean_attributes)
    assert len(h.levels) == 1 and "min_nodes" in h.stop_reason and h.n == 2
    # orthogonal nodes with no links: Leiden merges nothing, and no level is kept
    lone = Hierarchy(np.zeros((0, 2)), np.eye(6, dtype=np.float32), ArchRAGSettings(min_similarity=0.5, min_nodes=2))
    assert lone.cluster() is None and lone.done and "merged nothing" in lone.stop_reason and not lone.levels
