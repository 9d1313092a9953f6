"""What the Graph page draws in its Nodes view: a capped, typed subgraph of the heterograph (core/explore/drawing.py
turns it into the canvas component's payload).

The subgraph is chosen in the engine, not the browser: at most `limit` nodes, the most important of each kind
first (or the neighbourhood of a focus node), with a note saying what was left out. Text from documents is
escaped before it reaches HTML (tooltips); labels travel as JSON and are drawn on the canvas as text.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import col, select

from core.explore.neighbours import around
from core.models import Community, Document, Edge, Node
from core.text import truncate

KIND_COLORS = {
    "document": "#6C757D",
    "chunk": "#ADB5BD",
    "statement": "#F4A259",
    "entity": "#2F6690",
    "relationship": "#81C3D7",
    "attribute": "#9D4EDD",
    "topic": "#BC4B51",
    "community": "#5B8E7D",
}
SUMMARY_COLOR = "#173753"  # HiRAG summary entities (layer >= 1)
SUMMARY_GROUP = "summary entity (HiRAG layer ≥ 1)"
KIND_SHAPES = {"community": "diamond", "document": "square", "chunk": "box", "relationship": "triangle",
               "statement": "dot", "entity": "dot"}
SHARES = {"entity": 0.5, "community": 0.15, "document": 0.1, "chunk": 0.1, "relationship": 0.1, "statement": 0.05}


@dataclass
class DisplayNode:
    id: str
    kind: str
    label: str
    tooltip: str  # already-escaped HTML
    size: float = 12.0
    color: str = ""  # overrides the kind colour (super-nodes coloured by level or method)
    level: int | None = None  # community level, or HiRAG layer of an entity (hierarchical layout)
    members: int = 0  # a super-node's member entities
    shape: str = ""  # overrides the kind shape
    x: float | None = None  # layout computed in the engine (vis starts from it)
    y: float | None = None
    group: str = ""  # what its colour means, for the legend (empty: its kind)


@dataclass
class DisplayEdge:
    src: str
    dst: str
    kind: str
    label: str = ""
    weight: float = 1.0  # aggregated links: relationships between the two communities' members
    shown: bool = False  # draw `label` on the edge, without an arrow (a step of a path)


@dataclass
class DisplayGraph:
    nodes: list[DisplayNode] = field(default_factory=list)
    edges: list[DisplayEdge] = field(default_factory=list)
    available: dict[str, int] = field(default_factory=dict)  # kind -> nodes of that kind in the workspace
    note: str = ""
    omitted: dict[str, int] = field(default_factory=dict)  # what was left out, by what ("members", "children", …)

    @property
    def ids(self) -> list[str]:
        return [n.id for n in self.nodes]


def tooltip(kind: str, title: str, text: str, extra: str = "") -> str:
    """Escaped HTML for a node's hover box: title, kind, one line of facts, the start of its text."""
    body = html.escape(truncate(text, 400)) if text else ""
    head = f"<b>{html.escape(truncate(title, 120))}</b><br><i>{html.escape(kind)}</i>"
    return head + (f"<br>{html.escape(extra)}" if extra else "") + (f"<br><br>{body}" if body else "")


def available(store, ws_id: int) -> dict[str, int]:
    """Drawable nodes per kind (WCC components are bookkeeping, not drawn)."""
    c = store.counts(ws_id)
    with store.session() as s:
        c["community"] = s.exec(select(func.count()).select_from(Community).where(
            Community.workspace_id == ws_id, Community.method != "wcc")).one()
    return {k: c.get(k, 0) for k in KIND_COLORS if c.get(k, 0)}


_available = available  # older name, kept for callers outside this module


