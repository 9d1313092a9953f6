"""The entity graph: entities as vertices, relationship nodes collapsed into weighted undirected links.

Two views, each the graph one reference design clusters:
* layered (HiRAG's hierarchical KG G_k, hirag.txt §4.1 Eq. 9-11, Algorithm 1 line 23): the entities of every layer
  plus HiRAG's `summarizes` links between an entity and its summary entity one layer up;
* extracted (`EntityGraph.extracted()`, GraphRAG's graph, hierarchical-graph-rag.md): the layer-0 entities and
  the links of the relationships between them only, as extraction produced them.

It is a view of the stored graph (relationship nodes with `subject` / `object` edges), built in memory for
community detection and for the shortest paths of retrieval; nothing of it is stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import igraph as ig
from sqlmodel import col, select

from core.models import Edge, Node


@dataclass
class EntityGraph:
    ids: list[str]  # vertex index -> entity id (sorted by id)
    index: dict[str, int]  # entity id -> vertex index
    links: dict[tuple[int, int], float] = field(default_factory=dict)  # (a<b) -> summed weight
    link_rels: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # (a<b) -> relationship ids
    layer: list[int] = field(default_factory=list)  # vertex index -> HiRAG layer (0 = extracted)
    rel_links: dict[tuple[int, int], float] = field(default_factory=dict)  # links' relationship weight only

    def to_igraph(self) -> ig.Graph:
        g = ig.Graph(n=len(self.ids), edges=list(self.links), directed=False)
        g.vs["name"] = self.ids
        g.es["weight"] = [max(1e-6, w) for w in self.links.values()]
        return g

    def extracted(self) -> "EntityGraph":
        """The layer-0 entities (in id order) and the relationship links between them (in this graph's link order,
        relationship weights only): no summary entity, no `summarizes` link."""
        layer = self.layer or [0] * len(self.ids)
        keep = [v for v in range(len(self.ids)) if layer[v] == 0]
        pos = {v: i for i, v in enumerate(keep)}
        out = EntityGraph(ids=[self.ids[v] for v in keep], index={}, layer=[0] * len(keep))
        out.index = {e: i for i, e in enumerate(out.ids)}
        rel = self.rel_links or {k: self.links[k] for k in self.link_rels}
        for (a, b), w in rel.items():
            if a in pos and b in pos:
                key = (pos[a], pos[b])  # keep order preserves a < b
                out.links[key] = out.rel_links[key] = w
                out.link_rels[key] = list(self.link_rels.get((a, b), []))
        return out


def load_entity_graph(store, ws_id: int) -> EntityGraph:
    """The layered entity graph (module doc); `.extracted()` gives the layer-0 relationship graph."""
    with store.session() as s:
        ents = s.exec(select(Node.id, Node.layer).where(Node.workspace_id == ws_id, Node.kind == "entity")
                      .order_by(Node.id)).all()
        # in id order, so the links (and the clustering over them) depend on the graph, not on insertion order
        rels = s.exec(select(Node.id, Node.weight).where(Node.workspace_id == ws_id, Node.kind == "relationship")
                      .order_by(Node.id)).all()
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
            Edge.workspace_id == ws_id, col(Edge.kind).in_(("subject", "object")))).all()
        ups = s.exec(select(Edge.src, Edge.dst, Edge.weight).where(Edge.workspace_id == ws_id,
                                                                   Edge.kind == "summarizes")
                     .order_by(Edge.src, Edge.dst)).all()
    ent_ids = [e for e, _ in ents]
    index = {e: i for i, e in enumerate(ent_ids)}
    eg = EntityGraph(ids=ent_ids, index=index, layer=[int(lv or 0) for _, lv in ents])
    sub: dict[str, str] = {}
    obj: dict[str, str] = {}
    for src, dst, kind in ends:
        (sub if kind == "subject" else obj)[src] = dst
    for rid, w in rels:
        a, b = sub.get(rid), obj.get(rid)
        if a is None or b is None or a not in index or b not in index or a == b:
            continue
        key = (min(index[a], index[b]), max(index[a], index[b]))
        eg.links[key] = eg.links.get(key, 0.0) + float(w or 1.0)
        eg.rel_links[key] = eg.links[key]
        eg.link_rels.setdefault(key, []).append(rid)
    for a, b, w in ups:
        if a in index and b in index and a != b:
            key = (min(index[a], index[b]), max(index[a], index[b]))
            eg.links[key] = eg.links.get(key, 0.0) + float(w or 1.0)
    return eg
