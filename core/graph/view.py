"""An in-memory, read-only view of one workspace's graph for retrieval: loaded once per build version.

It holds what queries need fast: the entity graph (igraph, for shortest paths), entity vectors (for similarity
inside a community), community membership, and which chunks and documents back each entity and relationship.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import igraph as ig
import numpy as np
from sqlmodel import select

from core.algorithms.similarity import dots
from core.graph.entity_graph import EntityGraph, load_entity_graph
from core.models import Community, Document, Edge, Node


@dataclass
class GraphView:
    eg: EntityGraph
    g: ig.Graph
    entities: dict[str, Node]
    relationships: dict[str, Node]
    communities: dict[str, Community]
    members: dict[str, list[str]]  # community -> entity ids
    member_of: dict[str, list[str]]  # entity -> community ids (every method and level)
    entity_chunks: dict[str, list[tuple[str, float]]]  # entity -> (chunk id, weight)
    rel_chunks: dict[str, list[str]]  # relationship -> chunk ids
    chunk_doc: dict[str, str]  # chunk -> document
    documents: dict[str, tuple[str | None, str]]  # document -> (external id, title)
    entity_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    entity_vec_row: dict[str, int] = field(default_factory=dict)
    # HiRAG's layer-to-layer relations E_{i-1,i} (hirag.txt §4.1): (member, summary entity) -> stored description
    summarizes: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def load(cls, store, ws_id: int, index=None) -> "GraphView":
        eg = load_entity_graph(store, ws_id)
        with store.session() as s:
            ents = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws_id, Node.kind == "entity"))}
            rels = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws_id,
                                                               Node.kind == "relationship"))}
            comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws_id))}
            members: dict[str, list[str]] = defaultdict(list)
            member_of: dict[str, list[str]] = defaultdict(list)
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id,
                                                                    Edge.kind == "in_community")):
                members[dst].append(src)
                member_of[src].append(dst)
            entity_chunks: dict[str, list[tuple[str, float]]] = defaultdict(list)
            for src, dst, w in s.exec(select(Edge.src, Edge.dst, Edge.weight).where(
                    Edge.workspace_id == ws_id, Edge.kind == "mentions")):
                if dst in ents and src not in ents:
                    entity_chunks[dst].append((src, w))
            chunk_doc = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws_id,
                                                                            Node.kind == "chunk")).all())
            entity_chunks = {e: [(c, w) for c, w in lst if c in chunk_doc] for e, lst in entity_chunks.items()}
            rel_chunks: dict[str, list[str]] = defaultdict(list)
            for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id,
                                                                    Edge.kind == "derived_from")):
                if src in rels:
                    rel_chunks[src].append(dst)
            ups = {(src, dst): str((data or {}).get("description") or "")
                   for src, dst, data in s.exec(select(Edge.src, Edge.dst, Edge.data).where(
                       Edge.workspace_id == ws_id, Edge.kind == "summarizes"))}
            docs = {d: (x, t) for d, x, t in s.exec(select(Document.id, Document.external_id, Document.title)
                                                     .where(Document.workspace_id == ws_id)).all()}
        view = cls(eg=eg, g=eg.to_igraph(), entities=ents, relationships=rels, communities=comms,
                   members=dict(members), member_of=dict(member_of), entity_chunks=entity_chunks,
                   rel_chunks=dict(rel_chunks), chunk_doc=chunk_doc, documents=docs, summarizes=ups)
        if index is not None:
            ids, vecs = index.all_vectors("entity")
            view.entity_vecs = vecs
            view.entity_vec_row = {i: r for r, i in enumerate(ids)}
        return view

    def similarity(self, q: np.ndarray, entity_ids: list[str]) -> dict[str, float]:
        """Cosine similarity of the query vector to each entity that has a vector."""
        rows = [(e, self.entity_vec_row[e]) for e in entity_ids if e in self.entity_vec_row]
        if not rows:
            return {}
        sims = dots(self.entity_vecs[[r for _, r in rows]], q.astype(np.float32))
        return {e: float(v) for (e, _), v in zip(rows, sims)}

    def documents_of(self, chunk_ids) -> list[str]:
        """The documents behind some chunks, in the chunks' order, each once."""
        return list(dict.fromkeys(self.chunk_doc[c] for c in chunk_ids if c in self.chunk_doc))

    def shortest_path(self, a: str, b: str) -> list[str]:
        """Entity ids along one shortest (fewest hops) path from a to b in the entity graph, or [] if none."""
        ia, ib = self.eg.index.get(a), self.eg.index.get(b)
        if ia is None or ib is None:
            return []
        if ia == ib:
            return [a]
        if self._component[ia] != self._component[ib]:
            return []  # unreachable (asking igraph would print a RuntimeWarning for every such pair)
        path = self.g.get_shortest_path(ia, ib, mode="all", output="vpath")
        return [self.eg.ids[v] for v in path]

    @cached_property
    def _component(self) -> list[int]:
        return self.g.connected_components(mode="weak").membership

    def relationships_between(self, a: str, b: str) -> list[str]:
        ia, ib = self.eg.index.get(a), self.eg.index.get(b)
        if ia is None or ib is None:
            return []
        return self.eg.link_rels.get((min(ia, ib), max(ia, ib)), [])

    def layer_links_between(self, a: str, b: str) -> list[tuple[str, str, str]]:
        """HiRAG's layer-to-layer relations between a and b, as (member, summary entity, description): the
        `summarizes` links of either direction (hirag.txt §4.1, "we create the relations between entities in
        L_{i-1} and entities in L_i")."""
        return [(m, s, self.summarizes[(m, s)]) for m, s in ((a, b), (b, a)) if (m, s) in self.summarizes]
