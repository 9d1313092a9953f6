"""HiRAG's HiRetrieval (hirag.txt §4.2, Algorithm 2).

1. Local: V̂ = the top-n entities by similarity to the question (Eq. 12), with their descriptions.
2. Global: "P̂ = ∪_{p∈P} {p | p ∩ V̂ ≠ ∅}" (Eq. 13): every `hirag` community that holds an entity of V̂, with its
   report; ranked by how many of V̂ it holds, then by the best similarity inside it. `max_communities` (None by
   default) caps them only as an option: the paper keeps them all (the cap of 8 was Strata's own).
3. Bridge: from each community of P̂, its top-m members by similarity (Eq. 14), kept in that order; the
   shortest path in G_k between each consecutive pair (Eq. 15; `max_bridge_paths`, None by default, caps the
   pairs only as an option); "R̂ = {(h, r, t) ∈ G_k | h, t ∈ R}" (Eq. 16): every triple of G_k whose two ends
   lie on those paths. G_k's relations are E_k = E_{k-1} ∪ E_{k-1,k} (Eq. 9): the extracted relationships AND
   the layer-to-layer relations between an entity and its summary entity (§4.1, "we create the relations
   between entities in L_{i-1} and entities in L_i"), stored as `summarizes` links. So a path through a summary
   entity contributes its layer-to-layer triples (kind `summarizes`, the stored description, or offline, where the
   build writes none, "<member> is summarized by <summary entity>"); they were made by the build, not extracted
   from a chunk, so they back no source.
4. Text units: as HiRAG's code (nano-graphrag's `_find_most_related_text_unit_from_entities`) finds them, the
   chunks that mention the local entities, in the rank of the first entity they back, then by how many of that
   entity's graph neighbours they also mention; the leading ones that fit `text_unit_tokens` join the local
   section after the entities.
5. Sources: HiRAG's text units in HiRAG's order (`text_units`): the local entities' units, then the bridge
   relationships' chunks, then the key entities' units (where the ablations without the local level start); a
   document comes at its first chunk's place (`sources_in_order`). This is the context's own order, as HiRAG's code
   builds it. The ablation `hirag-simsources` instead ranks the chunks behind the context (the kept text units and
   the bridge relationships' chunks) by their similarity to the question first: it had been made the default on
   three of four sets (issue 11; 2wikimultihopqa preferred the context order), and a choice that does not hold on
   every set goes back to the paper's code (issue 26); it is measured beside it on every set (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Timer,
    by_similarity,
    fit_budget,
    register,
    sources_in_order,
)


def related_text_units(view, entities: list[str]) -> list[str]:
    """HiRAG's text units of the retrieved entities (its code's `_find_most_related_text_unit_from_entities`, from
    nano-graphrag): every chunk that mentions one of `entities`, ordered by the rank of the first entity it backs,
    then by how many of that entity's graph neighbours the chunk also mentions (most first), then by id."""
    order: dict[str, tuple[int, int]] = {}
    index = view.eg.index
    for rank, eid in enumerate(entities):
        ia = index.get(eid)
        shared: dict[str, int] = {}  # chunk -> neighbours of eid that mention it
        for nb in view.g.neighbors(ia) if ia is not None else ():
            for c in {c for c, _ in view.entity_chunks.get(view.eg.ids[nb], [])}:
                shared[c] = shared.get(c, 0) + 1
        for c, _ in view.entity_chunks.get(eid, []):
            if c not in order:
                order[c] = (rank, -shared.get(c, 0))
    return sorted(order, key=lambda c: (order[c], c))


def bridge_triples(view, on_path: set[str]) -> tuple[set[str], list[tuple[str, str, str]]]:
    """R̂ (Eq. 16): every triple of G_k whose head and tail both lie on a reasoning path, not only the paths' own
    hops: the extracted relationships (their ids) and the layer-to-layer `summarizes` relations (member, summary
    entity, description), in a stable order."""
    rels: set[str] = set()
    links: dict[tuple[str, str], str] = {}
    index = view.eg.index
    for a in sorted(on_path):
        ia = index.get(a)
        if ia is None:
            continue
        for nb in view.g.neighbors(ia):
            b = view.eg.ids[nb]
            if b in on_path and b > a:
                rels.update(view.relationships_between(a, b))
                for m, sid, desc in view.layer_links_between(a, b):
                    links[(m, sid)] = desc
    return rels, [(m, sid, d) for (m, sid), d in sorted(links.items())]


