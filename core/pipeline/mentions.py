"""What each chunk contributed to an entity or a relationship, and the fold that turns contributions into the node.

The extract stage folds a chunk's mentions into the entity and relationship rows as it goes (same-named mentions
share one node: aliases and types counted, descriptions kept up to a cap; a relationship's predicates, its
description and its weight summed). An entity's descriptions from the passages *about* it (the chunks of a document
whose real title names it, marked {"subject": true} on the `mentions` edge) come before those from passages that
merely name it, each group in canonical order: the cap then keeps what the entity's own page says of it instead of
whichever pages happened to name it first (on the Factbook, "Kuwait" was described by Saudi Arabia's borders and
other countries' trade partners). Each contribution is also kept on the edge that records it:

* a chunk's `mentions` edge to an entity: `data["x"] = [[name, type, description]]` (and `"subject": true`);
* a relationship's `derived_from` edge to a chunk: `data["x"] = [[predicate, weight, description, title]]`

(an entity merge that folds one edge into another appends the absorbed edge's contributions, core/resolution/merge.py).

The fold depends on the order contributions arrive in (the description cap, the first predicate and title). Its
canonical order is the chunk's (document id, ord): the order a from-scratch build extracts in. The node remembers
the position of its last contribution (`data["at"]`); a contribution that arrives before it (documents added to a
built workspace, whose ids sort before older ones) marks the node `data["refold"]`, and `refold` computes the node
again from its edges in canonical order (the resolve stage does this for every marked node; deleting documents
refolds what their chunks supported). So an entity or relationship is a function of the document set only: adding
documents, or deleting some, gives the node a from-scratch build of the same documents gives.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict

from sqlalchemy import bindparam, select, update

from core.models import Edge, Node, sql_table
from core.resolution.names import DESC_CAP, add_description, settle

MAX_PREDICATES = 10
_ENTITY_FOLDED = ("aliases", "types", "descriptions", "about", "at", "refold")
_REL_FOLDED = ("predicates", "at", "refold")


def _advance(data: dict, pos: tuple[str, int]) -> None:
    at = data.get("at")
    if at is not None and (str(at[0]), int(at[1])) > pos:
        data["refold"] = True  # arrived out of canonical order: the resolve stage folds this node again
    else:
        data["at"] = [pos[0], pos[1]]


def fold_entity(row: dict, name: str, typ: str, desc: str, pos: tuple[str, int], about: bool = False) -> None:
    """Fold one mention (surface form, type, description) into an entity row {"title", "type", "weight", "data"};
    `about`: the mention comes from a passage about the entity (its description joins those first)."""
    data = row["data"]
    if not data.get("aliases"):  # the first mention names the node (resolve settles title and type later)
        row["title"], row["type"] = name, typ
    aliases = data.setdefault("aliases", {})
    aliases[name] = aliases.get(name, 0) + 1
    types = data.setdefault("types", {})
    types[typ] = types.get(typ, 0) + 1
    if desc:
        data["descriptions"], data["about"] = add_description(data.get("descriptions", []),
                                                              int(data.get("about", 0)), desc, about)
    row["weight"] = (row.get("weight") or 0.0) + 1.0
    _advance(data, pos)


def fold_relationship(row: dict, pred: str, weight: float, desc: str, title: str, pos: tuple[str, int]) -> None:
    """Fold one chunk's statement of a relationship into its row {"title", "type", "text", "weight", "data"}."""
    data = row["data"]
    preds = data.get("predicates")
    if not preds:  # the first statement names it
        row["title"], row["type"], row["text"], row["weight"] = title, pred, desc, float(weight)
        data["predicates"] = [pred]
    else:
        if pred not in preds and len(preds) < MAX_PREDICATES:
            preds.append(pred)
        text = row.get("text") or ""
        if desc and desc not in text and len(text) < DESC_CAP:
            row["text"] = (text + " " + desc).strip()
        row["weight"] = (row.get("weight") or 0.0) + float(weight)
    _advance(data, pos)


def chunk_ords(conn, chunk_ids: list[str]) -> dict[str, int]:
    """chunk id -> its position in its document (the second half of a contribution's canonical position)."""
    t = sql_table(Node)
    out: dict[str, int] = {}
    ids = sorted(set(chunk_ids))
    for off in range(0, len(ids), 500):
        out.update((i, int(o or 0)) for i, o in conn.execute(select(t.c.id, t.c.ord).where(t.c.id.in_(ids[off : off + 500]))))
    return out


