"""The Graph page's node panel: search by name, and everything about one node of any kind (its text, kind,
HiRAG layer, the communities it belongs to, the documents behind it, its neighbours grouped by edge kind).

Plain reads by id over the indexed edge table (by source: the unique index; by target: `ix_edge_ws_dst`), so a
node of a big workspace is described in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import bindparam, text
from sqlmodel import select

from core.explore.display import materialize
from core.explore.find import search_names
from core.ids import owned
from core.models import Community, Document, Edge, Node
from core.store import without_hints


@dataclass
class NodeDetails:
    id: str
    kind: str
    title: str
    text: str
    facts: list[str]  # short "key: value" lines
    neighbours: dict[str, list[tuple[str, str]]]  # edge kind -> (id, title), at most per_kind of each
    counts: dict[str, int] = field(default_factory=dict)  # edge kind -> neighbours of that kind in all
    communities: list[tuple[str, str, int, str]] = field(default_factory=list)  # (id, method, level, title)
    sources: list[tuple[str, str, int]] = field(default_factory=list)  # (document id, title, passages)
    layer: int | None = None


def search_nodes(store, ws_id: int, text_: str, limit: int = 25,
                 layers: tuple[int, ...] = ()) -> list[tuple[str, str, str]]:
    """(id, kind, title) of entities, documents and communities named like `text_`, ranked by core/explore/find.py:
    the exact name of an entity first, then names starting with it, then other matches, fuzzy ones last; summary
    entities only for the HiRAG `layers` asked (none: the extracted entities only)."""
    return [(m.id, m.kind, m.title) for m in search_names(store, ws_id, text_, layers, limit).matches]


def _rows(s, sql: str, **params) -> list:
    stmt = text(without_hints(s, sql)).bindparams(*(bindparam(k, expanding=True) for k, v in params.items()
                                  if isinstance(v, (list, tuple))))
    return list(s.connection().execute(stmt, params))


def describe_node(store, ws_id: int, node_id: str, per_kind: int = 15) -> NodeDetails | None:
    """Everything the details panel shows about one node of any kind."""
    with store.session() as s:
        n = owned(s, Node, ws_id, node_id)
        c = owned(s, Community, ws_id, node_id) if n is None else None
        d = owned(s, Document, ws_id, node_id) if n is None and c is None else None
        if n is not None:
            facts = [f"kind: {n.kind}", f"type: {n.type}" if n.type else "", f"layer: {n.layer}",
                     f"weight: {n.weight:g}"]
            if n.data.get("aliases"):
                facts.append("merged surface forms: " + ", ".join(sorted(n.data["aliases"])))
            det = NodeDetails(n.id, n.kind, n.title, n.text, [f for f in facts if f], {},
                              layer=n.layer if n.kind == "entity" else None)
        elif c is not None:
            det = NodeDetails(c.id, "community", c.title, c.summary,
                              [f"method: {c.method}", f"level: {c.level}", f"members: {c.size}"]
                              + [f"finding: {f.get('summary', '')}" for f in (c.report or {}).get("findings", [])[:5]],
                              {})
        elif d is not None:
            det = NodeDetails(d.id, "document", d.title, d.text[:3000],
                              [f"file: {d.filename}", f"external id: {d.external_id}" if d.external_id else "",
                               f"characters: {d.n_chars:,}"], {})
            det.facts = [f for f in det.facts if f]
        else:
            return None
        edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws_id, Edge.src == node_id)
                       .limit(500)).all()
        edges += s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws_id, Edge.dst == node_id)
                        .limit(500)).all()
        counts = {k: int(v) for k, v in _rows(s, "SELECT kind, count(*) FROM edge WHERE workspace_id=:ws "
                                                 "AND src=:id GROUP BY kind", ws=ws_id, id=node_id)}
        counts.update({f"{k} (in)": int(v) for k, v in _rows(
            s, "SELECT kind, count(*) FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws AND dst=:id "
               "GROUP BY kind", ws=ws_id, id=node_id)})
        det.communities = _communities(s, ws_id, det)
        det.sources = _sources(s, ws_id, det, n)
        related = _related(s, ws_id, node_id, per_kind) if det.kind == "entity" else []
    groups: dict[str, list[str]] = {}
    for src, dst, kind in edges:
        other = dst if src == node_id else src
        label = kind if src == node_id else f"{kind} (in)"
        if len(groups.setdefault(label, [])) < per_kind:
            groups[label].append(other)
    if related:
        groups["related entities"] = related
    names = {x.id: x.label for x in materialize(store, ws_id, [i for lst in groups.values() for i in lst])}
    det.neighbours = {k: [(i, names.get(i, i)) for i in v] for k, v in groups.items()}
    det.counts = {k: max(counts.get(k, 0), len(v)) for k, v in groups.items()}
    return det


def _communities(s, ws_id: int, det: NodeDetails) -> list[tuple[str, str, int, str]]:
    """An entity's communities; a community's parent and children."""
    if det.kind == "entity":
        rows = _rows(s, "SELECT c.id, c.method, c.level, c.title FROM edge e JOIN community c ON c.id = e.dst "
                        "WHERE e.workspace_id=:ws AND e.src=:id AND e.kind='in_community' AND c.method != 'wcc'",
                     ws=ws_id, id=det.id)
    elif det.kind == "community":
        rows = _rows(s, "SELECT p.id, p.method, p.level, p.title FROM community c JOIN community p "
                        "ON p.id = c.parent_id AND p.workspace_id = c.workspace_id "
                        "WHERE c.workspace_id=:ws AND c.id=:id AND p.id != c.id", ws=ws_id, id=det.id)
        rows += _rows(s, "SELECT id, method, level, title FROM community WHERE workspace_id=:ws AND parent_id=:id "
                         "AND id != :id ORDER BY size DESC LIMIT 50", ws=ws_id, id=det.id)
    else:
        return []
    return sorted(((i, m, int(lv), t or "") for i, m, lv, t in rows), key=lambda r: (r[1], r[2], r[3]))


def _sources(s, ws_id: int, det: NodeDetails, n: Node | None, limit: int = 10) -> list[tuple[str, str, int]]:
    """Documents behind the node, with how many of its passages (chunks) back it, most first."""
    if det.kind == "document":
        return []
    if n is not None and n.document_id:
        counts = [(n.document_id, 1)]
    else:
        if det.kind == "entity":
            targets = [det.id]
        elif det.kind == "community":
            targets = [r[0] for r in _rows(s, "SELECT src FROM edge INDEXED BY ix_edge_ws_dst WHERE workspace_id=:ws "
                                              "AND dst=:id AND kind='in_community' LIMIT 200", ws=ws_id, id=det.id)]
        else:
            targets = []
        counts = []
        if targets:
            counts = _rows(s, "SELECT n.document_id, count(*) FROM edge e JOIN node n ON n.id = e.src "
                              "WHERE e.workspace_id=:ws AND e.dst IN :ts AND e.kind='mentions' AND n.kind='chunk' "
                              "GROUP BY n.document_id ORDER BY count(*) DESC LIMIT :k", ws=ws_id, ts=targets, k=limit)
        elif det.kind == "relationship":
            counts = _rows(s, "SELECT n.document_id, count(*) FROM edge e JOIN node n ON n.id = e.dst "
                              "WHERE e.workspace_id=:ws AND e.src=:id AND e.kind='derived_from' "
                              "GROUP BY n.document_id ORDER BY count(*) DESC LIMIT :k", ws=ws_id, id=det.id, k=limit)
    docs = [dc for dc, _ in counts if dc]
    titles = dict(_rows(s, "SELECT id, title FROM document WHERE workspace_id=:ws AND id IN :ids", ws=ws_id,
                        ids=docs)) if docs else {}
    return [(dc, titles.get(dc, dc), int(k)) for dc, k in counts if dc]


def _related(s, ws_id: int, node_id: str, limit: int) -> list[str]:
    """Entities at the other end of the entity's relationships (subject ↔ object)."""
    rows = _rows(s, "SELECT o.dst FROM edge e INDEXED BY ix_edge_ws_dst JOIN edge o ON o.workspace_id = e.workspace_id "
                    "AND o.src = e.src AND o.kind = (CASE e.kind WHEN 'subject' THEN 'object' ELSE 'subject' END) "
                    "WHERE e.workspace_id=:ws AND e.dst=:id AND e.kind IN ('subject', 'object') LIMIT 400",
                 ws=ws_id, id=node_id)
    out = [r[0] for r in rows if r[0] != node_id]
    return list(dict.fromkeys(out))[:limit]
