"""GraphRAG global search (hierarchical-graph-rag.md, "Retrieval" → "Global retrieval"): map-reduce over
community reports.

1. Community summary index first: the question is run against the "community" collection, Leiden reports only
   (GraphRAG's own hierarchy; ArchRAG's attributed communities are another strategy's), `top_communities` hits.
2. Expansion by hierarchy level: the children of each hit (Community.parent_id) join the selection, nearest to
   the question first (their stored report vectors), until `max_reports` reports are selected — the reading of
   GraphRAG's dynamic community selection, which descends from a relevant community into its children.
3. Map step, one call per report: the report is split into points, each rated 0-100 for how much it helps answer
   the question (GraphRAG's map prompt: "an 'I don't know' type of response should have a score of 0"). With an
   LLM this is a structured call returning {"points": [{"description", "score"}]}: the backend
   task `rate_points` (RetrievalLLM), which `llm_map_report` uses when the question is asked with Ollama (one call
   per report, run `backend.concurrency` at a time; the report's title, summary and findings are the data).
   Offline, `map_report` is the extractive map: the points are the report's findings ("headline:
   explanation") and the sentences of its summary not already in a finding; a point's relevance is the geometric
   mean of (a) the IDF-weighted share of the question's content words it contains (IDF over the chunks) and (b)
   the report's cosine similarity to the question, so a point sharing nothing with the question, or from a
   report unrelated to it, scores 0; the rating is 100 · relevance · (0.5 + 0.5 · importance / 10), importance
   being the finding's stored 0-10 importance (the report's rating for summary sentences). At most
   `points_per_report` points per report, best first.
4. Rank and filter: points rated below `min_importance` are dropped (GraphRAG drops score 0), the rest sorted by
   rating and added while they fit in `max_tokens` (the first point that does not fit ends the list, as
   GraphRAG's reduce context).
5. Reduce: offline it is extractive — the kept points in rating order are the `global` section; core/answer.py
   then answers from them (the reduce LLM call is that answer step).

Mapping: global = the ranked points (each a ContextItem with the community's id, kind "community", title
"<community title> · point n", score = its 0-100 rating); bridge = the child communities the expansion added
(child → parent hops), nearest first; local = the members of the communities that gave a kept point nearest to
the question (top `top_entities`, by cosine similarity of their description vectors).
Sources: the documents of those communities' members, weighted by the point ratings: every member among the
`top_entities` nearest of its community adds (sum of the community's kept ratings / 100) · similarity^γ to each
chunk that mentions it, γ = `member_sharpness` (1: plain weighting; GraphRAG's global search returns no sources
of its own, so no paper gives γ. 16 had been chosen on hotpotqa alone, recall@5 0.715 vs 0.575 on queries 50-150;
it stays a setting, see docs/BENCHMARKS.md for it measured on every set).
Path: hits (role entry), expansions (role layer, edge parent → child "child_of"), the local entities (role key,
edge in_community, role membership).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.algorithms.similarity import dot
from core.ingest import count_tokens
from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    llm_calls,
    register,
    sources_from_chunks,
)
from core.retrieval.graphrag.local_search import trim_documents
from core.text import content_words, split_sentences


@dataclass
class Point:
    community_id: str
    n: int  # 1-based number of the point inside its report
    text: str
    rating: int  # 0-100
    importance: float  # the stored 0-10 importance it was weighted by


def question_terms(bm25, question: str) -> dict[str, float]:
    """The question's content words with their IDF over the chunks (words no chunk has get the largest IDF)."""
    top = float(bm25.idf.max()) if len(bm25.idf) else 1.0
    words = dict.fromkeys(content_words(question))
    return {w: float(bm25.idf[bm25.vocab[w]]) if w in bm25.vocab else top for w in words}


