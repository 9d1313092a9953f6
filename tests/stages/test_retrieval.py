"""Retrieval on the built sample (hirag, naive) and recall@k evaluation on a tiny corpus with known gold ids."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from sqlmodel import select

from core.eval import Query, evaluate, load_queries, recall_at
from core.models import Community, Document, Edge, Node
from core.retrieval.base import Retrieval, get_strategy, item_tokens, strategy_names
from core.workspace import open_resources

QUESTIONS = json.loads((Path(__file__).resolve().parents[2] / "data" / "sample_questions.json").read_text())
HALDEN_Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


@pytest.fixture(scope="module")
def tables(sample_built):
    """Ids of every stored node, community and document, and the entity graph built from the tables alone."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        kinds = dict(s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws.id)).all())
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
        docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws.id))}
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id,
                                                                  Edge.kind.in_(("subject", "object")))).all()
        in_comm = set(s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id,
                                                              Edge.kind == "in_community")).all())
        ups = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id, Edge.kind == "summarizes")).all()
        mentions = set(s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id,
                                                               Edge.kind == "mentions")).all())
    G = nx.Graph()
    G.add_nodes_from(i for i, k in kinds.items() if k == "entity")
    sub = {src: dst for src, dst, k in ends if k == "subject"}
    obj = {src: dst for src, dst, k in ends if k == "object"}
    for rid, a in sub.items():
        b = obj[rid]
        if a != b:
            G.add_edge(a, b)
    G.add_edges_from((a, b) for a, b in ups if a != b)  # HiRAG: an entity and its summary entity are linked
    return {"kinds": kinds, "communities": comms, "documents": docs, "G": G, "in_community": in_comm,
            "mentions": mentions, "summarizes": set(ups)}


@pytest.fixture(scope="module")
def halden(sample_resources) -> Retrieval:
    return get_strategy("hirag").retrieve(sample_resources, HALDEN_Q)


def test_registry_knows_the_strategies():
    assert {"hirag", "naive"} <= set(strategy_names())
    with pytest.raises(KeyError, match="unknown strategy"):
        get_strategy("no-such-strategy")


def test_hirag_fills_local_bridge_and_global(halden, sample_resources, tables):
    cfg = sample_resources.settings.retrieval
    local, bridge, glob = halden.sections["local"], halden.sections["bridge"], halden.sections["global"]
    assert local and bridge and glob
    entities = [i for i in local if i.kind == "entity"]
    units = local[len(entities):]  # the text units follow the entities, as HiRAG's Sources table does
    assert 0 < len(entities) <= cfg.top_n_entities and cfg.max_communities is None
    assert all(tables["kinds"][i.id] == "entity" for i in entities)
    assert units and all(i.kind == "chunk" and tables["kinds"][i.id] == "chunk" for i in units)
    assert sum(item_tokens(i) for i in units) <= cfg.text_unit_tokens
    # each text unit mentions a local entity, and they come in the rank of the entity that brought them
    entity_ids = [i.id for i in entities]
    mentions = {(e, c) for (c, e) in tables["mentions"]}
    first = [min(n for n, e in enumerate(entity_ids) if (e, u.id) in mentions) for u in units]
    assert first == sorted(first)
    assert all(i.kind == "relationship" and tables["kinds"][i.id] == "relationship"
               or i.kind == "summarizes" and tables["kinds"][i.id] == "entity" for i in bridge)
    assert all(i.kind == "community" and i.id in tables["communities"] for i in glob)
    assert all(tables["communities"][i.id].method == "hirag" for i in glob)  # HiRAG's own communities
    for section in (entities, units, bridge):  # (bridge: relationships and layer-to-layer relations together)
        scores = [i.score for i in section]
        assert scores == sorted(scores, reverse=True)
    # the local entities are the question's nearest entities: the engineer and the barrier are among them
    titles = {i.title for i in entities}
    assert {"Halden Barrier", "Amara Okafor"} <= titles
    assert any(i.title.startswith("Amara Okafor — ") and i.title.endswith(" — Halden Barrier") for i in bridge)
    # every global community holds at least one local entity
    local_ids = set(entity_ids)
    for c in glob:
        assert any((e, c.id) in tables["in_community"] for e in local_ids)
    # every item's documents exist; extracted entities and relationships name theirs (HiRAG summary entities,
    # level >= 1, are made from other entities, not mentioned in a document)
    for i in local + bridge:
        assert all(d in tables["documents"] for d in i.documents)
        assert i.documents or (i.kind in ("entity", "summarizes") and i.level and i.level >= 1), i
    assert halden.trace["counts"]["local_entities"] == len(entities)
    counts = halden.trace["counts"]
    assert counts["bridge_relationships"] + counts["bridge_layer_links"] == len(bridge)
    assert set(halden.trace["timings_ms"]) >= {"embed_query", "entity_search", "bridge_paths", "rank_sources"}


