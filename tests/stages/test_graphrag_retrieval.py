"""GraphRAG local and global search on the built sample: sections, sources, paths against the stored graph, caps,
token budgets, the map step's ratings and the expansion by hierarchy level."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from sqlmodel import select

from core.ingest import count_tokens
from core.models import Community, Document, Edge, Node
from core.retrieval.base import Retrieval, get_strategy, item_tokens, strategy_names
from core.retrieval.graphrag.global_search import Point, map_report, reduce_points

HALDEN_Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"
GRANT_Q = "Who chairs the foundation that paid for the Carrow Gold field trials, and how large was the grant?"


@pytest.fixture(scope="module")
def tables(sample_built):
    """Every stored node (id -> kind), community, document and edge (src, dst, kind) of the sample."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        kinds = dict(s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws.id)).all())
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
        docs = set(s.exec(select(Document.id).where(Document.workspace_id == ws.id)).all())
        edges = set(s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id)).all())
    return {"kinds": kinds, "communities": comms, "documents": docs, "edges": edges}


def with_settings(res, **fields):
    """A shallow copy of the resources (sharing the loaded graph and index) with a deep copy of the settings."""
    out = copy.copy(res)
    out.settings = res.settings.model_copy(deep=True)
    for k, v in fields.items():
        section, name = k.split("__")
        setattr(getattr(out.settings.retrieval, section), name, v)
    return out


@pytest.fixture(scope="module")
def local(sample_resources) -> Retrieval:
    return get_strategy("graphrag-local").retrieve(sample_resources, HALDEN_Q)


@pytest.fixture(scope="module")
def glob(sample_resources) -> Retrieval:
    return get_strategy("graphrag-global").retrieve(sample_resources, HALDEN_Q)


def assert_path_is_stored(r: Retrieval, tables) -> None:
    """Every path node is a stored node of its kind (or a community), every edge joins two path nodes and is a
    stored edge in either direction, an in_community membership or a parent -> child link between communities."""
    assert r.path_nodes and r.path_edges
    known = set()
    for n in r.path_nodes:
        if n.kind == "community":
            assert n.id in tables["communities"], n
        else:
            assert tables["kinds"].get(n.id) == n.kind, n
        known.add(n.id)
    assert len(known) == len(r.path_nodes), "a node is listed twice"
    edges = tables["edges"]
    for e in r.path_edges:
        assert e.src in known and e.dst in known, e
        if e.kind == "child_of":
            assert tables["communities"][e.dst].parent_id == e.src, e
        else:
            assert (e.src, e.dst, e.kind) in edges or (e.dst, e.src, e.kind) in edges, e


def assert_sources_exist(r: Retrieval, tables) -> None:
    assert r.sources
    assert all(s.document_id in tables["documents"] for s in r.sources)
    assert len({s.document_id for s in r.sources}) == len(r.sources)
    scores = [s.score for s in r.sources]
    assert scores == sorted(scores, reverse=True)
    for items in r.sections.values():
        for i in items:
            assert all(d in tables["documents"] for d in i.documents), i


def test_both_strategies_are_registered():
    names = strategy_names()
    assert {"graphrag-local", "graphrag-global"} <= set(names)
    for n in ("graphrag-local", "graphrag-global"):
        s = get_strategy(n)
        assert s.name == n and s.label
        assert all(f"{sec}:" in s.description for sec in ("local", "bridge", "global"))


