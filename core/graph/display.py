"""What the Graph page draws: a capped, typed subgraph of the heterograph, and its pyvis HTML.

The subgraph is chosen in the engine, not the browser: at most `limit` nodes, the most important of each kind
first (or the neighbourhood of a focus node), with a note saying what was left out. Text from documents is
escaped before it reaches HTML; labels travel as JSON (pyvis' template escapes `<` and `>` there).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import select

from core.extract.text import truncate
from core.models import Community, Document, Edge, Node

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


@dataclass
class DisplayEdge:
    src: str
    dst: str
    kind: str
    label: str = ""


@dataclass
class DisplayGraph:
    nodes: list[DisplayNode] = field(default_factory=list)
    edges: list[DisplayEdge] = field(default_factory=list)
    available: dict[str, int] = field(default_factory=dict)  # kind -> nodes of that kind in the workspace
    note: str = ""


def _tooltip(kind: str, title: str, text: str, extra: str = "") -> str:
    body = html.escape(truncate(text, 400)) if text else ""
    head = f"<b>{html.escape(truncate(title, 120))}</b><br><i>{html.escape(kind)}</i>"
    return head + (f"<br>{html.escape(extra)}" if extra else "") + (f"<br><br>{body}" if body else "")


def _available(store, ws_id: int) -> dict[str, int]:
    """Drawable nodes per kind (WCC components are bookkeeping, not drawn)."""
    c = store.counts(ws_id)
    with store.session() as s:
        c["community"] = s.exec(select(func.count()).select_from(Community).where(
            Community.workspace_id == ws_id, Community.method != "wcc")).one()
    return {k: c.get(k, 0) for k in KIND_COLORS if c.get(k, 0)}


def search_nodes(store, ws_id: int, text: str, limit: int = 25) -> list[tuple[str, str, str]]:
    """(id, kind, title) of entities and communities whose name contains `text`, most important first."""
    text = text.strip()
    if not text:
        return []
    like = f"%{text}%"
    with store.session() as s:
        rows = [(i, k, t) for i, k, t in s.exec(
            select(Node.id, Node.kind, Node.title).where(Node.workspace_id == ws_id, Node.kind == "entity",
                                                         Node.title.like(like))  # type: ignore[attr-defined]
            .order_by(Node.weight.desc()).limit(limit))]  # type: ignore[union-attr]
        rows += [(i, "community", t) for i, t in s.exec(
            select(Community.id, Community.title).where(Community.workspace_id == ws_id, Community.method != "wcc",
                                                        Community.title.like(like))  # type: ignore[attr-defined]
            .order_by(Community.level).limit(limit))]
    return rows[:limit]


def display_graph(store, ws_id: int, kinds: list[str], limit: int, focus: str | None = None) -> DisplayGraph:
    """A subgraph of at most `limit` nodes of `kinds`: around `focus` when given, else the most important."""
    dg = DisplayGraph(available=_available(store, ws_id))
    wanted = [k for k in kinds if k in KIND_COLORS]
    if focus:
        chosen = list(dict.fromkeys([focus] + _neighbourhood(store, ws_id, focus, limit)))[:limit]
    else:
        chosen = _important(store, ws_id, wanted, limit, set())
    nodes = _materialize(store, ws_id, chosen)
    dg.nodes = nodes
    ids = {n.id for n in nodes}
    dg.edges = _edges_between(store, ws_id, ids, collapse_relationships="relationship" not in wanted,
                              collapse_chunks="chunk" not in wanted)
    total = sum(dg.available.get(k, 0) for k in wanted)
    if total > len(nodes):
        dg.note = (f"Showing {len(nodes):,} of {total:,} nodes of the selected kinds (cap {limit:,}); "
                   "the most connected come first. Search a node below to draw its neighbourhood.")
    return dg


def _important(store, ws_id: int, kinds: list[str], limit: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    with store.session() as s:
        budget = {k: int(limit * SHARES.get(k, 0.05) / max(1e-9, sum(SHARES.get(x, 0.05) for x in kinds)))
                  for k in kinds}
        spare = 0
        for kind in sorted(kinds, key=lambda k: -SHARES.get(k, 0.05)):
            n = budget[kind] + spare
            if kind == "community":
                rows = s.exec(select(Community.id).where(Community.workspace_id == ws_id, Community.method != "wcc")
                              .order_by(Community.level, Community.size.desc()).limit(n)).all()  # type: ignore[union-attr]
            elif kind == "document":
                rows = s.exec(select(Document.id).where(Document.workspace_id == ws_id).limit(n)).all()
            else:
                rows = s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == kind)
                              .order_by(Node.weight.desc(), Node.id).limit(n)).all()  # type: ignore[union-attr]
            rows = [r for r in rows if r not in taken]
            out += rows
            spare = max(0, n - len(rows))
    return out[:limit]


def _neighbourhood(store, ws_id: int, focus: str, limit: int) -> list[str]:
    with store.session() as s:
        out = list(s.exec(select(Edge.dst).where(Edge.workspace_id == ws_id, Edge.src == focus).limit(limit)))
        out += list(s.exec(select(Edge.src).where(Edge.workspace_id == ws_id, Edge.dst == focus).limit(limit)))
        c = s.get(Community, focus)
        if c is not None and c.parent_id:
            out.append(c.parent_id)
    return out


def _materialize(store, ws_id: int, ids: list[str]) -> list[DisplayNode]:
    out: dict[str, DisplayNode] = {}
    with store.session() as s:
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            for n in s.exec(select(Node).where(Node.id.in_(part))):  # type: ignore[union-attr]
                label = n.title if n.kind in ("entity", "relationship") else truncate(n.title or n.text, 40)
                extra = f"{n.type} · layer {n.layer} · weight {n.weight:g}" if n.kind == "entity" else ""
                out[n.id] = DisplayNode(n.id, n.kind, truncate(label, 40), _tooltip(n.kind, n.title, n.text, extra),
                                        size=min(40.0, 10 + 2 * (n.weight or 1) ** 0.5))
            for c in s.exec(select(Community).where(Community.id.in_(part))):  # type: ignore[union-attr]
                out[c.id] = DisplayNode(c.id, "community", truncate(c.title or "community", 40),
                                        _tooltip("community", c.title, c.summary,
                                                 f"{c.method} level {c.level} · {c.size} members"),
                                        size=min(50.0, 14 + 3 * c.size ** 0.5))
            for d in s.exec(select(Document).where(Document.id.in_(part))):  # type: ignore[union-attr]
                out[d.id] = DisplayNode(d.id, "document", truncate(d.title, 40),
                                        _tooltip("document", d.title, d.text[:400], d.filename), size=22)
    return [out[i] for i in ids if i in out]


def _edges_between(store, ws_id: int, ids: set[str], collapse_relationships: bool,
                   collapse_chunks: bool) -> list[DisplayEdge]:
    """Stored edges among `ids`, plus, for kinds left out, the links they carry: entity—entity for hidden
    relationship nodes, document→entity for hidden chunks."""
    out: list[DisplayEdge] = []
    lst = list(ids)
    with store.session() as s:
        for i in range(0, len(lst), 400):
            part = lst[i : i + 400]
            for src, dst, kind in s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
                    Edge.workspace_id == ws_id, Edge.src.in_(part))):  # type: ignore[attr-defined]
                if dst in ids:
                    out.append(DisplayEdge(src, dst, kind))
        for c in s.exec(select(Community.id, Community.parent_id).where(Community.id.in_(lst))):  # type: ignore[union-attr]
            if c[1] in ids:
                out.append(DisplayEdge(c[0], c[1], "child_of"))
        if collapse_relationships:
            ends: dict[str, list[str]] = {}
            for i in range(0, len(lst), 400):
                for src, dst in s.exec(select(Edge.src, Edge.dst).where(
                        Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")),  # type: ignore[attr-defined]
                        Edge.dst.in_(lst[i : i + 400]))):  # type: ignore[attr-defined]
                    ends.setdefault(src, []).append(dst)
            full = [r for r, e in ends.items() if len(e) == 2]
            preds = {}
            for i in range(0, len(full), 400):
                preds.update(dict(s.exec(select(Node.id, Node.type).where(Node.id.in_(full[i : i + 400]))).all()))  # type: ignore[union-attr]
            for r in full:
                a, b = ends[r]
                out.append(DisplayEdge(a, b, "relationship", preds.get(r, "")))
        if collapse_chunks:
            pairs: set[tuple[str, str]] = set()
            for i in range(0, len(lst), 400):
                for doc, ent in s.exec(select(Node.document_id, Edge.dst).join(Node, Node.id == Edge.src).where(
                        Edge.workspace_id == ws_id, Edge.kind == "mentions", Node.kind == "chunk",
                        Edge.dst.in_(lst[i : i + 400]))):  # type: ignore[attr-defined]
                    if doc in ids:
                        pairs.add((doc, ent))
            out += [DisplayEdge(d, e, "mentions") for d, e in sorted(pairs)]
    return out


_CDN = re.compile(r"<link[^>]+cdn\.jsdelivr\.net[^>]*/>\s*|<script[^>]+cdn\.jsdelivr\.net[^>]*>\s*</script>\s*", re.S)
_TOOLTIP_JS = """
<script>
// titles are escaped HTML built by Strata; render them as elements (vis shows strings as plain text)
(function () {
  if (typeof nodes === 'undefined') { return; }
  var updates = [];
  nodes.forEach(function (n) {
    if (typeof n.title === 'string') { var d = document.createElement('div'); d.innerHTML = n.title;
      d.style.maxWidth = '380px'; d.style.whiteSpace = 'normal'; updates.push({id: n.id, title: d}); }
  });
  nodes.update(updates);
  window.strataReady = true;
})();
</script>
"""


def to_pyvis_html(dg: DisplayGraph, height: int = 650, physics: bool = True) -> str:
    """Self-contained HTML (vis-network inlined, no CDN) drawing `dg`."""
    from pyvis.network import Network

    net = Network(height=f"{height}px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff")
    for n in dg.nodes:
        color = KIND_COLORS.get(n.kind, "#999")
        net.add_node(n.id, label=n.label, title=n.tooltip, color={"background": color, "border": color},
                     shape=KIND_SHAPES.get(n.kind, "dot"), size=n.size, kind=n.kind, font={"size": 12})
    for e in dg.edges:
        net.add_edge(e.src, e.dst, title=html.escape(f"{e.kind}: {e.label}" if e.label else e.kind),
                     color="#c8c8c8", width=1, arrows="to",
                     dashes=e.kind in ("in_community", "child_of"))
    net.set_options(_options(physics))
    page = net.generate_html(notebook=False)
    page = _CDN.sub("", page)
    return page.replace("</body>", _TOOLTIP_JS + "</body>")


def _options(physics: bool) -> str:
    import json

    return json.dumps({
        "physics": {"enabled": physics, "solver": "forceAtlas2Based",
                    "forceAtlas2Based": {"gravitationalConstant": -50, "springLength": 90},
                    "stabilization": {"iterations": 150}},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False},
        "edges": {"smooth": False},
    })



@dataclass
class NodeDetails:
    id: str
    kind: str
    title: str
    text: str
    facts: list[str]  # short "key: value" lines
    neighbours: dict[str, list[tuple[str, str]]]  # edge kind -> (id, title)


def describe_node(store, ws_id: int, node_id: str, per_kind: int = 15) -> NodeDetails | None:
    """Everything the details panel shows about one node of any kind."""
    with store.session() as s:
        n = s.get(Node, node_id)
        c = s.get(Community, node_id) if n is None else None
        d = s.get(Document, node_id) if n is None and c is None else None
        if n is not None:
            facts = [f"kind: {n.kind}", f"type: {n.type}" if n.type else "", f"layer: {n.layer}",
                     f"weight: {n.weight:g}"]
            if n.data.get("aliases"):
                facts.append("merged surface forms: " + ", ".join(sorted(n.data["aliases"])))
            det = NodeDetails(n.id, n.kind, n.title, n.text, [f for f in facts if f], {})
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
    groups: dict[str, list[str]] = {}
    for src, dst, kind in edges:
        other = dst if src == node_id else src
        label = kind if src == node_id else f"{kind} (in)"
        if len(groups.setdefault(label, [])) < per_kind:
            groups[label].append(other)
    names = {n.id: n.label for n in _materialize(store, ws_id, [i for lst in groups.values() for i in lst])}
    det.neighbours = {k: [(i, names.get(i, i)) for i in v] for k, v in groups.items()}
    return det