def test_hirag_sources_follow_its_text_units(halden, sample_resources):
    """HiRAG's sources follow its context as its code orders it: the documents of the local section's text units,
    in that order, come first (not re-ranked by similarity)."""
    units = [i for i in halden.sections["local"] if i.kind == "chunk"]
    assert len(units) >= 2
    view_docs = list(dict.fromkeys(sample_resources.view.chunk_doc[i.id] for i in units))
    got = [s.document_id for s in halden.sources]
    assert got[: len(view_docs)] == view_docs[: len(got)]


def test_hirag_simsources_leads_with_the_context_chunks_by_similarity(sample_resources, sample_built):
    """The ablation hirag-simsources: the chunks behind the context (the local text units and the chunks the
    bridge relationships were extracted from, read here from the `derived_from` edges) ranked by their stored
    vector's similarity to the question give the first sources, one per document at its best chunk's place."""
    r = get_strategy("hirag-simsources").retrieve(sample_resources, HALDEN_Q)
    _, store, ws, _ = sample_built
    bridge = [i.id for i in r.sections["bridge"]]
    with store.session() as s:
        derived = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id, Edge.kind == "derived_from",
                                                          Edge.src.in_(bridge))).all()
    backing = {i.id for i in r.sections["local"] if i.kind == "chunk"} | {c for _, c in derived}
    assert backing
    q = sample_resources.embed_query(HALDEN_Q)
    vecs = sample_resources.index.vectors("chunk", sorted(backing))
    sims = {c: float(np.dot(v, q)) for c, v in vecs.items()}
    assert len(sims) == len(backing)  # every chunk has a stored vector
    view = sample_resources.view
    docs = list(dict.fromkeys(view.chunk_doc[c] for c in sorted(sims, key=lambda c: -sims[c])))
    got = [s.document_id for s in r.sources]
    assert got[: len(docs)] == docs[: len(got)]


def test_path_nodes_and_edges_exist(halden, tables):
    assert halden.path_nodes and halden.path_edges
    known = set()
    for n in halden.path_nodes:
        if n.kind == "community":
            assert n.id in tables["communities"]
        else:
            assert n.kind == "entity" and tables["kinds"].get(n.id) == "entity", n
        known.add(n.id)
    G = tables["G"]
    for e in halden.path_edges:
        assert e.src in known and e.dst in known, e
        if e.kind == "in_community":
            assert (e.src, e.dst) in tables["in_community"]
        else:
            assert e.kind in ("relationship", "summarizes") and G.has_edge(e.src, e.dst), e
    roles = {n.role for n in halden.path_nodes}
    assert {"entry", "community"} <= roles


