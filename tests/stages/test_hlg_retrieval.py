"""HLG StatementGraphRAG / TopicGraphRAG and their chunk-based variants on the built sample workspace."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from sqlmodel import select

from core.ingest.tokens import count_tokens
from core.models import Document, Edge, Node
from core.retrieval.base import get_strategy, strategy_names
from core.retrieval.diversity import preprocess, similarity_cutoff, tfidf_matrix
from core.retrieval.hlg.rank import select_chunks, select_statements
from core.retrieval.hlg.strategy import beam_search, keywords, lexicon, path_score
from core.workspace import open_resources

HLG = ("hlg-statement", "hlg-topic", "hlg-statement-chunk", "hlg-topic-chunk")
HALDEN_Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


@pytest.fixture(scope="module")
def stored(sample_built):
    """Every node's kind, every stored edge (both directions) with its kind, the documents and chunk backing."""
    _, store, ws, _ = sample_built
    with store.session() as s:
        kinds = dict(s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws.id)).all())
        edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id)).all()
        docs = set(s.exec(select(Document.id).where(Document.workspace_id == ws.id)))
        chunk_doc = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws.id,
                                                                        Node.kind == "chunk")).all())
    linked: dict[frozenset, set[str]] = {}
    for a, b, k in edges:
        linked.setdefault(frozenset((a, b)), set()).add(k)
    return {"kinds": kinds, "edges": linked, "documents": docs, "chunk_doc": chunk_doc}


@pytest.fixture(scope="module")
def results(sample_resources):
    return {name: get_strategy(name).retrieve(sample_resources, HALDEN_Q) for name in HLG}


def test_the_four_strategies_are_registered_with_a_description():
    names = strategy_names()
    for name in HLG:
        assert name in names
        s = get_strategy(name)
        assert s.name == name and s.label
        assert all(f"{sec}:" in s.description for sec in ("local", "bridge", "global"))


def test_sections_hold_what_each_variant_promises(results, sample_resources, stored):
    cfg = sample_resources.settings.retrieval.hlg
    for name, r in results.items():
        local, bridge, glob = r.sections["local"], r.sections["bridge"], r.sections["global"]
        # TopicGraphRAG's score-guided beam takes B statements in all, starts included (§4.2, the published
        # RerankingBeamGraphSearch): when the score puts B starts above every neighbour, it takes no hop, and its
        # context holds none: no bridge then
        assert local and glob and (bridge or name.startswith("hlg-topic")), name
        kind = "chunk" if name.endswith("-chunk") else "statement"
        if kind == "chunk":  # §6.4: up to 10 unique chunks
            assert 0 < len(local) <= cfg.top_k and len({i.id for i in local}) == len(local), name
        else:  # §6.3: the statements of a context window of about 3,000 tokens
            used = sum(count_tokens(i.text) for i in local)
            assert used == r.trace["counts"]["context_tokens"] <= cfg.context_tokens, name
        assert all(i.kind == kind and stored["kinds"][i.id] == kind for i in local), name
        assert all(i.kind == "topic" and stored["kinds"][i.id] == "topic" for i in glob), name
        assert all(stored["kinds"][i.id] in ("entity", "relationship") for i in bridge), name
        for section in (local, bridge, glob):
            scores = [i.score for i in section]
            assert scores == sorted(scores, reverse=True), name
        assert all(set(i.documents) <= stored["documents"] and i.documents for i in local), name
        assert r.trace["counts"]["beam_depth"] >= (0 if name.startswith("hlg-topic") else 1), name  # (see above)
        assert r.trace["timings_ms"]["beam_search"] >= 0
        # the two documents the question needs (data/sample_questions.json) are among the first sources
        top = sample_resources.store.documents_by_id(sample_resources.ws.id, [s.document_id for s in r.sources[:5]])
        assert {"halden_barrier_overview.md", "amara_okafor_profile.md"} <= {d.filename for d in top.values()}, name


def test_local_items_pass_the_diversity_filter(results, sample_resources):
    lx = lexicon(sample_resources)
    cut = similarity_cutoff(sample_resources.settings.retrieval.hlg.diversity_threshold)
    for name, r in results.items():
        if name.endswith("-chunk"):
            row, m = lx.chunk_tfidf()
            rows = [row[i.id] for i in r.sections["local"]]
        else:
            m, rows = lx.statement_tfidf(), [lx.sids.index(i.id) for i in r.sections["local"]]
        sim = (m[rows] @ m[rows].T).toarray()
        np.fill_diagonal(sim, 0)
        assert (sim < cut).all(), name


