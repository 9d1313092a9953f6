"""ArchRAG online retrieval (archrag.txt §3.2): C-HNSW hierarchical search, then adaptive filtering per layer.

1. Hierarchical search (§3.2.1, Algorithm 2; core/retrieval/archrag/search.py): the k nearest nodes of every
   C-HNSW layer (k = 5, the paper's setting, §4), each layer entered through the inter-layer link of the nearest
   node of the layer above. R_0 = the k entities and the relationships between two of them; R_i = the k
   attributed communities of layer i. Nothing else is retrieved (no chunk text).
2. Adaptive filtering (§3.2.2, Eq. 3-4; core/retrieval/archrag/filter.py): one analysis per layer over R_i —
   with a model the filter prompt of Figure 10 (backend task `rate_points`), offline its extractive equivalent
   (the layer's sentences rated by cosine to the question) — then all rated points sorted and cut at the token
   budget `max_tokens`. core/answer.py merges the kept points (Eq. 4's P_merge).
3. Sections: an item of R_i kept when at least one kept point comes from it, its text its points (best first),
   its score the best one's relevance, its level the layer. local = layer-0 entities; bridge = R_0's
   relationships and, with two or more community layers, the layer-1 communities; global = the higher layers.
4. Sources are the documents behind the kept points, in the order the filter ranked them: a point backs the chunks
   its sentence was quoted from (offline) with its relevance, else the chunks behind its items (entity: the
   chunks that mention it; relationship: those it was extracted from; community: those that mention its members),
   its relevance divided among them. A chunk scores its best point, and a document comes at its best chunk's place
   (`sources_in_order`): summing a document's chunks would rank long documents by their length, not the filter.
5. Path: per layer the nodes found (role "entry" on the top layer, "layer" below, label "layer i: title"), each
   descent from a layer's best node through its inter-layer link (kind "chnsw", role "layer"; the target added
   when not among the k), kept relationships ("bridge", subject / object edges).
6. Ablations (`overrides` of the settings): archrag-efk (ef = k, Algorithm 2 line 6 as written), archrag-ef256 (the
   candidate list 256, Strata's own before issue 37), archrag-8k (max_tokens 8,000, GraphRAG's reduce budget, used
   before issue 37); the default is the published code's efSearch 40 and --max_tokens 4,000.
7. Trace: per layer (`trace["layers"]`) the nodes found, items in R_i, points, points kept and analysis calls;
   with a model `trace["llm"]["filter_calls"]` = the layers analysed (one call each).
"""

from __future__ import annotations

import numpy as np

from core.retrieval.archrag.filter import adaptive_filter, extractive_layer, fill_vectors, llm_layer
from core.retrieval.archrag.search import chnsw_cache, community_chunks, hierarchical_search, layer_content
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
    sources_in_order,
)