def test_bridge_paths_are_shortest_paths(halden, sample_resources, tables):
    """Re-derive the key entities (top-m members of each retrieved community by similarity), then walk the bridge
    edges: between each consecutive pair of key entities they must form a path of exactly the networkx distance."""
    res, cfg = sample_resources, sample_resources.settings.retrieval
    view = res.view
    q = res.embed_query(HALDEN_Q)
    keys: list[str] = []
    for item in halden.sections["global"]:
        sims = view.similarity(q, view.members.get(item.id, []))
        for eid, _ in sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.top_m_key_entities]:
            if eid not in keys:
                keys.append(eid)
    assert halden.trace["counts"]["key_entities"] == len(keys)
    G = tables["G"]
    walk = [e for e in halden.path_edges if e.role == "bridge"]
    pos, n_paths = 0, 0
    for a, b in zip(keys, keys[1:]):
        if cfg.max_bridge_paths is not None and n_paths >= cfg.max_bridge_paths:
            break
        if not nx.has_path(G, a, b):
            continue
        d = nx.shortest_path_length(G, a, b)
        seg = walk[pos : pos + d]
        assert len(seg) == d, "bridge path shorter than the walk expects"
        assert seg[0].src == a and seg[-1].dst == b, "bridge path is not a shortest path between its key entities"
        for x, y in zip(seg, seg[1:]):
            assert x.dst == y.src
        assert all(G.has_edge(e.src, e.dst) for e in seg)
        pos += d
        n_paths += 1
    assert pos == len(walk), "bridge edges left over: some path was longer than the shortest one"
    assert n_paths == halden.trace["counts"]["bridge_paths"] > 0


def test_bridge_relationships_join_path_entities(halden, sample_resources, tables):
    on_path = {e.src for e in halden.path_edges if e.role == "bridge"} | {
        e.dst for e in halden.path_edges if e.role == "bridge"}
    rels = sample_resources.view.relationships
    for item in halden.sections["bridge"]:
        if item.kind == "summarizes":
            continue  # test_bridge_holds_the_layer_to_layer_relations_on_the_paths
        r = rels[item.id]
        assert r.data["source"] in on_path and r.data["target"] in on_path


def test_hirag_global_keeps_every_community_of_a_local_entity(halden, tables):
    """Eq. 13: P̂ = every community (HiRAG's own) that holds a retrieved entity, none left out by a cap (the old
    code kept the 8 most hit)."""
    local = {i.id for i in halden.sections["local"] if i.kind == "entity"}
    expected = {cid for (e, cid) in tables["in_community"]
                if e in local and cid in tables["communities"] and tables["communities"][cid].method == "hirag"}
    assert len(expected) > 8
    assert {i.id for i in halden.sections["global"]} == expected
    assert halden.trace["counts"]["communities"] == len(expected)


def test_bridge_holds_the_layer_to_layer_relations_on_the_paths(halden, tables):
    """Eq. 16 over G_k, whose relations include the layer-to-layer ones (Eq. 9): every `summarizes` link whose two
    ends lie on a bridge path is a bridge triple (kind `summarizes`, id the summary entity), and nothing else is."""
    bridge_edges = [e for e in halden.path_edges if e.role == "bridge"]
    on_path = {e.src for e in bridge_edges} | {e.dst for e in bridge_edges}
    expected = {(m, s) for (m, s) in tables["summarizes"] if m in on_path and s in on_path}
    assert expected, "no bridge path goes through a summary entity on the sample"
    titles = {x.id: x.label for x in halden.path_nodes}
    got = {(i.title, i.id) for i in halden.sections["bridge"] if i.kind == "summarizes"}
    assert got == {(f"{titles[m]} → {titles[s]}", s) for m, s in expected}
    assert any(e.kind == "summarizes" for e in bridge_edges)  # a hop through a summary entity is drawn as such
    assert halden.trace["counts"]["bridge_layer_links"] == len(expected)


def test_sources_exist_and_are_ranked(halden, sample_resources, tables):
    assert 0 < len(halden.sources) <= sample_resources.settings.retrieval.max_sources
    ids = [s.document_id for s in halden.sources]
    assert len(ids) == len(set(ids))
    for s in halden.sources:
        doc = tables["documents"][s.document_id]
        assert s.title == doc.title and s.external_id == doc.external_id
        assert s.chunk_ids and all(tables["kinds"][c] == "chunk" for c in s.chunk_ids)
    scores = [s.score for s in halden.sources]
    assert scores == sorted(scores, reverse=True)
    top = [tables["documents"][s.document_id].filename for s in halden.sources[:3]]
    assert "amara_okafor_profile.md" in top


