"""GraphRAG local search (hierarchical-graph-rag.md, "Retrieval" → "Local retrieval").

1. Entry point: the question is embedded and run against the entity vector index (entity descriptions) of the
   extracted (layer-0) entities only: GraphRAG's graph has no HiRAG summary entity, so none enters the pool
   (issue 37; they had been kept after the layer-0 hits); the index is over-sampled (`oversample` ×
   `top_entities` hits, GraphRAG's `map_query_to_entities` oversample 2). Entities whose exact name occurs in the
   question (`res.names`, layer-0 names) come first, as GraphRAG's `include_entity_names`; names made only of stop
   words are skipped.
2. Graph expansion from the entry entities, as the paper's single retrieval query gathers them:
   * chunks that mention them (`mentions`, the paper's HAS_ENTITY), ranked by how many distinct entry entities
     they mention (the Neo4j query's `freq`), then by their similarity to the question;
   * community reports via IN_COMMUNITY (Leiden only, GraphRAG's own hierarchy). Each entity counts for its
     finest community of level <= `community_level`, 0 being the coarsest (GraphRAG's `--community-level`
     roll-up, the reading of its published `read_indexer_reports`); communities are ranked by how many entry
     entities they hold, then by the report's rating;
   * inside relationships (both ends entry entities), ranked by GraphRAG's relationship rank (combined degree
     of the two ends), then weight; outside relationships (one end outside), ranked first by how many entry
     entities their outside end links to (GraphRAG's `_filter_relationships`), then rank, then weight;
   * the entity descriptions.
3. Caps `top_chunks`, `top_communities`, `top_inside_rels`, `top_outside_rels`, then the token budget
   (`max_tokens`, counted with `core.ingest.count_tokens` over "title: text"), split as GraphRAG's
   `LocalSearchMixedContext`: `community_prop` of it for reports, `text_unit_prop` for chunks, the rest for
   entity descriptions then relationships; inside each share items are taken best first and the first one
   that does not fit ends the share (GraphRAG stops there too), so the lowest-ranked items are the ones dropped.

Mapping: local = entity descriptions + chunks, bridge = inside then outside relationships (score = the
relationship's rank, i.e. combined degree; listed in GraphRAG's priority order), global = community reports.
Degree is the entity's degree in GraphRAG's own graph, the extracted relationship graph (`EntityGraph.extracted()`:
distinct neighbours joined by a relationship; HiRAG's `summarizes` links and summary entities are not in it).
Sources: the documents of the context's chunks in the context's order (the kept chunks by how many entry entities
they mention, then similarity, as GraphRAG's `_build_text_unit_context` orders them), then the documents that only
back kept relationships, in the relationships' order: `sources_in_order`. The ablation `graphrag-local-simsources`
ranks the kept chunks by their similarity alone (issue 11 had made that the default on three of four sets, 2wiki
preferring the context order; a choice that does not hold on every set goes back to the published code, issue 26).
"""

from __future__ import annotations

import igraph as ig

from core.graph.entity_graph import EntityGraph
from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    chunk_similarity,
    fit_budget,
    register,
    sources_in_order,
)
from core.retrieval.cache import CacheKey
from core.text import content_words

EXTRACTED: CacheKey[tuple[EntityGraph, ig.Graph]] = CacheKey("graphrag.extracted")  # GraphRAG's graph, per build


def extracted_graph(res: Resources) -> tuple[EntityGraph, ig.Graph]:
    """GraphRAG's graph (the layer-0 relationship graph of the workspace) and its igraph, built once per Resources."""
    def build() -> tuple[EntityGraph, ig.Graph]:
        ex = res.view.eg.extracted()
        return ex, ex.to_igraph()

    return res.cached(EXTRACTED, build)


def report_text(c) -> str:
    """A community report as context: its summary, then each finding's headline and explanation."""
    parts = [c.summary or ""]
    for f in (c.report or {}).get("findings", []) or []:
        head, body = (f.get("summary") or "").strip(), (f.get("explanation") or "").strip()
        parts.append(body if head.rstrip("…") and body.startswith(head.rstrip("…")) else f"{head}: {body}")
    return "\n".join(p for p in parts if p)


