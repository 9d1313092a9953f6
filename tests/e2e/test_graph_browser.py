"""The Graph page's levels of detail in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py`,
Debian's chromium, every request off the machine aborted). Once the sample has built, the Communities view draws
the top communities as super-nodes in the canvas component; a click on a super-node in the canvas opens it into
exactly its child communities and member entities; "Back" returns to the overview. vis-network is served by the
app from the local pyvis package: nothing leaves the machine, and no JS error is raised."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from core.explore.explorer import DEFAULT_METHODS
from tests.e2e.conftest import CANVAS, canvas_frame, click_node, open_page, shot, wait_for_sample_build

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
