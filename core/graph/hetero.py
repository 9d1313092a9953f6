"""The whole heterograph as one sparse matrix, for retrieval walks (NodeRAG's personalized PageRank, HLG's beam
search): every stored node of every kind is a vertex, every stored edge between two nodes an undirected link.

Pairs linked by several edges keep one link whose weight is the sum and whose kind is the first edge's (edge rows
in id order), so `kind_of(a, b)` names a real stored edge between a and b. Edges to communities or documents
(`in_community`, chunk/topic `derived_from`) are not links here: communities and documents are not nodes.

It is read-only and loaded once per build version (cached by `GraphView.hetero`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sqlmodel import col, select

from core.models import Edge, Node


@dataclass
class HeteroGraph:
    ids: list[str]  # vertex -> node id
    index: dict[str, int]  # node id -> vertex
    kinds: np.ndarray  # vertex -> kind code (index into kind_names)
    kind_names: list[str]
    adj: sp.csr_matrix  # symmetric weighted adjacency (float64)
    link_kind: np.ndarray  # aligned with adj.data: edge kind code (index into edge_kind_names)
    edge_kind_names: list[str]

    @classmethod
    def load(cls, store, ws_id: int) -> "HeteroGraph":
        with store.session() as s:
            rows = s.exec(select(Node.id, Node.kind).where(Node.workspace_id == ws_id).order_by(Node.id)).all()
            edges = s.exec(select(Edge.src, Edge.dst, Edge.kind, Edge.weight).where(Edge.workspace_id == ws_id)
                           .order_by(col(Edge.id))).all()
        ids = [r[0] for r in rows]
        index = {n: i for i, n in enumerate(ids)}
        kind_names = sorted({k for _, k in rows})
        kcode = {k: i for i, k in enumerate(kind_names)}
        kinds = np.array([kcode[k] for _, k in rows], dtype=np.int16)
        edge_kind_names = sorted({e[2] for e in edges})
        ecode = {k: i for i, k in enumerate(edge_kind_names)}
        src, dst, ek, w = [], [], [], []
        for a, b, k, wt in edges:
            ia, ib = index.get(a), index.get(b)
            if ia is None or ib is None or ia == ib:
                continue
            src.append(ia)
            dst.append(ib)
            ek.append(ecode[k])
            w.append(max(float(wt or 0.0), 1e-6))
        n = len(ids)
        src_a, dst_a = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        r = np.concatenate([src_a, dst_a])
        c = np.concatenate([dst_a, src_a])
        wa = np.concatenate([w, w]).astype(np.float64)
        ka = np.concatenate([ek, ek]).astype(np.int16)
        key = r * max(n, 1) + c
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        weights = np.bincount(inverse, weights=wa, minlength=len(uniq)) if len(uniq) else np.zeros(0)
        # np.unique sorts keys row-major, which is CSR order: data and kinds line up with indices
        rr, cc = uniq // max(n, 1), uniq % max(n, 1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, rr + 1, 1)
        indptr = np.cumsum(indptr)
        adj = sp.csr_matrix((weights, cc.astype(np.int64), indptr), shape=(n, n))
        return cls(ids=ids, index=index, kinds=kinds, kind_names=kind_names, adj=adj,
                   link_kind=ka[first], edge_kind_names=edge_kind_names)

    def kind(self, node_id: str) -> str | None:
        i = self.index.get(node_id)
        return None if i is None else self.kind_names[self.kinds[i]]

    def kind_mask(self, kinds) -> np.ndarray:
        """Boolean vertex mask of the given node kinds."""
        codes = [self.kind_names.index(k) for k in kinds if k in self.kind_names]
        return np.isin(self.kinds, codes)

    def neighbors(self, node_id: str) -> list[tuple[str, str, float]]:
        """(neighbour id, edge kind, weight) of every link of a node."""
        i = self.index.get(node_id)
        if i is None:
            return []
        lo, hi = self.adj.indptr[i], self.adj.indptr[i + 1]
        return [(self.ids[j], self.edge_kind_names[k], float(w)) for j, k, w in
                zip(self.adj.indices[lo:hi], self.link_kind[lo:hi], self.adj.data[lo:hi])]

    def kind_of(self, a: str, b: str) -> str | None:
        """The kind of the stored edge linking a and b (either direction), or None when they are not linked."""
        ia, ib = self.index.get(a), self.index.get(b)
        if ia is None or ib is None:
            return None
        lo, hi = self.adj.indptr[ia], self.adj.indptr[ia + 1]
        pos = np.searchsorted(self.adj.indices[lo:hi], ib)
        if pos < hi - lo and self.adj.indices[lo + pos] == ib:
            return self.edge_kind_names[self.link_kind[lo + pos]]
        return None


@dataclass
class EdgeList:
    """Every stored edge between two vertices of a HeteroGraph, one row per edge (not merged per pair): its
    vertices, its kind (index into the graph's `edge_kind_names`, -1 for a kind the graph does not know) and the HNSW
    boost it carries (`data.hnsw`, 0 when none; core/pipeline/noderag_edges.py). For a walk over
    a chosen subset of the edges (NodeRAG's heterograph edges, core/retrieval/noderag.py)."""

    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray
    hnsw: np.ndarray

    @classmethod
    def load(cls, store, ws_id: int, graph: HeteroGraph) -> "EdgeList":
        from core.store import json_field

        with store.session() as s:
            edges = s.exec(select(Edge.src, Edge.dst, Edge.kind)
                           .add_columns(json_field(s, Edge.data, "hnsw")).where(col(Edge.workspace_id) == ws_id)
                           .order_by(col(Edge.id))).all()
        ecode = {k: i for i, k in enumerate(graph.edge_kind_names)}
        rows = [(graph.index[a], graph.index[b], ecode.get(k, -1), float(hb or 0.0))
                for a, b, k, hb in edges if a in graph.index and b in graph.index and a != b]
        arr = np.array(rows, dtype=np.float64).reshape(-1, 4)
        return cls(src=arr[:, 0].astype(np.int64), dst=arr[:, 1].astype(np.int64), kind=arr[:, 2].astype(np.int16),
                   hnsw=arr[:, 3])

