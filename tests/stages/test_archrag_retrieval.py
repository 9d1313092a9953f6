"""ArchRAG retrieval on the built sample: C-HNSW hierarchical search (k per layer, layer 0 = exact nearest
entities), adaptive filtering (sorted, within the token budget), sources, and a path made of stored nodes, stored
edges and C-HNSW links."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlmodel import select

from core.ingest import count_tokens
from core.models import Community, Document, Edge, Node
from core.retrieval.archrag import (
    Point,
    adaptive_filter,
    chnsw_cache,
    hierarchical_search,
)
from core.retrieval.base import Resources, Retrieval, get_strategy, strategy_names

QUESTIONS = [q["question"] for q in json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "sample_questions.json").read_text())]
HALDEN_Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


@pytest.fixture(scope="module")
def tables(sample_built):
    """Every stored node (id -> kind), community, document, chunk -> document, and edge (src, dst, kind)."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        kinds = dict(s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws.id)).all())
        chunk_doc = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws.id,
                                                                        Node.kind == "chunk")).all())
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
        docs = set(s.exec(select(Document.id).where(Document.workspace_id == ws.id)))
        edges = set(s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id)).all())
    return {"kinds": kinds, "chunk_doc": chunk_doc, "communities": comms, "documents": docs, "edges": edges}


@pytest.fixture(scope="module")
def halden(sample_resources):
    return get_strategy("archrag").retrieve(sample_resources, HALDEN_Q)


def test_registered_with_a_description_of_each_section():
    assert "archrag" in strategy_names()
    desc = get_strategy("archrag").description
    assert all(f"{s}:" in desc for s in ("local", "bridge", "global"))


def test_search_visits_every_layer_with_k_per_layer(sample_resources, halden, tables):
    index = chnsw_cache(sample_resources).index
    k = sample_resources.settings.retrieval.archrag.k_per_layer
    sizes = index.layer_sizes
    assert index.top >= 2 and min(sizes) < k  # the sample has community layers, one smaller than k
    found = halden.trace["chnsw"]["found"]
    assert len(found) == index.top + 1
    for layer, hits in enumerate(found):
        assert len(hits) == min(k, sizes[layer])
        layer_ids = set(index.ids[index.offsets[layer] : index.offsets[layer + 1]].tolist())
        assert {i for i, _ in hits} <= layer_ids
        sims = [s for _, s in hits]
        assert sims == sorted(sims, reverse=True)
        if layer == 0:
            assert all(tables["kinds"][i] == "entity" for i, _ in hits)
        else:
            assert all(tables["communities"][i].method == "attributed" for i, _ in hits)
    # the path shows every layer, entered from the top, and one descent per layer
    labels = [n.label for n in halden.path_nodes]
    assert all(any(lb.startswith(f"layer {i}: ") for lb in labels) for i in range(index.top + 1))
    assert {n.role for n in halden.path_nodes if n.label.startswith(f"layer {index.top}: ")} == {"entry"}
    assert len([e for e in halden.path_edges if e.kind == "chnsw"]) == index.top


def test_layer0_results_are_the_exact_nearest_entities(sample_resources):
    res = sample_resources
    cache = chnsw_cache(res)
    index = cache.index
    k = res.settings.retrieval.archrag.k_per_layer
    layer0 = index.ids[: index.offsets[1]].tolist()
    stored = res.index.vectors("entity", layer0)  # brute force over the entity collection, not the index copy
    ids = [e for e in layer0 if e in stored]
    mat = np.vstack([stored[e] for e in ids])
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    for question in QUESTIONS:
        q = res.embed_query(question)
        found, descents = hierarchical_search(cache, q, k, res.settings.retrieval.archrag.ef)
        brute = [ids[i] for i in np.argsort(-(mat @ q), kind="stable")[:k]]
        assert [e for e, _ in found[0]] == brute, question
        # each descent follows the inter-layer link of the best node of the layer above
        for layer, a, b in descents:
            assert a == found[layer][0][0]
            assert index.inter[cache.row[a]] == cache.row[b]


def test_adaptive_filter_sorts_dedupes_and_stops_at_the_budget():
    pts = [Point(0, "Alpha beta gamma delta.", 0.4), Point(1, "One two three four five six seven.", 0.9),
           Point(2, "Alpha beta gamma delta.", 0.4), Point(3, "Short one.", 0.7), Point(4, "Tail end.", 0.2)]
    kept, used = adaptive_filter(pts, 10_000)
    assert [p.score for p in kept] == sorted((p.score for p in kept), reverse=True)
    assert [p.part for p in kept] == [1, 3, 0, 4]  # the duplicate text of part 2 is not kept twice
    assert used == sum(count_tokens(p.text) for p in kept)
    budget = count_tokens(pts[1].text) + count_tokens(pts[3].text)
    kept, used = adaptive_filter(pts, budget)
    assert [p.part for p in kept] == [1, 3] and used == budget
    kept, used = adaptive_filter(pts, budget - 1)  # the first point that does not fit ends the list
    assert [p.part for p in kept] == [1] and used <= budget - 1


