"""Shallow personalized PageRank (core/algorithms/ppr.py) against a direct dense computation on a small graph: the
published update (NodeRAG's PPR.py, the default since issue 37) and the teleport form (the ablation)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from core.algorithms.ppr import personalization_vector, personalized_pagerank, top_by_kind

# 6 vertices, directed and weighted; vertex 4 has no out-link (dangling), vertex 5 is isolated (dangling too).
EDGES = [(0, 1, 2.0), (0, 2, 1.0), (1, 2, 3.0), (1, 0, 1.0), (2, 0, 1.0), (2, 3, 0.5), (3, 4, 1.0), (3, 1, 4.0)]
N = 6


def adjacency() -> sp.csr_matrix:
    r, c, w = zip(*EDGES)
    return sp.csr_matrix((w, (r, c)), shape=(N, N))


def dense_transition(dangling: str, e: np.ndarray) -> np.ndarray:
    """Row-stochastic P written out by hand: weights over the row sum, dangling rows as documented."""
    a = adjacency().toarray()
    P = np.zeros((N, N))
    for i in range(N):
        s = a[i].sum()
        if s > 0:
            P[i] = a[i] / s
        elif dangling == "uniform":
            P[i] = 1.0 / (N - 1)
            P[i, i] = 0.0
        else:
            P[i] = e
    return P


def dense_iterate(P: np.ndarray, e: np.ndarray, alpha: float, iterations: int, update: str) -> np.ndarray:
    p = e.copy()
    for _ in range(iterations):
        p = alpha * P.T @ p + (1 - alpha) * p if update == "published" else alpha * e + (1 - alpha) * P.T @ p
    return p


@pytest.mark.parametrize("update", ["published", "teleport"])
@pytest.mark.parametrize("dangling", ["uniform", "personalization"])
@pytest.mark.parametrize("iterations", [0, 1, 2, 3])
@pytest.mark.parametrize("alpha", [0.5, 0.15, 0.85])
def test_shallow_ppr_equals_dense_iteration(dangling, iterations, alpha, update):
    e = personalization_vector(N, {0: 1.0, 3: 3.0, 4: 1.0})  # a dangling vertex among the entries
    got = personalized_pagerank(adjacency(), e, alpha=alpha, iterations=iterations, dangling=dangling, update=update)
    want = dense_iterate(dense_transition(dangling, e), e, alpha, iterations, update)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert got.sum() == pytest.approx(1.0)  # P is stochastic: no mass is lost, dangling rows included


@pytest.mark.parametrize("dangling", ["uniform", "personalization"])
def test_many_iterations_reach_the_closed_form(dangling):
    e = personalization_vector(N, {1: 2.0, 4: 1.0})
    alpha = 0.5
    got = personalized_pagerank(adjacency(), e, alpha=alpha, iterations=200, dangling=dangling, update="teleport")
    P = dense_transition(dangling, e)
    closed = alpha * np.linalg.solve(np.eye(N) - (1 - alpha) * P.T, e)
    np.testing.assert_allclose(got, closed, rtol=1e-10, atol=1e-14)


def test_the_published_update_is_the_default_and_weighs_one_hop_twice_the_teleport_form():
    """Issue 37: after two steps from one entry, p = (alpha·Pᵀ + (1 − alpha)·I)² e = 0.25 e + 0.5 Pᵀe + 0.25 (Pᵀ)²e
    (NodeRAG's PPR.py, alpha 0.5), where the teleport form gives 0.5 e + 0.25 Pᵀe + 0.25 (Pᵀ)²e. On a directed cycle
    0 -> 1 -> 2 -> 3 -> 0 the 1-hop and 2-hop terms land on vertices 1 and 2."""
    cycle = sp.csr_matrix(np.roll(np.eye(4), 1, axis=1))
    e = np.array([1.0, 0.0, 0.0, 0.0])
    published = personalized_pagerank(cycle, e, alpha=0.5, iterations=2)  # the default update
    np.testing.assert_allclose(published, [0.25, 0.5, 0.25, 0.0])
    teleport = personalized_pagerank(cycle, e, alpha=0.5, iterations=2, update="teleport")
    np.testing.assert_allclose(teleport, [0.5, 0.25, 0.25, 0.0])
    # so the walk ranks a 1-hop neighbour above the entry itself only in the published form
    assert published[1] > published[0] and teleport[1] < teleport[0]


def test_two_iterations_by_hand_on_a_weighted_path():
    # 0 -1- 1 -3- 2 (undirected): from e = vertex 0, step 1 moves all walked mass to 1, step 2 splits it 1:3.
    a = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 3], [0, 3, 0]], dtype=float))
    e = np.array([1.0, 0.0, 0.0])
    p1 = personalized_pagerank(a, e, alpha=0.5, iterations=1, update="teleport")
    np.testing.assert_allclose(p1, [0.5, 0.5, 0.0])
    p2 = personalized_pagerank(a, e, alpha=0.5, iterations=2, update="teleport")
    # p2 = 0.5 e + 0.5 Pᵀ p1; Pᵀ p1 = [0.5·1/4, 0.5, 0.5·3/4]
    np.testing.assert_allclose(p2, [0.5 + 0.5 * 0.125, 0.25, 0.5 * 0.375])
    # published: p1 = [0.5, 0.5, 0]; p2 = 0.5 Pᵀ p1 + 0.5 p1 = 0.5 [0.125, 0.5, 0.375] + 0.5 [0.5, 0.5, 0]
    np.testing.assert_allclose(personalized_pagerank(a, e, alpha=0.5, iterations=2), [0.3125, 0.5, 0.1875])
    # shallow: a vertex three hops away gets nothing after two iterations, in either form
    b = sp.csr_matrix(np.diag(np.ones(3), 1) + np.diag(np.ones(3), -1))
    for update in ("published", "teleport"):
        p = personalized_pagerank(b, np.array([1.0, 0, 0, 0]), alpha=0.5, iterations=2, update=update)
        assert p[3] == 0.0 and p[2] > 0.0


def test_alpha_one_and_zero_iterations_return_the_personalization():
    e = personalization_vector(N, {2: 1.0, 5: 1.0})
    np.testing.assert_allclose(personalized_pagerank(adjacency(), e, alpha=1.0, iterations=5, update="teleport"), e)
    np.testing.assert_allclose(personalized_pagerank(adjacency(), e, alpha=0.0, iterations=5), e)  # never walks
    np.testing.assert_allclose(personalized_pagerank(adjacency(), e, alpha=0.5, iterations=0), e)
    # an unnormalized personalization is normalized
    np.testing.assert_allclose(personalized_pagerank(adjacency(), e * 7, alpha=0.5, iterations=2),
                               personalized_pagerank(adjacency(), e, alpha=0.5, iterations=2))


def test_bad_arguments_are_refused():
    e = personalization_vector(N, {0: 1.0})
    with pytest.raises(ValueError):
        personalized_pagerank(adjacency(), e, alpha=1.5)
    with pytest.raises(ValueError):
        personalized_pagerank(adjacency(), e, dangling="drop")
    with pytest.raises(ValueError):
        personalized_pagerank(adjacency(), np.zeros(N))
    with pytest.raises(ValueError):
        personalized_pagerank(adjacency(), np.ones(N - 1))
    with pytest.raises(ValueError):
        personalization_vector(N, {0: 0.0})
    with pytest.raises(ValueError):
        personalized_pagerank(adjacency(), e, update="lazy")


def test_top_by_kind_ranks_one_kind_and_skips_excluded_and_unreached():
    scores = np.array([0.3, 0.0, 0.5, 0.2, 0.5, 0.1])
    kinds = np.array([1, 1, 1, 2, 1, 1])
    np.testing.assert_array_equal(top_by_kind(scores, kinds, 1, 3), [2, 4, 0])  # ties by vertex
    exclude = np.array([False, False, True, False, False, False])
    np.testing.assert_array_equal(top_by_kind(scores, kinds, 1, 10, exclude=exclude), [4, 0, 5])  # 1 unreached
    assert len(top_by_kind(scores, kinds, 2, 0)) == 0
    np.testing.assert_array_equal(top_by_kind(scores, kinds, 2, 5), [3])


# ---------------------------------------------------------------------------------------------- NodeRAG's walk matrix
def tiny_heterograph():
    """chunk c - statement s - entity n - relationship r, plus the links NodeRAG does not define: c -> n (a subject
    mention), r -> c (derived_from), s -> r (mentions), c - c2 (next); s - c carries an HNSW boost."""
    from core.graph.hetero import EdgeList, HeteroGraph

    ids = ["c", "c2", "n", "r", "s"]
    kinds = ["chunk", "chunk", "entity", "relationship", "statement"]
    kind_names = sorted(set(kinds))
    edge_kind_names = ["derived_from", "mentions", "next", "subject"]
    h = HeteroGraph(ids=ids, index={i: v for v, i in enumerate(ids)},
                    kinds=np.array([kind_names.index(k) for k in kinds], dtype=np.int16), kind_names=kind_names,
                    adj=sp.csr_matrix((5, 5)), link_kind=np.zeros(0, dtype=np.int16), edge_kind_names=edge_kind_names)
    rows = [("s", "c", "derived_from", 1.0), ("s", "n", "mentions", 0.0), ("r", "n", "subject", 0.0),
            ("c", "n", "mentions", 0.0), ("r", "c", "derived_from", 0.0), ("s", "r", "mentions", 0.0),
            ("c", "c2", "next", 0.0)]
    edges = EdgeList(src=np.array([h.index[a] for a, *_ in rows]), dst=np.array([h.index[b] for _, b, *_ in rows]),
                     kind=np.array([edge_kind_names.index(k) for _, _, k, _ in rows], dtype=np.int16),
                     hnsw=np.array([b for *_, b in rows]))
    return h, edges


def test_noderag_walk_holds_only_the_papers_edges_with_unit_weights():
    from core.retrieval.noderag import Walk

    h, edges = tiny_heterograph()
    w = Walk(h, edges)
    v = h.index
    dense = w.adj.toarray()
    assert (dense == dense.T).all()
    # S-T (weight 1 + the HNSW boost), S-N and R-N only
    assert {(h.ids[a], h.ids[b]) for a, b in zip(*np.nonzero(dense)) if a < b} == {("c", "s"), ("n", "r"), ("n", "s")}
    assert dense[v["s"], v["c"]] == 2.0 and dense[v["s"], v["n"]] == 1.0 and dense[v["r"], v["n"]] == 1.0
    assert w.edge_kinds == ["derived_from", "mentions", "subject"]
    assert w.kind_of(v["c"], v["s"]) == "derived_from" and w.kind_of(v["c"], v["n"]) is None
    # a walk from the chunk reaches the entity only through its statement: two hops, not one
    p = personalized_pagerank(w.adj, personalization_vector(len(h.ids), {v["c"]: 1.0}), alpha=0.5, iterations=1)
    assert p[v["n"]] == 0.0 and p[v["s"]] > 0.0 and p[v["c2"]] == 0.0


def test_unbalance_adjust_caps_each_link_at_one_over_the_larger_degree_and_changes_the_walk():
    """The published code's unbalance_adjust (on in its Node_config.yaml, the default `degree_cap` since issue 37):
    every link weight capped at 1/degree of each end. s has degree 2 (c, n): its HNSW-raised link to c (2.0) and its
    link to n (1.0) both become 1/2, so a walk from s no longer prefers c two to one."""
    from core.query_config import NodeRAGQuerySettings
    from core.retrieval.noderag import Walk

    assert NodeRAGQuerySettings().degree_cap and NodeRAGQuerySettings().ppr_update == "published"
    h, edges = tiny_heterograph()
    v = h.index
    plain, capped = Walk(h, edges).adj.toarray(), Walk(h, edges, degree_cap=True).adj.toarray()
    assert plain[v["s"], v["c"]] == 2.0 and plain[v["s"], v["n"]] == 1.0 and plain[v["r"], v["n"]] == 1.0
    assert capped[v["s"], v["c"]] == 0.5 and capped[v["s"], v["n"]] == 0.5 and capped[v["r"], v["n"]] == 0.5
    e = personalization_vector(len(h.ids), {v["s"]: 1.0})
    p_plain = personalized_pagerank(sp.csr_matrix(plain), e, alpha=0.5, iterations=1)
    p_cap = personalized_pagerank(sp.csr_matrix(capped), e, alpha=0.5, iterations=1)
    assert p_plain[v["c"]] == pytest.approx(2 * p_plain[v["n"]]) and p_cap[v["c"]] == pytest.approx(p_cap[v["n"]])


def test_noderag_walk_options_add_the_links_the_paper_does_not_define():
    from core.algorithms.noderag import HETEROGRAPH_EDGES
    from core.query_config import NodeRAGQuerySettings
    from core.retrieval.noderag import Walk, walked_edges

    h, edges = tiny_heterograph()
    v = h.index
    cfg = NodeRAGQuerySettings(chunk_entity_links=True, relationship_chunk_links=True,
                               statement_relationship_links=True)
    dense = Walk(h, edges, walked_edges(cfg)).adj.toarray()
    assert dense[v["c"], v["n"]] == 1.0 and dense[v["r"], v["c"]] == 1.0 and dense[v["s"], v["r"]] == 1.0
    assert dense[v["c"], v["c2"]] == 0.0  # `next` is never walked
    assert walked_edges(NodeRAGQuerySettings()) == frozenset(HETEROGRAPH_EDGES)
