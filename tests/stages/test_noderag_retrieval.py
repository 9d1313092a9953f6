"""NodeRAG search (dual search + shallow PPR, core/retrieval/noderag.py) on the built sample workspace."""

from __future__ import annotations

import numpy as np
import pytest
from sqlmodel import select

from core.algorithms.noderag import HETEROGRAPH_EDGES
from core.graph.hetero import EdgeList
from core.models import Document, Edge, Node
from core.retrieval.base import get_strategy
from core.retrieval.noderag import NodeRAGStrategy, Walk, question_names

HALDEN_Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"
HALDEN_GOLD = {"halden_barrier_overview.md", "amara_okafor_profile.md"}
RETRIEVABLE = {"chunk", "statement", "attribute", "high_level", "relationship"}


@pytest.fixture(scope="module")
def tables(sample_built):
    """Every stored node (id -> kind, title), document and edge (as an unordered pair -> kinds) of the sample."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        nodes = {i: (k, t) for i, k, t in s.exec(select(Node.id, Node.kind, Node.title).where(
            Node.workspace_id == ws.id)).all()}
        docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws.id))}
        edges: dict[frozenset, set[str]] = {}
        triples: dict[frozenset, set[tuple[str, str, str]]] = {}  # pair -> (edge kind, source kind, target kind)
        for a, b, k in s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id)).all():
            edges.setdefault(frozenset((a, b)), set()).add(k)
            if a in nodes and b in nodes:
                triples.setdefault(frozenset((a, b)), set()).add((k, nodes[a][0], nodes[b][0]))
    return {"nodes": nodes, "documents": docs, "edges": edges, "triples": triples}


def with_settings(res, **knobs):
    """The same resources (loaded graph reused) with other NodeRAG query settings."""
    settings = res.settings.model_copy(deep=True)
    for k, v in knobs.items():
        setattr(settings.retrieval.noderag, k, v)
    return res.with_settings(settings)


@pytest.fixture(scope="module")
def halden(sample_resources):
    return get_strategy("noderag").retrieve(sample_resources, HALDEN_Q)


def entity_named(tables, title: str) -> str:
    return next(i for i, (k, t) in tables["nodes"].items() if k == "entity" and t == title)


def test_exact_match_of_a_named_entity_is_an_entry_point(sample_resources, tables):
    amara = entity_named(tables, "Amara Okafor")
    r = get_strategy("noderag").retrieve(sample_resources, "Where did Amara Okafor study civil engineering?")
    entries = {p.id for p in r.path_nodes if p.role == "entry"}
    assert amara in entries
    assert r.trace["counts"]["exact_entries"] >= 1
    # the entity is an entry point only: entities are never returned as context
    assert all(i.id != amara for s in r.sections.values() for i in s)
    # it leads to its attribute (the entity is among the top entities and has an attribute node)
    attrs = [i for i in r.sections["local"] if i.kind == "attribute" and i.title == "Amara Okafor"]
    assert attrs, "the attribute of the named entity is retrieved"


def test_question_names_drop_stop_words_and_lower_case_mentions(sample_resources):
    names = dict(question_names(sample_resources, "Who designed the Halden Barrier?", proper_only=True))
    assert "halden barrier" in names
    lower = dict(question_names(sample_resources, "who designed the halden barrier?", proper_only=True))
    assert "halden barrier" not in lower
    assert "halden barrier" in dict(question_names(sample_resources, "who designed the halden barrier?", False))
    assert all(n not in {"a", "the", "who"} for n in names)


def test_sections_hold_only_retrievable_kinds(halden, tables):
    local, bridge, glob = halden.sections["local"], halden.sections["bridge"], halden.sections["global"]
    assert local and bridge and glob
    for section, allowed in ((local, {"chunk", "statement", "attribute"}),
                             (bridge, {"chunk", "statement", "attribute", "relationship"}),
                             (glob, {"high_level"})):
        for item in section:
            assert item.kind in allowed
            assert tables["nodes"][item.id][0] == item.kind  # a real stored node of that kind
            assert all(d in tables["documents"] for d in item.documents)
        scores = [i.score for i in section]
        assert scores == sorted(scores, reverse=True)
    ids = [i.id for s in halden.sections.values() for i in s]
    assert len(ids) == len(set(ids))  # every node is returned once
    assert {tables["nodes"][i][0] for i in ids} <= RETRIEVABLE  # no entity, overview or topic


def test_per_kind_caps_are_respected(sample_resources, tables):
    caps = dict(entry_k=3, cross_nodes=4, top_entity=2, top_relationship=5, top_high_level=1)
    res = with_settings(sample_resources, **caps)
    r = get_strategy("noderag").retrieve(res, HALDEN_Q)
    roles: dict[str, list[str]] = {}
    for p in r.path_nodes:
        roles.setdefault(p.role, []).append(p.id)
    kinds = {i: tables["nodes"][i][0] for i in tables["nodes"]}
    vector_entries = [i for i in roles["entry"] if kinds[i] in {"chunk", "statement", "attribute", "high_level"}]
    assert len(vector_entries) <= caps["entry_k"]
    assert 0 < len(roles.get("cross", [])) <= 4 * caps["cross_nodes"]  # the top k of each of T, S, A, H
    assert all(kinds[i] in {"chunk", "statement", "attribute", "high_level"} for i in roles["cross"])
    rels = [i for s in r.sections.values() for i in s if i.kind == "relationship"]
    assert 0 < len(rels) <= caps["top_relationship"]
    keys = [i for i in roles.get("key", [])]
    assert len([i for i in keys if kinds[i] == "entity"]) <= caps["top_entity"]
    assert len([i for i in keys if kinds[i] == "overview"]) <= caps["top_high_level"]
    counts = r.trace["counts"]
    assert counts["cross_nodes"] <= 16 and counts["relationships"] <= 5 and counts["entities"] <= 2
    # returned = vector entries + cross nodes + relationships + what the key entities / overviews lead to
    returned = {i.id for s in r.sections.values() for i in s}
    assert set(vector_entries) | set(roles["cross"]) <= returned
    assert len(returned) <= caps["entry_k"] + 4 * caps["cross_nodes"] + caps["top_relationship"] + len(
        roles.get("result", []))
    # entry_k per kind when the entries are not taken jointly
    per_kind = get_strategy("noderag").retrieve(with_settings(sample_resources, entry_k=2, joint_entries=False),
                                                HALDEN_Q)
    ent = [p.id for p in per_kind.path_nodes if p.role == "entry"]
    for kind in ("chunk", "statement", "attribute", "high_level"):
        assert len([i for i in ent if kinds[i] == kind]) <= 2
    assert per_kind.trace["counts"]["vector_entries"] > 2


def test_cross_nodes_are_the_top_k_of_each_type(sample_resources, tables):
    """§2.5: "the top-k nodes with the highest PPR scores for each type are selected as cross nodes": each of T, S,
    A, H brings its own top k (scored by PPR, best first within a type), not k over the four together (the old
    code, kept as the published code's `cross_per_kind` off)."""
    kinds = {i: tables["nodes"][i][0] for i in tables["nodes"]}
    r = get_strategy("noderag").retrieve(with_settings(sample_resources, cross_nodes=2), HALDEN_Q)
    cross = [p.id for p in r.path_nodes if p.role == "cross"]
    per_kind = {k: [i for i in cross if kinds[i] == k] for k in ("chunk", "statement", "attribute", "high_level")}
    assert all(len(v) <= 2 for v in per_kind.values())
    assert sum(len(v) == 2 for v in per_kind.values()) >= 2 and len(cross) > 2
    score = {i.id: i.score for s in r.sections.values() for i in s}
    # a cross attribute that a top entity also leads to is listed under local with that entity's score
    # (max(p[a], p[entity])), so only the others show their own PPR score
    led = {i.id for i in r.sections["local"] if i.kind == "attribute"}
    for ids in per_kind.values():  # within a type, the best PPR scores (ranked best first)
        ids = [i for i in ids if i not in led]
        assert [score[i] for i in ids] == sorted((score[i] for i in ids), reverse=True)
    joint = get_strategy("noderag").retrieve(with_settings(sample_resources, cross_nodes=2, cross_per_kind=False),
                                             HALDEN_Q)
    assert 0 < len([p for p in joint.path_nodes if p.role == "cross"]) <= 2


def test_sources_exist_and_rank_the_gold_documents(halden, tables, sample_resources):
    srcs = halden.sources
    assert 0 < len(srcs) <= sample_resources.settings.retrieval.max_sources
    assert all(s.document_id in tables["documents"] for s in srcs)
    assert [s.score for s in srcs] == sorted([s.score for s in srcs], reverse=True)
    assert all(tables["nodes"][c][0] == "chunk" for s in srcs for c in s.chunk_ids)
    top = {tables["documents"][s.document_id].filename for s in srcs[:5]}
    assert HALDEN_GOLD <= top


def test_path_nodes_exist_and_path_edges_are_stored_edges(halden, tables):
    assert {p.role for p in halden.path_nodes} >= {"entry", "cross"}
    on_path = set()
    for p in halden.path_nodes:
        assert tables["nodes"][p.id][0] == p.kind
        assert p.role in {"entry", "cross", "key", "result"}
        on_path.add(p.id)
    assert len(on_path) == len(halden.path_nodes)
    assert halden.path_edges
    for e in halden.path_edges:
        assert e.src in on_path and e.dst in on_path
        stored = tables["edges"].get(frozenset((e.src, e.dst)), set())
        assert e.kind in stored, (e, stored)
        assert any(t in HETEROGRAPH_EDGES and t[0] == e.kind
                   for t in tables["triples"][frozenset((e.src, e.dst))])  # a walked edge of the paper's
    # every cross node the walk reached hangs on the path by a real edge when it has one
    linked = {e.dst for e in halden.path_edges}
    assert any(p.id in linked for p in halden.path_nodes if p.role == "cross")
    assert {"ppr", "vector_search", "exact_search", "rank_sources"} <= set(halden.trace["timings_ms"])


def walk_pairs(w: Walk) -> set[frozenset]:
    rows = np.repeat(np.arange(len(w.h.ids)), np.diff(w.adj.indptr))
    return {frozenset((w.h.ids[a], w.h.ids[b])) for a, b in zip(rows, w.adj.indices)}


def test_the_walk_holds_only_the_papers_edges_by_default(sample_resources, tables):
    w = NodeRAGStrategy.walk(sample_resources, teleport=True)  # uncapped weights (the ablation's walk)
    assert walk_pairs(NodeRAGStrategy.walk(sample_resources)) == walk_pairs(w)  # the capped default: same links
    pairs = walk_pairs(w)
    assert pairs
    for p in pairs:  # every walked link is a stored edge NodeRAG defines, weighing 1 (+1 for an HNSW boost)
        assert tables["triples"][p] & set(HETEROGRAPH_EDGES), tables["triples"][p]
    assert set(w.adj.data.tolist()) <= {1.0, 2.0, 3.0}
    kinds = {frozenset((tables["nodes"][a][0] for a in p)) for p in pairs}
    assert frozenset(("chunk", "entity")) not in kinds and frozenset(("relationship", "chunk")) not in kinds
    assert {"mentions", "subject", "object", "has_attribute", "matches", "has_overview", "derived_from",
            "semantic"} == set(w.edge_kinds)
    # every stored edge of the paper's kinds is walked
    want = {p for p, ts in tables["triples"].items() if ts & set(HETEROGRAPH_EDGES) and len(p) == 2}
    assert want == pairs


def test_options_add_the_links_the_paper_does_not_define(sample_resources, tables):
    base = walk_pairs(NodeRAGStrategy.walk(sample_resources))
    res = with_settings(sample_resources, chunk_entity_links=True, relationship_chunk_links=True,
                        statement_relationship_links=True)
    w = NodeRAGStrategy.walk(res, teleport=True)  # uncapped weights
    more = walk_pairs(w)
    added = {frozenset(tables["nodes"][a][0] for a in p) for p in more - base}
    assert added == {frozenset(("chunk", "entity")), frozenset(("relationship", "chunk")),
                     frozenset(("statement", "relationship"))}
    assert base < more
    with res.store.session() as s:  # a chunk's mention weighs 1 on the walk, its subject's too (plus 1 for HNSW)
        chunk_mentions = [(a, b) for a, b in s.exec(select(Edge.src, Edge.dst).where(
            Edge.workspace_id == res.ws.id, Edge.kind == "mentions")).all() if tables["nodes"][a][0] == "chunk"]
    idx = w.h.index
    assert chunk_mentions and {float(w.adj[idx[a], idx[b]]) for a, b in chunk_mentions} <= {1.0, 2.0}
    r = get_strategy("noderag").retrieve(res, HALDEN_Q)
    assert r.sources and r.sections["local"]


def test_degree_cap_bounds_link_weights(sample_resources, halden):
    """The published unbalance_adjust, on by default (issue 37): the walk's default adjacency is the capped one."""
    h = sample_resources.hetero
    w = Walk(h, EdgeList.load(sample_resources.store, sample_resources.ws.id, h), degree_cap=True)
    assert (NodeRAGStrategy.walk(sample_resources).adj != w.adj).nnz == 0
    assert halden.trace["ppr"] == {"update": "published", "degree_cap": True}
    plain = get_strategy("noderag-teleport").retrieve(sample_resources, HALDEN_Q)
    assert plain.trace["ppr"] == {"update": "teleport", "degree_cap": False}
    deg = np.diff(w.adj.indptr).astype(float)
    rows = np.repeat(np.arange(len(h.ids)), np.diff(w.adj.indptr))
    cap = 1.0 / np.maximum(np.maximum(deg[rows], deg[w.adj.indices]), 1.0)
    assert (w.adj.data <= cap + 1e-12).all() and (w.adj.data > 0).all()
    capped = get_strategy("noderag").retrieve(with_settings(sample_resources, degree_cap=True), HALDEN_Q)
    assert capped.sources and capped.sections["local"]


def test_no_entry_point_gives_an_empty_retrieval(sample_resources):
    res = with_settings(sample_resources, entry_k=0, exact_weight=0.0)
    r = get_strategy("noderag").retrieve(res, "Who designed the Halden Barrier?")
    assert not any(r.sections.values()) and not r.sources and not r.path_nodes