def _loads(data) -> dict:
    if isinstance(data, str):
        return json.loads(data)
    return dict(data or {})


def contributions(conn, ws_id: int, kind: str, ids: list[str]) -> tuple[dict[str, list], set[str]]:
    """node id -> [(position, contribution, from a passage about it)] in canonical order, read from the edges of
    `ids` (entities or relationships) to chunks; and the ids one of whose edges carries no contribution (written
    before they were recorded: such a node cannot be folded again)."""
    e, n = sql_table(Edge), sql_table(Node)
    out: dict[str, list] = defaultdict(list)
    legacy: set[str] = set()
    for off in range(0, len(ids), 500):
        part = ids[off : off + 500]
        if kind == "entity":
            q = (select(e.c.dst, e.c.data, n.c.document_id, n.c.ord).join(n, n.c.id == e.c.src)
                 .where(e.c.workspace_id == ws_id, e.c.kind == "mentions", e.c.dst.in_(part), n.c.kind == "chunk"))
        else:
            q = (select(e.c.src, e.c.data, n.c.document_id, n.c.ord).join(n, n.c.id == e.c.dst)
                 .where(e.c.workspace_id == ws_id, e.c.kind == "derived_from", e.c.src.in_(part),
                        n.c.kind == "chunk"))
        for nid, data, doc, ordinal in conn.execute(q):
            got = _loads(data)
            xs = got.get("x")
            if xs is None:
                legacy.add(nid)
                continue
            pos = (doc or "", int(ordinal or 0))
            out[nid].extend((pos, k, x, bool(got.get("subject"))) for k, x in enumerate(xs))
    for lst in out.values():
        lst.sort(key=lambda t: (t[0], t[1]))
    return {i: [(p, x, about) for p, _, x, about in lst] for i, lst in out.items()}, legacy


def refold(conn, ws_id: int, kind: str, ids: list[str]) -> dict[str, dict | None]:
    """Entities or relationships `ids` folded again from their edges in canonical order: id -> the row's new
    {"title", "type", "text", "weight", "data"} (other data keys kept: a relationship's ends, an entity's merges;
    an entity settled as the resolve stage settles it),
    or None for a node no chunk supports any more. Nodes with edges from before contributions were recorded are left
    out (their fold cannot be repeated). Nothing is written (`write_refolded` does)."""
    ids = sorted(set(ids))
    got, legacy = contributions(conn, ws_id, kind, ids)
    t = sql_table(Node)
    out: dict[str, dict | None] = {}
    for off in range(0, len(ids), 500):
        for nid, title, typ, data in conn.execute(
                select(t.c.id, t.c.title, t.c.type, t.c.data)
                .where(t.c.id.in_(ids[off : off + 500]))):
            if nid in legacy:
                continue
            xs = got.get(nid)
            if not xs:
                out[nid] = None
                continue
            keep = {k: v for k, v in copy.deepcopy(_loads(data)).items()
                    if k not in (_ENTITY_FOLDED if kind == "entity" else _REL_FOLDED)}
            if kind == "entity":
                row = {"title": title, "type": typ, "text": "", "weight": 0.0,
                       "data": {"aliases": {}, "types": {}, "descriptions": []}}
                for pos, (name, ety, desc), about in xs:
                    fold_entity(row, name, ety, desc, pos, about)
                row["title"], row["type"], row["text"] = settle(row["title"], row["type"], row["data"])
            else:
                row = {"title": title, "type": typ, "text": "", "weight": 0.0, "data": {}}
                for pos, (pred, w, desc, rtitle), _ in xs:
                    fold_relationship(row, pred, w, desc, rtitle, pos)
            row["data"] = keep | row["data"]
            out[nid] = row
    return out


def write_refolded(conn, rows: dict[str, dict | None]) -> None:
    """Write refolded rows (the None ones are the caller's to delete)."""
    t = sql_table(Node)
    upd = [{"_id": i, "title": r["title"], "type": r["type"], "text": r["text"], "weight": r["weight"],
            "data": r["data"]} for i, r in rows.items() if r is not None]
    if upd:
        conn.execute(update(t).where(t.c.id == bindparam("_id")), upd)
