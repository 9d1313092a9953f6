"""NodeRAG graph maths (core/algorithms/noderag.py) on hand-made graphs and vectors: the k-core k formula and selection
(checked against networkx), betweenness selection of a bridge, semantic matching within cluster and community,
the HNSW base-layer edges (checked against faiss' own neighbour ranges), the weight boost of an already linked
pair written by the augment stage (only a heterograph edge takes it), the heterograph's edge set and the flat
Leiden communities."""

from __future__ import annotations

import math
from types import SimpleNamespace

import faiss
import igraph as ig
import networkx as nx
import numpy as np
import pytest
from sqlalchemy import insert
from sqlmodel import select

from core.algorithms import noderag
from core.models import Edge, Node
from core.pipeline.noderag_communities import keyword_title
from core.pipeline.noderag_edges import write_edges
from core.store import Store


def to_nx(g: ig.Graph) -> nx.Graph:
    G = nx.Graph()
    G.add_nodes_from(range(g.vcount()))
    G.add_edges_from(g.get_edgelist())
    return G


def core_and_fringe() -> tuple[ig.Graph, np.ndarray, np.ndarray]:
    """Entities 0-5 form a 6-clique (core number 5); entities 6-8 hang off it in a path; statements 9-14 each
    mention two clique entities. Entity 5 is in the clique but mentioned only once (weight 1)."""
    edges = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    edges += [(5, 6), (6, 7), (7, 8)]
    edges += [(9 + s, s) for s in range(6)] + [(9 + s, (s + 1) % 6) for s in range(6)]
    g = ig.Graph(n=15, edges=edges)
    is_entity = np.array([True] * 9 + [False] * 6)
    weight = np.array([3, 2, 2, 4, 2, 1, 2, 2, 2] + [0] * 6, dtype=float)
    return g, is_entity, weight


# ---------------------------------------------------------------------------------------------- k-core
def test_kcore_k_is_noderag_default_formula():
    assert noderag.kcore_k(100, 150) == round(math.log(100) * math.sqrt(3.0)) == 8
    assert noderag.kcore_k(1000, 500) == round(math.log(1000) * 1.0) == 7
    assert noderag.kcore_k(10, 0) == 1  # clamped
    assert noderag.kcore_k(1, 0) == 1


def test_kcore_selection_matches_networkx_and_needs_two_mentions():
    g, is_entity, weight = core_and_fringe()
    G = to_nx(g)
    for k in (2, 3, 5):
        imp = noderag.important_entities(g, is_entity, weight, samples=100, seed=1, cap=100, k=k)
        expected = {v for v in nx.k_core(G, k).nodes if is_entity[v] and weight[v] > 1}
        assert imp.k == k
        assert imp.in_core == expected, k
        assert 5 not in imp.in_core  # in every core, but mentioned once
    assert {v for v in nx.k_core(G, 5).nodes} == set(range(6))
    assert imp.coreness == [nx.core_number(G)[v] for v in range(g.vcount())]


def test_default_k_falls_back_to_the_maximum_core():
    g, is_entity, weight = core_and_fringe()
    g.add_vertices(10)  # ten more statements, each mentioning entity 8: |V| = 25, mean degree 3.2, k = 6
    g.add_edges([(15 + s, 8) for s in range(10)])
    is_entity, weight = np.append(is_entity, [False] * 10), np.append(weight, [0.0] * 10)
    k = noderag.kcore_k(g.vcount(), g.ecount())
    assert k > max(g.coreness())  # the default k-core of this graph is empty
    imp = noderag.important_entities(g, is_entity, weight, samples=100, seed=1, cap=100)
    assert k == 6 and imp.k == max(g.coreness()) == 5
    assert imp.in_core == {v for v in nx.k_core(to_nx(g)).nodes if is_entity[v] and weight[v] > 1} == {0, 1, 2, 3, 4}


# ---------------------------------------------------------------------------------------------- betweenness
def two_cliques_and_bridge(bridge_weight: float) -> tuple[ig.Graph, np.ndarray, np.ndarray]:
    """Two 8-cliques of entities (0-7, 9-16) linked only through entity 8."""
    edges = [(i, j) for i in range(8) for j in range(i + 1, 8)]
    edges += [(9 + i, 9 + j) for i in range(8) for j in range(i + 1, 8)]
    edges += [(0, 8), (8, 9)]
    g = ig.Graph(n=17, edges=edges)
    weight = np.full(17, 2.0)
    weight[8] = bridge_weight
    return g, np.ones(17, dtype=bool), weight