def report_rating(c) -> float:
    return float((c.report or {}).get("rating") or 0.0)




def trim_documents(r: Retrieval, cap: int = 50) -> None:
    """Each item's documents with the ranked sources first, at most `cap` (a common entity is mentioned by
    thousands of chunks; the answer step cites the first ranked source an item names)."""
    rank = {s.document_id: i for i, s in enumerate(r.sources)}
    for items in r.sections.values():
        for it in items:
            it.documents = sorted(it.documents, key=lambda d: rank.get(d, len(rank)))[:cap]


def entry_entities(res: Resources, q, question: str, k: int, oversample: int) -> list[tuple[str, float, str]]:
    """(entity id, similarity, "name" | "vector"): exact name matches first, then entity-index hits among the
    layer-0 (extracted) entities, `k` in all; no HiRAG summary entity."""
    view = res.view
    named: list[str] = []
    for name, ids in res.names.find(question):
        if not content_words(name):
            continue
        named.extend(i for i in ids if i in view.entities and view.entities[i].layer == 0 and i not in named)
    sims = view.similarity(q, named)
    out = [(e, sims.get(e, 0.0), "name") for e in named]
    out.sort(key=lambda t: (-t[1], t[0]))
    out = out[:k]
    seen = {e for e, _, _ in out}
    hits = [h for h in res.nearest("entity", q, max(k, 1) * max(oversample, 1), where={"layer": 0})
            if h.id in view.entities and view.entities[h.id].layer == 0]
    for h in hits:
        if len(out) >= k:
            break
        if h.id not in seen:
            seen.add(h.id)
            out.append((h.id, float(h.score), "vector"))
    return out


def rank_chunks(res: Resources, q, entry: list[str], cap: int) -> list[tuple[str, int, float]]:
    """(chunk id, entry entities mentioned, similarity) of the chunks mentioning entry entities, best first."""
    view = res.view
    freq: dict[str, int] = {}
    for e in entry:
        for c in dict.fromkeys(c for c, _ in view.entity_chunks.get(e, [])):
            freq[c] = freq.get(c, 0) + 1
    if not freq or cap <= 0:
        return []
    by_freq = sorted(freq.items(), key=lambda kv: -kv[1])
    cut = by_freq[min(cap, len(by_freq)) - 1][1]
    need = [c for c, f in by_freq if f >= cut]  # only these can reach the top `cap`; the rest need no vector
    sims = chunk_similarity(res, q, need)
    ranked = sorted(((c, freq[c], sims.get(c, 0.0)) for c in need), key=lambda t: (-t[1], -t[2], t[0]))
    return ranked[:cap]


def rank_communities(view, entry: list[str], level: int, cap: int) -> list[tuple[str, int, list[str]]]:
    """(community id, entry entities held, those entities): each entity's finest Leiden community at a level
    <= `level`, ranked by entities held, then rating."""
    held: dict[str, list[str]] = {}
    for e in entry:
        best = None
        for cid in view.member_of.get(e, []):
            c = view.communities.get(cid)
            if c is not None and c.method == "leiden" and c.level <= level and (best is None or c.level > best.level):
                best = c
        if best is not None:
            held.setdefault(best.id, []).append(e)
    ranked = sorted(held.items(), key=lambda kv: (-len(kv[1]), -report_rating(view.communities[kv[0]]), kv[0]))
    return [(cid, len(es), es) for cid, es in ranked[:cap]]


