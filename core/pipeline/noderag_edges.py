"""NodeRAG's vector-side edges for the `augment` stage (noderag.txt §2.3 semantic matching, §2.4 HNSW semantic
edges): the vectors of the embedded kinds (T, S, A, H) and the one transaction that brings the `matches` and
`semantic` edges and the HNSW weight boosts to the wanted state.

An HNSW pair already joined by an edge of NodeRAG's heterograph (`noderag.HETEROGRAPH_EDGES`: between two embedded
kinds that is a semantic unit's `derived_from` link to its chunk, or a `matches` edge) raises that edge's weight by
1 ("When an edge already exists in G, adding the corresponding edge from HNSW increases its weight by 1") and is
marked `data.hnsw`; a pair joined only by an edge NodeRAG does not define (a chunk's `next`) gets its own
`semantic` edge, so the walk over the paper's edges never loses an HNSW link.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import delete, func, literal_column, update
from sqlalchemy import text as sql_text
from sqlmodel import col, select

from core.algorithms import noderag
from core.index.embedding import node_text_for_embedding
from core.models import Edge, Node, sql_table
from core.pipeline.context import BuildContext
from core.pipeline.noderag_communities import edge_row
from core.store import bulk_insert, is_sqlite, json_field

EMBEDDED = noderag.SEMANTIC_KINDS  # NodeRAG's retrievable, vector-searched kinds


def embed_rows(ctx: BuildContext, kind: str) -> list[tuple[str, str, dict]]:
    with ctx.store.session() as s:
        rows = s.exec(select(Node.id, Node.title, Node.text, Node.data).where(
            Node.workspace_id == ctx.ws.id, Node.kind == kind).order_by(Node.id)).all()
    key = "entity_id" if kind == "attribute" else "community_id"
    return [(i, node_text_for_embedding(kind, t, x), {key: (d or {}).get(key, "")}) for i, t, x, d in rows]


def load_vectors(ctx: BuildContext) -> tuple[list[str], list[str], np.ndarray]:
    """(ids, kinds, unit vectors) of every node of the embedded kinds that has a vector, in a stable order."""
    ids: list[str] = []
    kinds: list[str] = []
    parts: list[np.ndarray] = []
    with ctx.store.session() as s:
        live = {k: set(s.exec(select(Node.id).where(Node.workspace_id == ctx.ws.id, Node.kind == k)))
                for k in EMBEDDED}
    for kind in EMBEDDED:
        got, vecs = ctx.index.all_vectors(kind)
        keep = sorted((i, v) for v, i in enumerate(got) if i in live[kind])
        if not keep:
            continue
        ids += [i for i, _ in keep]
        kinds += [kind] * len(keep)
        parts.append(vecs[[v for _, v in keep]])
    if not parts:
        return [], [], np.zeros((0, 0), dtype=np.float32)
    x = np.vstack(parts).astype(np.float32, copy=False)
    del parts
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return ids, kinds, x


# Every edge between two nodes of the embedded kinds that can take an HNSW boost (a heterograph edge other than this
# stage's own `matches` and `semantic` ones; column `owner` = 1) or carries one from an earlier run (to be taken
# back if it may no longer hold it). Driven from the nodes (kind index) into the edge table's (workspace_id, src)
# prefix, so it reads the embedded nodes' edges instead of scanning every edge of the workspace.
_KINDS = ", ".join(f"'{k}'" for k in EMBEDDED)
_OWNER = " OR ".join(f"(e.kind = '{k}' AND a.kind = '{a}' AND b.kind = '{b}')" for k, a, b in noderag.HETEROGRAPH_EDGES
                     if k not in ("matches", "semantic") and a in EMBEDDED and b in EMBEDDED) or "FALSE"
_LINKED = f"""
    SELECT e.id, e.src, e.dst, e.kind, {{hnsw}}, ({_OWNER}) AS owner
    FROM {Node.__tablename__} AS a
    {{join}} {Edge.__tablename__} AS e ON e.workspace_id = a.workspace_id AND e.src = a.id
    JOIN {Node.__tablename__} AS b ON b.id = e.dst
    WHERE a.workspace_id = :ws AND a.kind IN ({_KINDS}) AND b.kind IN ({_KINDS}) AND e.kind != 'matches'
      AND e.kind != 'semantic' AND (({_OWNER}) OR {{hnsw}} IS NOT NULL)"""


def linked_sql(conn):
    """The query above for the connection's database: on SQLite driven from the nodes by CROSS JOIN (its written
    join order) and json_extract; on PostgreSQL a plain JOIN and the `->>` operator."""
    if is_sqlite(conn):
        return sql_text(_LINKED.format(hnsw="json_extract(e.data, '$.hnsw')", join="CROSS JOIN"))
    return sql_text(_LINKED.format(hnsw="CAST(e.data ->> 'hnsw' AS FLOAT)", join="JOIN"))


def _drop_hnsw(conn):
    """`data` without its `hnsw` key, as an UPDATE value."""
    if is_sqlite(conn):
        return func.json_remove(Edge.data, "$.hnsw")
    return literal_column("CAST(CAST(data AS jsonb) - 'hnsw' AS json)")


def _set_hnsw(conn):
    """`data` with `hnsw` set to 1, as an UPDATE value."""
    if is_sqlite(conn):
        return func.json_set(func.coalesce(Edge.data, literal_column("'{}'")), "$.hnsw", 1)
    return literal_column("""CAST(COALESCE(CAST(data AS jsonb), '{}') || '{"hnsw": 1}' AS json)""")


def delete_ids(s, ids: list[int]) -> None:
    for k in range(0, len(ids), 500):
        s.exec(delete(Edge).where(col(Edge.id).in_(ids[k : k + 500])))


def write_edges(ctx, ids: list[str], matches: list[tuple[int, int]], pairs: np.ndarray,
                 scores: np.ndarray) -> tuple[int, int]:
    """Bring this stage's `matches` and `semantic` edges and HNSW weight boosts to the wanted state in one
    transaction, touching only the rows that differ (a re-run over an unchanged graph writes nothing)."""
    ws_id, n = ctx.ws.id, len(ids)
    index = {nid: v for v, nid in enumerate(ids)}
    with ctx.store.session() as s:
        by = func.coalesce(json_field(s, Edge.data, "by", as_text=True), "")
        hnsw = json_field(s, Edge.data, "hnsw")
        old_sem = {(a, b): (eid, sc) for eid, a, b, sc in s.exec(
            select(Edge.id, Edge.src, Edge.dst, json_field(s, Edge.data, "score")).where(
                Edge.workspace_id == ws_id, Edge.kind == "semantic", by == "hnsw"))}
        old_match = {(a, b): (eid, w) for eid, a, b, w in s.exec(select(Edge.id, Edge.src, Edge.dst, Edge.weight).where(
            Edge.workspace_id == ws_id, Edge.kind == "matches"))}
        linked = s.exec(linked_sql(s), params={"ws": ws_id}).all()
        old_boost = {eid for eid, _, _, _, boost, _ in linked if boost is not None}
        # pair -> the one edge that takes the boost: a heterograph edge (owner), else a match
        owner: dict[tuple[int, ...], tuple] = {}
        for eid, src, dst, _kind, _, can_own in sorted(linked, key=lambda r: (r[3], r[1], r[2])):  # not row-id order
            if can_own and src in index and dst in index:
                owner.setdefault(tuple(sorted((index[src], index[dst]))), ("db", eid))
        for h, j in matches:
            owner.setdefault(tuple(sorted((h, j))), ("matches", (h, j)))
        boosted = noderag.split_linked(pairs, np.array(list(owner), dtype=np.int64).reshape(-1, 2), n)
        boost_db, boost_match = set(), set()
        for i, j in pairs[boosted].tolist():
            where, ref = owner[(i, j)]
            (boost_db.add(ref) if where == "db" else boost_match.add(ref))
        want_match = {(ids[h], ids[j]): 2.0 if (h, j) in boost_match else 1.0 for h, j in matches}
        # the wanted semantic edges as index pairs (i < j, unique) and their rounded scores: at a million tokens
        # 1.5M of them, which as rows of dicts took a gigabyte; rows are made a block at a time below
        sem = pairs[~boosted]
        sem_sc = np.array([round(float(v), 4) for v in scores[~boosted].tolist()], dtype=np.float64)
        stale, same = _semantic_diff(old_sem, index, sem, sem_sc, n)
        delete_ids(s, stale)
        delete_ids(s, [eid for k, (eid, w) in old_match.items() if want_match.get(k) != w])
        gone = sorted(old_boost - boost_db)
        for k in range(0, len(gone), 500):
            s.exec(update(Edge).where(col(Edge.id).in_(gone[k : k + 500])).values(
                weight=Edge.weight - hnsw, data=_drop_hnsw(s)))
        fresh = sorted(boost_db - old_boost)
        for k in range(0, len(fresh), 500):
            s.exec(update(Edge).where(col(Edge.id).in_(fresh[k : k + 500])).values(
                weight=Edge.weight + 1, data=_set_hnsw(s)))
        rows = [edge_row(ws_id, src, dst, "matches", w, {"hnsw": 1} if w > 1 else {})
                for (src, dst), w in want_match.items() if old_match.get((src, dst), (0, None))[1] != w]
        conn = s.connection()
        if rows:
            bulk_insert(conn, sql_table(Edge), rows)
        todo = np.flatnonzero(~same)
        for k in range(0, len(todo), _BLOCK):
            block = todo[k : k + _BLOCK]
            bulk_insert(conn, sql_table(Edge), [
                edge_row(ws_id, ids[i], ids[j], "semantic", 1.0, {"by": "hnsw", "score": sc})
                for (i, j), sc in zip(sem[block].tolist(), sem_sc[block].tolist())])
        s.commit()
    return len(sem), len(boost_db) + len(boost_match)


_BLOCK = 20_000  # semantic edge rows made and inserted at a time


def _semantic_diff(old: dict[tuple[str, str], tuple[int, float]], index: dict[str, int], sem: np.ndarray,
                   sem_sc: np.ndarray, n: int) -> tuple[list[int], np.ndarray]:
    """The stored semantic edges to delete (no longer wanted, or with another score), and a mask over the wanted
    pairs `sem` of those stored already with their score (not inserted again)."""
    same = np.zeros(len(sem), dtype=bool)
    if not old:
        return [], same
    codes = sem[:, 0] * n + sem[:, 1]  # sorted: the pairs are unique and in order
    stale: list[int] = []
    for (src, dst), (eid, sc) in old.items():
        i, j = index.get(src, -1), index.get(dst, -1)
        pos = int(np.searchsorted(codes, i * n + j)) if 0 <= i < j else len(codes)
        if pos < len(codes) and codes[pos] == i * n + j and sem_sc[pos] == sc:
            same[pos] = True
        else:
            stale.append(eid)
    return stale, same