def test_local_fills_every_section(local, sample_resources, tables):
    view = sample_resources.view
    sec = local.sections
    assert sec["local"] and sec["bridge"] and sec["global"]
    ents = [i for i in sec["local"] if i.kind == "entity"]
    chunks = [i for i in sec["local"] if i.kind == "chunk"]
    assert ents and chunks and len(ents) + len(chunks) == len(sec["local"])
    assert sec["local"][: len(ents)] == ents, "entity descriptions come before the chunks"
    assert all(tables["kinds"][i.id] == "entity" for i in ents)
    assert all(tables["kinds"][i.id] == "chunk" for i in chunks)
    assert all(i.kind == "relationship" and tables["kinds"][i.id] == "relationship" for i in sec["bridge"])
    assert all(i.kind == "community" and tables["communities"][i.id].method == "leiden" for i in sec["global"])
    # the question names the barrier: the exact name match is an entry entity
    assert "Halden Barrier" in {i.title for i in ents}
    assert local.trace["counts"]["name_matches"] >= 1
    # chunks: each mentions an entry entity; ranked by how many entry entities they mention
    entry = {i.id for i in ents}
    freq = [sum(1 for e in entry if any(c == ch.id for c, _ in view.entity_chunks.get(e, []))) for ch in chunks]
    assert all(f >= 1 for f in freq)
    assert freq == sorted(freq, reverse=True)
    # relationships: inside ones (two entry ends) first, then outside ones (exactly one entry end)
    ends = [{view.relationships[i.id].data["source"], view.relationships[i.id].data["target"]} for i in sec["bridge"]]
    inside = [len(e & entry) == 2 or (len(e) == 1 and e <= entry) for e in ends]
    assert inside == sorted(inside, reverse=True)
    assert all(ins or len(e & entry) == 1 for ins, e in zip(inside, ends))
    # communities: each holds an entry entity, at most at the roll-up level, ranked by entry entities held
    level = sample_resources.settings.retrieval.graphrag_local.community_level
    held = []
    for c in sec["global"]:
        assert tables["communities"][c.id].level <= level
        held.append(sum(1 for e in entry if c.id in view.member_of.get(e, [])))
    assert all(h >= 1 for h in held) and held == sorted(held, reverse=True)
    assert set(local.trace["timings_ms"]) >= {"embed_query", "entity_search", "chunks", "token_budget"}


def test_local_sources_and_path(local, tables):
    assert_sources_exist(local, tables)
    chunk_docs = {d for i in local.sections["local"] if i.kind == "chunk" for d in i.documents}
    # documents of the kept chunks come before those only backing relationships
    flags = [s.document_id in chunk_docs for s in local.sources]
    assert flags == sorted(flags, reverse=True) and flags[0]
    assert_path_is_stored(local, tables)
    roles = {(n.kind, n.role) for n in local.path_nodes}
    assert {("entity", "entry"), ("chunk", "chunk"), ("community", "community"), ("relationship", "bridge")} <= roles
    kinds = {(e.kind, e.role) for e in local.path_edges}
    assert {("mentions", "chunk"), ("in_community", "membership"), ("subject", "bridge"), ("object", "bridge")} <= kinds
    # every kept relationship is drawn with both of its ends
    rel_edges = {(e.src, e.kind) for e in local.path_edges}
    for i in local.sections["bridge"]:
        assert (i.id, "subject") in rel_edges and (i.id, "object") in rel_edges


def test_local_caps(sample_resources, local):
    res = with_settings(sample_resources, graphrag_local__top_entities=3, graphrag_local__top_chunks=2,
                        graphrag_local__top_communities=1, graphrag_local__top_inside_rels=1,
                        graphrag_local__top_outside_rels=2)
    r = get_strategy("graphrag-local").retrieve(res, HALDEN_Q)
    ents = [i for i in r.sections["local"] if i.kind == "entity"]
    chunks = [i for i in r.sections["local"] if i.kind == "chunk"]
    assert len(ents) == 3 and 1 <= len(chunks) <= 2
    assert len(r.sections["global"]) == 1
    assert 1 <= len(r.sections["bridge"]) <= 3
    c = r.trace["counts"]
    assert c["inside_relationships"] <= 1 and c["outside_relationships"] <= 2
    assert sample_resources.settings.retrieval.graphrag_local.top_chunks == 10, "the shared settings are untouched"


