"""WCC + hierarchical Leiden on the built sample and on synthetic graphs: levels, disjointness, nesting, coverage,
determinism, the effect of weights, and modularity per level checked against networkx."""

from __future__ import annotations

from collections import defaultdict

import igraph as ig
import networkx as nx
import pytest
from sqlmodel import select

from core.algorithms.leiden import Hierarchy, hierarchical_leiden, leiden_partition
from core.config import CommunitySettings
from core.graph.entity_graph import load_entity_graph
from core.models import Community, Edge, StageRun


# ------------------------------------------------------------------------------------------------------ graphs
def cliques_joined(k: int = 5) -> ig.Graph:
    """Two k-cliques {0..k-1} and {k..2k-1} joined by the single edge (k-1, k)."""
    edges = [(i, j) for i in range(k) for j in range(i + 1, k)]
    edges += [(k + i, k + j) for i in range(k) for j in range(i + 1, k)]
    edges.append((k - 1, k))
    g = ig.Graph(n=2 * k, edges=edges)
    g.es["weight"] = [1.0] * g.ecount()
    return g


def ring_of_cliques(n: int, k: int) -> ig.Graph:
    """n k-cliques in a ring, each joined to the next by one edge (the classic resolution-limit graph)."""
    edges = []
    for c in range(n):
        base = c * k
        edges += [(base + i, base + j) for i in range(k) for j in range(i + 1, k)]
        edges.append((base + k - 1, ((c + 1) % n) * k))
    g = ig.Graph(n=n * k, edges=edges)
    g.es["weight"] = [1.0] * g.ecount()
    return g


def matched_cliques() -> ig.Graph:
    """Two 4-cliques A={0..3}, B={4..7} plus a perfect matching i—i+4. Unweighted, A and B are the communities;
    with the matching edges 100 times heavier than the clique edges, the four matched pairs are."""
    edges, weights = [], []
    for base in (0, 4):
        for i in range(4):
            for j in range(i + 1, 4):
                edges.append((base + i, base + j))
                weights.append(1.0)
    for i in range(4):
        edges.append((i, i + 4))
        weights.append(100.0)
    g = ig.Graph(n=8, edges=edges)
    g.es["weight"] = weights
    return g


def with_isolated(g: ig.Graph, extra: int) -> ig.Graph:
    g = g.copy()
    g.add_vertices(extra)
    return g


# ------------------------------------------------------------------------------------------------------ invariants
def level_sets(h: Hierarchy) -> dict[int, list[frozenset[int]]]:
    out: dict[int, list[frozenset[int]]] = defaultdict(list)
    for c in h.clusters:
        out[c.level].append(frozenset(c.members))
    return dict(out)


def check_hierarchy(g: ig.Graph, h: Hierarchy, cfg: CommunitySettings) -> None:
    clustered = {v for comp in h.components if len(comp) >= cfg.min_component_size for v in comp}
    # the components are the weak components of g
    assert sorted(sorted(c) for c in h.components) == sorted(sorted(c) for c in g.connected_components("weak"))
    assert h.tiny_components == sum(1 for c in h.components if len(c) < cfg.min_component_size)
    levels = level_sets(h)
    # one level's communities are disjoint
    for level, sets in levels.items():
        seen: set[int] = set()
        for m in sets:
            assert m, "no empty community"
            assert not (seen & m), f"level {level} communities overlap"
            seen |= m
    # level 0 partitions every vertex of every non-tiny component, and nothing else
    assert set().union(*levels.get(0, [frozenset()])) == clustered
    # each level-0 community lies inside one component
    comp_of = {v: i for i, comp in enumerate(h.components) for v in comp}
    for m in levels.get(0, []):
        assert len({comp_of[v] for v in m}) == 1
    # nesting: a child is one level below its parent and inside it; the children of a split parent cover it
    for i, c in enumerate(h.clusters):
        assert c.level < cfg.max_levels
        if c.parent is None:
            assert c.level == 0
        else:
            p = h.clusters[c.parent]
            assert c.level == p.level + 1
            assert set(c.members) <= set(p.members)
            assert i in p.children
        if c.children:
            assert len(c.children) >= 2
            covered = [v for ch in c.children for v in h.clusters[ch].members]
            assert sorted(covered) == sorted(c.members)
            assert len(c.members) > cfg.max_cluster_size, "only large communities are split"


def nx_graph(g: ig.Graph) -> nx.Graph:
    G = nx.Graph()
    G.add_nodes_from(range(g.vcount()))
    for e in g.es:
        G.add_edge(*e.tuple, weight=e["weight"] if "weight" in g.es.attributes() else 1.0)
    return G


