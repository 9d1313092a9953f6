"""Community quality metrics (core/quality/metrics.py, core/quality/data.py) against hand-computed cases;
the arithmetic is written next to each expectation. sklearn and igraph serve as second references."""

from __future__ import annotations

import math

import igraph as ig
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, calinski_harabasz_score, normalized_mutual_info_score

from core.config import QualitySettings, Settings
from core.quality.metrics import (
    LevelData,
    adjacency,
    ari,
    badness,
    calinski_harabasz,
    chance_coherence,
    coherence,
    coherence_lift,
    complete_labels,
    conductance,
    coverage,
    indicator,
    level_labels,
    level_metrics,
    mean_pairwise,
    modularity,
    nmi,
    size_shares,
)

# The path graph 0 -(2)- 1 -(1)- 2 -(2)- 3, and vertex 4 with no link at all.
PAIRS = [(0, 1), (1, 2), (2, 3)]
WEIGHTS = [2.0, 1.0, 2.0]
A = adjacency(5, PAIRS, WEIGHTS)
LABELS = [0, 0, 1, 1, -1]  # {0,1}, {2,3}; vertex 4 in no community (a block of its own)


def test_adjacency_is_symmetric_and_counts_a_self_loop_twice():
    assert (A != A.T).nnz == 0
    assert A[0, 1] == A[1, 0] == 2.0
    loop = adjacency(2, [(0, 0), (0, 1)], [3.0, 1.0])
    assert loop[0, 0] == 6.0  # igraph's convention: a self-loop adds 2w to its vertex's degree
    assert complete_labels([5, -1, 5, -1]).tolist() == [0, 1, 0, 2]


def test_modularity_by_hand_and_as_igraph_computes_it():
    # degrees d = (2, 3, 3, 2, 0), 2m = 10. in({0,1}) = A01 + A10 = 4, in({2,3}) = 4; vol = 5 and 5 (vertex 4: 0).
    # Q = (4 + 4) / 10 - (5/10)^2 - (5/10)^2 - 0 = 0.8 - 0.5 = 0.3
    assert modularity(A, LABELS) == pytest.approx(0.3)
    g = ig.Graph(n=5, edges=PAIRS)
    assert modularity(A, LABELS) == pytest.approx(g.modularity([0, 0, 1, 1, 2], weights=WEIGHTS))
    # one block: Q = 10/10 - 1^2 = 0; all singletons: Q = 0 - (0.2^2 + 0.3^2 + 0.3^2 + 0.2^2) = -0.26
    assert modularity(A, [0, 0, 0, 0, 0]) == pytest.approx(0.0)
    assert modularity(A, [-1] * 5) == pytest.approx(-0.26)
    assert math.isnan(modularity(adjacency(3, [], []), [0, 1, 2]))


def test_coverage_is_the_share_of_link_weight_inside():
    # inside 8 of 2m = 10 (both directions counted on both sides) -> 0.8; all singletons -> 0
    assert coverage(A, LABELS) == pytest.approx(0.8)
    assert coverage(A, [-1] * 5) == pytest.approx(0.0)


def test_conductance_per_community_including_overlaps_and_isolated():
    groups = [[0, 1], [2, 3], [1, 2], [0, 1, 2], [4], [0, 1, 2, 3]]
    c = conductance(A, indicator(groups, 5))
    # {0,1}: vol 5, in 4, cut 1, min(5, 10-5) = 5 -> 0.2; {2,3} alike -> 0.2
    # {1,2}: vol 6, in 2 (A12 + A21), cut 4, min(6, 4) = 4 -> 1.0
    # {0,1,2}: vol 8, in 2*(2+1) = 6, cut 2, min(8, 2) = 2 -> 1.0 (the smaller side decides)
    # {4}: vol 0 -> NaN (isolated); everything: cut 0, min(10, 0) = 0 -> 0
    assert c[:4].tolist() == pytest.approx([0.2, 0.2, 1.0, 1.0])
    assert math.isnan(c[4])
    assert c[5] == 0.0


def test_coherence_is_the_mean_cosine_to_the_centroid():
    z = np.array([[1, 0], [0, 1], [1, 0], [1, 0], [0.6, 0.8]], dtype=np.float64)
    has = np.array([True, True, True, True, False])
    coh = coherence(z, has, indicator([[0, 1], [2, 3], [0], [3, 4]], 5))
    # {(1,0), (0,1)}: centroid (.5, .5), |c| = .7071; cos of each to it = .5 / .7071 = .7071 -> mean .7071
    # {(1,0), (1,0)}: 1.0; a singleton, or one member with a vector only: NaN
    assert coh[0] == pytest.approx(math.sqrt(0.5))
    assert coh[1] == pytest.approx(1.0)
    assert math.isnan(coh[2]) and math.isnan(coh[3])
    # the identity mean_i cos(z_i, c) = |c| on random unit vectors, against the direct computation
    rng = np.random.default_rng(3)
    v = rng.normal(size=(7, 5))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    cent = v.mean(axis=0)
    direct = float(np.mean(v @ cent / np.linalg.norm(cent)))
    assert coherence(v, np.ones(7, bool), indicator([list(range(7))], 7))[0] == pytest.approx(direct)


