"""The Graph page's levels of detail in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py`,
Debian's chromium, every request off the machine aborted). Once the sample has built, the Communities view draws
the top communities as super-nodes in the canvas component; a click on a super-node in the canvas opens it into
exactly its child communities and member entities; "Back" returns to the overview. A name typed in the search box
rings the person (not HiRAG's summaries of it) and centres it on the canvas; its details sit to the right of the
canvas; a node's tooltip goes on a click and stays gone while the pointer rests there. vis-network is served by the
app from the local pyvis package: nothing leaves the machine, and no JS error is raised."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.explore.explorer import DEFAULT_METHODS
from tests.e2e.conftest import (
    CANVAS,
    canvas_frame,
    click_node,
    first_clickable,
    open_page,
    shot,
    wait_for_sample_build,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]


def _graph(home: Path) -> tuple[dict[str, tuple], dict[str, set[str]]]:
    with sqlite3.connect(home / "strata.db", timeout=10) as con:
        comms = {i: (m, lv, p, t) for i, m, lv, p, t in con.execute(
            "select id, method, level, parent_id, title from community where method in (%s)"
            % ", ".join("?" * len(DEFAULT_METHODS)), DEFAULT_METHODS)}  # the methods the page opens on
        members: dict[str, set[str]] = {}
        for src, dst in con.execute("select src, dst from edge where kind = 'in_community'"):
            members.setdefault(dst, set()).add(src)
    return comms, members


def _drawn(frame) -> dict[str, dict]:
    return {n["id"]: n for n in frame.evaluate(
        "() => window.network.body.data.nodes.get().map(n => ({id: n.id, kind: n.kind, label: n.label}))")}


def test_super_nodes_open_on_a_click_in_the_canvas(app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)

        # the sample is small: the page opens on its nodes (in the same canvas); the Communities view is one
        # click away
        open_page(pg, "Graph")
        canvas = pg.locator(CANVAS)
        expect(canvas).to_have_count(1)
        expect(pg.locator("iframe[title='st.iframe']")).to_have_count(0)
        frame = canvas_frame(pg)
        assert {n["kind"] for n in _drawn(frame).values()} <= {"entity", "community", "document"}
        nodes_view = frame.evaluate("() => window.strataView")
        pg.locator("[data-testid='stRadio'] label", has_text="Communities").first.click()
        frame.wait_for_function(f"() => window.strataView !== {json.dumps(nodes_view)}", timeout=30_000)
        comms, members = _graph(home)
        roots = {i for i, (_, _, p, _) in comms.items() if not p or p not in comms}
        overview = _drawn(frame)
        assert set(overview) == roots
        assert {n["kind"] for n in overview.values()} == {"community"}
        view0 = frame.evaluate("() => window.strataView")

        # click the largest leiden community that has children, where the canvas draws it
        kids_of = {c: {k for k, (_, _, p, _) in comms.items() if p == c} for c in roots}
        target = max((c for c in roots if comms[c][0] == "leiden" and kids_of[c]), key=lambda c: len(members[c]))
        click_node(pg, target)
        frame.wait_for_function(f"() => window.strataView !== {json.dumps(view0)}", timeout=30_000)
        opened = _drawn(frame)
        assert set(opened) == kids_of[target] | members[target]  # exactly its children and its members
        assert {i for i, n in opened.items() if n["kind"] == "community"} == kids_of[target]
        expect(pg.locator(".st-key-graph_crumbs")).to_contain_text("Overview")
        expect(pg.locator("[data-testid='stCaptionContainer']", has_text="member entities").first).to_contain_text(
            f"{len(members[target]):,} member entities, {len(kids_of[target]):,} child communities")
        expect(pg.locator(".st-key-graph_details")).to_be_visible()  # the clicked community's details
        if __import__("os").environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "graph-community-open")

        # a click on a child opens it in turn; Back climbs up one level, then to the overview
        child = max(kids_of[target], key=lambda c: len(members.get(c, ())))
        view1 = frame.evaluate("() => window.strataView")
        click_node(pg, child)
        frame.wait_for_function(f"() => window.strataView !== {json.dumps(view1)}", timeout=30_000)
        kids = {k for k, (_, _, p, _) in comms.items() if p == child}
        assert set(_drawn(frame)) == kids | members[child]
        for expected in (set(opened), set(overview)):
            before = frame.evaluate("() => window.strataView")
            pg.get_by_role("button", name="Back").click()
            frame.wait_for_function(f"() => window.strataView !== {json.dumps(before)}", timeout=30_000)
            assert set(_drawn(frame)) == expected

        assert not pg.js_errors, pg.js_errors
        assert not pg.blocked, pg.blocked
    except BaseException:
        shot(pg, "graph-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise


def _person(home: Path, title: str) -> str:
    with sqlite3.connect(home / "strata.db", timeout=10) as con:
        return con.execute("select id from node where kind = 'entity' and layer = 0 and title = ?", (title,)).fetchone()[0]


def _settled(pg, frame, timeout_s: float = 30.0) -> None:
    """Wait until no node moves any more (physics stops at the latest 5 s after a drawing) and the view is still."""
    import time

    look = "() => JSON.stringify([window.network.getPositions(), window.network.getViewPosition(), " \
           "window.network.getScale()])"
    deadline, last = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        now = frame.evaluate(look)
        if now == last:
            return
        last = now
        pg.wait_for_timeout(500)
    raise AssertionError("the drawing never settled")


TOOLTIP = "() => { const t = document.querySelector('div.vis-tooltip'); return t ? getComputedStyle(t).visibility : ''; }"


def test_a_found_name_is_ringed_and_centred_and_a_click_leaves_no_tooltip(app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)
        open_page(pg, "Graph")
        frame = canvas_frame(pg)
        person = _person(home, "Amara Okafor")
        box = pg.get_by_role("textbox", name="Find a node by name")
        box.fill("Okafor")
        box.press("Enter")
        frame = canvas_frame(pg)
        frame.wait_for_function(f"() => window.strataFocus === {json.dumps(person)}", timeout=30_000)
        frame.wait_for_function(f"() => window.strataCentred === {json.dumps(person)}", timeout=30_000)
        _settled(pg, frame)
        canvas = pg.locator(CANVAS).first.bounding_box()
        at = frame.evaluate(f"() => window.network.canvasToDOM(window.network.getPositions([{json.dumps(person)}])"
                            f"[{json.dumps(person)}])")
        assert abs(at["x"] - canvas["width"] / 2) < 0.1 * canvas["width"], (at, canvas)
        assert abs(at["y"] - canvas["height"] / 2) < 0.1 * canvas["height"], (at, canvas)
        assert frame.evaluate("() => window.network.getSelectedNodes()") == [person]
        details = pg.locator(".st-key-graph_details")
        expect(details).to_contain_text("Amara Okafor")
        panel = details.bounding_box()
        assert panel["x"] >= canvas["x"] + canvas["width"]  # beside the canvas, not below it
        assert panel["y"] < canvas["y"] + canvas["height"] and panel["y"] + panel["height"] > canvas["y"]
        if __import__("os").environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "graph-found")

        # hover a node: its tooltip; click it: the tooltip goes, and stays gone while the pointer rests there
        shown = frame.evaluate("() => { const w = window.network.body.container.clientWidth, "
                               "h = window.network.body.container.clientHeight, p = window.network.getPositions(); "
                               "return Object.keys(p).filter(i => { const d = window.network.canvasToDOM(p[i]); "
                               "return d.x > 40 && d.y > 40 && d.x < w - 40 && d.y < h - 40; }); }")
        other = first_clickable(pg, [n for n in shown if n != person])  # on screen, not covered
        pos = frame.evaluate(f"() => window.network.canvasToDOM(window.network.getPositions([{json.dumps(other)}])"
                             f"[{json.dumps(other)}])")
        assert frame.evaluate(f"(p) => window.network.getNodeAt(p) === {json.dumps(other)}", pos)
        x, y = canvas["x"] + pos["x"], canvas["y"] + pos["y"]
        pg.mouse.move(x - 2, y - 2)
        pg.mouse.move(x, y)
        frame.wait_for_function(f"() => ({TOOLTIP})() === 'visible'", timeout=5_000)
        pg.mouse.click(x, y)
        frame.wait_for_function(f"() => window.strataFocus === {json.dumps(other)}", timeout=30_000)
        assert frame.evaluate(TOOLTIP) == "hidden"
        pg.mouse.move(x + 1, y + 1)
        pg.wait_for_timeout(1000)
        assert frame.evaluate(TOOLTIP) == "hidden"
        assert not pg.js_errors, pg.js_errors
        assert not pg.blocked, pg.blocked
    except BaseException:
        shot(pg, "graph-found-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