def membership_at(g: ig.Graph, h: Hierarchy, level: int) -> list[set[int]]:
    """Blocks of the level's view: each vertex in its community at that level, or its deepest one above it;
    vertices of tiny components alone."""
    assign: dict[int, int] = {}
    for lv in range(level + 1):
        for i, c in enumerate(h.clusters):
            if c.level == lv:
                for v in c.members:
                    assign[v] = i
    blocks: dict[object, set[int]] = defaultdict(set)
    for v in range(g.vcount()):
        blocks[assign.get(v, ("alone", v))].add(v)
    return list(blocks.values())


def check_modularity(g: ig.Graph, h: Hierarchy, weighted: bool) -> None:
    G = nx_graph(g)
    assert set(h.modularity) == {c.level for c in h.clusters}
    for level, q in h.modularity.items():
        blocks = membership_at(g, h, level)
        want = nx.community.modularity(G, blocks, weight="weight" if weighted else None)
        assert q == pytest.approx(want, abs=1e-9), level
        labels = [0] * g.vcount()
        for b, vs in enumerate(blocks):
            for v in vs:
                labels[v] = b
        assert q == pytest.approx(g.modularity(labels, weights=g.es["weight"] if weighted else None), abs=1e-9)


# ------------------------------------------------------------------------------------------------------ synthetic
def test_two_cliques_joined_by_one_edge():
    cfg = CommunitySettings()
    g = with_isolated(cliques_joined(5), 2)
    h = hierarchical_leiden(g, cfg)
    check_hierarchy(g, h, cfg)
    assert level_sets(h) == {0: [frozenset(range(5)), frozenset(range(5, 10))]}
    assert h.tiny_components == 2
    check_modularity(g, h, weighted=True)
    assert h.modularity[0] > 0.3


def test_ring_of_cliques_is_split_recursively():
    cfg = CommunitySettings(max_cluster_size=6)
    g = ring_of_cliques(30, 5)
    h = hierarchical_leiden(g, cfg)
    check_hierarchy(g, h, cfg)
    levels = level_sets(h)
    assert len(levels) >= 2
    assert any(len(m) > cfg.max_cluster_size for m in levels[0]), "the resolution limit merges cliques at level 0"
    cliques = {frozenset(range(c * 5, c * 5 + 5)) for c in range(30)}
    # the leaves (deepest community of every vertex) are exactly the 30 cliques
    leaves = {frozenset(c.members) for c in h.clusters if not c.children}
    assert leaves == cliques
    for c in h.clusters:
        if not c.children and c.level + 1 < cfg.max_levels:
            assert len(c.members) <= cfg.max_cluster_size
    check_modularity(g, h, weighted=True)


def test_max_levels_caps_the_depth():
    g = ring_of_cliques(30, 5)
    h = hierarchical_leiden(g, CommunitySettings(max_cluster_size=6, max_levels=1))
    assert {c.level for c in h.clusters} == {0}
    assert all(not c.children for c in h.clusters)


def test_unsplittable_large_community_stays_a_leaf():
    cfg = CommunitySettings(max_cluster_size=4)
    g = cliques_joined(8)  # two 8-cliques: Leiden keeps each clique whole when asked to split it
    h = hierarchical_leiden(g, cfg)
    check_hierarchy(g, h, cfg)
    assert level_sets(h) == {0: [frozenset(range(8)), frozenset(range(8, 16))]}
    sub = g.induced_subgraph(list(range(8)))
    assert len(set(leiden_partition(sub, sub.es["weight"], cfg.resolution, cfg.seed))) == 1


def test_same_seed_same_result_and_seed_is_used():
    g = ring_of_cliques(30, 5)
    cfg = CommunitySettings(max_cluster_size=6, seed=7)
    a, b = hierarchical_leiden(g, cfg), hierarchical_leiden(g, cfg)
    assert [(c.level, c.members, c.parent, c.children) for c in a.clusters] == [
        (c.level, c.members, c.parent, c.children) for c in b.clusters
    ]
    assert a.modularity == b.modularity


def test_weights_change_the_partition_when_used():
    g = matched_cliques()
    weighted = hierarchical_leiden(g, CommunitySettings(use_weights=True))
    unweighted = hierarchical_leiden(g, CommunitySettings(use_weights=False))
    assert sorted(level_sets(unweighted)[0], key=min) == [frozenset(range(4)), frozenset(range(4, 8))]
    assert sorted(level_sets(weighted)[0], key=min) == [frozenset({i, i + 4}) for i in range(4)]
    check_modularity(g, weighted, weighted=True)
    check_modularity(g, unweighted, weighted=False)