def test_naive_returns_chunks_backed_by_its_sources(sample_resources, tables):
    r = get_strategy("naive").retrieve(sample_resources, HALDEN_Q)
    local = r.sections["local"]
    assert local and not r.sections["bridge"] and not r.sections["global"]
    assert len(local) == min(sample_resources.settings.retrieval.naive_top_k, sum(
        1 for k in tables["kinds"].values() if k == "chunk"))
    assert all(i.kind == "chunk" and tables["kinds"][i.id] == "chunk" for i in local)
    scores = [i.score for i in local]
    assert scores == sorted(scores, reverse=True)
    source_docs = {s.document_id for s in r.sources}
    for i in local:
        assert len(i.documents) == 1 and i.documents[0] in source_docs
    assert all(s.document_id in tables["documents"] for s in r.sources)
    assert [s.score for s in r.sources] == sorted((s.score for s in r.sources), reverse=True)


@pytest.mark.parametrize("strategy,k,min_any,min_all", [("hirag", 3, 7, 2), ("hirag", 5, 7, 5),
                                                      ("hirag-simsources", 5, 7, 7), ("naive", 3, 7, 5)])
def test_sample_questions_find_their_documents(sample_resources, tables, strategy, k, min_any, min_all):
    """Measured on the sample (offline build, MiniLM, 2026-11-27): hirag, its sources in its context's order, has a
    listed document in its top 3 for 8/8 questions (all listed ones for 3/8) and all listed documents in its top 5
    for 6/8; its ablation with the sources by similarity finds all in the top 5 for 8/8; naive has one in its top
    3 for 8/8 (all for 6/8). The thresholds leave room for one miss."""
    strat = get_strategy(strategy)
    any_hit = all_hit = 0
    for q in QUESTIONS:
        r = strat.retrieve(sample_resources, q["question"])
        top = [tables["documents"][s.document_id].filename for s in r.sources[:k]]
        any_hit += any(d in top for d in q["documents"])
        all_hit += all(d in top for d in q["documents"])
    assert any_hit >= min_any, (strategy, k, any_hit)
    assert all_hit >= min_all, (strategy, k, all_hit)


def test_unreachable_pairs_give_no_path_and_no_warning(sample_resources):
    import warnings

    from core.graph.entity_graph import EntityGraph
    from core.graph.view import GraphView

    # two components (a-b-c and d-e): HiRAG's summary layers connect the sample, so build the case by hand
    eg = EntityGraph(ids=list("abcde"), index={k: i for i, k in enumerate("abcde")},
                     links={(0, 1): 1.0, (1, 2): 1.0, (3, 4): 1.0})
    view = GraphView(eg=eg, g=eg.to_igraph(), entities={}, relationships={}, communities={}, members={},
                     member_of={}, entity_chunks={}, rel_chunks={}, chunk_doc={}, documents={})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert view.shortest_path("a", "d") == []
        get_strategy("hirag").retrieve(sample_resources, HALDEN_Q)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    assert view.shortest_path("a", "c") == ["a", "b", "c"]
    assert view.shortest_path("a", "a") == ["a"]
    assert view.shortest_path("a", "no-such-entity") == []


def test_retrieval_round_trips_through_dict(halden):
    d = halden.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert Retrieval.from_dict(d).to_dict() == d


# ------------------------------------------------------------------------------------------------------ eval
def test_recall_at_hand_made_cases():
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, {"a", "c"}, 1) == 0.5
    assert recall_at(ranked, {"a", "c"}, 2) == 0.5
    assert recall_at(ranked, {"a", "c"}, 3) == 1.0
    assert recall_at(ranked, {"c"}, 2) == 0.0
    assert recall_at(ranked, {"d", "zz"}, 10) == 0.5
    assert recall_at(ranked, set(), 3) == 0.0
    assert recall_at([], {"a"}, 3) == 0.0
    assert recall_at(["a", "a", "b"], {"a", "b"}, 2) == 0.5