def report_points(c) -> list[tuple[str, float]]:
    """(point text, importance 0-10): each finding, then the summary's sentences that no finding already holds."""
    rep = c.report or {}
    out: list[tuple[str, float]] = []
    for f in rep.get("findings", []) or []:
        head, body = (f.get("summary") or "").strip(), (f.get("explanation") or "").strip()
        stem = head.rstrip("…").strip()
        text = body if stem and body.startswith(stem) else ": ".join(x for x in (head, body) if x)
        if text:
            out.append((text, float(f.get("importance") or 0.0)))
    rating = float(rep.get("rating") or 0.0)
    have = " ".join(t for t, _ in out)
    for s in split_sentences(c.summary or ""):
        if s not in have and len(s.split()) >= 3:
            out.append((s, rating))
    return out


def map_report(c, terms: dict[str, float], report_sim: float, k: int) -> list[Point]:
    """The offline map step over one report: its points rated 0-100 for the question, best `k` first."""
    total = sum(terms.values())
    out: list[Point] = []
    for n, (text, imp) in enumerate(report_points(c), start=1):
        present = set(content_words(text))
        lex = sum(v for w, v in terms.items() if w in present) / total if total else 0.0
        rel = math.sqrt(max(lex, 0.0) * max(report_sim, 0.0))
        rating = round(100 * rel * (0.5 + 0.5 * min(max(imp, 0.0), 10.0) / 10))
        out.append(Point(c.id, n, text, rating, imp))
    out.sort(key=lambda p: (-p.rating, p.n))
    return out[:k]


def map_material(c) -> str:
    """A community report as the map prompt's data: its title, summary and numbered findings."""
    lines = [f"Title: {c.title or c.id}", f"Summary: {c.summary}"]
    lines += [f"Finding {n}: {text}" for n, (text, _) in enumerate(report_points(c), start=1)]
    return "\n".join(lines)


def llm_map_report(llm, question: str, c, k: int) -> list[Point]:
    """The map step with a model: GraphRAG's map prompt over one report, its points rated 0-100, best `k` first."""
    out = [Point(c.id, n, p.description, int(p.score), p.score / 10)
           for n, p in enumerate(llm.rate_points(question, map_material(c)), start=1)]
    out.sort(key=lambda p: (-p.rating, p.n))
    return out[:k]


def reduce_points(points: list[Point], min_importance: int, max_tokens: int) -> list[Point]:
    """Points rated at least `min_importance`, best first, while they fit in `max_tokens`."""
    kept: list[Point] = []
    used = 0
    for p in sorted((p for p in points if p.rating >= min_importance), key=lambda p: (-p.rating, p.community_id, p.n)):
        t = count_tokens(p.text)
        if used + t > max_tokens:
            break
        used += t
        kept.append(p)
    return kept


def select_communities(res: Resources, q: np.ndarray, top: int, expand: bool, cap: int):
    """(hits [(id, sim)], expansions [(child id, parent id, sim)]): Leiden hits of the community index, then
    children of the hits nearest to the question, `cap` communities in all."""
    view = res.view
    hits = [(h.id, float(h.score)) for h in res.nearest("community", q, top, where={"method": "leiden"})
            if h.id in view.communities and view.communities[h.id].method == "leiden"][:cap]
    if not expand or len(hits) >= cap:
        return hits, []
    hit_ids = {h for h, _ in hits}
    kids = [(c.id, c.parent_id) for c in view.communities.values()
            if c.method == "leiden" and c.parent_id in hit_ids and c.id not in hit_ids]
    if not kids:
        return hits, []
    vecs = res.index.vectors("community", [k for k, _ in kids])
    qv = q.astype(np.float32)
    scored = sorted(((k, p, dot(vecs[k], qv) if k in vecs else 0.0) for k, p in kids), key=lambda t: (-t[2], t[0]))
    return hits, scored[: cap - len(hits)]