def rank_relationships(view, graph: tuple[EntityGraph, ig.Graph], entry: list[str], cap_in: int, cap_out: int):
    """(inside, outside): lists of (relationship id, rank, weight, links, (subject, object)), GraphRAG order, over
    GraphRAG's graph `graph` (`extracted_graph`): rank = the two ends' degrees there."""
    eg, g = graph
    idx = eg.index
    entry_set = set(entry)
    rels: dict[str, tuple[str, str]] = {}
    for e in entry:
        i = idx.get(e)
        if i is None:
            continue
        for nb in g.neighbors(i):
            for rid in eg.link_rels.get((min(i, nb), max(i, nb)), []):
                rel = view.relationships.get(rid)
                if rel is not None:
                    rels[rid] = (rel.data.get("source"), rel.data.get("target"))
    ends = sorted({x for a, b in rels.values() for x in (a, b) if x in idx})
    degree = dict(zip(ends, g.degree([idx[x] for x in ends]))) if ends else {}
    links: dict[str, set[str]] = {}
    for a, b in rels.values():
        if (a in entry_set) != (b in entry_set):
            out_end, in_end = (b, a) if a in entry_set else (a, b)
            links.setdefault(out_end, set()).add(in_end)
    inside, outside = [], []
    for rid, (a, b) in rels.items():
        rank = degree.get(a, 0) + degree.get(b, 0)
        w = float(view.relationships[rid].weight or 0.0)
        if a in entry_set and b in entry_set:
            inside.append((rid, rank, w, 0, (a, b)))
        else:
            out_end = b if a in entry_set else a
            outside.append((rid, rank, w, len(links.get(out_end, ())), (a, b)))
    inside.sort(key=lambda t: (-t[1], -t[2], t[0]))
    outside.sort(key=lambda t: (-t[3], -t[1], -t[2], t[0]))
    return inside[:cap_in], outside[:cap_out]