def test_graph_without_edges_has_no_communities():
    g = ig.Graph(n=5)
    g.es["weight"] = []
    h = hierarchical_leiden(g, CommunitySettings())
    assert h.clusters == [] and h.tiny_components == 5 and h.modularity == {}


# ------------------------------------------------------------------------------------------------------ sample
@pytest.fixture(scope="module")
def sample_graph(sample_built):
    """The sample's layered entity graph (HiRAG's), its extracted layer-0 graph (GraphRAG's) and the settings."""
    settings, store, ws, _ = sample_built
    eg = load_entity_graph(store, ws.id)
    return eg, eg.extracted(), settings.community


@pytest.fixture(scope="module")
def stored(sample_built):
    """Every stored community of the sample, its member ids, and the stage's counts."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        rows = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
        members: dict[str, set[str]] = defaultdict(set)
        for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id,
                                                                Edge.kind == "in_community")):
            members[dst].add(src)
        stage = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "communities")
                       .order_by(StageRun.id)).first()
    return rows, members, stage.counts


def test_sample_hierarchy_invariants(sample_graph):
    _, ex, cfg = sample_graph
    g = ex.to_igraph()
    assert g.vcount() > 100 and g.ecount() > 100
    h = hierarchical_leiden(g, cfg)
    check_hierarchy(g, h, cfg)
    assert len(level_sets(h)) >= 2, "the sample has communities on at least two levels"
    check_modularity(g, h, weighted=cfg.use_weights)
    assert h.modularity[0] > 0.3
    again = hierarchical_leiden(g, cfg)
    assert [c.members for c in again.clusters] == [c.members for c in h.clusters]


def _tables(store, ws_id: int):
    from core.models import Node

    with store.session() as s:
        layer = dict(s.exec(select(Node.id, Node.layer).where(Node.workspace_id == ws_id,
                                                              Node.kind == "entity")).all())
        rel_w = dict(s.exec(select(Node.id, Node.weight).where(Node.workspace_id == ws_id,
                                                               Node.kind == "relationship")).all())
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws_id,
                                                                  Edge.kind.in_(("subject", "object")))).all()
        ups = s.exec(select(Edge.src, Edge.dst, Edge.weight).where(Edge.workspace_id == ws_id,
                                                                   Edge.kind == "summarizes")).all()
    sub = {src: dst for src, dst, k in ends if k == "subject"}
    obj = {src: dst for src, dst, k in ends if k == "object"}
    return layer, rel_w, sub, obj, ups


def _check_links(eg, want: dict) -> None:
    got = {frozenset((eg.ids[a], eg.ids[b])): w for (a, b), w in eg.links.items()}
    assert got.keys() == want.keys()
    for k, w in want.items():
        assert got[k] == pytest.approx(w)
    assert eg.to_igraph().ecount() == len(want)


def test_sample_entity_graphs_match_the_tables(sample_built, sample_graph):
    _, store, ws, _ = sample_built
    eg, ex, _ = sample_graph
    layer, rel_w, sub, obj, ups = _tables(store, ws.id)
    assert sorted(eg.ids) == eg.ids and set(eg.ids) == set(layer)
    assert eg.layer == [layer[e] or 0 for e in eg.ids]
    # HiRAG's layered graph: the entities of every layer, relationship links plus the summarizes links
    want: dict[frozenset, float] = defaultdict(float)
    for rid, w in rel_w.items():
        want[frozenset((sub[rid], obj[rid]))] += w
    for a, b, w in ups:
        want[frozenset((a, b))] += w
    _check_links(eg, want)
    # GraphRAG's extracted graph: layer-0 entities only, relationship links between them only
    assert ex.ids == [e for e in eg.ids if not layer[e]]
    want0: dict[frozenset, float] = defaultdict(float)
    for rid, w in rel_w.items():
        if not layer[sub[rid]] and not layer[obj[rid]]:
            want0[frozenset((sub[rid], obj[rid]))] += w
    _check_links(ex, want0)
    assert sum(ex.rel_links.values()) == pytest.approx(sum(want0.values()))


def test_sample_has_summary_entities(sample_graph):
    eg, ex, _ = sample_graph
    assert any(lv > 0 for lv in eg.layer), "the sample builds HiRAG summary layers"
    assert len(eg.ids) > len(ex.ids) and len(eg.links) > len(ex.links)


def _check_stored(method: str, eg, h: Hierarchy, rows: dict, members: dict) -> list:
    """The stored rows of `method` are `h`'s communities, every level a partition, children inside parents."""
    comms = [c for c in rows.values() if c.method == method]
    # member lists sorted into tuples: frozensets only order partially, so a sorted list of them would depend on
    # the order the rows came back in
    want = sorted((c.level, tuple(sorted(eg.ids[v] for v in c.members))) for c in h.clusters)
    got = sorted((c.level, tuple(sorted(members[c.id]))) for c in comms)
    assert got == want
    for c in comms:
        assert c.size == len(members[c.id])
        if c.level == 0:
            assert c.parent_id is None
        else:
            parent = rows[c.parent_id]
            assert parent.method == method and parent.level == c.level - 1
            assert members[c.id] <= members[parent.id]
        assert c.title and c.summary, "every community has a report"
    return comms