def test_sources_are_the_documents_of_the_context_in_rank_order(results, sample_resources, stored):
    """Recall@k is computed on the sources: they are what the strategy retrieved, nothing re-ranks them."""
    limit = sample_resources.settings.retrieval.max_sources
    for name, r in results.items():
        local = r.sections["local"]
        docs = [stored["chunk_doc"][i.id] if i.kind == "chunk" else i.documents[0] for i in local]
        assert [s.document_id for s in r.sources] == list(dict.fromkeys(docs))[:limit], name
        assert set(docs) <= stored["documents"]
        for s in r.sources:  # a source's chunks are the chunks of its context items, first seen first
            if name.endswith("-chunk"):
                assert s.chunk_ids == [i.id for i in local if stored["chunk_doc"][i.id] == s.document_id], name
            assert s.chunk_ids and all(stored["chunk_doc"][c] == s.document_id for c in s.chunk_ids), name


def _chunks_of(stored, statement: str) -> list[str]:
    return sorted(c for c in stored["chunk_doc"]
                  if "derived_from" in stored["edges"].get(frozenset((statement, c)), set()))


def test_statement_and_chunk_variants_return_what_the_paper_says(results, sample_built, stored):
    """§4.1 Eq. 10: the top statements; §6.4: the top-ranked statements traced back to their chunks, up to 10."""
    settings, store, ws, embedder = sample_built
    cfg = settings.retrieval.hlg
    assert len(results["hlg-statement"].sections["local"]) > cfg.top_k  # a 3,000-token window holds more than 10
    s = settings.model_copy(deep=True)
    s.retrieval.hlg.diversity_threshold = -1.0  # cosine cut 2: no filter, so both see the same ranked statements
    res = open_resources(store, ws, s, embedder)
    for stmt, chunk in (("hlg-statement", "hlg-statement-chunk"), ("hlg-topic", "hlg-topic-chunk")):
        s_local = get_strategy(stmt).retrieve(res, HALDEN_Q).sections["local"]
        c_local = get_strategy(chunk).retrieve(res, HALDEN_Q).sections["local"]
        assert {stored["kinds"][i.id] for i in s_local} == {"statement"}
        assert {stored["kinds"][i.id] for i in c_local} == {"chunk"}
        # the chunks are those of the ranked statements, first seen first, up to 10
        traced = list(dict.fromkeys(c for i in s_local for c in _chunks_of(stored, i.id)))
        assert len(traced) >= cfg.top_k and [i.id for i in c_local] == traced[: cfg.top_k], (stmt, chunk)
        assert c_local[0].score == pytest.approx(s_local[0].score, abs=1e-4)  # a chunk scores its best statement


class _Lex:
    """What select_statements reads of a lexicon, over given texts."""

    def __init__(self, texts: list[str], tokens: list[int]):
        self.m, self.tokens = tfidf_matrix([preprocess(t) for t in texts]), tokens

    def statement_tfidf(self):
        return self.m

    def statement_tokens(self, s: int) -> int:
        return self.tokens[s]


def test_diversity_filter_drops_near_duplicates_at_the_paper_threshold_while_filling_the_context():
    cut = similarity_cutoff(0.005)  # the paper's tau = 0.5 %
    texts = ["The Halden Barrier has 1,200 sluice gates.",  # best first
             "The Halden Barriers have 1200 sluice gates.",  # the same statement once numbers and lemmas agree
             "The Halden Barrier has 1,200 steel sluice gates.",  # one more word: cosine < 0.995, kept
             "Amara Okafor designed the sluice gates.",
             "Amara Okafor studied at Delft."]
    lx = _Lex(texts, [10] * len(texts))
    ranked = np.arange(len(texts))
    assert select_statements(lx, ranked, cut, tokens=1000) == ([0, 2, 3, 4], 40)
    assert select_statements(lx, ranked, cut, tokens=25) == ([0, 2], 20)  # the window is full after two
    assert select_statements(lx, ranked[::-1], cut, tokens=1000)[0] == [4, 3, 2, 1]  # the better one stays
    assert select_statements(lx, ranked, 0.5, tokens=1000)[0] == [0, 3, 4]  # a looser threshold drops more