@dataclass(frozen=True)
class NodeFilter:
    """Which nodes of the chosen kinds may be drawn: entities of some HiRAG `layers` (empty: every layer) and, when
    `entities` is given, only those ids (the page passes the entities of at least a minimum degree); communities
    of some `methods` and `levels` (empty: all)."""

    layers: tuple[int, ...] = ()
    methods: tuple[str, ...] = ()
    levels: tuple[int, ...] = ()
    entities: frozenset[str] | None = None

    @property
    def active(self) -> bool:
        return bool(self.layers or self.methods or self.levels or self.entities is not None)

    def describe(self, min_degree: int = 0) -> str:
        parts = []
        if self.layers:
            parts.append("HiRAG layer " + ", ".join(map(str, self.layers)))
        if self.methods:
            parts.append("method " + ", ".join(self.methods))
        if self.levels:
            parts.append("community level " + ", ".join(map(str, self.levels)))
        if min_degree:
            parts.append(f"entity degree ≥ {min_degree}")
        return "; ".join(parts)


def display_graph(store, ws_id: int, kinds: list[str], limit: int, focus: str | None = None,
                  flt: NodeFilter | None = None, extra: list[str] | tuple[str, ...] = (),
                  min_degree: int = 0) -> DisplayGraph:
    """A subgraph of at most `limit` nodes of `kinds`: around `focus` when given, else the most important ones
    passing `flt`; then the `extra` nodes (added by one-hop expansions) while the cap allows."""
    flt = flt or NodeFilter()
    dg = DisplayGraph(available=available(store, ws_id))
    wanted = [k for k in kinds if k in KIND_COLORS]
    hood = None
    if focus:
        hood = around(store, ws_id, focus, wanted, max(0, limit - 1), flt.layers, flt.methods)
        chosen = [focus] + hood.ids
        total = 1 + sum(hood.found.values())
    else:
        chosen, total = _important(store, ws_id, wanted, limit, set(), flt)
    more = [i for i in dict.fromkeys(extra) if i not in set(chosen)]
    room = max(0, limit - len(chosen))
    nodes = materialize(store, ws_id, chosen + more[:room])
    dg.nodes = nodes
    ids = {n.id for n in nodes}
    dg.edges = edges_between(store, ws_id, ids, collapse_relationships="relationship" not in wanted,
                             collapse_chunks="chunk" not in wanted)
    if focus:
        dg.edges = star_edges(dg.edges, focus, len(nodes))
    base = len(ids - set(more[:room]))
    notes = []
    if hood is not None:
        notes.append(f"Its neighbourhood: {hood.describe() or 'no neighbours of the selected kinds'}"
                     + (f"; showing {base - 1:,} of them (cap {limit:,})." if total > base else "."))
        if total > base:
            dg.omitted["nodes"] = total - base
    elif total > base:
        notes.append(f"Showing {len(nodes):,} of {total:,} nodes of the selected kinds (cap {limit:,}); "
                     "the most connected come first. Find a node above to draw its neighbourhood.")
        dg.omitted["nodes"] = max(0, total - len(nodes))
    if flt.active and not focus:
        notes.append(f"Filters: {flt.describe(min_degree)}.")
    if len(more) > room:
        notes.append(f"{len(more) - room:,} nodes of the expanded neighbourhoods not drawn (cap {limit:,}).")
        dg.omitted["expanded"] = len(more) - room
    dg.note = " ".join(notes)
    return dg


def star_edges(edges: list[DisplayEdge], focus: str, room: int) -> list[DisplayEdge]:
    """A neighbourhood's edges: every edge of the focus, then links among its neighbours while `room` allows
    (relationships first, then the hierarchy's, then the rest), so the star stays readable."""
    rank = {"relationship": 0, "summarizes": 1, "child_of": 1}
    own = [e for e in edges if focus in (e.src, e.dst)]
    rest = sorted((e for e in edges if focus not in (e.src, e.dst)), key=lambda e: (rank.get(e.kind, 2), -e.weight))
    return own + rest[: max(0, room)]