def test_analysis_rates_sorts_and_respects_the_token_budget(sample_resources, halden, monkeypatch):
    cfg = sample_resources.settings.retrieval.archrag
    items = [i for sec in halden.sections.values() for i in sec]
    assert halden.sections["local"] and halden.sections["global"]
    for sec in halden.sections.values():
        assert [i.score for i in sec] == sorted((i.score for i in sec), reverse=True)
    assert all(i.score > cfg.min_relevance for i in items)
    counts = halden.trace["counts"]
    assert counts["points_kept"] <= counts["points"] and counts["context_tokens"] <= cfg.max_tokens
    # the local section holds the entities and chunks the question is about
    titles = {i.title for i in halden.sections["local"]}
    assert "Halden Barrier" in titles or "Amara Okafor" in titles
    # a small budget keeps only the best points, and never more tokens than the budget
    monkeypatch.setattr(cfg, "max_tokens", 60)
    small = get_strategy("archrag").retrieve(sample_resources, HALDEN_Q)
    kept_items = [i for sec in small.sections.values() for i in sec]
    assert 0 < small.trace["counts"]["context_tokens"] <= 60
    assert sum(count_tokens(i.text) for i in kept_items) <= 60 + 2 * len(kept_items)  # + joining spaces
    best_kept = max(i.score for i in kept_items)
    assert best_kept == max(i.score for i in items)
    assert len(kept_items) < len(items)


def test_sources_exist_and_back_the_items(halden, tables, sample_resources):
    assert halden.sources
    assert len(halden.sources) <= sample_resources.settings.retrieval.max_sources
    scores = [s.score for s in halden.sources]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    for s in halden.sources:
        assert s.document_id in tables["documents"]
        assert s.chunk_ids and all(tables["chunk_doc"][c] == s.document_id for c in s.chunk_ids)
    backed = {d for sec in halden.sections.values() for i in sec for d in i.documents}
    assert all(d in tables["documents"] for d in backed)
    assert {s.document_id for s in halden.sources} <= backed
    gold = {"halden_barrier_overview.md", "amara_okafor_profile.md"}
    with sample_resources.store.session() as s:
        filenames = dict(s.exec(select(Document.id, Document.filename)).all())
    assert gold & {filenames[s.document_id] for s in halden.sources[:5]}


def test_path_nodes_exist_and_edges_are_real(sample_resources, tables):
    cache = chnsw_cache(sample_resources)
    for question in QUESTIONS[:4]:
        r = get_strategy("archrag").retrieve(sample_resources, question)
        nodes = {n.id: n for n in r.path_nodes}
        assert len(nodes) == len(r.path_nodes)
        for n in r.path_nodes:
            if n.kind == "community":
                assert n.id in tables["communities"]
            else:
                assert tables["kinds"][n.id] == n.kind
        roles = {e.role for e in r.path_edges}
        assert "layer" in roles
        for e in r.path_edges:
            assert e.src in nodes and e.dst in nodes
            if e.kind == "chnsw":
                assert e.role == "layer" and cache.index.inter[cache.row[e.src]] == cache.row[e.dst]
            else:
                assert (e.src, e.dst, e.kind) in tables["edges"] or (e.dst, e.src, e.kind) in tables["edges"]
        # bridge relationships join two retrieved entities
        entities = {i for i, _ in r.trace["chnsw"]["found"][0]}
        for item in r.sections["bridge"]:
            if item.kind == "relationship":
                ends = {e.dst for e in r.path_edges if e.src == item.id and e.kind in ("subject", "object")}
                assert len(ends) == 2 and ends <= entities


def test_new_sentences_are_embedded_up_to_a_cap_then_rated_with_their_part_vector(sample_resources, monkeypatch):
    from core.retrieval import archrag

    res = Resources(sample_resources.store, sample_resources.ws, sample_resources.settings,
                    sample_resources.embedder, sample_resources.index)
    res.__dict__["view"] = sample_resources.view
    cache = chnsw_cache(res)  # a fresh cache: nothing embedded yet
    cache.statements = archrag._Statements({}, [], {}, {})  # as if no sentence quoted a statement (model build)
    monkeypatch.setattr(archrag, "MAX_EMBEDDED", 5)
    r = get_strategy("archrag").retrieve(res, HALDEN_Q)
    counts = r.trace["counts"]
    assert counts["sentences_stored"] == 0 and counts["sentences_embedded"] == 5
    assert len(cache.sentence_vecs) == 5
    assert r.sections["local"] and r.sections["global"] and r.sources
    items = [i for sec in r.sections.values() for i in sec]
    assert all(i.score > res.settings.retrieval.archrag.min_relevance for i in items)


def test_without_an_index_the_result_is_empty_and_says_why(sample_resources, tmp_path):
    settings = sample_resources.settings.model_copy(deep=True)
    settings.storage.home = tmp_path  # no chnsw.npz there
    res = Resources(sample_resources.store, sample_resources.ws, settings, sample_resources.embedder,
                    sample_resources.index)
    res.__dict__["view"] = sample_resources.view
    r = get_strategy("archrag").retrieve(res, HALDEN_Q)
    assert not any(r.sections.values()) and not r.sources and "C-HNSW" in r.trace["note"]


def test_retrieval_is_json_and_round_trips(halden):
    d = json.loads(json.dumps(halden.to_dict()))  # what the query log stores
    assert d == halden.to_dict()
    assert Retrieval.from_dict(d).to_dict() == d