def test_coherence_above_chance():
    # mean pairwise cosine of (1,0), (0,1), (1,0): pairs 0, 1, 0 -> 1/3; formula (3 |mu|^2 - 1) / 2 with
    # mu = (2/3, 1/3), |mu|^2 = 5/9 -> (5/3 - 1) / 2 = 1/3
    z = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float64)
    assert mean_pairwise(z) == pytest.approx(1 / 3)
    # two orthogonal members: coherence sqrt(.5), p = (2 * .5 - 1) / 1 = 0 (their cosine); with p0 = 1/3:
    # lift = (0 - 1/3) / (1 - 1/3) = -0.5. Two identical members: p = 1 -> lift 1. One member: NaN.
    lift = coherence_lift(np.array([math.sqrt(0.5), 1.0, 1.0]), np.array([2, 2, 1]), 1 / 3)
    assert lift[:2].tolist() == pytest.approx([-0.5, 1.0]) and math.isnan(lift[2])
    # a random group of s has coherence sqrt((1 + (s - 1) p0) / s): s = 2, p0 = 1/3 -> sqrt(2/3)
    assert chance_coherence(np.array([2]), 1 / 3)[0] == pytest.approx(math.sqrt(2 / 3))


def test_calinski_harabasz_by_hand_and_against_sklearn():
    x = np.array([[0, 0], [0, 2], [4, 0], [4, 2]], dtype=np.float64)
    lab = [0, 0, 1, 1]
    # means (0,1), (4,1), overall (2,1): B = 2*|(-2,0)|^2 + 2*|(2,0)|^2 = 16; W = 4 points at distance 1 = 4
    # CH = (16 / (2 - 1)) / (4 / (4 - 2)) = 8
    assert calinski_harabasz(x, lab) == pytest.approx(8.0)
    assert calinski_harabasz(x, lab) == pytest.approx(calinski_harabasz_score(x, lab))
    rng = np.random.default_rng(7)
    y = rng.normal(size=(60, 4))
    ly = rng.integers(0, 5, size=60)
    assert calinski_harabasz(y, ly) == pytest.approx(calinski_harabasz_score(y, ly), rel=1e-9)
    assert math.isnan(calinski_harabasz(x, [0, 0, 0, 0]))  # k = 1
    assert math.isnan(calinski_harabasz(x, [0, 1, 2, 3]))  # k = n


def test_nmi_and_ari_by_hand_and_against_sklearn():
    a, b = [0, 0, 1, 1], [0, 0, 0, 1]
    # contingency n(0,0) = 2, n(1,0) = 1, n(1,1) = 1 of n = 4.
    # H(a) = ln 2 = .693147; H(b) = -(.75 ln .75 + .25 ln .25) = .562335
    # MI = .5 ln(.5/(.5*.75)) + .25 ln(.25/(.5*.75)) + .25 ln(.25/(.5*.25)) = .143841 - .101366 + .173287 = .215762
    # NMI = .215762 / ((.693147 + .562335) / 2) = .343712
    assert nmi(a, b) == pytest.approx(0.343712, abs=1e-6)
    # pairs: C(4,2) = 6; Σ C(n_ij, 2) = 1; rows Σ C(2,2)+C(2,2) = 2; cols C(3,2)+C(1,2) = 3;
    # expected 2*3/6 = 1, max (2+3)/2 = 2.5 -> ARI = (1 - 1) / (2.5 - 1) = 0
    assert ari(a, b) == pytest.approx(0.0)
    c, d = [0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 1, 2]
    # Σ C(n_ij,2) = 1 + 1 = 2; rows 3 * C(2,2) = 3; cols C(2,2) + C(3,2) + 0 = 4; C(6,2) = 15
    # expected 3*4/15 = .8, max 3.5 -> ARI = (2 - .8) / (3.5 - .8) = .444444
    assert ari(c, d) == pytest.approx(1.2 / 2.7)
    for x, y in [(a, b), (c, d), ([3, 3, 7, 7, 9], [1, 1, 0, 0, 2])]:
        assert nmi(x, y) == pytest.approx(normalized_mutual_info_score(x, y))
        assert ari(x, y) == pytest.approx(adjusted_rand_score(x, y))
    assert nmi([3, 3, 7, 7, 9], [1, 1, 0, 0, 2]) == pytest.approx(1.0)  # a relabelling
    rng = np.random.default_rng(11)
    x, y = rng.integers(0, 6, 200), rng.integers(0, 9, 200)
    assert nmi(x, y) == pytest.approx(normalized_mutual_info_score(x, y))
    assert ari(x, y) == pytest.approx(adjusted_rand_score(x, y))