class GraphRAGGlobalStrategy:
    name = "graphrag-global"
    label = "GraphRAG global search (map-reduce)"
    description = (
        "local: members of the communities behind the kept points that are nearest to the question; bridge: child "
        "communities added by expanding the index hits one level down; global: the points of the community reports "
        "rated 0-100 for the question by the map step, best first within the token budget (the reduce input)."
    )

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval.graphrag_global
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        view = res.view
        bm25 = res.chunk_bm25
        t.lap("load_graph")
        q = res.embed_query(question)
        t.lap("embed_query")
        hits, kids = select_communities(res, q, cfg.top_communities, cfg.expand_children, cfg.max_reports)
        t.lap("community_search")
        sims = dict(hits) | {k: s for k, _, s in kids}
        terms = question_terms(bm25, question)
        mapped: list[Point] = []
        if llm is not None:
            per = llm_calls(lambda cid: llm_map_report(llm, question, view.communities[cid], cfg.points_per_report),
                            list(sims), res.settings.backend.concurrency)
            mapped = [p for points in per for p in points]
            r.trace["llm"] = {"model": llm.model, "map_calls": len(sims)}
        else:
            for cid in sims:
                mapped.extend(map_report(view.communities[cid], terms, sims[cid], cfg.points_per_report))
        t.lap("map")
        kept = reduce_points(mapped, cfg.min_importance, cfg.max_tokens)
        t.lap("reduce")

        weight: dict[str, float] = {}
        for p in kept:
            weight[p.community_id] = weight.get(p.community_id, 0.0) + p.rating / 100
        chosen = sorted(weight, key=lambda c: (-weight[c], c))
        near: dict[str, list[tuple[str, float]]] = {}
        for cid in chosen:
            member_sims = view.similarity(q, view.members.get(cid, []))
            near[cid] = sorted(member_sims.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.top_entities]
        chunk_scores: dict[str, float] = {}
        for cid in chosen:
            for e, s in near[cid]:
                for c, _ in view.entity_chunks.get(e, []):
                    chunk_scores[c] = chunk_scores.get(c, 0.0) + weight[cid] * max(s, 0.0) ** cfg.member_sharpness
        r.sources = sources_from_chunks(view, {c: s for c, s in chunk_scores.items() if s > 0},
                                        res.settings.retrieval.max_sources)
        t.lap("rank_sources")

        def docs(cid: str) -> list[str]:
            cs = [c for e, _ in near.get(cid, []) for c, _ in view.entity_chunks.get(e, [])]
            return view.documents_of(cs)

        for p in kept:
            comm = view.communities[p.community_id]
            r.sections["global"].append(ContextItem(comm.id, "community", f"{comm.title or comm.id} · point {p.n}",
                                                    p.text, float(p.rating), comm.level, docs(comm.id)))
        for k, parent, s in kids:
            comm = view.communities[k]
            title = f"{comm.title or k} ← {view.communities[parent].title}"
            r.sections["bridge"].append(ContextItem(k, "community", title, comm.summary, round(s, 4), comm.level,
                                                    docs(k)))
        best: dict[str, tuple[float, str]] = {}
        for cid in chosen:
            for e, s in near[cid]:
                if e not in best or s > best[e][0]:
                    best[e] = (s, cid)
        local = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[: cfg.top_entities]
        for e, (s, _) in local:
            n = view.entities[e]
            r.sections["local"].append(ContextItem(e, "entity", n.title, n.text, round(s, 4), n.layer,
                                                   docs_of_entity(view, e)))

        trim_documents(r)
        for cid, _ in hits:
            r.path_nodes.append(PathStep(cid, "community", "entry", view.communities[cid].title))
        for k, parent, _ in kids:
            r.path_nodes.append(PathStep(k, "community", "layer", view.communities[k].title))
            r.path_edges.append(PathEdge(parent, k, "child_of", "layer"))
        for e, (_, cid) in local:
            r.path_nodes.append(PathStep(e, "entity", "key", view.entities[e].title))
            r.path_edges.append(PathEdge(e, cid, "in_community", "membership"))
        r.trace["counts"] = {
            "community_hits": len(hits), "expanded_children": len(kids), "reports_mapped": len(sims),
            "points_rated": len(mapped), "points_kept": len(kept), "communities_with_points": len(chosen),
            "point_tokens": sum(count_tokens(p.text) for p in kept), "local_entities": len(local),
            "sources": len(r.sources),
        }
        return r


def docs_of_entity(view, e: str) -> list[str]:
    return list(dict.fromkeys(view.chunk_doc[c] for c, _ in view.entity_chunks.get(e, []) if c in view.chunk_doc))


register(GraphRAGGlobalStrategy)