def test_chunk_selection_traces_ranked_statements_to_unique_chunks(sample_resources):
    lx = lexicon(sample_resources)
    cut = similarity_cutoff(sample_resources.settings.retrieval.hlg.diversity_threshold)
    ranked = np.argsort(-(lx.E @ sample_resources.embed_query(HALDEN_Q)))
    picked = select_chunks(lx, ranked, cut, 4)
    first = list(dict.fromkeys(c for s in ranked for c in lx.schunks[s]))
    assert [c for c, _ in picked] == first[:4]  # the sample's chunks are distinct texts: none dropped
    order = {int(s): n for n, s in enumerate(ranked)}
    for c, s in picked:  # each with the best-ranked statement it backs
        assert c in lx.schunks[s] and all(c not in lx.schunks[x] for x in ranked[: order[s]])
    assert select_chunks(lx, ranked, cut, 0) == []


def test_path_nodes_exist_and_path_edges_are_stored_edges(results, stored):
    for name, r in results.items():
        assert r.path_nodes and r.path_edges, name
        ids = {n.id for n in r.path_nodes}
        assert len(ids) == len(r.path_nodes)
        for n in r.path_nodes:
            assert stored["kinds"].get(n.id) == n.kind, (name, n)
        roles = {n.role for n in r.path_nodes}
        hops = not name.startswith("hlg-topic")  # the guided beam may take no hop (see above)
        assert {"entry", "beam"} <= roles or not hops and "entry" in roles, name
        for e in r.path_edges:
            assert e.src in ids and e.dst in ids
            assert e.kind in stored["edges"].get(frozenset((e.src, e.dst)), set()), (name, e)
        beam_edges = [e for e in r.path_edges if e.role == "beam"]
        assert (beam_edges or not hops) and all(e.kind == "mentions" for e in beam_edges)
        assert all(stored["kinds"][e.src] == "statement" and stored["kinds"][e.dst] == "entity" for e in beam_edges)


def test_path_score_is_the_attention_weighted_path_embedding(sample_resources):
    res = sample_resources
    lx = lexicon(res)
    q = res.embed_query(HALDEN_Q)
    beam = beam_search(q, lx.E, lx.nbr, np.argsort(-(lx.E @ q))[:5], width=5, depth=2)
    assert len(beam.paths) >= 2 and len(beam.paths[1])
    rows, got = beam.paths[-1][0], float(beam.scores[-1][0])
    raw = res.index.vectors("statement", [lx.sids[i] for i in rows])
    vecs = np.stack([raw[lx.sids[i]] for i in rows]).astype(np.float64)
    # Eq. 6-7 written out: alpha_i = softmax(cos(e_Q, e_i)), e_path = sum alpha_i e_i, score = cos(e_Q, e_path)
    cos = vecs @ q / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(q))
    alpha = np.exp(cos) / np.exp(cos).sum()
    e_path = alpha @ vecs
    direct = float(e_path @ q / (np.linalg.norm(e_path) * np.linalg.norm(q)))
    assert got == pytest.approx(direct, abs=1e-5)
    assert path_score(q, vecs) == pytest.approx(direct, abs=1e-9)
    assert path_score(q, vecs[:1]) == pytest.approx(cos[0], abs=1e-9)  # one statement: its own cosine


def test_beam_width_and_depth_are_respected(sample_resources):
    lx = lexicon(sample_resources)
    q = sample_resources.embed_query(HALDEN_Q)
    starts = np.argsort(-(lx.E @ q))[:6]
    width, depth = 3, 2
    beam = beam_search(q, lx.E, lx.nbr, starts, width=width, depth=depth)
    assert 2 <= len(beam.paths) <= depth + 1
    assert (beam.paths[0][:, 0] == starts).all()
    for d, (paths, scores, grp) in enumerate(zip(beam.paths, beam.scores, beam.starts)):
        assert paths.shape[1] == d + 1
        assert np.bincount(grp).max() <= width  # B paths per start at every depth
        assert (paths[:, 0] == starts[grp]).all()
        for p in paths:
            assert len(set(p.tolist())) == len(p)  # no statement twice on a path
            for a, b in pairwise(p):
                assert lx.nbr[a, b] > 0  # consecutive statements share an entity (Eq. 5)
        if d:  # a child improves on its parent (the same path without its last statement)
            parent = {tuple(p): s for p, s in zip(beam.paths[d - 1].tolist(), beam.scores[d - 1])}
            assert all(s > parent[tuple(p[:-1])] for p, s in zip(paths.tolist(), scores))
    wide = beam_search(q, lx.E, lx.nbr, starts, width=50, depth=3)
    assert sum(map(len, wide.paths)) >= sum(map(len, beam.paths))