class HiRAGStrategy:
    name = "hirag"
    label = "HiRAG (local + bridge + global)"
    description = (
        "local: descriptions of the n entities nearest to the question, then their text units; bridge: "
        "relationships along the shortest paths linking the key entities of the retrieved communities; global: "
        "reports of the communities that hold the local entities."
    )
    use_local = True
    use_bridge = True
    use_global = True
    similarity_sources = False  # the ablation hirag-simsources: the chunks behind the context by similarity first

    def text_units(self, view, local_units: list[str], bridge: list[ContextItem], key_entities: list[str]) -> list[str]:
        """The chunks behind the retrieved context, in the order they back it: the local entities' text units
        (`related_text_units`), then the chunks the bridge relationships were extracted from (in the bridge
        section's order), then the key entities' text units (the overview's members)."""
        out = list(local_units)
        out += [c for it in bridge for c in view.rel_chunks.get(it.id, [])]
        out += related_text_units(view, key_entities) if self.use_global else []
        return list(dict.fromkeys(out))

    @staticmethod
    def unit_items(res: Resources, units: list[str], local: list[tuple[str, float]], budget: int) -> list[ContextItem]:
        """The leading text units that fit in `budget` tokens, as chunk items after the entities (HiRAG's context
        puts its Sources table after the entities); each scored with the similarity of the entity that brought it."""
        view = res.view
        brought: dict[str, float] = {}
        for eid, sc in local:
            for c, _ in view.entity_chunks.get(eid, []):
                brought.setdefault(c, sc)
        items: list[ContextItem] = []
        used = 0
        for start in range(0, len(units), 32):  # read the chunks a batch at a time until the budget is full
            batch = units[start : start + 32]
            nodes = res.store.nodes_by_id(res.ws_id, batch)
            more = [ContextItem(c, "chunk", nodes[c].title, nodes[c].text, round(brought.get(c, 0.0), 4), None,
                                view.documents_of([c])) for c in batch if c in nodes]
            kept, n = fit_budget(more, budget - used)
            items += kept
            used += n
            if len(kept) < len(more):
                break
        return items

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        view = res.view
        t.lap("load_graph")
        q = res.embed_query(question)
        t.lap("embed_query")
        hits = res.nearest("entity", q, cfg.top_n_entities)
        local = [(h.id, h.score) for h in hits if h.id in view.entities]
        t.lap("entity_search")

        # global: communities holding a retrieved entity (HiRAG's own `hirag` communities, every level: Eq. 13)
        hit_sim = dict(local)
        tally: dict[str, list[float]] = {}
        for eid, sc in local:
            for cid in view.member_of.get(eid, []):
                if view.communities.get(cid) is not None and view.communities[cid].method == "hirag":
                    tally.setdefault(cid, []).append(sc)
        ranked_comms = sorted(tally.items(), key=lambda kv: (-len(kv[1]), -max(kv[1]),
                                                             -view.communities[kv[0]].level, kv[0]))
        ranked_comms = ranked_comms[: cfg.max_communities] if cfg.max_communities is not None else ranked_comms
        comms = [cid for cid, _ in ranked_comms]
        t.lap("communities")

        # bridge: key entities per community, shortest paths between consecutive ones, triples on the paths
        key_entities: list[str] = []
        for cid in comms:
            sims = view.similarity(q, view.members.get(cid, []))
            top = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.top_m_key_entities]
            for eid, sc in top:
                if eid not in key_entities:
                    key_entities.append(eid)
                    hit_sim.setdefault(eid, sc)
        paths: list[list[str]] = []
        for a, b in zip(key_entities, key_entities[1:]) if self.use_bridge else ():
            if cfg.max_bridge_paths is not None and len(paths) >= cfg.max_bridge_paths:
                break
            p = view.shortest_path(a, b)
            if len(p) >= 2:
                paths.append(p)
        on_path = {e for p in paths for e in p}
        t.lap("bridge_paths")
        bridge_rels, layer_links = bridge_triples(view, on_path)
        t.lap("bridge_triples")

        local_units = related_text_units(view, [e for e, _ in local]) if self.use_local else []
        unit_items: list[ContextItem] = []
        if self.use_local:
            for eid, sc in local:
                n = view.entities[eid]
                docs = view.documents_of([c for c, _ in view.entity_chunks.get(eid, [])])
                r.sections["local"].append(ContextItem(eid, "entity", n.title, n.text, round(sc, 4), n.layer, docs))
            unit_items = self.unit_items(res, local_units, local, cfg.text_unit_tokens)
            r.sections["local"] += unit_items
        if self.use_bridge:
            items = []
            for rid in bridge_rels:
                rel = view.relationships[rid]
                ends = rel.data.get("source"), rel.data.get("target")
                sc = sum(hit_sim.get(e, 0.0) for e in ends if e) / 2
                items.append(ContextItem(rid, "relationship", rel.title, rel.text, round(sc, 4), None,
                                         view.documents_of(view.rel_chunks.get(rid, []))))
            for m, sid, desc in layer_links:
                mn, sn = view.entities[m], view.entities[sid]
                text = desc or f"{mn.title} is summarized by {sn.title}."
                sc = (hit_sim.get(m, 0.0) + hit_sim.get(sid, 0.0)) / 2
                items.append(ContextItem(sid, "summarizes", f"{mn.title} → {sn.title}", text, round(sc, 4),
                                         sn.layer))
            items.sort(key=lambda i: (-i.score, i.kind, i.id, i.title))
            r.sections["bridge"] = items
        if self.use_global:
            for cid, comm_sims in ranked_comms:
                comm = view.communities[cid]
                r.sections["global"].append(ContextItem(cid, "community", comm.title or cid, comm.summary,
                                                        round(max(comm_sims), 4), comm.level))
        units = self.text_units(view, local_units, r.sections["bridge"], key_entities)
        if self.similarity_sources:  # the chunks behind the context: kept text units, bridge chunks
            backing = [it.id for it in unit_items]
            backing += [c for it in r.sections["bridge"] for c in view.rel_chunks.get(it.id, [])]
            units = by_similarity(res, q, backing) + units
        r.sources = sources_in_order(view, units, cfg.max_sources)
        t.lap("rank_sources")

        # path: entry entities, their communities, key entities and the bridge paths
        for eid, _ in local:
            r.path_nodes.append(PathStep(eid, "entity", "entry", view.entities[eid].title))
        for cid in comms:
            r.path_nodes.append(PathStep(cid, "community", "community", view.communities[cid].title))
            for eid, _ in local:
                if cid in view.member_of.get(eid, []):
                    r.path_edges.append(PathEdge(eid, cid, "in_community", "membership"))
        entry = {e for e, _ in local}
        for eid in key_entities:
            if eid not in entry:
                r.path_nodes.append(PathStep(eid, "entity", "key", view.entities[eid].title))
        seen = entry | set(key_entities)
        for p in paths:
            for e in p:
                if e not in seen:
                    seen.add(e)
                    r.path_nodes.append(PathStep(e, "entity", "bridge", view.entities[e].title))
            for a, b in zip(p, p[1:]):
                hop = "summarizes" if view.layer_links_between(a, b) and not view.relationships_between(a, b) \
                    else "relationship"
                r.path_edges.append(PathEdge(a, b, hop, "bridge"))
        r.trace["counts"] = {
            "local_entities": len(local), "text_units": len(unit_items), "communities": len(comms),
            "key_entities": len(key_entities), "bridge_paths": len(paths), "bridge_relationships": len(bridge_rels),
            "bridge_layer_links": len(layer_links), "sources": len(r.sources),
        }
        return r


