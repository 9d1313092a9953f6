"""The route a strategy took (`Retrieval.path_nodes` / `path_edges`) as a small drawing for the Ask page.

Nodes are coloured by kind (core/explore/display.py KIND_COLORS, plus "community") and shaped, bordered and sized by
the role the strategy gave them (entry points, PPR cross nodes, key entities, bridge paths, communities, layer
hops, beam paths, memberships, chunks, results); edges are coloured and dashed by role. A node the strategy listed
under several roles is drawn in the most telling one (ROLES order) and its tooltip lists them all.

With `with_sources` the drawing ends where the answer's evidence lives: each ranked source document (role
`result`) hangs off its best chunk by the stored `derived_from` edge, and that chunk is linked by its stored
`mentions` edges to the drawn entities. Nothing else is added: every drawn edge is a path edge of the strategy or
one of those stored edges.

At most `limit` nodes are drawn, the most telling roles first, with a note saying what was left out. Text from
documents is escaped before it reaches HTML (tooltips are escaped HTML, labels travel as JSON); the drawing is a
payload for the same canvas component as the Graph page's (vis-network from the local pyvis package, no CDN), so
`window.network` in its frame tells what was drawn.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass, field

from sqlmodel import col, select

from core.explore.display import KIND_COLORS, shape_svg, tooltip
from core.explore.drawing import canvas_payload, positions
from core.models import Community, Document, Edge, Node
from core.retrieval.base import Retrieval
from core.text import truncate

# the Graph page's kind colours, plus the NodeRAG kinds it does not draw
ROUTE_KIND_COLORS = {"community": "#5B8E7D", "high_level": "#E9C46A", "overview": "#264653", **KIND_COLORS}


@dataclass(frozen=True)
class RoleStyle:
    shape: str  # vis-network node shape
    border: str  # node border and edge colour
    size: int
    border_width: float
    dashes: tuple[int, ...] | None  # edge dash pattern (None: solid)
    edge_width: float
    meaning: str


# In drawing priority: a node with several roles is drawn in the first of them; the cap keeps the first roles.
ROLES: dict[str, RoleStyle] = {
    "entry": RoleStyle("star", "#D62828", 26, 3, None, 2.5, "entry points"),
    "result": RoleStyle("box", "#2B9348", 18, 3, None, 2, "source documents, as ranked"),
    "key": RoleStyle("hexagon", "#E9A800", 22, 3, None, 2, "key entities"),
    "cross": RoleStyle("triangle", "#F77F00", 22, 3, (6, 4), 2, "PPR cross nodes"),
    "community": RoleStyle("diamond", "#1D7874", 24, 3, (10, 5), 1.5, "communities"),
    "bridge": RoleStyle("dot", "#003049", 16, 3, None, 3.5, "bridge paths"),
    "layer": RoleStyle("triangleDown", "#6A4C93", 20, 3, (2, 4), 2.5, "layer hops"),
    "beam": RoleStyle("square", "#E76F51", 15, 3, (12, 3, 3, 3), 2.5, "beam-search paths"),
    "chunk": RoleStyle("ellipse", "#7D8597", 14, 2, (1, 4), 1.5, "chunks"),
    "membership": RoleStyle("dot", "#8D99AE", 10, 1, (4, 4), 1, "memberships"),
    "missed": RoleStyle("box", "#9D0208", 18, 3, None, 1, "gold documents the route did not reach"),
}
GOLD = "#FFB703"  # the halo of a gold node (the Evaluate page's question view)
DEFAULT_ROLE = RoleStyle("dot", "#B0B0B0", 12, 1, None, 1, "other steps")
_NAMED = {"entry", "result", "key", "cross", "community", "missed"}  # roles whose labels stay readable when zoomed out
_LABEL_INSIDE = {"ellipse", "database", "box", "circle", "text"}


@dataclass
class RouteNode:
    id: str
    kind: str
    roles: list[str]
    label: str
    tooltip: str = ""  # escaped HTML

    @property
    def role(self) -> str:
        return self.roles[0]


@dataclass
class RouteEdge:
    src: str
    dst: str
    kind: str
    role: str


@dataclass
class RouteGraph:
    nodes: list[RouteNode] = field(default_factory=list)
    edges: list[RouteEdge] = field(default_factory=list)
    total_nodes: int = 0  # before the cap
    note: str = ""
    gold: set[str] = field(default_factory=set)  # the drawn nodes that are gold (the Evaluate page highlights them)

    @property
    def roles(self) -> list[str]:
        """Roles present (of drawn nodes and edges), known ones in ROLES order, unknown ones after."""
        seen = {n.role for n in self.nodes} | {e.role for e in self.edges}
        return [r for r in ROLES if r in seen] + sorted(seen - set(ROLES))

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(n.kind for n in self.nodes))


def style_of(role: str) -> RoleStyle:
    return ROLES.get(role, DEFAULT_ROLE)


def _rank(role: str) -> int:
    return list(ROLES).index(role) if role in ROLES else len(ROLES)


def route_graph(r: Retrieval, store, ws_id: int, limit: int = 300, with_sources: bool = True,
                max_sources: int = 10, gold: set[str] | None = None, gold_docs: list[str] | None = None) -> RouteGraph:
    """The path of `r` (plus, with `with_sources`, its sources' documents) as a capped, styled RouteGraph. With
    `gold` (the gold documents' and their chunks' ids), the drawn gold nodes are marked, and each gold document of
    `gold_docs` the route did not reach is drawn apart (role "missed"), so a reader sees what the strategy missed."""
    nodes: dict[str, RouteNode] = {}
    for step in r.path_nodes:
        n = nodes.get(step.id)
        if n is None:
            nodes[step.id] = RouteNode(step.id, step.kind, [step.role or "other"], step.label)
        elif step.role not in n.roles:
            n.roles.append(step.role)
    edges: dict[tuple[str, str, str], RouteEdge] = {}
    for e in r.path_edges:
        edges.setdefault((e.src, e.dst, e.role), RouteEdge(e.src, e.dst, e.kind, e.role))
    if with_sources:
        _add_sources(r, store, ws_id, nodes, edges, max_sources)
    for d in gold_docs or []:
        if d not in nodes:
            nodes[d] = RouteNode(d, "document", ["missed"], "")
    for n in nodes.values():
        n.roles.sort(key=_rank)

    every = list(nodes.values())
    order = sorted(range(len(every)), key=lambda i: (_rank(every[i].role), i))
    kept = [every[i] for i in order[:limit]]
    kept_ids = {n.id for n in kept}
    kept = [n for n in every if n.id in kept_ids]  # back in path order
    rg = RouteGraph(nodes=kept, total_nodes=len(every), gold=kept_ids & ((gold or set()) | set(gold_docs or [])))
    rg.edges = [e for e in edges.values() if e.src in kept_ids and e.dst in kept_ids and e.src != e.dst]
    _describe(store, ws_id, rg.nodes)
    if len(every) > len(kept):
        left = Counter(every[i].role for i in order[limit:])
        dropped = len(edges) - len(rg.edges)
        rg.note = (f"Showing {len(kept):,} of {len(every):,} path nodes (cap {limit:,}); left out: "
                   + ", ".join(f"{c:,} {role}" for role, c in left.most_common())
                   + (f", and the {dropped:,} edges that reach them" if dropped else "") + ".")
    return rg


def _add_sources(r: Retrieval, store, ws_id: int, nodes: dict[str, RouteNode],
                 edges: dict[tuple[str, str, str], RouteEdge], max_sources: int) -> None:
    """Each ranked source document (role result) under its best chunk (stored derived_from), and that chunk's
    stored `mentions` edges to the entities already drawn."""
    chunks: list[str] = []
    for s in r.sources[:max_sources]:
        if s.document_id not in nodes:
            nodes[s.document_id] = RouteNode(s.document_id, "document", ["result"], s.title)
        elif "result" not in nodes[s.document_id].roles:
            nodes[s.document_id].roles.append("result")
        if s.chunk_ids:
            c = s.chunk_ids[0]
            chunks.append(c)
            if c not in nodes:
                nodes[c] = RouteNode(c, "chunk", ["chunk"], "")
            edges.setdefault((c, s.document_id, "result"), RouteEdge(c, s.document_id, "derived_from", "result"))
    entities = [i for i, n in nodes.items() if n.kind == "entity"]
    if not chunks or not entities:
        return
    ent = set(entities)
    with store.session() as s:
        rows = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "mentions",
                                                       col(Edge.src).in_(chunks))).all()
    for src, dst in rows:
        if dst in ent:
            edges.setdefault((src, dst, "chunk"), RouteEdge(src, dst, "mentions", "chunk"))


def _describe(store, ws_id: int, nodes: list[RouteNode]) -> None:
    """Labels and escaped tooltips from the stored rows (nodes, communities, documents)."""
    by_id = {n.id: n for n in nodes}
    ids = list(by_id)
    found: dict[str, tuple[str, str, str]] = {}  # id -> (title, text, extra)
    with store.session() as s:
        for i in range(0, len(ids), 400):
            part = ids[i: i + 400]
            for n in s.exec(select(Node).where(Node.workspace_id == ws_id,
                                               col(Node.id).in_(part))):
                extra = f"{n.type} · layer {n.layer}" if n.kind == "entity" else ""
                found[n.id] = (n.title or truncate(n.text, 60), n.text, extra)
            for c in s.exec(select(Community).where(Community.workspace_id == ws_id,
                                                    col(Community.id).in_(part))):
                found[c.id] = (c.title or "community", c.summary, f"{c.method} level {c.level} · {c.size} members")
            for d in s.exec(select(Document).where(Document.workspace_id == ws_id,
                                                   col(Document.id).in_(part))):
                found[d.id] = (d.title, d.text[:400], d.filename)
    for n in nodes:
        title, text, extra = found.get(n.id, (n.label or n.id, "", "not found in the store"))
        roles = "roles: " + ", ".join(n.roles)
        n.label = truncate(n.label or title or n.id, 28)
        n.tooltip = tooltip(n.kind, title, text, f"{roles} · {extra}" if extra else roles)


def _font_color(hex_color: str) -> str:
    h = hex_color.lstrip("#")
    if len(h) != 6:
        return "#222222"
    rgb = [int(h[i: i + 2], 16) for i in (0, 2, 4)]
    return "#ffffff" if 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 150 else "#222222"


def route_payload(rg: RouteGraph, height: int = 420, physics: bool = True) -> dict:
    """The canvas component's payload drawing `rg`: nodes placed in the engine (drawn at once, fitted to the frame
    however wide it is when shown), styled by role and coloured by kind."""

    idx = {n.id: i for i, n in enumerate(rg.nodes)}
    xy = positions(len(rg.nodes), [(idx[e.src], idx[e.dst], 1.0) for e in rg.edges
                                   if e.src in idx and e.dst in idx])
    nodes = []
    for n, (x, y) in zip(rg.nodes, xy):
        st_, fill = style_of(n.role), ROUTE_KIND_COLORS.get(n.kind, "#999999")
        inside = st_.shape in _LABEL_INSIDE
        gold = n.id in rg.gold  # a thick gold halo, whatever the role; `gold` tells a test what was highlighted
        node: dict = {"id": n.id, "label": n.label, "title": n.tooltip, "shape": st_.shape, "size": st_.size,
                      "borderWidth": 6 if gold else st_.border_width, "kind": n.kind, "role": n.role,
                      "roles": n.roles, "x": round(float(x), 1), "y": round(float(y), 1),
                      "color": {"background": fill, "border": GOLD if gold else st_.border,
                                "highlight": {"background": fill, "border": "#000000"}},
                      "font": {"size": 18 if n.role in _NAMED else 11,
                               "color": _font_color(fill) if inside else "#222222"}}
        if gold:
            node |= {"gold": True, "shadow": {"enabled": True, "color": GOLD, "size": 18}}
        nodes.append(node)
    edges = []
    for e in rg.edges:
        st_ = style_of(e.role)
        edges.append({"from": e.src, "to": e.dst, "title": html.escape(f"{e.kind} · {e.role}"), "role": e.role,
                      "color": st_.border, "width": st_.edge_width, "arrows": "to",
                      "dashes": list(st_.dashes) if st_.dashes else False})
    options = {
        "physics": {"enabled": physics, "solver": "forceAtlas2Based",
                    "forceAtlas2Based": {"gravitationalConstant": -60, "springLength": 80},
                    "stabilization": {"enabled": False}, "minVelocity": 1.0},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False},
        "edges": {"smooth": False},
    }
    return canvas_payload(nodes, edges, options, height)


def _line(style: RoleStyle) -> str:
    dash = f' stroke-dasharray="{",".join(map(str, style.dashes))}"' if style.dashes else ""
    return (f'<svg width="28" height="10" style="vertical-align:middle;margin-left:3px"><line x1="1" y1="5" x2="27" '
            f'y2="5" stroke="{style.border}" stroke-width="{style.edge_width}"{dash}/></svg>')


def legend_html(rg: RouteGraph) -> str:
    """The roles present (node symbol, edge line when such edges are drawn, meaning) and the kinds present.
    Only Strata's own names and colours: no document text."""
    edge_roles = {e.role for e in rg.edges}
    items = []
    for role in rg.roles:
        s = style_of(role)
        meaning = s.meaning if role in ROLES else f"{s.meaning} ({role})"
        items.append(f'<span class="route-role" data-role="{html.escape(role)}" style="display:inline-block;'
                     f'margin:0 12px 4px 0;white-space:nowrap">{shape_svg(s.shape, "#f1f3f5", s.border, s.border_width)}'
                     + (_line(s) if role in edge_roles else "")
                     + f' <b>{html.escape(role)}</b> <span style="color:#666">{html.escape(meaning)}</span></span>')
    kinds = [f'<span class="route-kind" style="display:inline-block;margin:0 10px 4px 0;white-space:nowrap">'
             f'<span style="display:inline-block;width:10px;height:10px;border-radius:50%;background:'
             f'{ROUTE_KIND_COLORS.get(k, "#999999")};margin-right:4px"></span>{html.escape(k)}</span>'
             for k in rg.kinds]
    if rg.gold:
        items.append(f'<span class="route-role" data-role="gold" style="display:inline-block;margin:0 12px 4px 0;'
                     f'white-space:nowrap">{shape_svg("dot", "#f1f3f5", GOLD, 2.5)} <b>gold</b> '
                     '<span style="color:#666">gold documents and their chunks (halo)</span></span>')
    return ('<div class="route-legend" style="font-size:12.5px;line-height:1.5;font-family:sans-serif">'
            + "".join(items) + '<br><span style="color:#666;margin-right:6px">colour = kind:</span>'
            + "".join(kinds) + "</div>")
