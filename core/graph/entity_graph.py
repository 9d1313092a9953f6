"""The entity graph: entities of every layer as vertices, relationship nodes collapsed into weighted undirected
links, plus HiRAG's `summarizes` links between an entity and its summary entity one layer up (Algorithm 1,
line 23: the graph of layer i holds the edges between layers i-1 and i).

It is a view of the stored graph (relationship nodes with `subject` / `object` edges), built in memory for
community detection and for the shortest paths of retrieval; nothing of it is stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import igraph as ig
from sqlmodel import select

from core.models import Edge, Node


@dataclass
class EntityGraph:
    ids: list[str]  # vertex index -> entity id
    index: dict[str, int]  # entity id -> vertex index
    links: dict[tuple[int, int], float] = field(default_factory=dict)  # (a<b) -> summed weight
    link_rels: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # (a<b) -> relationship ids

    def to_igraph(self) -> ig.Graph:
        g = ig.Graph(n=len(self.ids), edges=list(self.links), directed=False)
        g.vs["name"] = self.ids
        g.es["weight"] = [max(1e-6, w) for w in self.links.values()]
        return g


def load_entity_graph(store, ws_id: int) -> EntityGraph:
    with store.session() as s:
        ent_ids = list(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "entity")
                              .order_by(Node.id)))
        rels = s.exec(select(Node.id, Node.weight).where(Node.workspace_id == ws_id, Node.kind == "relationship")).all()
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
            Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")))).all()  # type: ignore[attr-defined]
        ups = s.exec(select(Edge.src, Edge.dst, Edge.weight).where(Edge.workspace_id == ws_id,
                                                                   Edge.kind == "summarizes")).all()
    index = {e: i for i, e in enumerate(ent_ids)}
    eg = EntityGraph(ids=ent_ids, index=index)
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
        eg.link_rels.setdefault(key, []).append(rid)
    for a, b, w in ups:
        if a in index and b in index and a != b:
            key = (min(index[a], index[b]), max(index[a], index[b]))
            eg.links[key] = eg.links.get(key, 0.0) + float(w or 1.0)
    return eg
