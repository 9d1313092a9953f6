"""One community (or HiRAG summary entity) in detail, for the Hierarchy page's panel: its report, its members by
kind, the documents behind it, its subgraph drawn for the canvas. Communities: Leiden (GraphRAG §2), HiRAG's,
NodeRAG's, attributed (ArchRAG §3); a summary entity's members are everything it summarizes, layer by layer
(hirag.txt §4.1). The frames these are opened from are core/explore/hierarchy.py.

Pure reads, aggregated in SQL; members are gathered in a temporary table of the connection.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import text

from core.explore.display import DisplayGraph, edges_between, materialize
from core.explore.drawing import vis_payload
from core.explore.hierarchy import read_rows
from core.store import is_sqlite


# -- one community (or summary entity) in detail --------------------------------------------------------------------
@dataclass
class Member:
    id: str
    title: str
    type: str
    weight: float
    text: str


@dataclass
class SourceDoc:
    id: str
    title: str
    filename: str
    mentions: int  # mentions of members in the document's chunks (or statements)
    members: int  # distinct members it mentions


@dataclass
class CommunityDetail:
    id: str
    kind: str  # community, summary
    method: str
    level: int
    title: str
    summary: str
    report: dict
    size: int
    parent: tuple[str, str] | None  # (id, title)
    children: list[tuple[str, str, int]]  # (id, title, size), largest first
    members: dict[str, list[Member]]  # kind -> the most important members of that kind
    counts: dict[str, int]  # kind -> how many in all
    documents: list[SourceDoc]
    n_documents: int
    graph: dict | None = None  # the members' subgraph, a canvas payload (core/explore/drawing.py)
    graph_note: str = ""


# Members are gathered once into a temporary table (the connection's own, never the workspace's tables); on SQLite,
# lookups by edge target name their index, which its planner (no ANALYZE statistics) would otherwise pass over, and
# CROSS JOIN keeps the written join order. The SQL below is for SQLite; `_dialect` rewrites it for PostgreSQL.
_BY_COMMUNITY = ("INSERT OR IGNORE INTO temp.strata_members SELECT src FROM edge INDEXED BY ix_edge_ws_dst "
                 "WHERE workspace_id=:ws AND dst=:cid AND kind='in_community'")
_BY_SUMMARY = ("INSERT OR IGNORE INTO temp.strata_members WITH RECURSIVE d(id) AS (SELECT src FROM edge "
               "INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:cid AND kind='summarizes' UNION "
               "SELECT e.src FROM d CROSS JOIN edge e INDEXED BY ix_edge_ws_dst ON e.workspace_id=:ws AND e.dst=d.id "
               "AND e.kind='summarizes') SELECT id FROM d")
_GROUP = "CASE WHEN n.kind='entity' AND n.layer>0 THEN 'summary entity' ELSE n.kind END"
_M = "temp.strata_members m"
_BY_DST = "edge e INDEXED BY ix_edge_ws_dst"


def _dialect(session, sql: str) -> str:
    """`sql` as written (SQLite), or for PostgreSQL: no index hints, plain JOINs, the temporary schema `pg_temp`,
    ON CONFLICT DO NOTHING for INSERT OR IGNORE."""
    if is_sqlite(session):
        return sql
    sql = sql.replace(" INDEXED BY ix_edge_ws_dst", "").replace("CROSS JOIN", "JOIN").replace("temp.", "pg_temp.")
    if sql.startswith("INSERT OR IGNORE INTO"):
        sql = "INSERT INTO" + sql[len("INSERT OR IGNORE INTO"):] + " ON CONFLICT DO NOTHING"
    return sql


def _read(session, sql: str, **params) -> list:
    return read_rows(session, _dialect(session, sql), **params)


def community_detail(store, ws_id: int, cid: str, per_kind: int = 200, max_documents: int = 25,
                     graph_cap: int = 120) -> CommunityDetail | None:
    """Report, members by kind, source documents (most member mentions first) and the drawn subgraph of one
    community, or of one HiRAG summary entity (its members: everything it summarizes, layer by layer)."""
    with store.session() as s:
        c = _read(s, "SELECT id, method, level, parent_id, size, title, summary, report FROM community "
                         "WHERE id=:cid AND workspace_id=:ws", ws=ws_id, cid=cid)
        if c:
            _, method, level, parent_id, size, title, summary, report = c[0]
            kind, gather = "community", _BY_COMMUNITY
            parent = _read(s, "SELECT id, title FROM community WHERE id=:p AND workspace_id=:ws", p=parent_id,
                           ws=ws_id) if parent_id else []
            children = _read(s, "SELECT id, title, size FROM community WHERE workspace_id=:ws AND method=:m "
                                    "AND parent_id=:cid AND id!=:cid ORDER BY size DESC, id LIMIT 100",
                                 ws=ws_id, m=method, cid=cid)
            report = _json(report)
        else:
            n = _read(s, "SELECT id, layer, title, text FROM node WHERE id=:cid AND workspace_id=:ws "
                             "AND kind='entity' AND layer>0", ws=ws_id, cid=cid)
            if not n:
                return None
            _, level, title, summary = n[0]
            method, kind, gather, report, size = "hirag_layers", "summary", _BY_SUMMARY, {}, 0
            parent = _read(s, "SELECT n.id, n.title FROM edge e CROSS JOIN node n ON n.id=e.dst "
                                  "WHERE e.workspace_id=:ws AND e.src=:cid AND e.kind='summarizes' "
                                  "ORDER BY e.weight DESC, n.id LIMIT 1", ws=ws_id, cid=cid)
            children = _read(s, f"SELECT n.id, n.title, n.weight FROM {_BY_DST} CROSS JOIN node n ON n.id=e.src "
                                    "WHERE e.workspace_id=:ws AND e.dst=:cid AND e.kind='summarizes' AND n.layer>0 "
                                    "ORDER BY n.weight DESC, n.id LIMIT 100", ws=ws_id, cid=cid)
        p = dict(ws=ws_id, cid=cid, cap=per_kind)
        _rows_w(s, "CREATE TEMP TABLE IF NOT EXISTS strata_members (id TEXT PRIMARY KEY)")
        try:
            _rows_w(s, "DELETE FROM temp.strata_members")
            _rows_w(s, gather, **p)
            members, counts, docs = _members(s, kind, p, max_documents)
            names = {i: (t, f) for i, t, f in _read(
                s, "SELECT id, title, filename FROM document WHERE workspace_id=:ws AND id IN :ids",
                ws=ws_id, ids=[d[0] for d in docs])} if docs else {}
        except BaseException:
            s.rollback()  # the temporary table goes with it (PostgreSQL takes no statement in a failed transaction)
            raise
        _rows_w(s, "DROP TABLE IF EXISTS temp.strata_members")
        s.commit()  # ends the read; only the connection's temporary table was written
    if kind == "summary":
        size = counts.get("entity", 0)
    documents = []
    for d, mentions, ms, _ in docs:
        doc_title, filename = names.get(d, (d, ""))
        documents.append(SourceDoc(d, doc_title, filename, int(mentions), int(ms)))
    det = CommunityDetail(cid, kind, method, int(level), title or "", summary or "", report or {}, int(size or 0),
                          (parent[0][0], parent[0][1] or "") if parent else None,
                          [(i, t or "", int(n or 0)) for i, t, n in children], dict(members), counts, documents,
                          int(docs[0][3]) if docs else 0)
    _draw(store, ws_id, det, graph_cap)
    return det


def _rows_w(session, sql: str, **params) -> None:
    session.connection().execute(text(_dialect(session, sql)), params)


def _members(s, kind: str, p: dict, max_documents: int) -> tuple[dict[str, list[Member]], dict[str, int], list]:
    """Members by kind (the heaviest `cap` of each), relationships inside, attached attributes and high-level
    elements, and the documents whose chunks (or statements) mention members most."""
    members: dict[str, list[Member]] = defaultdict(list)
    counts: dict[str, int] = {}
    for k, i, t, ty, w, x, total in _read(
            s, f"SELECT k, id, title, type, weight, text, total FROM (SELECT {_GROUP} AS k, n.id, n.title, n.type, "
            "n.weight, substr(n.text, 1, 400) AS text, row_number() OVER (PARTITION BY "
            f"{_GROUP} ORDER BY n.weight DESC, n.id) AS rk, count(*) OVER (PARTITION BY {_GROUP}) AS total "
            f"FROM {_M} CROSS JOIN node n ON n.id=m.id) AS ranked WHERE rk<=:cap ORDER BY k, rk", **p):
        members[k].append(Member(i, t, ty, w, x))
        counts[k] = total
    for i, t, ty, w, x, total in _read(
            s, "SELECT r.id, r.title, r.type, r.weight, substr(r.text, 1, 400), count(*) OVER () FROM node r "
            f"WHERE r.id IN (SELECT e.src FROM {_M} CROSS JOIN {_BY_DST} ON e.workspace_id=:ws AND e.dst=m.id "
            "WHERE e.kind IN ('subject', 'object') GROUP BY e.src HAVING count(*)>=2) "
            "ORDER BY r.weight DESC, r.id LIMIT :cap", **p):
        members["relationship (inside)"].append(Member(i, t, ty, w, x))
        counts["relationship (inside)"] = total
    attached = _read(s, f"SELECT a.kind, a.id, a.title, a.type, a.weight, substr(a.text, 1, 400) FROM {_M} "
                            "CROSS JOIN edge h ON h.workspace_id=:ws AND h.src=m.id AND h.kind='has_attribute' "
                            "CROSS JOIN node a ON a.id=h.dst ORDER BY a.weight DESC LIMIT :cap", **p)
    attached += _read(s, f"SELECT n.kind, n.id, n.title, n.type, n.weight, substr(n.text, 1, 400) FROM {_BY_DST} "
                             "CROSS JOIN node n ON n.id=e.src WHERE e.workspace_id=:ws AND e.dst=:cid "
                             "AND e.kind NOT IN ('in_community', 'summarizes') ORDER BY n.weight DESC LIMIT :cap", **p)
    attached += _read(s, f"SELECT o.kind, o.id, o.title, o.type, o.weight, substr(o.text, 1, 400) FROM {_BY_DST} "
                             "CROSS JOIN edge h ON h.workspace_id=:ws AND h.src=e.src AND h.kind='has_overview' "
                             "CROSS JOIN node o ON o.id=h.dst WHERE e.workspace_id=:ws AND e.dst=:cid "
                             "AND e.kind='derived_from' ORDER BY o.weight DESC LIMIT :cap", **p)
    for k, i, t, ty, w, x in attached:
        if k not in ("entity", "relationship", "chunk", "statement"):  # attributes, high-level elements, overviews
            members[k].append(Member(i, t, ty, w, x))
            counts[k] = counts.get(k, 0) + 1
    docs: list = []
    for src_kind in ("chunk", "statement"):  # chunks hold the mentions; statements when chunks link none
        docs = _read(s, "SELECT x.document_id, count(*) AS mentions, count(DISTINCT e.dst) AS ms, count(*) OVER () "
                            f"FROM {_M} CROSS JOIN {_BY_DST} ON e.workspace_id=:ws AND e.dst=m.id AND e.kind='mentions' "
                            "CROSS JOIN node x ON x.id=e.src WHERE x.kind=:sk AND x.document_id IS NOT NULL "
                            "GROUP BY x.document_id ORDER BY mentions DESC, ms DESC, x.document_id LIMIT :nd",
                         sk=src_kind, nd=max_documents, **p)
        if docs:
            break
    return members, counts, docs


def _json(value) -> dict:
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


# drawn inside a tab, the frame may start hidden (zero size): fit the drawing again once it gets its size
def _draw(store, ws_id: int, det: CommunityDetail, cap: int) -> None:
    """The members' subgraph for the canvas component: the summary entity itself, then its most mentioned
    entities, capped; relationships drawn as entity—entity links, documents left out."""

    ids = ([det.id] if det.kind == "summary" else [])
    ids += [m.id for k in ("summary entity", "entity") for m in det.members.get(k, [])]
    ids = list(dict.fromkeys(ids))[:cap]
    if not ids:
        return
    nodes = materialize(store, ws_id, ids)
    edges = edges_between(store, ws_id, {n.id for n in nodes}, collapse_relationships=True, collapse_chunks=False)
    det.graph = vis_payload(DisplayGraph(nodes=nodes, edges=edges), height=520)
    n_all = det.counts.get("entity", 0) + det.counts.get("summary entity", 0)
    if n_all > len(nodes):
        det.graph_note = f"Drawing the {len(nodes):,} most mentioned of {n_all:,} member entities."
