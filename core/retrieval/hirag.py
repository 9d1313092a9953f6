"""HiRAG's HiRetrieval (hirag.txt §4.2, Algorithm 2).

1. Local: V̂ = the top-n entities by similarity to the question (Eq. 12), with their descriptions.
2. Global: P̂ = the communities that contain an entity of V̂ (Eq. 13), with their reports; ranked by how many of
   V̂ they hold, then by the best similarity inside them, and capped at `max_communities`.
3. Bridge: from each community of P̂, its top-m members by similarity (Eq. 14), kept in that order; the
   shortest path in the entity graph between each consecutive pair (Eq. 15); every relationship whose two ends
   lie on those paths (Eq. 16), with its description.
4. Sources: the chunks that mention the local entities or gave the bridge relationships, scored by the
   similarity of what they back, summed per document.
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
    register,
    sources_from_chunks,
)


class HiRAGStrategy:
    name = "hirag"
    label = "HiRAG (local + bridge + global)"
    description = (
        "local: descriptions of the n entities nearest to the question; bridge: relationships along the shortest "
        "paths linking the key entities of the retrieved communities; global: reports of the communities that "
        "hold the local entities."
    )
    use_local = True
    use_bridge = True
    use_global = True

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        cfg = res.settings.retrieval
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        view = res.view
        t.lap("load_graph")
        q = res.embed_query(question)
        t.lap("embed_query")
        hits = res.index.query("entity", q, cfg.top_n_entities)
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
        comms = [cid for cid, _ in ranked_comms[: cfg.max_communities]]
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
            if len(paths) >= cfg.max_bridge_paths:
                break
            p = view.shortest_path(a, b)
            if len(p) >= 2:
                paths.append(p)
        on_path = {e for p in paths for e in p}
        bridge_rels: set[str] = set()
        for p in paths:
            for a, b in zip(p, p[1:]):
                bridge_rels.update(view.relationships_between(a, b))
        t.lap("bridge_paths")

        # R̂: all triples whose head and tail are on a path (Eq. 16), not only the path's own hops
        on_path_list = sorted(on_path)
        index = view.eg.index
        for a in on_path_list:
            ia = index.get(a)
            if ia is None:
                continue
            for nb in view.g.neighbors(ia):
                b = view.eg.ids[nb]
                if b in on_path and b > a:
                    bridge_rels.update(view.relationships_between(a, b))
        t.lap("bridge_triples")

        chunk_scores: dict[str, float] = {}
        if self.use_local:
            for eid, sc in local:
                n = view.entities[eid]
                docs = view.documents_of([c for c, _ in view.entity_chunks.get(eid, [])])
                r.sections["local"].append(ContextItem(eid, "entity", n.title, n.text, round(sc, 4), n.layer, docs))
                for c, _ in view.entity_chunks.get(eid, []):
                    chunk_scores[c] = chunk_scores.get(c, 0.0) + max(sc, 0.0)
        if self.use_bridge:
            items = []
            for rid in bridge_rels:
                rel = view.relationships[rid]
                ends = rel.data.get("source"), rel.data.get("target")
                sc = sum(hit_sim.get(e, 0.0) for e in ends if e) / 2
                items.append(ContextItem(rid, "relationship", rel.title, rel.text, round(sc, 4), None,
                                         view.documents_of(view.rel_chunks.get(rid, []))))
            items.sort(key=lambda i: (-i.score, i.id))
            r.sections["bridge"] = items
            for it in items:
                for c in view.rel_chunks.get(it.id, []):
                    chunk_scores[c] = chunk_scores.get(c, 0.0) + 0.5 * max(it.score, 0.0)
        if self.use_global:
            # the documents behind an overview: the chunks of each retrieved community's key entities
            for eid in key_entities:
                for c, _ in view.entity_chunks.get(eid, []):
                    chunk_scores[c] = chunk_scores.get(c, 0.0) + 0.25 * max(hit_sim.get(eid, 0.0), 0.0)
            for cid, comm_sims in ranked_comms[: cfg.max_communities]:
                comm = view.communities[cid]
                r.sections["global"].append(ContextItem(cid, "community", comm.title or cid, comm.summary,
                                                        round(max(comm_sims), 4), comm.level))
        r.sources = sources_from_chunks(view, chunk_scores, cfg.max_sources)
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
                r.path_edges.append(PathEdge(a, b, "relationship", "bridge"))
        r.trace["counts"] = {
            "local_entities": len(local), "communities": len(comms), "key_entities": len(key_entities),
            "bridge_paths": len(paths), "bridge_relationships": len(bridge_rels), "sources": len(r.sources),
        }
        return r


class HiRAGLocal(HiRAGStrategy):
    name = "hirag-local"
    label = "HiRAG-local (ablation: local only)"
    description = "local: descriptions of the n entities nearest to the question; bridge and global: left out."
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
    description = ("local: descriptions of the n entities nearest to the question; global: reports of the "
                   "communities that hold them; bridge: left out.")
    use_bridge = False


for _cls in (HiRAGStrategy, HiRAGLocal, HiRAGGlobal, HiRAGBridge, HiRAGNoBridge):
    register(_cls)
