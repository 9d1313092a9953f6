"""The `resolve` stage: entity resolution by name. Same-named mentions already share a node (their id is their
normalized name, core/text.py `norm_key`); this stage settles each entity's title, type and description from all
its mentions (core/resolution/names.py `settle`), and records the merged surface forms.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import bindparam, update
from sqlmodel import select

from core.build.context import BuildContext, Progress
from core.models import Node, sql_table
from core.resolution.names import settle


def resolve_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws = ctx.store, ctx.ws
    t = sql_table(Node)
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
                       {"entities": total, "surface_forms_merged": merged})
    if total == 0:
        yield Progress(0, 0, "no entities", {"entities": 0})