class HiRAGLocal(HiRAGStrategy):
    name = "hirag-local"
    label = "HiRAG-local (ablation: local only)"
    description = ("local: descriptions of the n entities nearest to the question, then their text units; bridge "
                   "and global: left out.")
    use_bridge = False
    use_global = False


class HiRAGGlobal(HiRAGStrategy):
    name = "hirag-global"
    label = "HiRAG-global (ablation: global only)"
    description = ("global: reports of the communities that hold the n entities nearest to the question; local and "
                   "bridge: left out (the entities only choose the communities).")
    use_local = False
    use_bridge = False


class HiRAGBridge(HiRAGStrategy):
    name = "hirag-bridge"
    label = "HiRAG-bridge (ablation: bridge only)"
    description = ("bridge: relationships along the shortest paths linking the key entities of the retrieved "
                   "communities; local and global: left out.")
    use_local = False
    use_global = False


class HiRAGNoBridge(HiRAGStrategy):
    name = "hirag-nobridge"
    label = "HiRAG w/o bridge (ablation: local + global)"
    description = ("local: descriptions of the n entities nearest to the question, then their text units; global: "
                   "reports of the communities that hold them; bridge: left out.")
    use_bridge = False


class HiRAGSimSources(HiRAGStrategy):
    name = "hirag-simsources"
    label = "HiRAG (ablation: sources by similarity)"
    description = HiRAGStrategy.description + (" Ablation, not the paper's code: the chunks behind the context are "
                                               "ranked by similarity to the question before HiRAG's own order.")
    similarity_sources = True


for _cls in (HiRAGStrategy, HiRAGLocal, HiRAGGlobal, HiRAGBridge, HiRAGNoBridge, HiRAGSimSources):
    register(_cls)
