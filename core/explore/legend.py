"""The Graph page's legend: what the shapes, colours, sizes and edge kinds of one drawing mean, read from the
drawing itself (`DisplayGraph`), so it lists only what is drawn. HTML of Strata's own names and colours only; a
colour group named after a community carries no title (no document text reaches it)."""

from __future__ import annotations

import html

from core.explore.display import KIND_COLORS, KIND_SHAPES, DisplayGraph, shape_svg
from core.explore.drawing import EDGE_COLORS

NODE_MEANINGS = {
    "entity": "entity (person, place, organisation, concept …)",
    "document": "document",
    "community": "community",
    "chunk": "passage of a document",
    "statement": "statement",
    "relationship": "relationship",
    "attribute": "attribute (NodeRAG)",
    "topic": "topic (HLG)",
}
EDGE_MEANINGS = {
    "relationship": "related: extracted relationships between two entities (hover: how many)",
    "links": "relationships between the members of two communities (thicker: more)",
    "in_community": "member of a community",
    "child_of": "sub-community of",
    "summarizes": "summarized by a HiRAG summary entity",
    "mentions": "a passage of the document mentions the entity",
    "derived_from": "taken from",
    "next": "the next passage",
    "subject": "subject of a relationship",
    "object": "object of a relationship",
    "semantic": "similar meaning",
    "has_attribute": "attribute of",
    "in_topic": "in a topic",
}
DASHED = ("in_community", "child_of")
ORDER = list(NODE_MEANINGS)  # kinds in the legend: entities first


def symbol(shape: str, fill: str) -> str:
    return shape_svg(shape, fill, fill, 1.0)


def line(color: str, dashed: bool, width: float = 2) -> str:
    dash = ' stroke-dasharray="4,3"' if dashed else ""
    return (f'<svg width="26" height="10" style="vertical-align:middle"><line x1="1" y1="5" x2="25" y2="5" '
            f'stroke="{color}" stroke-width="{width}"{dash}/></svg>')


def _item(marks: str, text: str, cls: str) -> str:
    return (f'<span class="{cls}" style="display:inline-block;margin:0 12px 3px 0;white-space:nowrap">{marks} '
            f"{html.escape(text)}</span>")


def legend_html(dg: DisplayGraph, sized_by: str = "") -> str:
    """Shapes and colours of the drawn nodes (one item per meaning, with up to six swatches when a meaning has
    several colours), the drawn edge kinds with their line, and what a node's size says."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for n in sorted(dg.nodes, key=lambda n: (ORDER.index(n.kind) if n.kind in ORDER else len(ORDER), bool(n.group))):
        what = n.group or NODE_MEANINGS.get(n.kind, n.kind)
        shape, colours = groups.setdefault(what, (n.shape or KIND_SHAPES.get(n.kind, "dot"), []))
        colour = n.color or KIND_COLORS.get(n.kind, "#999999")
        if colour not in colours:
            colours.append(colour)
    nodes = [_item("".join(symbol(shape, c) for c in colours[:6]) + (" …" if len(colours) > 6 else ""), what,
                   "graph-legend-node") for what, (shape, colours) in groups.items()]
    kinds = list(dict.fromkeys(e.kind for e in dg.edges))
    edges = [_item(line(EDGE_COLORS.get(k, "#c8c8c8"), k in DASHED or (k == "mentions" and any(
        e.shown for e in dg.edges))), EDGE_MEANINGS.get(k, k.replace("_", " ")), "graph-legend-edge") for k in kinds]
    size = [f'<span style="color:#666">size: {html.escape(sized_by)}</span>'] if sized_by else []
    return ('<div class="graph-legend" style="font-size:12.5px;line-height:1.6">' + "".join(nodes)
            + ("<br>" + "".join(edges) if edges else "") + ("<br>" + "".join(size) if size else "") + "</div>")


def sized_by(dg: DisplayGraph, by_documents: bool) -> str:
    """What a node's size means in `dg`."""
    parts = []
    if any(n.members for n in dg.nodes):
        parts.append("a community by " + ("the documents its members appear in" if by_documents
                                          else "its member entities"))
    if any(n.kind == "entity" for n in dg.nodes):
        parts.append("an entity by its mentions")
    return "; ".join(parts)
