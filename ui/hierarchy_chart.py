"""The hierarchy pictures in Vega-Lite (Streamlit's Altair charts): a sunburst (`mark_arc`), an icicle and a nested
treemap (`mark_rect`), drawn from core/explore/hierarchy_layout.py's geometry of a `HierarchyFrame`.

Vega-Lite rather than plotly: plotly's script is 4.7 MB, which the browser fetched, parsed and then drew with, about
3 s after the page opened (2.6 s to the Hierarchy page's first drawing on the 240-paragraph workspace); Vega's is
775 KB and draws in about 0.4 s (the two side by side on that workspace, one shared machine at load 4–10: plotly
4.7 s, Vega 2.6 s, medians of 6). Each top-level branch has its own colour, its descendants the same colour lighter
with depth; "N more" sectors are grey, the root neutral. A label is drawn only where its sector can hold it, cut to
fit; the tooltip says the title, where the sector sits (level or HiRAG layer) and its members. A click selects a
sector (the point selection `SELECTION`, on its id).

Document text (community titles) reaches the chart only as data values: Vega draws a label as text, never as HTML
or Markdown, and its tooltip escapes HTML, so nothing here needs plotly's escaping (`&`, `<`, `>` as entities).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from core.explore.hierarchy import HierarchyFrame, Sector, where
from core.explore.hierarchy_layout import Rect, Span, children, fit_two_lines, least_room, partition, treemap
from core.text import truncate

SELECTION = "sector"  # the point selection's name: `event.selection[SELECTION]` lists the clicked sectors' ids
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
MORE, ROOT, DARK, LIGHT = "#c9c9c9", "#eeeeee", "#1f1f1f", "#ffffff"
FONT = 11
WIDTH = 1000.0  # the width a treemap or icicle is laid out in (the chart stretches it to its container)
HEADER = 16.0  # a treemap parent's label strip


def _mix(colour: str, white: float) -> str:
    """`colour` (#rrggbb) mixed with `white` (0..1) of white."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * white):02x}" for c in rgb)


def _dark(colour: str) -> bool:
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5


def _edge(px: float) -> float:
    """The white outline of a sector `px` wide at its narrowest: thinner for slivers, whose outlines would hide
    their colour."""
    return 1.0 if px >= 6 else 0.5 if px >= 2 else 0.0


def colours(frame: HierarchyFrame, depth: dict[str, int]) -> dict[str, str]:
    """Sector id -> fill: each top-level branch a colour of `PALETTE`, its descendants the same colour lighter by
    depth, "N more" sectors grey, the root neutral."""
    branch: dict[str, int] = {}  # sector id -> its top-level branch's number (-1: grey)
    out: dict[str, str] = {}
    tops = 0
    for s in frame.sectors:  # a parent comes before its children in a frame
        if s.id not in depth:
            continue
        if s.kind == "root":
            out[s.id] = ROOT
            continue
        if depth[s.id] == 1 and s.kind != "more":
            branch[s.id], tops = tops, tops + 1
        else:
            branch[s.id] = branch.get(s.parent, -1) if depth[s.id] > 1 else -1
        base = MORE if s.kind == "more" or branch[s.id] < 0 else PALETTE[branch[s.id] % len(PALETTE)]
        out[s.id] = _mix(base, 1 - 0.78 ** (depth[s.id] - 1))
    return out


def _row(frame: HierarchyFrame, s: Sector, fill: str) -> dict:
    """A sector's data: its id and its parent's, what the tooltip and the mark's aria-label say, its colours."""
    title, at = truncate(s.title, 120), where(frame.method, s)
    return {"id": s.id, "parent": s.parent, "title": title, "where": at, "members": f"{s.size:,}", "colour": fill,
            "ink": LIGHT if _dark(fill) else DARK, "about": f"{title} · {at} · {s.size:,} members"}


def _placed(frame: HierarchyFrame, places: dict[str, Span] | dict[str, Rect]) -> Iterator[tuple[Sector, Any, dict]]:
    """Each sector `places` holds, in the frame's order: the sector, its place, and its data row's common part."""
    fill = colours(frame, {i: p.depth for i, p in places.items()})
    for s in frame.sectors:
        if s.id in places:
            yield s, places[s.id], _row(frame, s, fill[s.id])


def _box(x0: float, y0: float, x1: float, y1: float, ty: float, narrowest: float, label: str) -> dict:
    """A rectangle's geometry in the `WIDTH`-wide layout, its label's height, and the room the label has."""
    return {"x0": x0, "x1": x1, "y0": y0, "y1": y1, "ty": ty, "edge": _edge(narrowest), "label": label,
            "room": (x1 - x0) / WIDTH, "least": least_room(label, FONT)}


def sunburst_rows(frame: HierarchyFrame, spans: dict[str, Span], radius: float) -> list[dict]:
    """Rows of the sunburst: angles in radians, rings in depth units (ring d spans [d, d + 1]); a label where it
    fits, along the ring (tangential) when that holds more of it, else across it (radial), never upside down; `room`
    the px it may take (Vega cuts it there)."""
    ring = radius / (max(sp.depth for sp in spans.values()) + 1)
    rows = []
    for s, sp, row in _placed(frame, spans):
        t0, t1 = sp.start * 2 * math.pi, sp.end * 2 * math.pi
        mid, r_in = (t0 + t1) / 2, sp.depth * ring
        row |= {"t0": t0, "t1": t1, "r0": sp.depth, "r1": sp.depth + 1, "tm": mid, "rm": sp.depth + 0.5,
                "angle": 0.0, "label": "", "room": 0.0, "edge": _edge((t1 - t0) * max(r_in, ring))}
        if sp.depth == 0:
            row |= {"rm": 0.0, "label": fit_two_lines(s.label, 2 * ring - 12, FONT), "room": 2 * ring - 12}
        elif t1 - t0 > 0:
            r_mid, half = r_in + ring / 2, (t1 - t0) / 2
            along = min(2 * math.sqrt(max(0.0, (r_in + ring - 3) ** 2 - r_mid ** 2)),
                        2 * r_mid * math.tan(min(half, 1.2))) - 6 if ring >= FONT + 6 else 0.0
            across = ring - 8 if half * 2 * r_in >= FONT + 2 else 0.0
            deg = math.degrees(mid)
            room, angle = ((along, deg if not 90 < deg < 270 else deg - 180) if along >= across
                           else (across, deg - 90 if deg <= 180 else deg + 90))
            row |= {"label": s.label if room >= least_room(s.label, FONT) else "", "room": room, "angle": angle % 360}
        rows.append(row)
    return rows


def icicle_rows(frame: HierarchyFrame, spans: dict[str, Span], height: float) -> list[dict]:
    """Rows of the icicle, laid out in `WIDTH` × `height` (y down): a column per depth (the root's half as wide,
    at the left), a sector's height its share; labels run along the columns, where a sector is tall enough."""
    col = WIDTH / (max(sp.depth for sp in spans.values()) + 0.5)
    rows = []
    for s, sp, row in _placed(frame, spans):
        x0, x1, y0, y1 = max(0.0, sp.depth - 0.5) * col, (sp.depth + 0.5) * col, sp.start * height, sp.end * height
        rows.append(row | _box(x0, y0, x1, y1, (y0 + y1) / 2, y1 - y0, s.label if y1 - y0 >= FONT + 3 else ""))
    return rows


def treemap_rows(frame: HierarchyFrame, height: float) -> list[dict]:
    """Rows of the treemap, laid out in `WIDTH` × `height` (y down); the label sits in a parent's header strip or
    at a leaf's top left."""
    rects, kids = treemap(frame, WIDTH, height, header=HEADER), children(frame)
    rows = []
    for s, r, row in _placed(frame, rects):
        label = s.label if r.head or (s.id not in kids and r.height >= FONT + 4) else ""  # never under children
        rows.append(row | _box(r.x0, r.y0, r.x1, r.y1, r.y0 + HEADER / 2, min(r.width, r.height), label))
    return rows


def hierarchy_chart(frame: HierarchyFrame, view: str = "sunburst", height: int = 620, select: bool = True):
    """The Vega-Lite chart of `frame` as a sunburst, treemap or icicle, `height` px high and as wide as its
    container; with `select`, a click selects a sector (the point selection `SELECTION`, on its id)."""
    import altair as alt
    import pandas as pd

    if view == "sunburst":
        radius = height / 2 - 4
        spans = partition(frame)
        rows = sunburst_rows(frame, spans, radius)
        r_scale = alt.Scale(type="linear", domain=[0, max(sp.depth for sp in spans.values()) + 1],
                            range=[0, radius], zero=True)
        shape = alt.Chart().mark_arc(stroke=LIGHT, cursor="pointer").encode(
            theta=alt.Theta("t0:Q", scale=None), theta2="t1:Q", radius=alt.Radius("r0:Q", scale=r_scale),
            radius2="r1:Q")
        text = alt.Chart().mark_text(fontSize=FONT, baseline="middle", align="center", cursor="pointer",
                                     lineBreak="\n", limit=alt.ExprRef("datum.room")).encode(
            theta=alt.Theta("tm:Q", scale=None), radius=alt.Radius("rm:Q", scale=r_scale),
            angle=alt.Angle("angle:Q", scale=None), text="label:N")
    else:
        rows = icicle_rows(frame, partition(frame), height) if view == "icicle" else treemap_rows(frame, height)
        x = alt.X("x0:Q", scale=alt.Scale(domain=[0, WIDTH]), axis=None)  # stretched to the container's width
        y = alt.Y("y0:Q", scale=alt.Scale(domain=[0, height], range=[0, height]), axis=None)
        text_y = alt.Y("ty:Q", scale=alt.Scale(domain=[0, height], range=[0, height]), axis=None)
        room = "datum.room * width"  # the sector's width on screen, px
        shape = alt.Chart().mark_rect(stroke=LIGHT, cursor="pointer").encode(
            x=x, x2="x1:Q", y=y, y2="y1:Q")
        text = alt.Chart().mark_text(fontSize=FONT, baseline="middle", align="left", dx=4, cursor="pointer",
                                     limit=alt.ExprRef(f"max(0, {room} - 8)")).encode(
            x=x, y=text_y, text=alt.condition(f"{room} - 8 >= datum.least", alt.Text("label:N"), alt.value("")))
    tooltip = [alt.Tooltip("title:N"), alt.Tooltip("where:N"), alt.Tooltip("members:N")]
    about = alt.Description("about:N")  # each mark's aria-label (Vega's default lists every encoded field)
    shape = shape.encode(color=alt.Color("colour:N", scale=None), tooltip=tooltip, description=about,
                         strokeWidth=alt.StrokeWidth("edge:Q", scale=None))
    text = text.transform_filter("datum.label != ''").encode(color=alt.Color("ink:N", scale=None), tooltip=tooltip,
                                                             description=about)
    if select:  # on the shapes; a click on a label selects its sector too (its datum carries the same id)
        sel = alt.selection_point(fields=["id"], name=SELECTION)
        shape = shape.encode(opacity=alt.condition(sel, alt.value(1.0), alt.value(0.45))).add_params(sel)
    chart = alt.layer(shape, text, data=pd.DataFrame(rows))
    return chart.properties(height=height, width="container").configure_view(stroke=None)
