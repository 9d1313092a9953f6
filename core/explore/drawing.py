"""How a `DisplayGraph` becomes vis-network data: node and edge dicts, options (physics, hierarchical layout), a
layout computed in the engine, and the payload the canvas component draws (the Graph page; the Ask page's paths
build theirs in core/explore/route.py with the same `positions` and `canvas_payload`).

The layout is Fruchterman-Reingold (igraph) from a fixed circle, so a view always opens the same way and draws at
once with physics off; with physics on, vis-network starts from it and needs few iterations. Tooltips are the
escaped HTML of `display.tooltip`; labels travel as JSON and vis draws them on the canvas as text.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import random

import numpy as np

from core.explore.display import KIND_COLORS, KIND_SHAPES, DisplayEdge, DisplayGraph, DisplayNode, hierarchy_levels
from core.explore.explore_index import ExploreIndex

LEVEL_COLORS = ["#5B8E7D", "#E07A5F", "#3D405B", "#D4A017", "#81B29A", "#9C6644", "#6D597A"]
METHOD_COLORS = {"leiden": "#5B8E7D", "hirag": "#7B5EA7", "noderag": "#F4A259", "attributed": "#E07A5F",
                 "wcc": "#8D99AE"}
EDGE_COLORS = {"links": "#8fb8ad", "in_community": "#b9c7d6", "child_of": "#9aa5b1", "summarizes": "#a48bc2",
               "relationship": "#7d8fa3", "mentions": "#d3c6a6"}
# one colour per branch of a hierarchy (super-nodes coloured by parent): Tableau's 10, then 4 more
BRANCH_COLORS = ["#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#76B7B2", "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F",
                 "#BAB0AC", "#2F4B7C", "#A05195", "#665191", "#D45087"]


def level_color(level: int) -> str:
    return LEVEL_COLORS[level % len(LEVEL_COLORS)]


def method_color(method: str) -> str:
    return METHOD_COLORS.get(method, "#8D99AE")


def branch_color(rank: int) -> str:
    return BRANCH_COLORS[rank % len(BRANCH_COLORS)]


def community_colors(ix: ExploreIndex, cs: list[int], color_by: str,
                     opened: int | None = None) -> dict[int, tuple[str, str]]:
    """(colour, what it means) of each super-node: by `method`, by `level`, or by `parent`: in the overview every
    community takes the colour of the top community it falls under (its root; a root its own), so one hierarchy's
    communities share a colour; in an opened community each child has its own (and its members take it,
    `member_colors`)."""
    if color_by == "method":
        return {c: (method_color(ix.comm_method[c]), f"{ix.comm_method[c]} community") for c in cs}
    if color_by != "parent":
        return {c: (level_color(int(ix.comm_level[c])), f"level {int(ix.comm_level[c])} community") for c in cs}
    branch = {c: c if opened is not None else (ix.ancestors(c) or [c])[0] for c in cs}
    order = sorted(set(branch.values()), key=lambda b: (-int(ix.comm_size[b]), ix.comm_ids[b]))
    rank = {b: i for i, b in enumerate(order)}
    what = "child community (its members in its colour)" if opened is not None else \
        "community (colour: the top community it falls under)"
    return {c: (branch_color(rank[branch[c]]), what) for c in cs}


def member_colors(ix: ExploreIndex, kids: list[int], colors: dict[int, tuple[str, str]]) -> dict[int, str]:
    """Entity index → the colour of the first (largest) drawn child community it belongs to."""
    out: dict[int, str] = {}
    for k in kids:
        for e in ix.members(k).tolist():
            out.setdefault(e, colors[k][0])
    return out


def vis_node(n: DisplayNode, level: int | None = None) -> dict:
    color = n.color or KIND_COLORS.get(n.kind, "#999999")
    d = {"id": n.id, "label": n.label, "title": n.tooltip, "kind": n.kind, "size": round(n.size, 1),
         "shape": n.shape or KIND_SHAPES.get(n.kind, "dot"),
         "color": {"background": color, "border": color, "highlight": {"background": color, "border": "#222222"}},
         "font": {"size": 14 if n.members else 12}}
    if n.members:
        d["members"] = n.members
        d["borderWidth"] = 2
    if n.x is not None and n.y is not None:
        d["x"], d["y"] = round(n.x, 1), round(n.y, 1)
    if level is not None:
        d["level"] = level
    return d


def vis_edge(e: DisplayEdge) -> dict:
    if e.kind == "links":
        w = max(1.0, e.weight)
        return {"from": e.src, "to": e.dst, "title": html.escape(f"{int(w):,} relationships between their members"),
                "color": EDGE_COLORS["links"], "width": round(min(10.0, 1 + 1.3 * math.log2(w)), 2), "kind": e.kind}
    text = f"{e.kind}: {e.label}" if e.label else e.kind
    if e.shown:  # a step of a path: its label on the line, no arrow
        return {"from": e.src, "to": e.dst, "title": html.escape(text), "kind": e.kind, "label": e.label,
                "font": {"size": 11, "align": "top", "color": "#444444"}, "color": EDGE_COLORS.get(e.kind, "#9aa5b1"),
                "width": 2, "dashes": e.kind == "mentions"}
    if e.kind == "relationship" and e.weight > 1:
        text = f"{int(e.weight):,} relationships" + (f" ({e.label}, …)" if e.label else "")
    return {"from": e.src, "to": e.dst, "title": html.escape(text), "kind": e.kind,
            "color": EDGE_COLORS.get(e.kind, "#c8c8c8"), "width": 1,
            "arrows": "" if e.kind == "relationship" and not e.label else "to",
            "dashes": e.kind in ("in_community", "child_of")}


def vis_options(physics: bool, hierarchical: bool, n_nodes: int, placed: bool = True, roomy: bool = False) -> dict:
    """vis-network options. With the nodes `placed` by `layout`, physics starts from there without a stabilization
    pass, so the drawing shows at once and settles on screen; a hierarchical layout is vis's own, stabilized.
    `roomy` (super-nodes drawn): physics keeps big nodes from overlapping."""
    iterations = 150 if n_nodes <= 300 else 60
    atlas: dict = {"gravitationalConstant": -50, "springLength": 90}
    if roomy:
        atlas.update(avoidOverlap=0.8, springLength=140)
    opts: dict = {
        "physics": {"enabled": physics, "solver": "forceAtlas2Based",
                    "forceAtlas2Based": atlas,
                    "stabilization": {"enabled": not placed, "iterations": iterations, "updateInterval": 50},
                    "minVelocity": 1.0},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": False, "hideEdgesOnDrag": n_nodes > 500},
        "edges": {"smooth": False},
        "layout": {"improvedLayout": n_nodes <= 150},
    }
    if hierarchical:
        opts["layout"]["hierarchical"] = {"enabled": True, "direction": "UD", "sortMethod": "directed",
                                          "levelSeparation": 160, "nodeSpacing": 110, "shakeTowards": "roots"}
        opts["physics"] = {"enabled": physics, "solver": "hierarchicalRepulsion",
                           "hierarchicalRepulsion": {"nodeDistance": 130, "avoidOverlap": 0.3},
                           "stabilization": {"iterations": iterations, "updateInterval": 50}}
    return opts


def positions(n: int, links: list[tuple[int, int, float]]) -> np.ndarray:
    """x, y for `n` nodes joined by `links` (a, b, weight): Fruchterman-Reingold from a circle, seeded (the same
    drawing always opens the same way), about 80·√n pixels across."""
    import igraph as ig

    if n <= 1:
        return np.zeros((n, 2))
    pairs = [(a, b) for a, b, _ in links if a != b]
    weights = [w for a, b, w in links if a != b]
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    start = np.column_stack([np.cos(angle), np.sin(angle)]) * math.sqrt(n)
    g = ig.Graph(n=n, edges=pairs)
    ig.set_random_number_generator(random.Random(n))  # a seeded generator of its own for this layout
    try:
        coords = np.array(g.layout_fruchterman_reingold(weights=weights or None, niter=300 if n <= 500 else 150,
                                                        seed=start.tolist()).coords)
    finally:
        ig.set_random_number_generator(random)  # igraph's default: Python's `random` module
    coords -= coords.mean(axis=0)
    span = float(np.abs(coords).max()) or 1.0
    return coords * ((80 * math.sqrt(n) + 60) / 2 / span)


def layout(dg: DisplayGraph) -> None:
    """x, y for every node of `dg` (`positions`, heavier links pulling harder)."""
    idx = {nd.id: i for i, nd in enumerate(dg.nodes)}
    links = [(idx[e.src], idx[e.dst], 1.0 + math.log1p(max(0.0, e.weight - 1))) for e in dg.edges
             if e.src in idx and e.dst in idx]
    for nd, (x, y) in zip(dg.nodes, positions(len(dg.nodes), links)):
        nd.x, nd.y = float(x), float(y)


def ensure_layout(dg: DisplayGraph) -> None:
    if any(n.x is None for n in dg.nodes):
        layout(dg)


def vis_payload(dg: DisplayGraph, height: int = 680, physics: bool = True, hierarchical: bool = False) -> dict:
    """What the canvas component draws: nodes, edges, options, and a `view` key naming this exact drawing (the
    component redraws only when it changes)."""
    if not hierarchical:
        ensure_layout(dg)
    levels = hierarchy_levels(dg) if hierarchical else {}
    return canvas_payload([vis_node(n, levels.get(n.id)) for n in dg.nodes], [vis_edge(e) for e in dg.edges],
                          vis_options(physics, hierarchical, len(dg.nodes), roomy=any(n.members for n in dg.nodes)),
                          height)


def canvas_payload(nodes: list[dict], edges: list[dict], options: dict, height: int) -> dict:
    """What the canvas component (ui/graph_canvas.py) draws, with a `view` key naming this exact drawing (the
    component redraws only when it changes)."""
    body = {"nodes": nodes, "edges": edges, "options": options, "height": height}
    key = hashlib.sha1(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    return {"view": key, **body}


def with_focus(payload: dict, node_id: str | None, centre: int = 0) -> dict:
    """The payload with a node to highlight (`focus`: ringed and selected) when it is drawn; the canvas centres it
    whenever `centre` is a number it has not centred for yet (0: never). Outside the `view` key: a new focus
    highlights without a redraw."""
    drawn = node_id is not None and any(n["id"] == node_id for n in payload["nodes"])
    return {**payload, "focus": {"id": node_id, "centre": int(centre)} if drawn else None}
