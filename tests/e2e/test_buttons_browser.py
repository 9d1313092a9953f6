"""The buttons the other browser tests do not press, pressed in a real browser on the sample workspace: on the
Graph page a click on a node in the Nodes view (its details), "Open this community", "Draw its neighbourhood",
"Back to the overview", and the three exports (the view as GraphML, the whole graph as JSON, the communities as
CSV), each read back; on the Build page "Build / resume" and "Stop". No Streamlit exception box, no JS error."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import networkx as nx
import pytest

from tests.e2e.conftest import (
    assert_page_clean,
    canvas_frame,
    canvas_nodes,
    click_node,
    first_clickable,
    open_page,
    shot,
    wait_for_sample_build,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

def _download(pg, name) -> Path:
    from playwright.sync_api import expect

    button = pg.locator("[data-testid='stDownloadButton']").get_by_role("button", name=name, exact=True)
    expect(button).to_have_count(1)
    with pg.expect_download() as got:
        button.click()
    return Path(got.value.path())


def test_graph_and_build_buttons(app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)

        # Graph, Nodes view: a click on a community node shows its details; "Open this community" opens it
        open_page(pg, "Graph")
        community = first_clickable(pg, [n["id"] for n in canvas_nodes(pg) if n["kind"] == "community"])
        click_node(pg, community)
        details = pg.locator(".st-key-graph_details")
        expect(details).to_be_visible()
        expect(details).to_contain_text("community")
        details.get_by_role("button", name=re.compile("Open this community")).click()
        expect(pg.locator(".st-key-graph_crumbs")).to_contain_text("›")
        expect(pg.locator(".st-key-graph_crumbs").get_by_role("button", name=re.compile("Back"))).to_be_enabled()
        assert_page_clean(pg)
        shot(pg, "buttons-01-community-opened")

        # "Draw its neighbourhood", then "Back to the overview"
        pg.locator(".st-key-graph_details").get_by_role("button", name=re.compile("Draw its neighbourhood")).click()
        expect(pg.get_by_text("Neighbourhood of the selected node.")).to_be_visible()
        pg.get_by_role("button", name="Back to the overview").click()
        expect(pg.get_by_text("Neighbourhood of the selected node.")).to_have_count(0)
        assert_page_clean(pg)

        # the exports, each read back
        pg.get_by_text("Export", exact=True).click()
        view = nx.read_graphml(_download(pg, "Download sample-view.graphml"))
        drawn = canvas_frame(pg).evaluate("() => window.network.body.data.nodes.length")
        assert view.number_of_nodes() == drawn > 0
        pg.locator("[data-testid='stRadio'] label", has_text="Whole graph").click()
        pg.locator("[data-testid='stSelectbox']", has_text="Format").click()
        pg.get_by_role("option", name="json").click()
        whole = json.loads(_download(pg, "Download sample-graph.json").read_text(encoding="utf-8"))
        assert len(whole["nodes"]) > view.number_of_nodes() and whole["edges"]
        rows = list(csv.DictReader(io.StringIO(_download(pg, "Download the communities (CSV)").read_text(
            encoding="utf-8-sig"))))  # (a BOM, for spreadsheets)
        assert rows and {"id", "method", "level", "title"} <= set(rows[0])
        assert_page_clean(pg)

        # Build: "Build / resume" starts a run, "Stop" stops it, and the page says so
        open_page(pg, "Build")
        start = pg.get_by_role("button", name="Build / resume")
        expect(start).to_be_enabled()
        start.click()
        stop = pg.get_by_role("button", name="Stop")
        expect(stop).to_be_enabled()
        stop.click()
        expect(pg.locator("[data-testid='stAlert']", has_text="Build stopped")).to_be_visible(timeout=120_000)
        expect(pg.locator("[data-testid='stSidebar']")).not_to_contain_text("Building", timeout=30_000)
        expect(start).to_be_enabled()
        assert_page_clean(pg)
        shot(pg, "buttons-02-build-stopped")
        assert not pg.blocked, pg.blocked
    except BaseException:
        shot(pg, "buttons-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
