"""Entity resolution. Same-named mentions already share a node (their id is their normalized name); this stage
settles each entity's title, type and description from all its mentions, and records the merged surface forms.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from sqlalchemy import bindparam, update
from sqlmodel import select

from core.models import Node

_PUNCT = re.compile(r"[^\w\s&]+")
_LEADING = re.compile(r"^(the|a|an)\s+")


def norm_key(name: str) -> str:
    """The merge key of an entity name: accents folded, lower case, no punctuation, no leading article."""
    s = unicodedata.normalize("NFKD", name)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower().strip()
    s = re.sub(r"['’]s\b", "", s)
    s = _PUNCT.sub(" ", s)
    s = " ".join(s.split())
    return _LEADING.sub("", s)


def settle(title: str, typ: str, data: dict | None) -> tuple[str, str, str]:
    """(title, type, text) of an entity from all its mentions: the most used surface form (longest on ties), the
    most used type, its descriptions joined (or its title)."""
    data = data or {}
    aliases: dict = data.get("aliases", {})
    types: dict = data.get("types", {})
    if aliases:
        title = max(aliases.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]
    if types:
        typ = max(types.items(), key=lambda kv: (kv[1], kv[0]))[0]
    descs = data.get("descriptions", [])
    return title, typ, " ".join(descs) if descs else title


def resolve_stage(ctx) -> Iterator:
    from core.build.context import Progress

    store, ws = ctx.store, ctx.ws
    t = Node.__table__  # type: ignore[attr-defined]
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
