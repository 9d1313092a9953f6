"""ArchRAG's LLM-based hierarchical clustering (archrag.txt Algorithm 1): KNN augmentation, cosine weights,
weighted Leiden, the community graph and the termination rules."""

from __future__ import annotations

import numpy as np

from core.algorithms.attributed import EPS, Hierarchy, cluster, community_links, leiden, run
from core.algorithms.chnsw import unit_rows
from core.config import ArchRAGSettings


def _mean_attributes(level, vecs):
    return unit_rows(np.vstack([vecs[g].mean(axis=0) for g in level.groups]))


def _two_clusters(rng, n_each=20, dim=24, noise=0.15):
    centres = np.zeros((2, dim), dtype=np.float32)
    centres[0, 0] = centres[1, 1] = 1.0  # orthogonal themes
    vecs = np.repeat(centres, n_each, axis=0) + noise * rng.standard_normal((2 * n_each, dim)).astype(np.float32)
    return unit_rows(vecs)


def _published_augmentation(rel, vecs, percentile=0.7, search_k=1.5, m_du_scale=1.0):
    """ArchRAG's published `compute_distance` rule, written out plainly: wx = the percentile of the links' cosines,
    m_du = int(mean degree of non-isolated nodes x scale), int(search_k x m_du) nearest others per node, node by
    node up to m_du new links above wx, a link added earlier counting as existing."""
    sims = vecs @ vecs.T
    n = len(vecs)
    links = {tuple(sorted(p)) for p in rel.tolist()}
    wx = np.percentile([sims[a, b] for a, b in links], 100 * percentile)
    deg = np.zeros(n, dtype=int)
    for a, b in links:
        deg[a] += 1
        deg[b] += 1
    m_du = int(int(deg.sum() / (deg > 0).sum()) * m_du_scale)
    for u in range(n):
        near = [j for j in np.argsort(-sims[u], kind="stable") if j != u][: int(search_k * m_du)]
        new = [v for v in near if tuple(sorted((u, v))) not in links and sims[u, v] > wx][:m_du]
        links |= {tuple(sorted((u, int(v)))) for v in new}
    return links, wx, m_du


def test_knn_augmentation_follows_the_published_rule_with_cosine_weights():
    rng = np.random.default_rng(0)
    vecs = unit_rows(rng.standard_normal((60, 8)))
    rel = np.array([[0, 1], [2, 3], [4, 5], [0, 7], [1, 9], [3, 11], [6, 8], [10, 12]])  # links stay, whatever
    h = Hierarchy(rel, vecs, ArchRAGSettings())
    steps = list(h.augment())
    assert steps[-1] == (60, 60)
    want, wx, m_du = _published_augmentation(rel, vecs)
    assert m_du >= 1
    got = {tuple(p) for p in h.pairs.tolist()}
    assert got == want, "E' = E ∪ the published code's KNN links"
    assert h.knn_added == len(want) - len(rel) > 0
    sims = vecs @ vecs.T
    for (a, b), w in zip(h.pairs.tolist(), h.weights.tolist()):
        assert abs(w - max(sims[a, b], EPS)) < 1e-5, "weight = attribute (cosine) similarity"
        if (a, b) not in {tuple(sorted(p)) for p in rel.tolist()}:
            assert sims[a, b] > wx - 1e-6
    assert (h.weights > 0).all(), "weights stay positive for Leiden"
    # a stricter percentile adds fewer links; a degree scale of 0 adds none
    strict = Hierarchy(rel, vecs, ArchRAGSettings(knn_percentile=0.95))
    list(strict.augment())
    assert strict.knn_added < h.knn_added
    none = Hierarchy(rel, vecs, ArchRAGSettings(knn_degree_scale=0))
    list(none.augment())
    assert none.knn_added == 0


def test_two_separated_clusters_become_two_communities():
    rng = np.random.default_rng(1)
    vecs = _two_clusters(rng)
    # a few relationship links inside each theme and one across (it must not glue the two together)
    rel = np.array([[0, 1], [1, 2], [20, 21], [22, 23], [5, 30]])
    h = Hierarchy(rel, vecs, ArchRAGSettings(seed=3))
    level = h.cluster()
    assert level is not None and level.layer == 1
    themes = [set(range(20)), set(range(20, 40))]
    assert all(any(set(g.tolist()) <= t for t in themes) for g in level.groups), "no community spans both themes"
    assert len(level.groups) < 40
    assert level.knn_added > 0 and level.n_links == len(h.pairs)
    # same seed, same graph: same communities
    again = Hierarchy(rel, vecs, ArchRAGSettings(seed=3)).cluster()
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
    cfg = ArchRAGSettings(max_levels=2, min_clusters=2, seed=5)
    h = run(np.zeros((0, 2), dtype=np.int64), vecs, cfg, _mean_attributes)
    assert len(h.levels) == 2 and h.stop_reason.startswith("reached max_levels")
    first, second = h.levels
    assert first.n_nodes == 192 and second.n_nodes == len(first.groups)
    assert sorted(np.concatenate(first.groups).tolist()) == list(range(192)), "a level partitions the layer below"
    assert len(second.groups) < len(first.groups) < 192
    assert len(h.knn_of) == 2 and h.knn_of[0].shape[0] == 192, "the kNN of each clustered graph is kept"


