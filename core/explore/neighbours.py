"""A node's real neighbourhood, for "Draw its neighbourhood" on the Graph page (`display.display_graph` with a
focus).

Relationships are nodes of their own (entity ← subject — relationship — object → entity), so an entity's direct
edges reach relationship nodes, chunks and statements, not the entities it is related to. Here an entity's
neighbours are, in this order: the entities at the other end of its relationships (most relationships first),
the summary entities it feeds and the entities it summarizes (HiRAG `summarizes`), its communities, the documents
whose passages mention it (most passages first), then its direct neighbours of the other kinds asked for
(relationship nodes, chunks, statements, …). A document's are its chunks' entities (most mentioned first); a
community's its parent, children and members (the most mentioned first); any other node's, its direct edges. Only
kinds in `kinds` are returned; every read names the workspace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import bindparam, text

from core.store import without_hints

OTHER_END = "CASE e.kind WHEN 'subject' THEN 'object' ELSE 'subject' END"


@dataclass
class Neighbourhood:
    focus_kind: str = ""  # entity, relationship, chunk, …, community, document; "" when not found
    ids: list[str] = field(default_factory=list)  # the neighbours, in the order they are drawn
    found: dict[str, int] = field(default_factory=dict)  # what they are: "related entities", "communities", …

    def describe(self) -> str:
        return ", ".join(f"{n:,} {what}" for what, n in self.found.items() if n)


def _q(s, sql: str, **params) -> list:
    stmt = text(without_hints(s, sql)).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
                                                     if isinstance(v, (list, tuple))))
    return list(s.connection().execute(stmt, params))


def _kind_of(s, ws_id: int, node_id: str) -> str:
    row = _q(s, "SELECT kind FROM node WHERE workspace_id=:ws AND id=:id", ws=ws_id, id=node_id)
    if row:
        return row[0][0]
    if _q(s, "SELECT 1 FROM community WHERE workspace_id=:ws AND id=:id AND method != 'wcc'", ws=ws_id, id=node_id):
        return "community"
    if _q(s, "SELECT 1 FROM document WHERE workspace_id=:ws AND id=:id", ws=ws_id, id=node_id):
        return "document"
    return ""


def _entities_ok(s, ws_id: int, ids: list[str], layers: tuple[int, ...]) -> set[str]:
    """Those of `ids` that are entities of the HiRAG `layers` (empty: any layer)."""
    if not ids:
        return set()
    rows = _q(s, "SELECT id, layer FROM node WHERE workspace_id=:ws AND kind='entity' AND id IN :ids", ws=ws_id,
              ids=ids)
    return {i for i, lv in rows if not layers or int(lv or 0) in layers}


def _kinds_of(s, ws_id: int, ids: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i in range(0, len(ids), 500):
        out.update(dict(_q(s, "SELECT id, kind FROM node WHERE workspace_id=:ws AND id IN :ids", ws=ws_id,
                           ids=ids[i : i + 500])))
    return out


def around(store, ws_id: int, focus: str, kinds: tuple[str, ...] | list[str], limit: int,
           layers: tuple[int, ...] = (), methods: tuple[str, ...] = ()) -> Neighbourhood:
    """The neighbours of `focus` of `kinds` (entities of `layers`, communities of `methods`; empty: all), at most
    `limit`, in the order the module says."""
    want = set(kinds)
    out = Neighbourhood()
    groups: list[tuple[str, list[str]]] = []
    with store.session() as s:
        kind = out.focus_kind = _kind_of(s, ws_id, focus)
        if kind == "entity":
            if "entity" in want:
                rel = _q(s, "SELECT o.dst, count(*) FROM edge e INDEXED BY ix_edge_ws_dst JOIN edge o ON "
                            f"o.workspace_id = e.workspace_id AND o.src = e.src AND o.kind = {OTHER_END} "
                            "WHERE e.workspace_id=:ws AND e.dst=:id AND e.kind IN ('subject', 'object') "
                            "AND o.dst != :id GROUP BY o.dst ORDER BY count(*) DESC, o.dst LIMIT :k",
                         ws=ws_id, id=focus, k=limit)
                ok = _entities_ok(s, ws_id, [r[0] for r in rel], layers)
                groups.append(("related entities", [r[0] for r in rel if r[0] in ok]))
                ups = _q(s, "SELECT dst FROM edge WHERE workspace_id=:ws AND src=:id AND kind='summarizes'",
                         ws=ws_id, id=focus)
                ups += _q(s, "SELECT src FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:id "
                             "AND kind='summarizes'", ws=ws_id, id=focus)
                ok = _entities_ok(s, ws_id, [r[0] for r in ups], layers)
                groups.append(("summary links", sorted({r[0] for r in ups if r[0] in ok})))
            if "community" in want:
                rows = _q(s, "SELECT c.id FROM edge e JOIN community c ON c.id = e.dst AND c.workspace_id = "
                             "e.workspace_id WHERE e.workspace_id=:ws AND e.src=:id AND e.kind='in_community' "
                             "AND c.method != 'wcc' ORDER BY c.level, c.size DESC", ws=ws_id, id=focus)
                if methods:
                    rows = _q(s, "SELECT id FROM community WHERE workspace_id=:ws AND id IN :ids AND method IN :m "
                                 "ORDER BY level, size DESC", ws=ws_id, ids=[r[0] for r in rows] or [""],
                              m=list(methods))
                groups.append(("communities", [r[0] for r in rows]))
            if "document" in want:
                rows = _q(s, "SELECT n.document_id, count(*) FROM edge e INDEXED BY ix_edge_ws_dst JOIN node n ON "
                             "n.id = e.src AND n.workspace_id = e.workspace_id WHERE e.workspace_id=:ws AND "
                             "e.dst=:id AND e.kind='mentions' AND n.kind='chunk' GROUP BY n.document_id "
                             "ORDER BY count(*) DESC, n.document_id LIMIT :k", ws=ws_id, id=focus, k=limit)
                groups.append(("documents", [r[0] for r in rows if r[0]]))
        elif kind == "document":
            if "entity" in want:
                rows = _q(s, "SELECT e.dst, count(*) FROM node n JOIN edge e ON e.workspace_id = n.workspace_id "
                             "AND e.src = n.id AND e.kind = 'mentions' WHERE n.workspace_id=:ws AND "
                             "n.document_id=:id AND n.kind='chunk' GROUP BY e.dst ORDER BY count(*) DESC, e.dst "
                             "LIMIT :k", ws=ws_id, id=focus, k=4 * limit)
                ok = _entities_ok(s, ws_id, [r[0] for r in rows], layers)
                groups.append(("entities mentioned", [r[0] for r in rows if r[0] in ok]))
            if "chunk" in want:
                rows = _q(s, "SELECT id FROM node WHERE workspace_id=:ws AND document_id=:id AND kind='chunk' "
                             "ORDER BY ord LIMIT :k", ws=ws_id, id=focus, k=limit)
                groups.append(("passages", [r[0] for r in rows]))
        elif kind == "community":
            rows = _q(s, "SELECT parent_id FROM community WHERE workspace_id=:ws AND id=:id AND parent_id IS NOT NULL "
                         "AND parent_id != id", ws=ws_id, id=focus)
            rows += _q(s, "SELECT id FROM community WHERE workspace_id=:ws AND parent_id=:id AND id != :id "
                          "ORDER BY size DESC, id", ws=ws_id, id=focus)
            if "community" in want:
                groups.append(("communities", [r[0] for r in rows]))
            if "entity" in want:
                mem = _q(s, "SELECT n.id, n.layer FROM edge e INDEXED BY ix_edge_ws_dst JOIN node n ON n.id = e.src "
                            "AND n.workspace_id = e.workspace_id WHERE e.workspace_id=:ws AND e.dst=:id AND "
                            "e.kind='in_community' AND n.kind='entity' ORDER BY n.weight DESC, n.id LIMIT :k",
                         ws=ws_id, id=focus, k=limit)
                groups.append(("members", [i for i, lv in mem if not layers or int(lv or 0) in layers]))
        if kind and kind not in ("community", "document"):
            rows = _q(s, "SELECT dst FROM edge WHERE workspace_id=:ws AND src=:id LIMIT :k", ws=ws_id, id=focus,
                      k=4 * limit)
            rows += _q(s, "SELECT src FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:id LIMIT :k",
                       ws=ws_id, id=focus, k=4 * limit)
            direct = list(dict.fromkeys(r[0] for r in rows))
            kinds_of = _kinds_of(s, ws_id, direct)
            other = [i for i in direct if kinds_of.get(i) in want and (kind != "entity" or kinds_of[i] != "entity")]
            if kind != "entity":
                ok = _entities_ok(s, ws_id, [i for i in other if kinds_of.get(i) == "entity"], layers)
                other = [i for i in other if kinds_of.get(i) != "entity" or i in ok]
                if "document" in want:
                    docs = _q(s, "SELECT DISTINCT document_id FROM node WHERE workspace_id=:ws AND id IN :ids "
                                 "AND document_id IS NOT NULL", ws=ws_id, ids=[focus] + direct)
                    other += [r[0] for r in docs]
            groups.append(("other neighbours", other))
    # the first group (related entities, a document's entities, a community's parent and children) takes at most
    # 60 % of the room at first, so the other groups are drawn too; what is left then goes to every group in turn
    seen, fresh = {focus}, []
    for what, ids in groups:
        fresh.append([i for i in dict.fromkeys(ids) if i not in seen])
        seen.update(fresh[-1])
        out.found[what] = out.found.get(what, 0) + len(fresh[-1])
    taken = [0] * len(fresh)
    for g, ids in enumerate(fresh):
        share = max(1, int(0.6 * limit)) if g == 0 and len(fresh) > 1 else limit
        taken[g] = min(len(ids), share, max(0, limit - sum(taken)))
    for g, ids in enumerate(fresh):
        taken[g] += min(len(ids) - taken[g], max(0, limit - sum(taken)))
    out.ids = [i for g, ids in enumerate(fresh) for i in ids[: taken[g]]]
    return out
