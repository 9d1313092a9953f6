"""Naive chunk RAG, the baseline: the question's nearest chunks by vector similarity."""

from __future__ import annotations

from core.retrieval.base import (
    ContextItem,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    register,
    sources_from_chunks,
)


@register
class NaiveStrategy:
    name = "naive"
    label = "Naive chunk search"
    description = ("local: the chunks nearest to the question; bridge: none (no graph is used); "
                   "global: none (no summaries are used).")

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        q = res.embed_query(question)
        t.lap("embed_query")
        hits = res.nearest("chunk", q, res.settings.retrieval.naive_top_k)
        t.lap("vector_search")
        nodes = res.store.nodes_by_id(res.ws_id, [h.id for h in hits])
        view = res.view
        for h in hits:
            n = nodes.get(h.id)
            if n is None:
                continue
            r.sections["local"].append(ContextItem(h.id, "chunk", n.title, n.text, round(h.score, 4),
                                                   documents=[n.document_id] if n.document_id else []))
            r.path_nodes.append(PathStep(h.id, "chunk", "entry", n.title))
        r.sources = sources_from_chunks(view, {h.id: max(h.score, 1e-6) for h in hits if h.id in nodes},
                                        res.settings.retrieval.max_sources)
        t.lap("rank_sources")
        r.trace["counts"] = {"chunks": len(r.sections["local"]), "sources": len(r.sources)}
        return r


@register
class BM25Strategy:
    name = "bm25"
    label = "BM25 chunk search"
    description = ("local: the chunks that score highest for the question's words under Okapi BM25 (k1 1.5, b 0.75); "
                   "bridge: none (no graph is used); global: none (no summaries are used).")

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        bm = res.chunk_bm25
        t.lap("load_index")
        hits = bm.top(question, res.settings.retrieval.naive_top_k)
        t.lap("bm25_search")
        nodes = res.store.nodes_by_id(res.ws_id, [i for i, _ in hits])
        for cid, sc in hits:
            n = nodes.get(cid)
            if n is None:
                continue
            r.sections["local"].append(ContextItem(cid, "chunk", n.title, n.text, round(sc, 4),
                                                   documents=[n.document_id] if n.document_id else []))
            r.path_nodes.append(PathStep(cid, "chunk", "entry", n.title))
        r.sources = sources_from_chunks(res.view, {c: sc for c, sc in hits if c in nodes},
                                        res.settings.retrieval.max_sources)
        t.lap("rank_sources")
        r.trace["counts"] = {"chunks": len(r.sections["local"]), "sources": len(r.sources)}
        return r