def test_termination_on_min_clusters_and_when_nothing_merges():
    rng = np.random.default_rng(6)
    vecs = _two_clusters(rng, n_each=10)
    small = Hierarchy(np.zeros((0, 2)), vecs[:3], ArchRAGSettings(min_clusters=4))
    assert small.done and "min_clusters" in small.stop_reason, "too few entities: no level at all"
    # a clustering into fewer communities than min_clusters is not kept (the published rule)
    first = Hierarchy(np.zeros((0, 2)), vecs, ArchRAGSettings(min_clusters=1, max_cluster_size=0)).cluster()
    n_first = len(first.groups)
    assert 1 < n_first < len(vecs)
    h = run(np.zeros((0, 2), dtype=np.int64), vecs, ArchRAGSettings(min_clusters=n_first + 1, max_cluster_size=0),
            _mean_attributes)
    assert not h.levels and f"gave {n_first} communities (< min_clusters {n_first + 1}); not kept" in h.stop_reason
    # with min_clusters = that count the level is kept; the loop then ends on a later clustering or graph too small
    h = run(np.zeros((0, 2), dtype=np.int64), vecs, ArchRAGSettings(min_clusters=n_first, max_cluster_size=0),
            _mean_attributes)
    assert len(h.levels) == 1 and len(h.levels[0].groups) == n_first
    assert "min_clusters" in h.stop_reason and all(len(lv.groups) >= n_first for lv in h.levels)
    # nodes with no links and no augmentation: Leiden merges nothing, and no level is kept
    lone = Hierarchy(np.zeros((0, 2)), np.eye(6, dtype=np.float32),
                     ArchRAGSettings(knn_degree_scale=0, min_clusters=2))
    assert lone.cluster() is None and lone.done and "merged nothing" in lone.stop_reason and not lone.levels


def _capped_by_hand(members, pairs, weights, max_size, seed):
    """The size-capped hierarchical Leiden written out plainly, one community at a time: Leiden over the links
    inside `members`; each of its communities larger than max_size is clustered again the same way."""
    local = {m: i for i, m in enumerate(members)}
    inner = [(local[a], local[b], w) for (a, b), w in zip(pairs.tolist(), weights.tolist()) if a in local and b in local]
    sub_pairs = np.array([(a, b) for a, b, _ in inner], dtype=np.int64).reshape(-1, 2)
    labels = leiden(len(members), sub_pairs, np.array([w for *_, w in inner]), 1.0, seed)
    out = []
    for c in sorted(set(labels.tolist())):
        group = [members[i] for i in np.flatnonzero(labels == c)]
        whole = len(set(labels.tolist())) == 1
        out += ([group] if len(group) <= max_size or whole else _capped_by_hand(group, pairs, weights, max_size, seed))
    return out


def test_leiden_is_size_capped_as_the_published_code_clusters():
    """GCluster as the published code runs it (hierarchical Leiden, max_cluster_size 15): communities above the
    cap are split again on their own subgraph; the final clusters nest in the uncapped ones."""
    rng = np.random.default_rng(9)
    n = 150
    centres = unit_rows(rng.standard_normal((3, 16)))
    vecs = unit_rows(np.repeat(centres, 50, axis=0) + 0.35 * rng.standard_normal((n, 16)))
    h = Hierarchy(np.zeros((0, 2)), vecs, ArchRAGSettings(seed=4, max_cluster_size=0))
    list(h.augment())
    free = cluster(n, h.pairs, h.weights, 1.0, 4)
    capped = cluster(n, h.pairs, h.weights, 1.0, 4, max_size=15)
    assert np.bincount(free).max() > 15, "without the cap some community is larger than 15"
    sizes = np.bincount(capped)
    assert sizes.max() <= 15 and len(sizes) > len(np.bincount(free))
    for c in range(len(sizes)):
        assert len(set(free[capped == c].tolist())) == 1, "a capped community lies inside one uncapped community"
    want = sorted(sorted(g) for g in _capped_by_hand(list(range(n)), h.pairs, h.weights, 15, 4))
    got = sorted(sorted(np.flatnonzero(capped == c).tolist()) for c in range(len(sizes)))
    assert got == want, "the recursion of the published code, community by community"
    # the Hierarchy uses the settings' cap (15 by default)
    level = Hierarchy(np.zeros((0, 2)), vecs, ArchRAGSettings(seed=4)).cluster()
    assert level is not None and max(len(g) for g in level.groups) <= 15