def test_local_token_budget_drops_lowest_ranked_first(sample_resources, local):
    cfg = sample_resources.settings.retrieval.graphrag_local
    full = sum(item_tokens(i) for s in local.sections.values() for i in s)
    assert full <= cfg.max_tokens
    budget = max(full // 3, 200)
    r = get_strategy("graphrag-local").retrieve(with_settings(sample_resources, graphrag_local__max_tokens=budget),
                                                HALDEN_Q)
    used = {k: sum(item_tokens(i) for i in v) for k, v in r.sections.items()}
    assert sum(used.values()) <= budget
    assert sum(used.values()) == r.trace["counts"]["context_tokens"]
    assert used["global"] <= int(budget * cfg.community_prop)
    dropped = 0
    for name in ("local", "bridge", "global"):
        for kind in {i.kind for i in local.sections[name]}:
            before = [i.id for i in local.sections[name] if i.kind == kind]
            after = [i.id for i in r.sections[name] if i.kind == kind]
            assert after == before[: len(after)], "only the lowest-ranked items are dropped"
            dropped += len(before) - len(after)
    assert dropped > 0


def test_global_points_are_rated_sorted_and_filtered(glob, sample_resources, tables):
    cfg = sample_resources.settings.retrieval.graphrag_global
    pts = glob.sections["global"]
    assert pts and glob.sections["local"]
    assert all(i.kind == "community" and tables["communities"][i.id].method == "leiden" for i in pts)
    assert all(" · point " in i.title for i in pts)
    ratings = [i.score for i in pts]
    assert ratings == sorted(ratings, reverse=True)
    assert all(cfg.min_importance <= r <= 100 for r in ratings)
    assert sum(count_tokens(i.text) for i in pts) <= cfg.max_tokens
    per = {}
    for i in pts:
        per[i.id] = per.get(i.id, 0) + 1
    assert max(per.values()) <= cfg.points_per_report
    assert all(i.kind == "entity" and tables["kinds"][i.id] == "entity" for i in glob.sections["local"])
    # a higher bar keeps only the points that clear it, a smaller budget only the best ones
    bar = int(ratings[len(ratings) // 2]) + 1
    hi = get_strategy("graphrag-global").retrieve(with_settings(sample_resources, graphrag_global__min_importance=bar),
                                                  HALDEN_Q)
    assert [i.score for i in hi.sections["global"]] == [r for r in ratings if r >= bar]
    small = max(count_tokens(pts[0].text), 1) + 1
    lo = get_strategy("graphrag-global").retrieve(with_settings(sample_resources, graphrag_global__max_tokens=small),
                                                  HALDEN_Q)
    assert 1 <= len(lo.sections["global"]) < len(pts)
    assert sum(count_tokens(i.text) for i in lo.sections["global"]) <= small
    n = len(lo.sections["global"])
    assert [(i.id, i.title) for i in lo.sections["global"]] == [(i.id, i.title) for i in pts[:n]]


def test_global_expansion_adds_only_children_of_hits(glob, sample_resources, tables):
    comms = tables["communities"]
    hits = [n.id for n in glob.path_nodes if n.role == "entry"]
    assert hits and all(n.kind == "community" and comms[n.id].method == "leiden" for n in glob.path_nodes
                        if n.role in ("entry", "layer"))
    kids = [n.id for n in glob.path_nodes if n.role == "layer"]
    assert [i.id for i in glob.sections["bridge"]] == kids
    assert all(comms[k].parent_id in hits and k not in hits for k in kids)
    assert {(e.src, e.dst) for e in glob.path_edges if e.role == "layer"} == {(comms[k].parent_id, k) for k in kids}
    has_children = any(c.parent_id in hits and c.id not in hits for c in comms.values())
    assert bool(kids) == has_children
    cfg = sample_resources.settings.retrieval.graphrag_global
    assert len(hits) + len(kids) <= cfg.max_reports
    off = get_strategy("graphrag-global").retrieve(
        with_settings(sample_resources, graphrag_global__expand_children=False), HALDEN_Q)
    assert not off.sections["bridge"] and not any(n.role == "layer" for n in off.path_nodes)


def test_global_sources_and_path(glob, tables):
    assert_sources_exist(glob, tables)
    assert_path_is_stored(glob, tables)
    assert {e.kind for e in glob.path_edges} <= {"child_of", "in_community"}


def test_local_and_global_find_the_grant_documents(sample_resources, tables):
    docs = {d: t for d, (_, t) in sample_resources.view.documents.items()}
    for name in ("graphrag-local", "graphrag-global"):
        r = get_strategy(name).retrieve(sample_resources, GRANT_Q)
        titles = [docs[s.document_id] for s in r.sources[:5]]
        assert any("meridian" in t.lower() or "carrow gold" in t.lower() for t in titles), (name, titles)


def test_map_report_rates_points_by_question_and_importance():
    c = SimpleNamespace(id="c1", summary="The Halden Barrier closes in storms. It was finished in 2004.", report={
        "rating": 6.0,
        "findings": [
            {"summary": "Sluice gates", "explanation": "Amara Okafor designed the sluice gates.", "importance": 10},
            {"summary": "Sluice gates again", "explanation": "Amara Okafor designed the sluice gates.",
             "importance": 2},
            {"summary": "Lanterns", "explanation": "The festival has lanterns.", "importance": 10},
        ]})
    terms = {"sluice": 3.0, "gates": 2.0, "designed": 1.0}
    pts = map_report(c, terms, 0.5, 10)
    by_text = {}
    for p in pts:
        by_text.setdefault(p.text.split(": ")[-1], []).append(p.rating)
    assert by_text["The festival has lanterns."] == [0], "a point sharing nothing with the question is rated 0"
    hi, lo = sorted(by_text["Amara Okafor designed the sluice gates."], reverse=True)
    assert 0 < lo < hi <= 100, "the stored importance raises the rating"
    assert [p.rating for p in pts] == sorted((p.rating for p in pts), reverse=True)
    assert any("2004" in p.text for p in pts), "the summary's sentences are points too"
    assert map_report(c, terms, 0.0, 10)[0].rating == 0, "a report unrelated to the question rates nothing"
    assert len(map_report(c, terms, 0.5, 2)) == 2
    kept = reduce_points([Point("a", 1, "x y", 0, 1.0), Point("b", 1, "z", 50, 1.0), Point("a", 2, "w", 70, 1.0)],
                         1, 100)
    assert [(p.community_id, p.n) for p in kept] == [("a", 2), ("b", 1)]


def test_round_trip_through_dict(local, glob):
    for r in (local, glob):
        assert Retrieval.from_dict(r.to_dict()).to_dict() == r.to_dict()


def test_local_sources_follow_the_context_chunks(local, sample_resources):
    """GraphRAG local's sources are its kept chunks' documents in the context's order (mention count, then
    similarity), as its published code orders its text units; the ablation ranks them by similarity alone."""
    view = sample_resources.view
    chunks = [i for i in local.sections["local"] if i.kind == "chunk"]
    assert len(chunks) >= 2
    docs = list(dict.fromkeys(view.chunk_doc[i.id] for i in chunks))
    assert [s.document_id for s in local.sources][: len(docs)] == docs[: len(local.sources)]

    sim = get_strategy("graphrag-local-simsources").retrieve(sample_resources, HALDEN_Q)
    q = sample_resources.embed_query(HALDEN_Q)
    ids = [i.id for i in sim.sections["local"] if i.kind == "chunk"]
    vecs = sample_resources.index.vectors("chunk", ids)
    by_sim = list(dict.fromkeys(view.chunk_doc[c] for c in sorted(ids, key=lambda c: -float(vecs[c] @ q))))
    assert [s.document_id for s in sim.sources][: len(by_sim)] == by_sim[: len(sim.sources)]


def test_local_stays_on_graphrags_own_graph(sample_resources, tables):
    """Issue 37: GraphRAG local's entry pool never takes a HiRAG summary entity, even when the question is one's own
    text (the pool had kept them after the layer-0 hits, so they filled it when those ran short), and a
    relationship's rank is its ends' degree in the extracted relationship graph, HiRAG's `summarizes` links not
    counted."""
    view = sample_resources.view
    summaries = sorted((e for e, n in view.entities.items() if (n.layer or 0) > 0), key=lambda e: view.entities[e].title)
    assert summaries, "the sample build makes HiRAG summary entities"
    res = with_settings(sample_resources, graphrag_local__oversample=1, graphrag_local__top_entities=15)
    for sid in summaries[:3]:
        r = get_strategy("graphrag-local").retrieve(res, view.entities[sid].text)
        ents = [i for i in r.sections["local"] if i.kind == "entity"]
        assert ents and all((view.entities[i.id].layer or 0) == 0 for i in ents), view.entities[sid].title
        assert not any(n.kind == "entity" and (view.entities[n.id].layer or 0) > 0 for n in r.path_nodes)
    # degree: distinct neighbours joined by an extracted relationship between two layer-0 entities
    nbrs: dict[str, set[str]] = {}
    for rel in view.relationships.values():
        a, b = rel.data.get("source"), rel.data.get("target")
        if a in view.entities and b in view.entities and a != b and \
                (view.entities[a].layer or 0) == 0 == (view.entities[b].layer or 0):
            nbrs.setdefault(a, set()).add(b)
            nbrs.setdefault(b, set()).add(a)
    local = get_strategy("graphrag-local").retrieve(sample_resources, HALDEN_Q)
    layered = []
    for item in local.sections["bridge"]:
        a, b = view.relationships[item.id].data["source"], view.relationships[item.id].data["target"]
        assert item.score == len(nbrs.get(a, ())) + len(nbrs.get(b, ())), item.title
        layered.append(sum(view.g.degree(view.eg.index[x]) for x in (a, b)))
    assert local.sections["bridge"] and any(d != i.score for d, i in zip(layered, local.sections["bridge"])), \
        "some end has a summarizes link, which the layered degree would have counted"
