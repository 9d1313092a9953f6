"""How are two entities connected? The Graph page's question, and the documents behind the communities.

`EntityDocs` (one per build, as the app caches the `ExploreIndex`): which documents' passages mention each entity,
an entity × document matrix counting the passages (chunks), read once from the `mentions` edges of the workspace's
chunks. From it:

* `community_documents`: how many distinct documents the members of each community appear in (what the
  communities overview sizes its super-nodes by);
* `connect`: the shortest paths between two entities on the entity graph, where two extracted entities are one
  step apart when a relationship joins them, and an entity and a document one step apart when a passage of the
  document mentions the entity (so two entities mentioned by one document are two steps apart, through it); a few
  shortest simple paths (Yen's algorithm, igraph), shortest first; and the documents that mention both.

HiRAG's summary entities (layer >= 1) and their `summarizes` links are left out: a path goes through what the
documents say. Every read names the workspace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy import sparse
from sqlalchemy import bindparam, text

from core.explore.display import DisplayEdge, DisplayGraph, materialize
from core.explore.explore_index import ExploreIndex
from core.store import index_hint


@dataclass
class EntityDocs:
    ix: ExploreIndex
    doc_ids: list[str]
    passages: sparse.csr_matrix  # entity index × document index: passages of the document mentioning the entity

    @cached_property
    def doc_index(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.doc_ids)}

    @cached_property
    def real(self) -> np.ndarray:
        """Entity indices of the extracted entities (HiRAG layer 0)."""
        return np.flatnonzero(self.ix.ent_layer == 0)

    @cached_property
    def graph(self):
        """igraph of entities (vertex e) and documents (vertex n_entities + d): relationships between extracted
        entities, and mentions of an extracted entity by a document's passages."""
        import igraph as ig

        ix, n_e = self.ix, len(self.ix.ent_ids)
        real = ix.ent_layer == 0
        keep = real[ix.link_a] & real[ix.link_b]
        rel = np.column_stack([ix.link_a[keep], ix.link_b[keep]])
        m = self.passages[self.real].tocoo()
        ment = np.column_stack([self.real[m.row], n_e + m.col])
        edges = np.concatenate([rel, ment]).astype(np.int64)
        return ig.Graph(n=n_e + len(self.doc_ids), edges=edges.tolist(), directed=False)


def entity_documents(store, ws_id: int, ix: ExploreIndex) -> EntityDocs:
    """Read the workspace's chunk → entity `mentions` once, as an entity × document passage count (two indexed
    reads, the chunks' documents and the mentions edges, joined here rather than row by row in SQL)."""
    with store.session() as s:
        conn = s.connection()
        chunks = dict(conn.execute(text("SELECT id, document_id FROM node WHERE workspace_id=:ws AND kind='chunk' "
                                        "AND document_id IS NOT NULL"), {"ws": ws_id}).fetchall())
        rows = conn.execute(text("SELECT src, dst FROM edge" + index_hint(conn, "ix_edge_ws_kind")
                                 + " WHERE workspace_id=:ws AND kind='mentions'"), {"ws": ws_id}).fetchall()
    docs = sorted(set(chunks.values()))
    di = {d: i for i, d in enumerate(docs)}
    ei = ix.ent_index
    pairs = [(ei[e], di[chunks[c]]) for c, e in rows if c in chunks and e in ei]
    arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    m = sparse.coo_matrix((np.ones(len(arr), dtype=np.int32), (arr[:, 0], arr[:, 1])),
                          shape=(len(ix.ent_ids), len(docs))).tocsr()
    m.sum_duplicates()
    return EntityDocs(ix, docs, m)


def community_documents(ed: EntityDocs) -> np.ndarray:
    """Distinct documents mentioning any member, per community of the index."""
    ix = ed.ix
    comm = np.repeat(np.arange(len(ix.comm_ids), dtype=np.int64), np.diff(ix.mem_start))
    members = sparse.csr_matrix((np.ones(len(comm), dtype=np.int32), (comm, ix.mem_ent)),
                                shape=(len(ix.comm_ids), len(ix.ent_ids)))
    has = ed.passages.copy()
    has.data[:] = 1
    return np.diff((members @ has).tocsr().indptr).astype(np.int32)


# -- paths --------------------------------------------------------------------------------------------------------
@dataclass
class Step:
    src: str
    dst: str
    kind: str  # "relationship" (entity—entity) or "mentions" (entity—document)
    label: str = ""  # the relationships' predicates, or how many passages mention the entity


@dataclass
class Path:
    ids: list[str]  # entity and document ids, from the first entity to the second
    titles: list[str]
    kinds: list[str]  # "entity" or "document", per id
    steps: list[Step]

    @property
    def hops(self) -> int:
        return len(self.steps)


@dataclass
class Connection:
    a: str
    b: str
    a_title: str
    b_title: str
    paths: list[Path] = field(default_factory=list)
    shared: list[tuple[str, str, int, int]] = field(default_factory=list)  # (doc id, title, passages of a, of b)

    @property
    def hops(self) -> int | None:
        return self.paths[0].hops if self.paths else None


def _rows(store, sql: str, **params) -> list:
    stmt = text(sql).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
                                  if isinstance(v, (list, tuple))))
    with store.session() as s:
        return list(s.connection().execute(stmt, params))