def test_settings_bound_the_search_through_the_strategy(sample_built):
    settings, store, ws, embedder = sample_built
    s = settings.model_copy(deep=True)
    s.retrieval.hlg.beam_width, s.retrieval.hlg.depth, s.retrieval.hlg.top_k = 2, 1, 3
    s.retrieval.hlg.context_tokens = 60
    res = open_resources(store, ws, s, embedder)
    for name in HLG:
        r = get_strategy(name).retrieve(res, HALDEN_Q)
        counts = r.trace["counts"]
        assert counts["beam_depth"] <= 1 and counts["beam_paths"] <= 2 * counts["start_statements"], name
        if name.endswith("-chunk"):
            assert 0 < len(r.sections["local"]) <= 3, name
        else:  # the window: 60 tokens of statements (the first statement always)
            assert 0 < counts["context_tokens"] <= 60 or len(r.sections["local"]) == 1, name
    s.retrieval.hlg.depth = 0
    r = get_strategy("hlg-statement").retrieve(open_resources(store, ws, s, embedder), HALDEN_Q)
    assert r.trace["counts"]["beam_depth"] == 0 and r.sections["local"]


def test_keywords_are_entity_names_in_the_question(sample_resources):
    lx = lexicon(sample_resources)
    kws = dict(keywords(sample_resources, lx, HALDEN_Q + " The"))
    assert "halden barrier" in kws
    assert "the" not in kws and "a" not in kws
    assert all(len(c) and (c < len(lx.eids)).all() for c in kws.values())


def test_statements_are_scored_alone_and_topicgraphrags_beam_by_that_score(results, sample_resources):
    """Eq. 9: a kept statement is scored by itself alone, its chunk plays no part: offline (no reranker) by its cosine
    to the question; in the hybrid ablations by (cos(e_Q, e_s) + its TF-IDF cosine to the question and keywords) / 2.
    §4.2: TopicGraphRAG's beam is guided by that score (similarity offline), StatementGraphRAG's by Eq. 7; the
    chunk-blended score runs only in a named ablation."""
    lx = lexicon(sample_resources)
    q = np.asarray(sample_resources.embed_query(HALDEN_Q), dtype=np.float64)
    q /= np.linalg.norm(q)
    row = {sid: i for i, sid in enumerate(lx.sids)}
    for name in ("hlg-statement", "hlg-topic"):
        r = results[name]
        assert r.trace["rerank"] == "statement", name
        for item in r.sections["local"]:
            assert item.score == pytest.approx(float(lx.E[row[item.id]] @ q), abs=1e-4), (name, item.title)
        hybrid = get_strategy(name + "-hybrid").retrieve(sample_resources, HALDEN_Q)
        assert hybrid.trace["rerank"] == "hybrid"
        lexical = lx.lexical_scores(" ".join([HALDEN_Q] + hybrid.trace["keywords"]))
        for item in hybrid.sections["local"]:
            i = row[item.id]
            assert item.score == pytest.approx((float(lx.E[i] @ q) + lexical[i]) / 2, abs=2e-2), (name, item.title)
    assert results["hlg-topic"].trace["beam"] == "similarity"
    assert get_strategy("hlg-topic-hybrid").retrieve(sample_resources, HALDEN_Q).trace["beam"] == "reranker (hybrid)"
    assert results["hlg-statement"].trace["beam"] == "path (Eq. 7)"
    blend = get_strategy("hlg-statement-chunkblend").retrieve(sample_resources, HALDEN_Q)
    assert blend.trace["rerank"] == "chunk-blend"
    off = [i for i in blend.sections["local"] if abs(i.score - float(lx.E[row[i.id]] @ q)) > 1e-3]
    assert off  # the blend moves scores away from the statement's own cosine
    assert get_strategy("hlg-topic-pathbeam").retrieve(sample_resources, HALDEN_Q).trace["beam"] == "path (Eq. 7)"
