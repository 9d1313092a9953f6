"""The pictures' geometry (core/explore/hierarchy_layout.py) on hand-made frames: the partition (sunburst rings,
icicle columns) and the nested squarified treemap tile their parents, keep areas proportional to values, never
overlap among siblings, and put each sector at its depth; squarify keeps aspect ratios low; labels are cut to fit."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from core.explore.hierarchy import HierarchyFrame, Sector
from core.explore.hierarchy_layout import (
    CHAR_WIDTH,
    Rect,
    children,
    fit_label,
    fit_two_lines,
    least_room,
    partition,
    squarify,
    treemap,
)

EPS = 1e-9



def aspect(r: Rect) -> float:
    """A rectangle's aspect ratio, ≥ 1 (∞ for a degenerate one)."""
    lo, hi = sorted((r.width, r.height))
    return hi / lo if lo > 0 else math.inf

def _frame(rows: list[tuple[str, str, float, str]]) -> HierarchyFrame:
    """(id, parent, value, kind) rows, a parent before its children, the root's parent ""."""
    return HierarchyFrame("leiden", [Sector(i, p, i, i, 0, int(v), k, value=v) for i, p, v, k in rows], 0, 0)


SMALL = _frame([("root", "", 10, "root"), ("more:root", "root", 0.5, "more"), ("A", "root", 6, "community"),
                ("B", "root", 3.5, "community"), ("A1", "A", 3, "community"), ("A2", "A", 3, "community"),
                ("B1", "B", 1, "community")])  # B holds 3.5 but its drawn child 1: a gap


def _random_frame(seed: int, n: int = 120) -> HierarchyFrame:
    """A random tree under one root, values rolled up as the frame does (a parent never smaller than its
    children, sometimes larger), one "N more" per parent now and then."""
    rng = random.Random(seed)
    parent = {"r": ""}
    kind = {"r": "root"}
    for k in range(n):
        p = rng.choice([i for i in parent if kind[i] != "more" and len(i) < 8])
        i = f"{p}.{k}"
        parent[i], kind[i] = p, "more" if rng.random() < 0.1 else "community"
    size = {i: rng.randint(1, 30) for i in parent}
    value: dict[str, float] = {}
    for i in sorted(parent, key=len, reverse=True):  # deeper first
        below = sum(value[c] for c in parent if parent[c] == i)
        value[i] = max(float(size[i]), below)
    order = sorted(parent, key=lambda i: (i.count("."), i))
    return _frame([(i, parent[i], value[i], kind[i]) for i in order])


def _depths(frame: HierarchyFrame) -> dict[str, int]:
    par = {s.id: s.parent for s in frame.sectors}

    def d(i: str) -> int:
        return 0 if not par[i] else 1 + d(par[i])

    return {i: d(i) for i in par}


def _overlap(a: Rect, b: Rect) -> float:
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))


def test_partition_of_a_small_frame():
    spans = partition(SMALL)
    assert spans["root"].depth == 0 and (spans["root"].start, spans["root"].end) == (0.0, 1.0)
    # children in the frame's order, the "N more" sector last; a share is value / the parent's value
    assert [(s, round(spans[s].start, 9), round(spans[s].end, 9)) for s in ("A", "B", "more:root")] == [
        ("A", 0.0, 0.6), ("B", 0.6, 0.95), ("more:root", 0.95, 1.0)]
    assert (spans["A1"].start, spans["A1"].end, spans["A2"].end) == (0.0, pytest.approx(0.3), pytest.approx(0.6))
    assert spans["B1"].start == pytest.approx(0.6) and spans["B1"].end == pytest.approx(0.7)  # the rest of B: a gap
    assert {i: sp.depth for i, sp in spans.items()} == _depths(SMALL)


@pytest.mark.parametrize("seed", range(6))
def test_partition_children_tile_their_parent_in_proportion(seed):
    frame = _random_frame(seed)
    spans, kids = partition(frame), children(frame)
    by = {s.id: s for s in frame.sectors}
    assert set(spans) == set(by) and {i: sp.depth for i, sp in spans.items()} == _depths(frame)
    for p, lst in kids.items():
        span = spans[p]
        at = span.start
        for c in lst:  # side by side from the parent's start, in order, never overlapping
            assert spans[c.id].start == pytest.approx(at, abs=EPS) and spans[c.id].end >= spans[c.id].start
            assert spans[c.id].end - spans[c.id].start == pytest.approx(
                (span.end - span.start) * c.value / by[p].value, abs=EPS)
            at = spans[c.id].end
        assert at <= span.end + EPS
        filled = sum(c.value for c in lst)
        if filled == by[p].value:  # values add up: the children tile the parent exactly
            assert at == pytest.approx(span.end, abs=EPS)
        assert [c.kind == "more" for c in lst] == sorted(c.kind == "more" for c in lst)  # "N more" last


def test_a_frame_of_one_root_and_an_empty_frame():
    one = _frame([("root", "", 5, "root")])
    assert partition(one) == {"root": partition(one)["root"]} and partition(one)["root"].depth == 0
    assert treemap(one, 300, 200) == {"root": Rect(0, 0.0, 0.0, 300, 200)}
    empty = HierarchyFrame("leiden", [], 0, 0)
    assert partition(empty) == {} and treemap(empty) == {}


