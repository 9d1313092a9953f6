"""ArchRAG retrieval on the built sample (archrag.txt §3.2): Algorithm 2's k nearest nodes per C-HNSW layer, each
layer entered through the inter-layer link from the layer above; R_0 = entities and the relationships between
them, no chunk text; adaptive filtering per layer (sorted, within the token budget); sources = the documents behind
the kept items; a path made of stored nodes, stored edges and C-HNSW links."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlmodel import select

from core.ingest import count_tokens
from core.models import Community, Document, Edge, Node
from core.retrieval.archrag import filter as archrag_filter
from core.retrieval.archrag import search as archrag_search
from core.retrieval.archrag.filter import Point, Statements, adaptive_filter
from core.retrieval.archrag.search import chnsw_cache, community_chunks, hierarchical_search
from core.retrieval.base import VIEW, Resources, Retrieval, get_strategy, strategy_names

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


def _items(r: Retrieval):
    return [i for sec in r.sections.values() for i in sec]


def test_registered_with_a_description_of_each_section():
    assert "archrag" in strategy_names()
    desc = get_strategy("archrag").description
    assert all(f"{s}:" in desc for s in ("local", "bridge", "global"))


def test_each_layer_contributes_at_most_k_items(sample_resources, halden, tables):
    index = chnsw_cache(sample_resources).index
    k = sample_resources.settings.retrieval.archrag.k_per_layer
    sizes = index.layer_sizes
    assert index.top >= 2  # the sample has two or more community layers
    found = halden.trace["chnsw"]["found"]
    assert len(found) == index.top + 1
    for layer, hits in enumerate(found):
        assert len(hits) == min(k, sizes[layer])
        layer_ids = set(index.ids[index.offsets[layer] : index.offsets[layer + 1]].tolist())
        assert {i for i, _ in hits} <= layer_ids
        sims = [s for _, s in hits]
        assert sims == sorted(sims, reverse=True)
        kinds = {tables["kinds"].get(i, "community") for i, _ in hits}
        assert kinds == ({"entity"} if layer == 0 else {"community"})
    # every kept item is one of the k found on its layer, or a relationship joining two of layer 0's
    found_ids = [{i for i, _ in hits} for hits in found]
    for item in _items(halden):
        if item.kind == "relationship":
            assert item.level == 0
        else:
            assert item.id in found_ids[item.level]
    for layer in range(index.top + 1):
        assert sum(i.level == layer and i.kind != "relationship" for i in _items(halden)) <= k
    per_layer = {x["layer"]: x for x in halden.trace["layers"]}
    assert sorted(per_layer) == list(range(index.top + 1))
    assert all(per_layer[i]["found"] == len(found[i]) and per_layer[i]["filter_calls"] == 0 for i in per_layer)
    # the path shows every layer, entered from the top, and one descent per layer
    labels = [n.label for n in halden.path_nodes]
    assert all(any(lb.startswith(f"layer {i}: ") for lb in labels) for i in range(index.top + 1))
    assert {n.role for n in halden.path_nodes if n.label.startswith(f"layer {index.top}: ")} == {"entry"}
    assert len([e for e in halden.path_edges if e.kind == "chnsw"]) == index.top


@pytest.mark.parametrize("ef,upper", [(None, 1), (None, None), (3, None), (64, None)])
def test_each_layer_result_is_the_brute_force_nearest_of_the_region_searchlayer_entered(sample_resources, ef, upper):
    """Algorithm 2: SearchLayer from the entry s returns the k nearest of the nodes it visited (V); without the
    per-target descent (`upper` None), s of a layer is the inter-layer link of the nearest node found above."""
    res = sample_resources
    cache = chnsw_cache(res)
    index = cache.index
    k = res.settings.retrieval.archrag.k_per_layer
    stored = res.index.vectors("entity", index.ids[: index.offsets[1]].tolist())  # not the index's copy
    for question in QUESTIONS:
        q = res.embed_query(question)
        visited: list[set[int]] = []
        found, descents = hierarchical_search(cache, q, k, ef, visited, upper)
        assert len(visited) == index.top + 1
        for layer in range(index.top + 1):
            region = sorted(visited[layer])
            assert all(index.layer_of(g) == layer for g in region)
            ids = [str(index.ids[g]) for g in region]
            if layer == 0:
                mat = np.vstack([stored[i] / np.linalg.norm(stored[i]) for i in ids])
            else:
                mat = index.vecs[region]
            sims = mat @ (q / np.linalg.norm(q))
            brute = [ids[j] for j in np.argsort(-sims, kind="stable")[:k]]
            assert [e for e, _ in found[layer]] == brute, (question, layer)
            if layer < index.top and upper is None:  # entered through the link of the best node above
                entry = int(index.inter[cache.row[found[layer + 1][0][0]]])
                assert entry in visited[layer]
        for layer, a, b in descents:
            assert a == found[layer][0][0]
            assert index.inter[cache.row[a]] == cache.row[b]


def test_no_chunk_is_retrieved_and_the_items_are_bounded_by_k_per_layer(sample_resources, halden):
    """The paper retrieves k nodes per layer plus the relationships among the k entities (§3.2.1) and no chunk
    text; its token cost is O(kL(c + P)) (Appendix A.3)."""
    k = sample_resources.settings.retrieval.archrag.k_per_layer
    layers = halden.trace["counts"]["layers"]
    assert all(i.kind in ("entity", "relationship", "community") for i in _items(halden))
    assert not [n for n in halden.path_nodes if n.kind == "chunk"]
    counts = halden.trace["counts"]
    assert counts["items"] <= k * layers + counts["relationships"]
    view = sample_resources.view
    entities = [e for e, _ in halden.trace["chnsw"]["found"][0]]
    pairs = {frozenset((a, b)) for n, a in enumerate(entities) for b in entities[n + 1 :]
             if view.relationships_between(a, b)}
    assert counts["relationships"] == len({r for p in pairs for r in view.relationships_between(*p)})


def test_adaptive_filter_drops_zero_sorts_dedupes_and_stops_at_the_budget():
    pts = [Point(0, [0], "Alpha beta gamma delta.", 0.4), Point(1, [0], "One two three four five six seven.", 0.9),
           Point(2, [0], "Alpha beta gamma delta.", 0.4), Point(3, [0], "Short one.", 0.7),
           Point(4, [0], "Tail end.", 0.2), Point(0, [1], "I do not know.", 0.0)]
    kept, used = adaptive_filter(pts, 10_000)
    assert [p.layer for p in kept] == [1, 3, 0, 4]  # score 0 dropped; the duplicate of layer 2 not kept twice
    assert used == sum(count_tokens(p.text) for p in kept)
    budget = count_tokens(pts[1].text) + count_tokens(pts[3].text)
    kept, used = adaptive_filter(pts, budget)
    assert [p.layer for p in kept] == [1, 3] and used == budget
    kept, used = adaptive_filter(pts, budget - 1)  # the first point that does not fit ends the list
    assert [p.layer for p in kept] == [1] and used <= budget - 1


def test_each_layer_is_analysed_into_rated_sentences_sorted_within_the_budget(sample_resources, halden, monkeypatch):
    cfg = sample_resources.settings.retrieval.archrag
    items = _items(halden)
    assert halden.sections["local"] and halden.sections["global"]
    for sec in halden.sections.values():
        assert [i.score for i in sec] == sorted((i.score for i in sec), reverse=True)
    assert all(0 < i.score <= 1 for i in items)
    counts = halden.trace["counts"]
    assert counts["points_kept"] <= counts["points"] and counts["context_tokens"] <= cfg.max_tokens
    assert sum(x["points"] for x in halden.trace["layers"]) == counts["points"]
    titles = {i.title for i in halden.sections["local"]}
    assert "Halden Barrier" in titles or "Amara Okafor" in titles
    again = get_strategy("archrag").retrieve(sample_resources, HALDEN_Q)
    assert again.to_dict()["sections"] == halden.to_dict()["sections"]  # deterministic
    # a small budget keeps only the best points, and never more tokens than the budget
    monkeypatch.setattr(cfg, "max_tokens", 60)
    small = get_strategy("archrag").retrieve(sample_resources, HALDEN_Q)
    kept_items = _items(small)
    assert 0 < small.trace["counts"]["context_tokens"] <= 60
    assert sum(count_tokens(i.text) for i in kept_items) <= 60 + 2 * len(kept_items)  # + joining spaces
    assert max(i.score for i in kept_items) == max(i.score for i in items)
    assert len(kept_items) < len(items)
    # sources follow what was kept: fewer kept items, only their documents
    assert {s.document_id for s in small.sources} <= {d for i in kept_items for d in i.documents}


def test_sources_are_the_documents_of_the_kept_items(halden, tables, sample_resources):
    assert halden.sources
    assert len(halden.sources) <= sample_resources.settings.retrieval.max_sources
    scores = [s.score for s in halden.sources]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    view = sample_resources.view
    behind: set[str] = set()  # every chunk behind a kept item: its mentions / extraction / members' mentions
    for i in _items(halden):
        if i.kind == "entity":
            behind |= {c for c, _ in view.entity_chunks.get(i.id, [])}
        elif i.kind == "relationship":
            behind |= set(view.rel_chunks.get(i.id, []))
        else:
            behind |= set(community_chunks(view, i.id))
    st = archrag_filter.load_statements(sample_resources, chnsw_cache(sample_resources))
    quoted = {c for i in _items(halden) for x in st.chunks_of for c in st.chunks_of[x] if x in i.text}
    for s in halden.sources:
        assert s.document_id in tables["documents"]
        assert s.chunk_ids and all(tables["chunk_doc"][c] == s.document_id for c in s.chunk_ids)
        assert set(s.chunk_ids) <= behind | quoted
    backed = {d for i in _items(halden) for d in i.documents}
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
        assert "layer" in {e.role for e in r.path_edges}
        for e in r.path_edges:
            assert e.src in nodes and e.dst in nodes
            if e.kind == "chnsw":
                assert e.role == "layer" and cache.index.inter[cache.row[e.src]] == cache.row[e.dst]
            else:
                assert (e.src, e.dst, e.kind) in tables["edges"] or (e.dst, e.src, e.kind) in tables["edges"]
        entities = {i for i, _ in r.trace["chnsw"]["found"][0]}
        for item in r.sections["bridge"]:
            if item.kind == "relationship":
                ends = {e.dst for e in r.path_edges if e.src == item.id and e.kind in ("subject", "object")}
                assert len(ends) == 2 and ends <= entities


def test_new_sentences_are_embedded_up_to_a_cap_then_rated_with_their_item_vector(sample_resources, monkeypatch):
    res = Resources(sample_resources.store, sample_resources.ws, sample_resources.settings,
                    sample_resources.embedder, sample_resources.index)
    res.cached(VIEW, lambda: sample_resources.view)  # the graph already loaded, the rest of the cache fresh
    cache = chnsw_cache(res)  # a fresh cache: nothing embedded yet
    cache.statements = Statements({}, [], {})  # as if no sentence quoted a statement (model build)
    monkeypatch.setattr(archrag_filter, "MAX_EMBEDDED", 5)
    r = get_strategy("archrag").retrieve(res, HALDEN_Q)
    counts = r.trace["counts"]
    assert counts["sentences_stored"] == 0 and counts["sentences_embedded"] == 5
    assert len(cache.sentence_vecs) == 5
    assert r.sections["local"] and r.sections["global"] and r.sources


def test_a_host_sharing_the_database_reads_the_index_the_build_stored(sample_resources, tmp_path):
    settings = sample_resources.settings.model_copy(deep=True)
    settings.storage.home = tmp_path  # another app host: its own STRATA_HOME, nothing of the build's on its disk
    res = Resources(sample_resources.store, sample_resources.ws, settings, sample_resources.embedder,
                    sample_resources.index)
    res.cached(VIEW, lambda: sample_resources.view)
    r = get_strategy("archrag").retrieve(res, HALDEN_Q)
    assert r.sections["local"] and r.sections["global"] and r.sources
    assert not list(tmp_path.iterdir()), "nothing was read from or written to that host's disk"


def test_without_an_index_the_result_is_empty_and_says_why(sample_resources, tmp_path, monkeypatch):
    monkeypatch.setattr(archrag_search, "CHNSW_ARTIFACT", "never-stored")  # the workspace's store holds none of it
    settings = sample_resources.settings.model_copy(deep=True)
    settings.storage.home = tmp_path  # and no index file of an older build there
    res = Resources(sample_resources.store, sample_resources.ws, settings, sample_resources.embedder,
                    sample_resources.index)
    res.cached(VIEW, lambda: sample_resources.view)  # the graph already loaded, the rest of the cache fresh
    r = get_strategy("archrag").retrieve(res, HALDEN_Q)
    assert not any(r.sections.values()) and not r.sources and "C-HNSW" in r.trace["note"]


def test_retrieval_is_json_and_round_trips(halden):
    d = json.loads(json.dumps(halden.to_dict()))  # what the query log stores
    assert d == halden.to_dict()
    assert Retrieval.from_dict(d).to_dict() == d