def test_load_queries(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"id": "x", "question": "Q1?", "gold_ids": ["d1", 2]}\n\n{"question": "Q2?"}\n')
    qs = load_queries(p)
    assert [(q.id, q.question, q.gold) for q in qs] == [("x", "Q1?", {"d1", "2"}), ("3", "Q2?", set())]
    assert len(load_queries(p, limit=1)) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok"}\nnot json\n')
    with pytest.raises(ValueError, match=":2:"):
        load_queries(bad)
    for line in ('[1, 2]', '"just a string"', '{"gold_ids": ["a"]}'):
        odd = tmp_path / "odd.jsonl"
        odd.write_text(line + "\n")
        with pytest.raises(ValueError, match="not a query line"):
            load_queries(odd)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no queries"):
        load_queries(empty)


def test_evaluate_on_known_gold_ids(tmp_path, tiny_jsonl, tiny_rows, build):
    b = build(tmp_path / "home", [tiny_jsonl])
    docs = b.store.documents(b.ws.id)
    assert sorted(d.external_id for d in docs) == ["d1", "d2", "d3", "d4"]
    res = open_resources(b.store, b.ws, b.settings, b.embedder)
    text = {r["id"]: r["text"] for r in tiny_rows}
    # a document's own text finds it first; a gold id that is in no document can never be recalled
    queries = [
        Query("q1", text["d3"], {"d3"}),
        Query("q2", text["d4"], {"d4", "missing"}),
        Query("q3", text["d1"], {"d1", "d2"}),
    ]
    out = evaluate(res, queries, ["naive", "hirag"], [1, 2, 4])
    assert set(out) == {"naive", "hirag"}
    n = out["naive"]
    assert n["queries"] == 3
    assert n["recall@1"] == pytest.approx(round((1 + 0.5 + 0.5) / 3, 4))
    assert n["recall@4"] == pytest.approx(round((1 + 0.5 + 1) / 3, 4))
    assert 0 < n["latency_ms_p50"] <= n["latency_ms_p95"]
    # evaluate's numbers are the mean recall of each strategy's own ranked sources
    for name in ("naive", "hirag"):
        strat = get_strategy(name)
        for k in (1, 2, 4):
            vals = []
            for i, q in enumerate(queries):
                ranked = [s.external_id for s in strat.retrieve(res, q.question).sources]
                vals.append(recall_at(ranked, q.gold, k))
                # per query, the gold ranks (sorted gold ids) give the same recall: what bench/report.py pairs
                found = out[name]["found"][i]
                assert len(found) == len(q.gold) and sum(0 < r <= k for r in found) / len(found) == vals[-1]
            assert out[name][f"recall@{k}"] == pytest.approx(round(sum(vals) / len(vals), 4)), (name, k)
    assert out["naive"]["found"][0] == [1] and out["naive"]["found"][1][1] == 0  # d3 first; "missing" never found


@pytest.mark.parametrize("name, filled", [("hirag-local", {"local"}), ("hirag-global", {"global"}),
                                          ("hirag-bridge", {"bridge"}), ("hirag-nobridge", {"local", "global"})])
def test_hirag_ablations_fill_only_their_levels(sample_resources, tables, name, filled):
    r = get_strategy(name).retrieve(sample_resources, HALDEN_Q)
    assert {s for s, items in r.sections.items() if items} == filled
    assert r.sources and all(s.document_id in tables["documents"] for s in r.sources)


def test_bm25_ranks_chunks_holding_the_rare_question_words(sample_resources, tables):
    r = get_strategy("bm25").retrieve(sample_resources, "Halden Barrier sluice gates")
    local = r.sections["local"]
    assert local and all(tables["kinds"][i.id] == "chunk" for i in local)
    assert [i.score for i in local] == sorted((i.score for i in local), reverse=True)
    assert "sluice" in local[0].text.lower() and "halden" in local[0].text.lower()
    assert not r.sections["bridge"] and not r.sections["global"]
    assert r.sources[0].document_id in local[0].documents
