"""Where each sector of a hierarchy frame (core/explore/hierarchy.py) is drawn: pure geometry, no plotting import.

* `partition`: each sector's depth and its [start, end) span of the circle (sunburst: angle = span × 2π, ring =
  depth) or of the height (icicle: y = span, column = depth). The root spans [0, 1]; a child takes the share
  `value / parent value` of its parent's span, siblings side by side in the frame's order with an "N more" sector
  last. Values are rolled up bottom-up (a parent is never smaller than its children), so children never overflow
  their parent; where their values fall short of the parent's (soft or partial membership) a gap is left, as
  plotly's `branchvalues="total"` did, so every area stays true.
* `treemap`: nested squarified rectangles (Bruls, Huizing and van Wijk, "Squarified treemaps", 2000): a parent's
  children squarified inside its rectangle less a small padding and a header strip for its label, so the nesting
  shows; areas proportional to values among siblings.
* `fit_label`: a label cut to the room a sector has, or nothing when too little of it would show.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from core.explore.hierarchy import HierarchyFrame, Sector
from core.text import truncate

CHAR_WIDTH = 0.52  # a character's mean width in font sizes (Source Sans: 0.46 measured; a cut beats an overflow)


@dataclass(frozen=True)
class Span:
    depth: int
    start: float
    end: float


@dataclass(frozen=True)
class Rect:
    depth: int
    x0: float
    y0: float
    x1: float
    y1: float
    head: float = 0.0  # the strip at its top kept for its label (a parent large enough), 0 when none

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0


def root_of(frame: HierarchyFrame) -> Sector | None:
    return next((s for s in frame.sectors if not s.parent), None)


def children(frame: HierarchyFrame) -> dict[str, list[Sector]]:
    """Each sector's children in the frame's order, its "N more" sector last."""
    kids: dict[str, list[Sector]] = defaultdict(list)
    for s in frame.sectors:
        if s.parent:
            kids[s.parent].append(s)
    return {p: sorted(lst, key=lambda s: s.kind == "more") for p, lst in kids.items()}  # a stable sort


def partition(frame: HierarchyFrame) -> dict[str, Span]:
    """Sector id -> its depth and [start, end) span; sectors not reachable from the root are left out."""
    root = root_of(frame)
    if root is None:
        return {}
    kids, out = children(frame), {root.id: Span(0, 0.0, 1.0)}
    todo = [root]
    while todo:
        parent = todo.pop()
        span, at = out[parent.id], out[parent.id].start
        per_value = (span.end - span.start) / parent.value if parent.value > 0 else 0.0
        for child in kids.get(parent.id, ()):
            end = min(span.end, at + child.value * per_value)
            out[child.id] = Span(span.depth + 1, at, end)
            at = end
            todo.append(child)
    return out


def squarify(values: list[float], x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float, float,
                                                                                          float]]:
    """Rectangles (x0, y0, x1, y1) tiling the given one, their areas proportional to `values` (in that order; Bruls
    et al. lay out the largest first, so pass them sorted, largest first, for the best aspect ratios)."""
    total = sum(values)
    if total <= 0 or x1 <= x0 or y1 <= y0:
        return [(x0, y0, x0, y0) for _ in values]
    scale = (x1 - x0) * (y1 - y0) / total
    areas = [max(0.0, v) * scale for v in values]
    out: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        wide = x1 - x0 >= y1 - y0  # a row is laid along the shorter side: a column when wide, a strip when tall
        side = y1 - y0 if wide else x1 - x0
        row = [areas[i]]
        while i + len(row) < len(areas) and _worst(row + [areas[i + len(row)]], side) <= _worst(row, side):
            row.append(areas[i + len(row)])
        i += len(row)
        thick = sum(row) / side if side > 0 else 0.0
        if i == len(areas):  # the last row takes what is left: float error never leaves a sliver
            thick = x1 - x0 if wide else y1 - y0
        at = y0 if wide else x0
        for a in row:
            step = a / thick if thick > 0 else 0.0
            out.append((x0, at, x0 + thick, at + step) if wide else (at, y0, at + step, y0 + thick))
            at += step
        last = out[-1]  # the row's last rectangle ends where the row does
        out[-1] = (last[0], last[1], last[2], y1) if wide else (last[0], last[1], x1, last[3])
        if wide:
            x0 += thick
        else:
            y0 += thick
    return out


def _worst(row: list[float], side: float) -> float:
    """The worst aspect ratio of a row of areas laid along `side` (Bruls et al.'s `worst`)."""
    s = sum(row)
    if s <= 0 or side <= 0 or min(row) <= 0:
        return math.inf
    return max(side * side * max(row) / (s * s), s * s / (side * side * min(row)))


def treemap(frame: HierarchyFrame, width: float = 1000.0, height: float = 620.0, pad: float = 2.0,
            header: float = 16.0) -> dict[str, Rect]:
    """Sector id -> its rectangle in a `width` × `height` box (y down). A parent large enough keeps a `header`
    strip at its top (for its label) and `pad` on its other sides; its children are squarified in the rest, largest
    first. Where children's values fall short of their parent's, the shortfall takes its place and stays empty."""
    root = root_of(frame)
    if root is None:
        return {}
    kids, out = children(frame), {root.id: Rect(0, 0.0, 0.0, width, height)}
    todo = [root]
    while todo:
        parent = todo.pop()
        lst = sorted(kids.get(parent.id, ()), key=lambda s: -s.value)
        if not lst:
            continue
        box = out[parent.id]
        inner, head = _inner(box, pad, header)
        if head:
            out[parent.id] = box = Rect(box.depth, box.x0, box.y0, box.x1, box.y1, head)
        values = [s.value for s in lst]
        rest = max(0.0, parent.value - sum(values))
        order = sorted(range(len(values) + (rest > 0)), key=lambda k: -(values + [rest])[k])
        rects = squarify([(values + [rest])[k] for k in order], *inner)
        for k, r in zip(order, rects):
            if k < len(lst):
                out[lst[k].id] = Rect(box.depth + 1, *r)
                todo.append(lst[k])
    return out


def _inner(r: Rect, pad: float, header: float) -> tuple[tuple[float, float, float, float], float]:
    """The part of `r` its children fill, and the header strip kept above it: less the header and padding when
    they leave the children most of its room, less the padding alone when that does."""
    if r.width > 4 * pad + 40 and r.height > header + 2 * pad + 24:
        return (r.x0 + pad, r.y0 + header, r.x1 - pad, r.y1 - pad), header
    if r.width > 6 * pad and r.height > 6 * pad:
        return (r.x0 + pad, r.y0 + pad, r.x1 - pad, r.y1 - pad), 0.0
    return (r.x0, r.y0, r.x1, r.y1), 0.0


def fit_label(label: str, room: float, font: float = 11.0, least: int = 4) -> str:
    """`label` cut (at a word, with an ellipsis) to what `room` pixels hold at `font` px, or "" when fewer than
    `least` of its characters would show."""
    n = int(room / (CHAR_WIDTH * font))
    if n >= len(label):
        return label
    cut = truncate(label, n) if n > 1 else ""
    return cut if len(cut.rstrip("…").strip()) >= least else ""


def least_room(label: str, font: float = 11.0, least: int = 6) -> float:
    """The room (px) a label needs to be worth drawing: the whole of a short one, `least` characters of a long one
    (a cut label ends in an ellipsis), for a renderer that cuts labels itself (Vega's `limit`)."""
    return min(len(label), least + 1) * CHAR_WIDTH * font


def fit_two_lines(label: str, room: float, font: float = 11.0) -> str:
    """`label` on one line when it fits `room` px, else on two ("\\n" between them), split at the word that
    balances them best, each cut to fit."""
    words = label.split()
    if fit_label(label, room, font) == label or len(words) < 2:
        return fit_label(label, room, font)
    cut = min(range(1, len(words)), key=lambda k: abs(len(" ".join(words[:k])) - len(" ".join(words[k:]))))
    return "\n".join(fit_label(" ".join(part), room, font, least=1) for part in (words[:cut], words[cut:]))