def test_singleton_and_tiny_shares():
    # sizes 1, 2, 3, 5 with tiny = 2: singletons 1/4, tiny (<= 2) 2/4
    assert size_shares([1, 2, 3, 5], 2) == (0.25, 0.5)
    assert size_shares([4, 4], 2) == (0.0, 0.0)


def test_cluster_sparsity_of_hard_and_soft_levels():
    z = np.eye(5, dtype=np.float32)
    hard = LevelData("leiden", 0, list("abcde"), A, z, np.ones(5, bool), ["c1", "c2"], ["t1", "t2"],
                     [np.array([0, 1, 2]), np.array([3, 4])], np.array([0, 0, 0, 1, 1]))
    # CS = 1 - Σ|S|(|S|-1) / (n(n-1)) = 1 - (3*2 + 2*1) / (5*4) = 1 - 8/20 = 0.6
    assert level_metrics(hard, QualitySettings()).figures["cluster_sparsity"] == pytest.approx(0.6)
    soft = LevelData("hirag_layers", 0, list("abcd"), adjacency(4, PAIRS, WEIGHTS), z[:4, :4], np.ones(4, bool),
                     ["s1", "s2"], ["", ""], [np.array([0, 1, 2]), np.array([2, 3])], np.array([0, 0, 1, 1]),
                     soft=True)
    # soft groups as stored (vertex 2 in both): 1 - (3*2 + 2*1) / (4*3) = 1 - 8/12 = 1/3; 1 of 4 clustered
    # vertices is in two groups
    f = level_metrics(soft, QualitySettings()).figures
    assert f["cluster_sparsity"] == pytest.approx(1 / 3)
    assert f["soft_share"] == pytest.approx(0.25)