def test_betweenness_selects_the_bridge():
    g, is_entity, weight = two_cliques_and_bridge(2.0)
    exact = noderag.sampled_betweenness(g, samples=100, seed=3)
    ref = nx.betweenness_centrality(to_nx(g), normalized=False)
    assert np.allclose(exact, [ref[v] for v in range(g.vcount())])
    assert int(np.argmax(exact)) == 8
    imp = noderag.important_entities(g, is_entity, weight, samples=100, seed=3, cap=100)
    assert 8 in imp.by_betweenness
    assert imp.by_betweenness == {0, 8, 9}  # the bridge and the two clique members it touches
    assert 8 not in imp.in_core  # a bridge is not in the dense core


def test_sampled_betweenness_is_seeded_and_still_finds_the_bridge():
    g, is_entity, weight = two_cliques_and_bridge(2.0)
    a = noderag.sampled_betweenness(g, samples=6, seed=11)
    assert np.array_equal(a, noderag.sampled_betweenness(g, samples=6, seed=11))
    imp = noderag.important_entities(g, is_entity, weight, samples=6, seed=11, cap=100)
    assert 8 in imp.by_betweenness


def test_bridge_mentioned_once_is_not_important_and_cap_keeps_the_core_first():
    g, is_entity, weight = two_cliques_and_bridge(1.0)
    imp = noderag.important_entities(g, is_entity, weight, samples=100, seed=3, cap=100)
    assert 8 not in imp.selected
    capped = noderag.important_entities(g, is_entity, weight, samples=100, seed=3, cap=3)
    assert len(capped.selected) == 3
    core = g.coreness()
    assert all(core[v] == max(core) for v in capped.selected)
    assert capped.selected[0] in (0, 9)  # highest core, then highest betweenness


# ---------------------------------------------------------------------------------------------- semantic matching
def test_semantic_matches_only_within_cluster_and_community():
    labels = np.array([0, 0, 0, 1, 1, 0, 0, 1])
    community = np.array([0, 0, 1, 0, 0, -1, 0, 0])
    is_high = np.array([True, False, False, False, True, False, True, False])
    pairs = noderag.semantic_matches(labels, community, is_high)
    assert pairs == [(0, 1), (0, 6), (4, 3), (4, 7), (6, 1)]
    for h, j in pairs:
        assert is_high[h] and labels[h] == labels[j] and community[h] == community[j] >= 0


def test_kmeans_uses_sqrt_n_clusters_and_is_seeded():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 16)) * 10
    x = np.vstack([c + rng.normal(size=(25, 16)) for c in centers]).astype(np.float32)
    labels = noderag.kmeans_labels(x, seed=5)
    assert len(set(labels.tolist())) <= round(math.sqrt(len(x))) == 10
    assert np.array_equal(labels, noderag.kmeans_labels(x, seed=5))
    for b in range(4):  # a K-means cluster never mixes two well separated blobs
        for other in range(4):
            if other != b:
                assert not set(labels[b * 25:(b + 1) * 25]) & set(labels[other * 25:(other + 1) * 25])


