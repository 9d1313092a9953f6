"""The `resolve` stage: entity resolution by name. Same-named mentions already share a node (their id is their
normalized name, core/text.py `norm_key`); this stage settles each entity's title, type and description from all
its mentions (core/resolution/names.py `settle`), and records the merged surface forms. First it folds again, in
canonical order, the entities and relationships that received contributions out of order (documents added to a
built workspace: core/pipeline/mentions.py), so they equal a from-scratch build's.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import bindparam, update
from sqlmodel import select

from core.models import Node, sql_table
from core.pipeline.context import BuildContext, Progress
from core.pipeline.mentions import refold, write_refolded
from core.resolution.names import settle
from core.store import json_field


def refold_marked(store, ws_id: int, step: int = 2000) -> int:
    """Fold again, in canonical order, every entity and relationship the extract stage marked as having received a
    contribution out of order (documents added to a built workspace; core/pipeline/mentions.py). Returns how many."""
    n = 0
    for kind in ("entity", "relationship"):
        with store.session() as s:
            flag = json_field(s, Node.data, "refold", as_text=True)
            marked = list(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == kind,
                                                       flag.is_not(None)).order_by(Node.id)))
        for off in range(0, len(marked), step):
            with store.session() as s:
                conn = s.connection()
                rows = refold(conn, ws_id, kind, marked[off : off + step])
                write_refolded(conn, {i: r for i, r in rows.items() if r is not None})
                s.commit()
        n += len(marked)
    return n


def resolve_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws = ctx.store, ctx.ws
    t = sql_table(Node)
    assert ws.id is not None  # a stored workspace
    refolded = refold_marked(store, ws.id)
    with store.session() as s:
        ids = list(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 0)))
    total = len(ids)
    merged = 0
    step = 5000
    for off in range(0, total, step):
        with store.session() as s:
            conn = s.connection()
            updates = []
            for nid, title, typ, data in conn.execute(select(t.c.id, t.c.title, t.c.type, t.c.data)
                                                      .where(t.c.id.in_(ids[off : off + step]))):
                merged += max(0, len((data or {}).get("aliases", {})) - 1)
                title, typ, text = settle(title, typ, data)
                updates.append({"_id": nid, "title": title, "type": typ, "text": text})
            if updates:
                conn.execute(update(t).where(t.c.id == bindparam("_id")), updates)
            s.commit()
        yield Progress(min(total, off + step), total, "settled entity names and types",
                       {"entities": total, "surface_forms_merged": merged, "refolded": refolded})
    if total == 0:
        yield Progress(0, 0, "no entities", {"entities": 0})