def test_level_metrics_figures_and_the_worst_first():
    z = np.array([[1, 0], [0.8, 0.6], [0, 1], [0.1, 0.995], [1, 0]], dtype=np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    ld = LevelData("leiden", 1, list("abcde"), A, z, np.ones(5, bool), ["c1", "c2", "c3"], ["one", "two", "lone"],
                   [np.array([0, 1]), np.array([2, 3]), np.array([4])], np.array([0, 0, 1, 1, 2]))
    m = level_metrics(ld, QualitySettings(tiny_size=1))
    f = m.figures
    assert f["communities"] == 3 and f["vertices"] == 5 and f["unclustered"] == 0
    assert f["modularity"] == pytest.approx(0.3) and f["coverage"] == pytest.approx(0.8)
    assert f["conductance_mean"] == pytest.approx(0.2)  # 0.2, 0.2 and the isolated one (NaN) left out
    assert f["singleton_share"] == pytest.approx(1 / 3) and f["tiny_share"] == pytest.approx(1 / 3)
    assert m.table["id"][0] == "c3"  # isolated and a singleton: worst
    assert any("isolated" in r for r in m.table["reasons"][0])
    assert any(r.startswith("tiny: 1 member") for r in m.table["reasons"][0])
    assert sorted(m.hist) == [1, 2, 2]


def test_badness_ranks_and_words():
    cfg = QualitySettings(tiny_size=2, weak_conductance=0.5, mixed_lift=0.1)
    score, reasons = badness(np.array([math.nan, 0.1, 0.7]), np.array([math.nan, 0.5, 0.05]),
                             np.array([1, 10, 10]), cfg, np.array([math.nan, 0.9, 0.5]), np.array([1, .5, .48]))
    # percentile ranks within the level: conductance (NaN = isolated = worst) [1, 0, .5]; lift among the defined
    # ones (.5, .05 -> 0, 1), undefined = .5 -> [.5, 0, 1]; size (smaller worse; ties average) [1, .25, .25]
    # score = mean: [2.5/3, .25/3, 1.75/3]
    assert score.tolist() == pytest.approx([2.5 / 3, 0.25 / 3, 1.75 / 3])
    assert reasons[0] == ["tiny: 1 member", "weakly connected: isolated, its members have no links at all"]
    assert reasons[1] == []
    assert reasons[2] == ["mixed themes: coherence 0.50, against 0.48 for 10 random entities",
                          "weakly connected: 70% of its members' link weight leaves it"]


def test_level_labels_take_the_deepest_community_at_or_above():
    # communities: 0 = {0,1,2,3} at level 0, 1 = {0,1} at level 1, 2 = {4} at level 0, 3 = {0} at level 2
    levels = np.array([0, 1, 0, 2])
    members = [np.array([0, 1, 2, 3]), np.array([0, 1]), np.array([4]), np.array([0])]
    assert level_labels(6, levels, members, 0).tolist() == [0, 0, 0, 0, 2, -1]
    assert level_labels(6, levels, members, 1).tolist() == [1, 1, 0, 0, 2, -1]
    assert level_labels(6, levels, members, 5).tolist() == [3, 1, 0, 0, 2, -1]


def test_hirag_levels_soft_membership_and_contraction(tmp_path):
    """Two HiRAG layers in a real store and vector index: the soft member goes to the nearer centroid for the hard
    labels, and layer 1's graph is layer 0's relationship graph contracted onto the summary entities."""
    from core.index.vectors import VectorIndex
    from core.models import Edge, Node
    from core.quality.data import load_base, load_levels
    from core.store import Store

    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("h")
    index = VectorIndex(tmp_path / "vectors", "test")
    vec = {"a": [1, 0, 0], "b": [1, 0.1, 0], "c": [0.1, 1, 0], "d": [0, 1, 0.1],
           "S1": [1, 0.3, 0], "S2": [0, 1, 0.05], "T": [0.5, 0.5, 0]}
    layer = {"a": 0, "b": 0, "c": 0, "d": 0, "S1": 1, "S2": 1, "T": 2}
    with store.session() as s:
        for e, lv in layer.items():
            s.add(Node(id=e, workspace_id=ws.id, kind="entity", title=e, layer=lv))
        for i, (x, y) in enumerate([("a", "b"), ("b", "c"), ("c", "d")]):  # relationships, weight 1 each
            s.add(Node(id=f"r{i}", workspace_id=ws.id, kind="relationship", weight=1.0))
            s.add(Edge(workspace_id=ws.id, src=f"r{i}", dst=x, kind="subject"))
            s.add(Edge(workspace_id=ws.id, src=f"r{i}", dst=y, kind="object"))
        for src, dst in [("a", "S1"), ("b", "S1"), ("c", "S1"), ("c", "S2"), ("d", "S2"), ("S1", "T"), ("S2", "T")]:
            s.add(Edge(workspace_id=ws.id, src=src, dst=dst, kind="summarizes"))
        s.commit()
    index.upsert("entity", list(vec), np.array(list(vec.values()), dtype=np.float32))
    base = load_base(store, index, ws.id)
    levels = load_levels(store, index, ws.id, "hirag_layers", Settings(), base)
    assert [ld.level for ld in levels] == [0, 1]
    l0, l1 = levels
    assert l0.ids == ["a", "b", "c", "d"] and l0.comm_ids == ["S1", "S2"]
    assert [g.tolist() for g in l0.groups] == [[0, 1, 2], [2, 3]]
    # c is in both; its cosine to S2's centroid (c, d) is higher than to S1's (a, b, c): hard label S2
    assert l0.labels.tolist() == [0, 0, 1, 1]
    m0 = level_metrics(l0, QualitySettings()).figures
    # layer-0 graph a-b-c-d, weights 1: 2m = 6, in {a,b} = 2, in {c,d} = 2, vol 3 and 3 -> Q = 4/6 - .5 = 1/6
    assert m0["modularity"] == pytest.approx(1 / 6)
    # soft groups: {a,b,c}: vol 5, in 4, cut 1, min(5, 1) -> 1.0; {c,d}: vol 3, in 2, cut 1, min(3, 3) -> 1/3
    assert conductance(l0.adj, indicator(l0.groups, 4)).tolist() == pytest.approx([1.0, 1 / 3])
    # CS over the soft groups: 1 - (3*2 + 2*1) / (4*3) = 1/3
    assert m0["cluster_sparsity"] == pytest.approx(1 / 3)
    # layer 1: S1 <- {a,b}, S2 <- {c,d}: self-loops of weight 1 each (2 on the diagonal), S1-S2 weight 1 (b-c)
    assert l1.ids == ["S1", "S2"] and l1.comm_ids == ["T"]
    assert l1.adj.toarray().tolist() == [[2.0, 1.0], [1.0, 2.0]]
    m1 = level_metrics(l1, QualitySettings()).figures
    assert m1["modularity"] == pytest.approx(0.0) and m1["coverage"] == pytest.approx(1.0)
    # GraphRAG's `leiden` is measured on the extracted graph: layer-0 entities and relationship links only
    ex = base.extracted()
    assert ex.ids == ["a", "b", "c", "d"] and (ex.layer == 0).all() and ex.has_vec.all()
    assert sorted(map(tuple, ex.pairs.tolist())) == [(0, 1), (1, 2), (2, 3)] and ex.weights.tolist() == [1.0] * 3
    assert len(base.ids) == 7 and len(base.pairs) == 3 + 7  # the layered graph adds the summarizes links
    assert ex.extracted() is ex
