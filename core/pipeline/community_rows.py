"""Community rows of the build: stable ids, the rows of a clustered hierarchy, and the one-transaction writer that
replaces a method's communities while keeping unchanged rows (and their reports). Used by the `communities`,
`attributed` and `augment` stages and by the what-if variants (core/quality/variants.py).
"""

from __future__ import annotations

from sqlalchemy import bindparam, delete, select, update

from core.algorithms.leiden import Hierarchy
from core.graph.entity_graph import EntityGraph
from core.ids import IdScope, local_id
from core.models import Community, Edge, sql_table
from core.store import bulk_insert

METHODS = ("wcc", "leiden", "hirag")  # the methods the `communities` stage writes


def community_id(ids: IdScope, method: str, level: int, member_ids: list[str]) -> str:
    return ids.id(method, str(level), ",".join(sorted(local_id(m) for m in member_ids)))


def cluster_rows(ids: IdScope, method: str, eg: EntityGraph, h: Hierarchy, rows: list[Community],
                 members_of: dict[str, list[str]]) -> None:
    """Community rows (and their members) of every level of `h`, each child pointing at its parent."""
    cluster_ids: list[str] = []
    for c in h.clusters:
        members = [eg.ids[v] for v in c.members]
        cid = community_id(ids, method, c.level, members)
        cluster_ids.append(cid)
        rows.append(Community(id=cid, workspace_id=ids.ws_id, method=method, level=c.level, size=len(members),
                              parent_id=cluster_ids[c.parent] if c.parent is not None else None,
                              data={"children": len(c.children),
                                    "modularity_level": round(h.modularity.get(c.level, 0.0), 4)}))
        members_of[cid] = members


def write_communities(store, ws_id: int, rows: list[Community], members_of: dict[str, list[str]],
                      methods: tuple[str, ...]) -> None:
    """Replace the communities of `methods` by `rows`, keeping unchanged ones (and their reports) as they are.

    One transaction; new rows and their `in_community` edges go in through bulk inserts (the ORM took 35 s for
    the 10k communities and 200k member edges of a 1M-token corpus)."""
    t = sql_table(Community)
    e = sql_table(Edge)
    rows = list({r.id: r for r in rows}.values())
    with store.session() as s:
        conn = s.connection()
        old = {i for (i,) in conn.execute(select(t.c.id).where(t.c.workspace_id == ws_id, t.c.method.in_(methods)))}
        new = {r.id for r in rows}
        gone = sorted(old - new)
        for i in range(0, len(gone), 500):
            part = gone[i : i + 500]
            conn.execute(delete(e).where(e.c.workspace_id == ws_id, e.c.kind == "in_community", e.c.dst.in_(part)))
            conn.execute(delete(t).where(t.c.id.in_(part)))
        kept_ids = sorted(old & new)
        kept_data: dict[str, dict] = {}
        for i in range(0, len(kept_ids), 500):
            for cid, data in conn.execute(select(t.c.id, t.c.data).where(t.c.id.in_(kept_ids[i : i + 500]))):
                kept_data[cid] = dict(data or {})
        kept = [{"_id": r.id, "parent_id": r.parent_id, "size": r.size, "data": kept_data[r.id] | dict(r.data or {})}
                for r in rows if r.id in kept_data]
        if kept:
            conn.execute(update(t).where(t.c.id == bindparam("_id")), kept)
        fresh = [r for r in rows if r.id not in kept_data]
        bulk_insert(conn, t, [{"id": r.id, "workspace_id": ws_id, "method": r.method, "level": r.level,
                               "parent_id": r.parent_id, "size": r.size, "title": r.title or "",
                               "summary": r.summary or "", "report": dict(r.report or {}), "data": dict(r.data or {})}
                              for r in fresh])
        bulk_insert(conn, e, [{"workspace_id": ws_id, "src": m, "dst": r.id, "kind": "in_community", "weight": 1.0,
                               "data": {}} for r in fresh for m in members_of[r.id]])
        s.commit()