def test_leiden_is_graphrag_s_on_the_extracted_graph_only(sample_built, sample_graph, stored):
    _, store, ws, _ = sample_built
    eg, ex, cfg = sample_graph
    rows, members, counts = stored
    g = ex.to_igraph()
    h = hierarchical_leiden(g, cfg)
    leiden = _check_stored("leiden", ex, h, rows, members)
    layer = dict(zip(eg.ids, eg.layer))
    # no summary entity in any leiden community: layer 0 only
    assert all(layer[m] == 0 for c in leiden for m in members[c.id])
    # level 0 partitions the layer-0 entities of the non-tiny components of the extracted graph
    lvl0 = [members[c.id] for c in leiden if c.level == 0]
    assert sum(map(len, lvl0)) == len(set().union(*lvl0))
    clustered = {ex.ids[v] for comp in h.components if len(comp) >= cfg.min_component_size for v in comp}
    assert set().union(*lvl0) == clustered
    wcc = [c for c in rows.values() if c.method == "wcc"]
    assert sorted(tuple(sorted(members[c.id])) for c in wcc) == sorted(
        tuple(sorted(ex.ids[v] for v in comp)) for comp in h.components if len(comp) >= cfg.min_component_size)
    assert all(not c.summary for c in wcc), "WCC components get no report"
    # the stage recorded the same modularity and counts per level
    assert counts["entities"] == g.vcount() == len(ex.ids)
    assert counts["modularity"] == {str(k): round(v, 4) for k, v in h.modularity.items()}
    assert {int(k): v for k, v in counts["communities_per_level"].items()} == {
        lv: len(ms) for lv, ms in level_sets(h).items()}


def test_hirag_communities_partition_the_layered_graph(sample_graph, stored):
    eg, _, cfg = sample_graph
    rows, members, counts = stored
    g = eg.to_igraph()
    h = hierarchical_leiden(g, cfg)
    check_hierarchy(g, h, cfg)
    hirag = _check_stored("hirag", eg, h, rows, members)
    layer = dict(zip(eg.ids, eg.layer))
    # HiRAG's communities hold summary entities (layer >= 1) beside extracted ones (hirag.txt §4.1)
    mixed = [c for c in hirag if any(layer[m] >= 1 for m in members[c.id])
             and any(layer[m] == 0 for m in members[c.id])]
    assert mixed, "some HiRAG community holds entities of several layers"
    # each level partitions its nodes; level 0 covers every entity of the layered graph's non-tiny components
    for level in {c.level for c in hirag}:
        sets = [members[c.id] for c in hirag if c.level == level]
        assert sum(map(len, sets)) == len(set().union(*sets)), f"hirag level {level} overlaps"
    lvl0 = set().union(*(members[c.id] for c in hirag if c.level == 0))
    assert lvl0 == {eg.ids[v] for comp in h.components if len(comp) >= cfg.min_component_size for v in comp}
    assert any(layer[m] >= 1 for m in lvl0)
    hi = counts["hirag"]
    assert hi["entities"] == len(eg.ids) and hi["summary_entities"] == sum(1 for lv in eg.layer if lv > 0)
    assert hi["modularity"] == {str(k): round(v, 4) for k, v in h.modularity.items()}
    assert {int(k): v for k, v in hi["communities_per_level"].items()} == {
        lv: len(ms) for lv, ms in level_sets(h).items()}
    assert hi["with_summary_entities"] == sum(1 for c in hirag if any(layer[m] >= 1 for m in members[c.id]))


def test_hirag_retrieval_reads_hirag_communities(sample_resources):
    from core.retrieval.base import get_strategy

    r = get_strategy("hirag").retrieve(sample_resources, "Who conducts the Kelmouth Choir?")
    comms = sample_resources.view.communities
    assert r.sections["global"], "the question reaches some community"
    assert all(comms[i.id].method == "hirag" for i in r.sections["global"])