def _predicates(store, ws_id: int, pairs: list[tuple[str, str]]) -> dict[frozenset, list[str]]:
    """The types (predicates) of the relationships joining each pair of entities, most frequent first."""
    ents = sorted({e for p in pairs for e in p})
    if not ents:
        return {}
    rows = _rows(store, "SELECT s.dst, o.dst, r.type FROM edge s JOIN edge o ON o.workspace_id = s.workspace_id AND "
                        "o.src = s.src AND o.kind = 'object' JOIN node r ON r.id = s.src AND r.workspace_id = "
                        "s.workspace_id WHERE s.workspace_id=:ws AND s.kind = 'subject' AND s.dst IN :ents AND "
                        "o.dst IN :ents", ws=ws_id, ents=ents)
    want = {frozenset(p) for p in pairs}
    out: dict[frozenset, dict[str, int]] = {}
    for a, b, t in rows:
        key = frozenset((a, b))
        if key in want:
            out.setdefault(key, {})[t or "related to"] = out.get(key, {}).get(t or "related to", 0) + 1
    return {k: sorted(v, key=lambda t: (-v[t], t)) for k, v in out.items()}


def _titles(store, ws_id: int, docs: list[str]) -> dict[str, str]:
    if not docs:
        return {}
    return dict(_rows(store, "SELECT id, title FROM document WHERE workspace_id=:ws AND id IN :ids", ws=ws_id,
                      ids=docs))


def connect(store, ws_id: int, ed: EntityDocs, a: str, b: str, k: int = 4, slack: int = 1) -> Connection | None:
    """The shortest paths between entities `a` and `b` (ids of this workspace's entities; None when either is
    not one): at most `k`, no longer than the shortest plus `slack` steps, shortest first; and the documents
    mentioning both, the most passages first."""
    ix = ed.ix
    ia, ib = ix.ent_index.get(a), ix.ent_index.get(b)
    if ia is None or ib is None:
        return None
    con = Connection(a, b, ix.ent_title[ia], ix.ent_title[ib])
    row_a, row_b = ed.passages.getrow(ia), ed.passages.getrow(ib)
    both = np.intersect1d(row_a.indices, row_b.indices)
    if len(both):
        pa = dict(zip(row_a.indices.tolist(), row_a.data.tolist()))
        pb = dict(zip(row_b.indices.tolist(), row_b.data.tolist()))
        titles = _titles(store, ws_id, [ed.doc_ids[d] for d in both.tolist()])
        shared = [(ed.doc_ids[d], titles.get(ed.doc_ids[d], ed.doc_ids[d]), int(pa[d]), int(pb[d]))
                  for d in both.tolist()]
        con.shared = sorted(shared, key=lambda r: (-min(r[2], r[3]), -(r[2] + r[3]), r[1], r[0]))
    if ia == ib or ix.ent_layer[ia] != 0 or ix.ent_layer[ib] != 0:
        return con
    n_e = len(ix.ent_ids)
    raw = [p for p in ed.graph.get_k_shortest_paths(ia, to=ib, k=k, mode="all") if len(p) > 1]
    if not raw:
        return con
    shortest = len(raw[0])
    raw = [p for p in raw if len(p) <= shortest + slack]
    docs = sorted({ed.doc_ids[v - n_e] for p in raw for v in p if v >= n_e})
    titles = _titles(store, ws_id, docs)
    pairs = [(ix.ent_ids[x], ix.ent_ids[y]) for p in raw for x, y in zip(p, p[1:]) if x < n_e and y < n_e]
    preds = _predicates(store, ws_id, pairs)
    for p in raw:
        ids = [ix.ent_ids[v] if v < n_e else ed.doc_ids[v - n_e] for v in p]
        steps = []
        for (x, y), (u, v) in zip(zip(p, p[1:]), zip(ids, ids[1:])):
            if x < n_e and y < n_e:
                names = preds.get(frozenset((u, v)), [])
                label = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
                steps.append(Step(u, v, "relationship", label or "related to"))
            else:
                e, d = (x, y - n_e) if x < n_e else (y, x - n_e)
                n = int(ed.passages[e, d])
                steps.append(Step(u, v, "mentions", f"{n} passage{'s' if n != 1 else ''}"))
        con.paths.append(Path(ids, [ix.ent_title[v] if v < n_e else titles.get(i, i) for v, i in zip(p, ids)],
                              ["entity" if v < n_e else "document" for v in p], steps))
    return con


def path_graph(store, ws_id: int, path: Path, spacing: float = 190.0) -> DisplayGraph:
    """One path as a small drawing: its nodes on a line, from the first entity to the second, each step labelled."""
    nodes = {n.id: n for n in materialize(store, ws_id, path.ids)}
    dg = DisplayGraph()
    for i, nid in enumerate(path.ids):
        n = nodes.get(nid)
        if n is None:
            continue
        n.x, n.y = i * spacing, 0.0
        if i in (0, len(path.ids) - 1):
            n.size, n.group = 20.0, "the two entities asked about"
        dg.nodes.append(n)
    dg.edges = [DisplayEdge(s.src, s.dst, s.kind, s.label, shown=True) for s in path.steps]
    return dg