class GraphRAGLocalStrategy:
    name = "graphrag-local"
    label = "GraphRAG local search"
    description = (
        "local: descriptions of the entry entities (exact name matches and entity-index hits) and the chunks that "
        "mention most of them; bridge: relationships between two entry entities, then from an entry entity "
        "outward, by combined degree; global: reports of the Leiden communities holding most entry entities."
    )
    similarity_sources = False  # the ablation graphrag-local-simsources: kept chunks by similarity alone

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval.graphrag_local
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        view = res.view
        t.lap("load_graph")
        q = res.embed_query(question)
        t.lap("embed_query")
        entry = entry_entities(res, q, question, cfg.top_entities, cfg.oversample)
        entry_ids = [e for e, _, _ in entry]
        t.lap("entity_search")

        chunks = rank_chunks(res, q, entry_ids, cfg.top_chunks)
        t.lap("chunks")
        comms = rank_communities(view, entry_ids, cfg.community_level, cfg.top_communities)
        t.lap("communities")
        inside, outside = rank_relationships(view, extracted_graph(res), entry_ids, cfg.top_inside_rels,
                                             cfg.top_outside_rels)
        t.lap("relationships")

        # candidate items in rank order, then the token budget split as GraphRAG's mixed context
        ent_items = [ContextItem(e, "entity", view.entities[e].title, view.entities[e].text, round(sc, 4),
                                 view.entities[e].layer, view.documents_of([c for c, _ in view.entity_chunks.get(e, [])]))
                     for e, sc, _ in entry]
        nodes = res.store.nodes_by_id(res.ws_id, [c for c, _, _ in chunks])
        chunk_items = [ContextItem(c, "chunk", nodes[c].title, nodes[c].text, round(f + max(s, 0.0), 4), None,
                                   view.documents_of([c])) for c, f, s in chunks if c in nodes]
        rel_items = [ContextItem(rid, "relationship", view.relationships[rid].title, view.relationships[rid].text,
                                 float(rank), None, view.documents_of(view.rel_chunks.get(rid, [])))
                     for rid, rank, _, _, _ in inside + outside]
        comm_items = [ContextItem(cid, "community", view.communities[cid].title or cid,
                                  report_text(view.communities[cid]), float(n), view.communities[cid].level,
                                  view.documents_of([c for e in es for c, _ in view.entity_chunks.get(e, [])]))
                      for cid, n, es in comms]
        total = max(cfg.max_tokens, 0)
        comm_budget = int(total * cfg.community_prop)
        chunk_budget = int(total * cfg.text_unit_prop)
        local_budget = max(total - comm_budget - chunk_budget, 0)
        r.sections["global"], comm_used = fit_budget(comm_items, comm_budget)
        kept_ents, ent_used = fit_budget(ent_items, local_budget)
        kept_rels, rel_used = fit_budget(rel_items, local_budget - ent_used) if len(kept_ents) == len(ent_items) \
            else ([], 0)
        kept_chunks, chunk_used = fit_budget(chunk_items, chunk_budget)
        r.sections["local"] = kept_ents + kept_chunks
        r.sections["bridge"] = kept_rels
        t.lap("token_budget")

        # sources: the kept chunks' documents in the context's order (or, for the ablation, by the chunk's
        # similarity), then those only backing kept relationships, in the relationships' order (module docstring)
        kept = [it.id for it in kept_chunks]
        if self.similarity_sources:
            sim_of = {c: s for c, _, s in chunks}
            kept.sort(key=lambda c: (-sim_of[c], c))
        rel_chunks = [c for it in kept_rels for c in view.rel_chunks.get(it.id, [])]
        r.sources = sources_in_order(view, list(dict.fromkeys(kept + rel_chunks)),
                                     res.settings.retrieval.max_sources)
        t.lap("rank_sources")

        trim_documents(r)
        self._path(r, view, entry, kept_chunks, comms, r.sections["global"], kept_rels, inside + outside)
        r.trace["counts"] = {
            "entry_entities": len(entry), "name_matches": sum(1 for _, _, via in entry if via == "name"),
            "chunks": len(kept_chunks), "communities": len(r.sections["global"]),
            "inside_relationships": sum(1 for i in kept_rels if i.id in {x[0] for x in inside}),
            "outside_relationships": sum(1 for i in kept_rels if i.id in {x[0] for x in outside}),
            "context_tokens": comm_used + ent_used + rel_used + chunk_used,
            "sources": len(r.sources),
        }
        return r

    @staticmethod
    def _path(r: Retrieval, view, entry, kept_chunks, comms, kept_comms, kept_rels, ranked_rels) -> None:
        entry_ids = [e for e, _, _ in entry]
        seen = set(entry_ids)
        for e in entry_ids:
            r.path_nodes.append(PathStep(e, "entity", "entry", view.entities[e].title))
        mentioned = {e: {c for c, _ in view.entity_chunks.get(e, [])} for e in entry_ids}
        for it in kept_chunks:
            r.path_nodes.append(PathStep(it.id, "chunk", "chunk", it.title))
            for e in entry_ids:
                if it.id in mentioned[e]:
                    r.path_edges.append(PathEdge(it.id, e, "mentions", "chunk"))
        held = {cid: es for cid, _, es in comms}
        for it in kept_comms:
            r.path_nodes.append(PathStep(it.id, "community", "community", it.title))
            for e in held.get(it.id, []):
                r.path_edges.append(PathEdge(e, it.id, "in_community", "membership"))
        ends_of = {rid: ab for rid, _, _, _, ab in ranked_rels}
        for it in kept_rels:
            a, b = ends_of[it.id]
            for x in (a, b):
                if x not in seen and x in view.entities:
                    seen.add(x)
                    r.path_nodes.append(PathStep(x, "entity", "bridge", view.entities[x].title))
            r.path_nodes.append(PathStep(it.id, "relationship", "bridge", it.title))
            r.path_edges.append(PathEdge(it.id, a, "subject", "bridge"))
            r.path_edges.append(PathEdge(it.id, b, "object", "bridge"))


register(GraphRAGLocalStrategy)


@register
class GraphRAGLocalSimSources(GraphRAGLocalStrategy):
    name = "graphrag-local-simsources"
    label = "GraphRAG local search (ablation: sources by similarity)"
    description = GraphRAGLocalStrategy.description + (" Ablation, not the published code: the sources rank the kept "
                                                       "chunks by similarity to the question alone.")
    similarity_sources = True