class ArchRAGStrategy:
    name = "archrag"
    label = "ArchRAG (C-HNSW + adaptive filtering)"
    description = (
        "local: the k entities nearest the question on C-HNSW layer 0; "
        "bridge: the relationships between those entities and the k nearest layer-1 attributed communities; "
        "global: reports of the k nearest attributed communities of every higher layer. "
        "Each layer is analysed once into points rated for the question; the best points fill the token budget."
    )
    overrides: dict[str, object] = {}  # an ablation's settings (retrieval.archrag fields) over the workspace's

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval.archrag.model_copy(update=self.overrides)
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        cache = chnsw_cache(res)
        view = res.view
        t.lap("load_index")
        if cache.index is None or len(cache.index.ids) == 0:
            r.trace["note"] = "no C-HNSW index: build the workspace with ArchRAG attributed communities on"
            r.trace["counts"] = {"layers": 0, "items": 0, "sources": 0}
            return r
        index = cache.index
        q = np.asarray(res.embed_query(question), dtype=np.float32)
        t.lap("embed_query")
        found, descents = hierarchical_search(cache, q, cfg.k_per_layer, cfg.ef, upper=cfg.upper_ef)
        layers = layer_content(view, found)
        t.lap("hierarchical_search")
        analysed = [i for i, items in enumerate(layers) if items]
        stored = embedded = 0
        if llm is None:
            stored, embedded = fill_vectors(res, cache, [it for items in layers for it in items])
            t.lap("read_layers")
            per_layer = [extractive_layer(i, layers[i], q) for i in analysed]
        else:
            per_layer = llm_calls(lambda i: llm_layer(llm, question, i, layers[i]), analysed,
                                  res.settings.backend.concurrency)
            r.trace["llm"] = {"model": llm.model, "filter_calls": len(analysed)}
        points = [p for pts in per_layer for p in pts]
        t.lap("analyse_layers")
        kept, used = adaptive_filter(points, cfg.max_tokens)
        t.lap("adaptive_filter")

        by_item: dict[tuple[int, int], list] = {}
        chunk_scores: dict[str, float] = {}
        for p in kept:
            by_item.setdefault((p.layer, p.items[0]), []).append(p)
            chunks, weight = [c for c in p.chunks if c in view.chunk_doc], p.score
            if not chunks:
                for i in p.items:
                    it = layers[p.layer][i]
                    if it.kind == "community" and not it.chunks:
                        it.chunks = community_chunks(view, it.id)
                chunks = list(dict.fromkeys(c for i in p.items for c in layers[p.layer][i].chunks
                                            if c in view.chunk_doc))
                weight = p.score / max(len(chunks), 1)
            for c in chunks:
                chunk_scores[c] = max(chunk_scores.get(c, 0.0), weight)
            p.chunks = chunks
        kept_items = []
        for (layer, i), pts in by_item.items():
            it = layers[layer][i]
            docs = view.documents_of([c for p in pts for c in p.chunks])
            r.sections[it.section].append(ContextItem(it.id, it.kind, it.title, " ".join(p.text for p in pts),
                                                      round(pts[0].score, 4), layer, docs))
            kept_items.append(it)
        for sec in r.sections.values():
            sec.sort(key=lambda i: (-i.score, i.id))
        ranked = sorted(chunk_scores, key=lambda c: (-chunk_scores[c], c))  # the filter's order (Eq. 4's Sort)
        r.sources = sources_in_order(view, ranked, res.settings.retrieval.max_sources)
        t.lap("rank_sources")
        _path(r, view, found, descents, kept_items)
        calls = 1 if llm is not None else 0
        r.trace["layers"] = [
            {"layer": i, "found": len(found[i]), "items": len(layers[i]),
             "points": sum(p.layer == i for p in points), "points_kept": sum(p.layer == i for p in kept),
             "filter_calls": calls if layers[i] else 0}
            for i in range(index.top, -1, -1)]
        r.trace["chnsw"] = {"layer_sizes": index.layer_sizes,
                            "found": [[[i, round(s, 4)] for i, s in layer] for layer in found]}
        r.trace["counts"] = {
            "layers": index.top + 1, "found": sum(len(x) for x in found), "items": sum(len(x) for x in layers),
            "relationships": sum(it.kind == "relationship" for it in layers[0]) if layers else 0,
            "points": len(points), "points_kept": len(kept), "items_kept": len(kept_items),
            "context_tokens": used, "sentences_stored": stored, "sentences_embedded": embedded,
            "sources": len(r.sources),
        }
        return r


def _path(r: Retrieval, view, found, descents, kept) -> None:
    have: set[str] = set()

    def title(nid: str, layer: int) -> str | None:
        n = view.entities.get(nid) if layer == 0 else view.communities.get(nid)
        return None if n is None else (n.title or nid)

    def add(nid: str, kind: str, role: str, label: str) -> None:
        if nid not in have:
            have.add(nid)
            r.path_nodes.append(PathStep(nid, kind, role, label))

    top = len(found) - 1
    for layer in range(top, -1, -1):
        kind = "entity" if layer == 0 else "community"
        for nid, _ in found[layer]:
            name = title(nid, layer)
            if name is not None:
                add(nid, kind, "entry" if layer == top else "layer", f"layer {layer}: {name}")
    for layer, a, b in descents:
        name = title(b, layer - 1)
        if a in have and name is not None:
            add(b, "entity" if layer == 1 else "community", "layer", f"layer {layer - 1}: {name} (C-HNSW link)")
            r.path_edges.append(PathEdge(a, b, "chnsw", "layer"))
    for it in kept:
        if it.kind == "relationship" and it.ends and all(e in have for e in it.ends):
            add(it.id, "relationship", "bridge", it.title)
            r.path_edges.append(PathEdge(it.id, it.ends[0], "subject", "bridge"))
            r.path_edges.append(PathEdge(it.id, it.ends[1], "object", "bridge"))


register(ArchRAGStrategy)


@register
class ArchRAGEfK(ArchRAGStrategy):
    name = "archrag-efk"
    label = "ArchRAG (ablation: candidate list k, Algorithm 2 as written)"
    overrides = {"ef": None}


@register
class ArchRAGEf256(ArchRAGStrategy):
    name = "archrag-ef256"
    label = "ArchRAG (ablation: candidate list 256, Strata's own)"
    overrides = {"ef": 256}


@register
class ArchRAG8k(ArchRAGStrategy):
    name = "archrag-8k"
    label = "ArchRAG (ablation: filter budget 8,000 tokens, GraphRAG's)"
    overrides = {"max_tokens": 8000}