# ---------------------------------------------------------------------------------------------- HNSW edges
def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _faiss_base_pairs(x, m: int, seed: int, ef: int | None = None) -> set[tuple[int, int]]:
    """The same index built here, its level-0 lists read through faiss' own neighbor_range."""
    index = faiss.IndexHNSWFlat(x.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.rng = faiss.RandomGenerator(seed)
    if ef is not None:
        index.hnsw.efConstruction = ef
    faiss.omp_set_num_threads(1)
    index.add(x)
    nb = faiss.vector_to_array(index.hnsw.neighbors)
    want = set()
    for i in range(len(x)):
        begin, end = np.zeros(1, dtype=np.uint64), np.zeros(1, dtype=np.uint64)
        index.hnsw.neighbor_range(i, 0, faiss.swig_ptr(begin), faiss.swig_ptr(end))
        want |= {(min(i, int(j)), max(i, int(j))) for j in nb[int(begin[0]):int(end[0])] if j >= 0 and j != i}
    return want


@pytest.mark.parametrize("rows", [7, 64, 1 << 14])
def test_hnsw_pairs_read_in_blocks_of_nodes_are_the_same_sorted_pairs(monkeypatch, rows):
    x = unit_rows(300, 24, 1)
    monkeypatch.setattr(noderag, "_PAIR_ROWS", rows)
    pairs = noderag.hnsw_base_pairs(x, m=4, seed=9)
    assert pairs.dtype == np.int64 and pairs.shape[1] == 2
    assert set(map(tuple, pairs.tolist())) == _faiss_base_pairs(x, 4, 9)
    assert pairs.tolist() == sorted(pairs.tolist())  # lexicographic, as the edges are written


def test_hnsw_pairs_are_the_base_layer_neighbours_once_each():
    x = unit_rows(300, 24, 1)
    pairs = noderag.hnsw_base_pairs(x, m=4, seed=9)
    want = _faiss_base_pairs(x, 4, 9)
    got = [tuple(p) for p in pairs.tolist()]
    assert len(got) == len(set(got))  # once each
    assert all(i < j for i, j in got)
    assert set(got) == want
    assert np.array_equal(pairs, noderag.hnsw_base_pairs(x, m=4, seed=9))  # deterministic
    assert len(got) >= len(x) - 1  # every vector has at least one neighbour
    sc = noderag.pair_scores(x, pairs)
    i, j = pairs[0]
    assert sc[0] == pytest.approx(float(x[i] @ x[j]), abs=1e-5)


def test_split_linked_marks_pairs_linked_in_either_order():
    pairs = np.array([[0, 1], [1, 2], [2, 5]])
    mask = noderag.split_linked(pairs, np.array([[5, 2], [0, 3]]), n=6)
    assert mask.tolist() == [False, False, True]


def test_linked_pair_gets_weight_raised_instead_of_a_semantic_edge(tmp_path):
    store = Store(tmp_path / "db.sqlite")
    ws = store.create_workspace("w")
    ids = ["c0", "s1", "s2", "s3"]
    kinds = ["chunk", "statement", "statement", "statement"]
    with store.session() as s:
        s.connection().execute(insert(Node.__table__), [
            {"id": i, "workspace_id": ws.id, "kind": k, "key": "", "title": i, "text": i, "type": "", "layer": 0,
             "weight": 1.0, "document_id": None, "ord": None, "data": {}} for i, k in zip(ids, kinds)])
        s.add(Edge(workspace_id=ws.id, src="s1", dst="c0", kind="derived_from"))
        s.commit()
    ctx = SimpleNamespace(store=store, ws=ws)
    pairs = np.array([[0, 1], [1, 2], [2, 3]])
    scores = np.array([0.9, 0.8, 0.7], dtype=np.float32)

    def edges():
        with store.session() as s:
            return sorted((e.src, e.dst, e.kind, e.weight, tuple(sorted(e.data))) for e in s.exec(select(Edge)))

    assert write_edges(ctx, ids, [], pairs, scores) == (2, 1)
    first = edges()
    assert ("s1", "c0", "derived_from", 2.0, ("hnsw",)) in first
    semantic = {(a, b) for a, b, k, _, _ in first if k == "semantic"}
    assert semantic == {("s1", "s2"), ("s2", "s3")}  # no semantic edge for the linked pair c0-s1
    assert write_edges(ctx, ids, [], pairs, scores) == (2, 1)
    assert edges() == first  # re-run: no second boost, no new rows
    assert write_edges(ctx, ids, [], pairs[1:], scores[1:]) == (2, 0)
    assert ("s1", "c0", "derived_from", 1.0, ()) in edges()  # the boost is taken back with its HNSW pair


def test_keyword_title_keeps_content_words_and_numbers():
    assert keyword_title("The choir sang while 1,000 lanterns rose over the harbour.") == \
        "choir sang 1,000 lanterns rose harbour"
    assert keyword_title("Of the and") == "Of the and"


def test_only_a_heterograph_edge_takes_an_hnsw_boost(tmp_path):
    """A pair joined only by an edge NodeRAG does not define (a chunk's `next`) gets its own semantic edge, and a
    boost such an edge carried from an earlier run is taken back."""
    store = Store(tmp_path / "db.sqlite")
    ws = store.create_workspace("w")
    ids = ["c0", "c1", "s2"]
    kinds = ["chunk", "chunk", "statement"]
    with store.session() as s:
        s.connection().execute(insert(Node.__table__), [
            {"id": i, "workspace_id": ws.id, "kind": k, "key": "", "title": i, "text": i, "type": "", "layer": 0,
             "weight": 1.0, "document_id": None, "ord": None, "data": {}} for i, k in zip(ids, kinds)])
        s.add(Edge(workspace_id=ws.id, src="c0", dst="c1", kind="next", weight=2.0, data={"hnsw": 1}))
        s.add(Edge(workspace_id=ws.id, src="s2", dst="c1", kind="derived_from"))
        s.commit()
    ctx = SimpleNamespace(store=store, ws=ws)
    pairs = np.array([[0, 1], [1, 2]])
    assert write_edges(ctx, ids, [], pairs, np.array([0.9, 0.8], dtype=np.float32)) == (1, 1)
    with store.session() as s:
        got = sorted((e.src, e.dst, e.kind, e.weight, tuple(sorted(e.data))) for e in s.exec(select(Edge)))
    assert got == [("c0", "c1", "next", 1.0, ()), ("c0", "c1", "semantic", 1.0, ("by", "score")),
                   ("s2", "c1", "derived_from", 2.0, ("hnsw",))]


def test_heterograph_edges_are_the_papers():
    """§2.2-2.4: S-N and R-N (decomposition), N-A, H-S/A/H and H-O (augmentation), T-S and HNSW edges among the
    embedded T, S, A, H (enrichment); no chunk-entity, relationship-chunk or statement-relationship link."""
    kinds = {(a, b) for _, a, b in noderag.HETEROGRAPH_EDGES}
    undirected = {frozenset(p) for p in kinds}
    for a, b in [("statement", "entity"), ("relationship", "entity"), ("entity", "attribute"),
                 ("high_level", "statement"), ("high_level", "attribute"), ("high_level", "overview"),
                 ("statement", "chunk")]:
        assert frozenset((a, b)) in undirected
    assert frozenset(("chunk", "entity")) not in undirected
    assert frozenset(("relationship", "chunk")) not in undirected
    assert frozenset(("statement", "relationship")) not in undirected
    assert {k for k, _, _ in noderag.HETEROGRAPH_EDGES} == {
        "mentions", "subject", "object", "has_attribute", "matches", "has_overview", "derived_from", "semantic"}
    assert all(a in noderag.SEMANTIC_KINDS and b in noderag.SEMANTIC_KINDS
               for k, a, b in noderag.HETEROGRAPH_EDGES if k == "semantic")
    assert set(noderag.COMMUNITY_EDGES) == set(noderag.DECOMPOSITION_EDGES) | set(noderag.ATTRIBUTE_EDGES)


def test_leiden_communities_partition_and_are_seeded():
    """Two 5-cliques joined by one edge, plus an isolated vertex: two communities and a singleton, every vertex
    in exactly one, the same partition for the same seed."""
    edges = [(a, b) for a in range(5) for b in range(a + 1, 5)]
    edges += [(a + 5, b + 5) for a, b in edges] + [(4, 5)]
    g = ig.Graph(n=11, edges=edges)
    comms, q = noderag.leiden_communities(g, 1.0, 2, seed=7)
    assert sorted(map(sorted, comms)) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10]]
    assert [len(c) for c in comms] == sorted((len(c) for c in comms), reverse=True)
    assert q == pytest.approx(g.modularity([0] * 5 + [1] * 5 + [2]))
    assert noderag.leiden_communities(g, 1.0, 2, seed=7) == (comms, q)
    assert noderag.leiden_communities(ig.Graph(), 1.0, 2, seed=7) == ([], 0.0)