def _important(store, ws_id: int, kinds: list[str], limit: int, taken: set[str],
               flt: NodeFilter | None = None) -> tuple[list[str], int]:
    """The most important nodes of `kinds` passing `flt`, each kind given its share of `limit`; and how many nodes
    of those kinds pass the filter."""
    flt = flt or NodeFilter()
    out: list[str] = []
    total = 0
    with store.session() as s:
        budget = {k: int(limit * SHARES.get(k, 0.05) / max(1e-9, sum(SHARES.get(x, 0.05) for x in kinds)))
                  for k in kinds}
        spare = 0
        for kind in sorted(kinds, key=lambda k: -SHARES.get(k, 0.05)):
            n = budget[kind] + spare
            if kind == "community":
                q = select(Community.id).where(Community.workspace_id == ws_id, Community.method != "wcc")
                if flt.methods:
                    q = q.where(col(Community.method).in_(flt.methods))
                if flt.levels:
                    q = q.where(col(Community.level).in_(flt.levels))
                rows = s.exec(q.order_by(col(Community.level), col(Community.size).desc())).all()
            elif kind == "document":
                rows = s.exec(select(Document.id).where(Document.workspace_id == ws_id)).all()
            else:
                q = select(Node.id).where(Node.workspace_id == ws_id, Node.kind == kind)
                if kind == "entity" and flt.layers:
                    q = q.where(col(Node.layer).in_(flt.layers))
                if kind != "entity" or flt.entities is None:
                    total += s.exec(select(func.count()).select_from(q.subquery())).one()
                    q = q.limit(n)
                rows = s.exec(q.order_by(col(Node.weight).desc(), Node.id)).all()
                if kind == "entity" and flt.entities is not None:
                    rows = [r for r in rows if r in flt.entities]
                    total += len(rows)
            if kind in ("community", "document"):
                total += len(rows)
            rows = [r for r in rows[:n] if r not in taken]
            out += rows
            spare = max(0, n - len(rows))
    return out[:limit], total


def materialize(store, ws_id: int, ids: list[str]) -> list[DisplayNode]:
    """Display nodes for ids of any kind (nodes, communities, documents), in the order given; unknown ids dropped."""
    out: dict[str, DisplayNode] = {}
    with store.session() as s:
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for n in s.exec(select(Node).where(Node.workspace_id == ws_id, col(Node.id).in_(part))):
                label = n.title if n.kind in ("entity", "relationship") else truncate(n.title or n.text, 40)
                extra = f"{n.type} · layer {n.layer} · weight {n.weight:g}" if n.kind == "entity" else ""
                summary = n.kind == "entity" and (n.layer or 0) > 0
                out[n.id] = DisplayNode(n.id, n.kind, truncate(label, 40), tooltip(n.kind, n.title, n.text, extra),
                                        size=min(40.0, 10 + 2 * (n.weight or 1) ** 0.5),
                                        level=n.layer if n.kind == "entity" else None,
                                        color=SUMMARY_COLOR if summary else "", group=SUMMARY_GROUP if summary else "")
            for c in s.exec(select(Community).where(Community.workspace_id == ws_id, col(Community.id).in_(part))):
                out[c.id] = DisplayNode(c.id, "community", truncate(c.title or "community", 40),
                                        tooltip("community", c.title, c.summary,
                                                 f"{c.method} level {c.level} · {c.size} members"),
                                        size=min(50.0, 14 + 3 * c.size ** 0.5), level=c.level, members=c.size)
            for d in s.exec(select(Document).where(Document.workspace_id == ws_id, col(Document.id).in_(part))):
                out[d.id] = DisplayNode(d.id, "document", truncate(d.title, 40),
                                        tooltip("document", d.title, d.text[:400], d.filename), size=22)
    return [out[i] for i in ids if i in out]