def test_squarify_tiles_in_proportion_with_low_aspect_ratios():
    values = [6.0, 6.0, 4.0, 3.0, 2.0, 2.0, 1.0]  # Bruls et al.'s example, in a 6 × 4 rectangle
    rects = [Rect(1, *r) for r in squarify(values, 0, 0, 6, 4)]
    assert [r.width * r.height for r in rects] == pytest.approx(values)
    assert all(_overlap(a, b) == pytest.approx(0, abs=EPS) for a, b in itertools.combinations(rects, 2))
    assert all(0 <= r.x0 <= r.x1 <= 6 + EPS and 0 <= r.y0 <= r.y1 <= 4 + EPS for r in rects)
    assert max(aspect(r) for r in rects) <= 3.0  # the paper's layout: at most 3 (the slice layout: 24)
    square = [Rect(1, *r) for r in squarify([1.0] * 16, 0, 0, 100, 100)]
    assert max(aspect(r) for r in square) <= 1.5
    skewed = [Rect(1, *r) for r in squarify(sorted([50.0, 20, 10, 5, 5, 3, 3, 2, 1, 1], reverse=True), 0, 0, 160, 90)]
    assert max(aspect(r) for r in skewed) <= 4.0
    assert squarify([], 0, 0, 10, 10) == []


@pytest.mark.parametrize("seed", range(6))
def test_treemap_nests_children_inside_their_parent_in_proportion(seed):
    frame = _random_frame(seed, 400)  # large enough that parents start at every kind of float coordinate
    by, kids = {s.id: s for s in frame.sectors}, children(frame)
    exact = treemap(frame, 1000, 620, pad=0, header=0)
    assert {i: r.depth for i, r in exact.items()} == _depths(frame)
    padded = treemap(frame, 1000, 620)
    for p, lst in kids.items():
        parent, area = exact[p], exact[p].width * exact[p].height
        for c in lst:  # without padding the children take their value's share of the parent's area
            r = exact[c.id]
            assert r.width * r.height == pytest.approx(area * c.value / by[p].value, rel=1e-6, abs=1e-6)
            assert parent.x0 - EPS <= r.x0 <= r.x1 <= parent.x1 + EPS and parent.y0 - EPS <= r.y0 <= r.y1 <= parent.y1 + EPS
        if sum(c.value for c in lst) == by[p].value:  # and tile it when the values add up
            assert sum(exact[c.id].width * exact[c.id].height for c in lst) == pytest.approx(area, rel=1e-6)
        for a, b in itertools.combinations(lst, 2):  # siblings never overlap, padded or not
            assert _overlap(exact[a.id], exact[b.id]) <= 1e-6 and _overlap(padded[a.id], padded[b.id]) <= 1e-6
        pr = padded[p]
        assert pr.head == (16 if pr.width > 4 * 2 + 40 and pr.height > 16 + 2 * 2 + 24 else 0)  # room: a header
        inside = [padded[c.id] for c in lst]
        assert all(pr.x0 - EPS <= r.x0 and r.x1 <= pr.x1 + EPS and pr.y0 + pr.head - EPS <= r.y0 and
                   r.y1 <= pr.y1 + EPS for r in inside)  # below its header strip
        areas = [r.width * r.height for r in inside]
        if pr.head and min(areas) > 0:  # padded: the children still share the room left in proportion
            ratio = [a / by[c.id].value for a, c in zip(areas, lst)]
            assert max(ratio) == pytest.approx(min(ratio), rel=1e-6)


def test_a_parent_large_enough_keeps_a_header_and_pads():
    rects = treemap(SMALL, 1000, 620, pad=2, header=16)
    assert rects["root"].head == 16 and rects["A"].head == 16
    assert rects["A1"].y0 == pytest.approx(rects["A"].y0 + 16)
    assert min(r.x0 for i, r in rects.items() if i in ("A1", "A2")) == pytest.approx(rects["A"].x0 + 2)
    assert rects["A1"].head == 0  # a leaf keeps no strip
    # B's drawn child holds 1 of its 3.5: it takes that share of B's inner room, the rest stays empty
    inner_b = (rects["B"].width - 4) * (rects["B"].height - 18)
    assert rects["B1"].width * rects["B1"].height == pytest.approx(inner_b / 3.5, rel=1e-6)


def test_labels_fit_their_room():
    assert fit_label("Harbour works", 200) == "Harbour works"
    room = 8 * CHAR_WIDTH * 11
    cut = fit_label("Harbour works and gates", room)
    assert cut.endswith("…") and len(cut) <= 8 and "Harbour works and gates".startswith(cut[:-1])
    assert fit_label("Harbour works and gates", 2 * CHAR_WIDTH * 11) == ""  # too little of it would show
    assert fit_label("21 extracted entities", 6 * CHAR_WIDTH * 11) == ""  # "21…" would say nothing
    assert least_room("6 more") == 6 * CHAR_WIDTH * 11 and least_room("Harbour works and gates") == 7 * CHAR_WIDTH * 11
    two = fit_two_lines("Leiden communities (GraphRAG)", 20 * CHAR_WIDTH * 11)
    assert two == "Leiden communities\n(GraphRAG)"
    assert fit_two_lines("Leiden", 20 * CHAR_WIDTH * 11) == "Leiden"
    assert all(len(line) * CHAR_WIDTH * 11 <= 10 * CHAR_WIDTH * 11 for line in
               fit_two_lines("Attributed communities (ArchRAG)", 10 * CHAR_WIDTH * 11).split("\n"))
    assert not math.isnan(aspect(Rect(0, 0, 0, 2, 1)))