def test_without_a_cap_every_important_entity_is_kept():
    """The paper and its published code select important entities without a cap (cap None)."""
    g, is_entity, weight = two_cliques_and_bridge(2.0)
    imp = noderag.important_entities(g, is_entity, weight, samples=100, seed=3, cap=None)
    assert sorted(imp.selected) == sorted(imp.in_core | imp.by_betweenness)
    assert len(imp.selected) > 3  # more than the capped run above keeps
    assert imp.selected == noderag.important_entities(g, is_entity, weight, samples=100, seed=3, cap=10_000).selected


def test_matching_clusters_follow_the_published_code():
    """ceil(sqrt(n)) K-means clusters, and K-means only when they would average more than Hcluster_size nodes."""
    assert [noderag.kmeans_clusters(n) for n in (1, 2, 100, 101, 1600)] == [1, 2, 10, 11, 40]
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 16)) * 10
    x = np.vstack([c + rng.normal(size=(25, 16)) for c in centers]).astype(np.float32)
    whole = noderag.matching_labels(x, seed=5, hcluster_size=39)  # 100 / 10 = 10 nodes per cluster <= 39
    assert whole.tolist() == [0] * 100  # one cluster: a high-level element matches its whole community
    split = noderag.matching_labels(x, seed=5, hcluster_size=9)  # 10 > 9: K-means
    assert np.array_equal(split, noderag.kmeans_labels(x, seed=5)) and len(set(split.tolist())) > 1


def test_hnsw_pairs_use_the_given_construction_list():
    x = unit_rows(300, 24, 2)
    pairs = noderag.hnsw_base_pairs(x, m=4, seed=9, ef=200)
    assert {tuple(p) for p in pairs.tolist()} == _faiss_base_pairs(x, 4, 9, ef=200)