def edges_between(store, ws_id: int, ids: set[str], collapse_relationships: bool,
                  collapse_chunks: bool) -> list[DisplayEdge]:
    """Stored edges among `ids`, plus, for kinds left out, the links they carry: entity—entity for hidden
    relationship nodes, document→entity for hidden chunks."""
    out: list[DisplayEdge] = []
    lst = list(ids)
    with store.session() as s:
        for i in range(0, len(lst), 400):
            part = lst[i : i + 400]
            for src, dst, kind in s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
                    Edge.workspace_id == ws_id, col(Edge.src).in_(part))):
                if dst in ids:
                    out.append(DisplayEdge(src, dst, kind))
        for c in s.exec(select(Community.id, Community.parent_id).where(Community.workspace_id == ws_id,
                                                                        col(Community.id).in_(lst))):
            if c[1] in ids:
                out.append(DisplayEdge(c[0], c[1], "child_of"))
        if collapse_relationships:
            ends: dict[str, list[str]] = {}
            for i in range(0, len(lst), 400):
                for src, dst in s.exec(select(Edge.src, Edge.dst).where(
                        Edge.workspace_id == ws_id, col(Edge.kind).in_(("subject", "object")),
                        col(Edge.dst).in_(lst[i : i + 400]))):
                    ends.setdefault(src, []).append(dst)
            full = [r for r, e in ends.items() if len(e) == 2]
            preds = {}
            for i in range(0, len(full), 400):
                preds.update(dict(s.exec(select(Node.id, Node.type).where(
                    Node.workspace_id == ws_id, col(Node.id).in_(full[i : i + 400]))).all()))
            for r in full:
                a, b = ends[r]
                out.append(DisplayEdge(a, b, "relationship", preds.get(r, "")))
        if collapse_chunks:
            pairs: set[tuple[str, str]] = set()
            for i in range(0, len(lst), 400):
                for doc, ent in s.exec(select(Node.document_id, Edge.dst).join(Node, col(Node.id) == Edge.src).where(
                        Edge.workspace_id == ws_id, Edge.kind == "mentions", Node.kind == "chunk",
                        col(Edge.dst).in_(lst[i : i + 400]))):
                    if doc in ids:
                        pairs.add((doc, ent))
            out += [DisplayEdge(d, e, "mentions") for d, e in sorted(pairs)]
    return out


KIND_RANK = {"relationship": 0, "attribute": 0, "high_level": 0, "overview": 0, "topic": 1, "statement": 1,
             "chunk": 2, "document": 3}


def hierarchy_levels(dg: DisplayGraph) -> dict[str, int]:
    """vis levels for a hierarchical layout: communities by level (0 on top), then entities by HiRAG layer (the
    highest summary layer first), then the other kinds."""
    comm = [n.level for n in dg.nodes if n.kind == "community" and n.level is not None]
    base = max(comm) + 1 if comm else 0
    layers = [n.level for n in dg.nodes if n.kind == "entity" and n.level is not None]
    top = max(layers) if layers else 0
    out = {}
    for n in dg.nodes:
        if n.kind == "community":
            out[n.id] = n.level or 0
        elif n.kind == "entity":
            out[n.id] = base + top - (n.level or 0)
        else:
            out[n.id] = base + top + 1 + KIND_RANK.get(n.kind, 1)
    return out


def shape_svg(shape: str, fill: str, border: str, width: float) -> str:
    """A 16 px SVG of a vis-network node shape, for legends (the Ask page's paths, the Graph page)."""
    a = f'fill="{fill}" stroke="{border}" stroke-width="{min(width, 2.5)}"'
    body = {
        "star": f'<polygon {a} points="8,1 10,6 15,6 11,9.5 12.5,15 8,11.7 3.5,15 5,9.5 1,6 6,6"/>',
        "hexagon": f'<polygon {a} points="8,1.5 14,4.8 14,11.2 8,14.5 2,11.2 2,4.8"/>',
        "triangle": f'<polygon {a} points="8,2 14.5,14 1.5,14"/>',
        "triangleDown": f'<polygon {a} points="1.5,2 14.5,2 8,14"/>',
        "diamond": f'<polygon {a} points="8,1 15,8 8,15 1,8"/>',
        "square": f'<rect {a} x="2.5" y="2.5" width="11" height="11"/>',
        "ellipse": f'<ellipse {a} cx="8" cy="8" rx="7" ry="4.5"/>',
        "box": f'<rect {a} x="1" y="4" width="14" height="8" rx="2"/>',
    }.get(shape, f'<circle {a} cx="8" cy="8" r="{5 if width < 2 else 6}"/>')
    return f'<svg width="16" height="16" viewBox="0 0 16 16" style="vertical-align:middle">{body}</svg>'
