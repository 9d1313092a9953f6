"""The Ask page in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py` on an empty STRATA_HOME,
Debian's chromium, every request off the machine aborted): once the sample workspace has built on first start, a
question put to two strategies side by side (naive and HiRAG) shows both answers, each opening with its best
evidence and its evidence chain drawn small, then their panels and sources, and, one switch away, each one's whole
path drawn on the graph; the question is then in the history, whose JSON export downloads; an item's "Show on
graph" opens the Graph page on its node."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import CANVAS, canvas_frame, open_page, shot, wait_for_sample_build

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

QUESTION = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"



def _pick(pg, label: str) -> None:
    """Add `label` to the Strategies multiselect."""
    box = pg.locator("[data-testid='stMultiSelect']", has_text="Strategies")
    box.locator("input").first.click()
    pg.get_by_role("option", name=label, exact=True).click()
    pg.keyboard.press("Escape")


def test_two_strategies_side_by_side_with_their_panels_and_drawn_paths(app_server, page):
    from playwright.sync_api import expect

    url, _home, log_path = app_server
    pg = page
    try:
        # the sample builds in the background on first start; the Build page says when it is done
        wait_for_sample_build(pg, url)

        open_page(pg, "Ask")
        ms = pg.locator("[data-testid='stMultiSelect']", has_text="Strategies")
        expect(ms).to_contain_text("HiRAG")  # the default
        _pick(pg, "Naive chunk search")
        expect(ms).to_contain_text("Naive chunk search")
        # a rerun before Ask (the research switch, on and off) keeps the strategies picked and not yet asked
        for _ in range(2):
            pg.locator("label", has_text="Research: ablations").click()
            pg.wait_for_timeout(1500)
            expect(ms).to_contain_text("Naive chunk search")
        pg.get_by_label("Question").fill(QUESTION)
        pg.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()

        # both answers, side by side, each with its three panels, sources and a drawn path
        heads = pg.get_by_role("heading", name=re.compile(r"^Answer · "))
        expect(heads).to_have_count(2, timeout=120_000)
        assert "HiRAG" in heads.nth(0).inner_text() and "Naive" in heads.nth(1).inner_text()
        boxes = [heads.nth(i).bounding_box() for i in (0, 1)]
        assert boxes[0]["x"] < boxes[1]["x"] and abs(boxes[0]["y"] - boxes[1]["y"]) < 5  # side by side
        for i in (0, 1):
            answer, column = pg.locator(f".st-key-answer_{i}"), pg.locator(f".st-key-details_{i}")
            for section in ("Local", "Bridge", "Global"):
                expect(column.get_by_role("tab", name=re.compile(rf"^{section} \(\d+\)$"))).to_be_visible()
            expect(column.get_by_role("heading", name="Sources")).to_be_visible()
            expect(column.locator("[data-testid='stExpander'] summary")
                   .filter(has_text=re.compile(r"\[\d+\] ")).first).to_be_visible()
            # first its answer block (offline: the best evidence, cited) and its evidence chain, drawn small
            expect(answer.locator(f".st-key-evidence_{i}")).to_contain_text("Best evidence")
            expect(answer.locator(f".st-key-evidence_{i}")).to_contain_text(re.compile(r"\[\d+\] "))
            expect(answer.locator(f".st-key-chain_{i} {CANVAS}")).to_have_count(1)
            assert (answer.locator(f".st-key-evidence_{i}").bounding_box()["y"]
                    < column.get_by_role("heading", name="Sources").bounding_box()["y"])
            # the details in the answer's column, below it (read until the chain's frame has its height: the
            # column grows when the drawing reports its size, and the details move down with it)
            for _ in range(50):
                box, below = answer.bounding_box(), column.bounding_box()
                if abs(box["x"] - below["x"]) < 5 and below["y"] >= box["y"] + box["height"] - 1:
                    break
                pg.wait_for_timeout(100)
            assert abs(box["x"] - below["x"]) < 5 and below["y"] >= box["y"] + box["height"] - 1, (box, below)
        # the whole paths wait for their switch, then draw full width below the columns, one tab per strategy
        assert pg.locator(".st-key-path_0").count() == 0
        pg.locator("label", has_text="Show the whole retrieval paths").click()
        for i in (0, 1):
            expect(pg.locator(f".st-key-path_{i} .route-legend")).to_contain_text("entry")
        hirag = pg.locator(".st-key-details_0")
        items = hirag.locator(".st-key-panel_0_local [data-testid='stExpander']")
        expect(items.first).to_be_visible()
        items.first.locator("summary").click()
        expect(items.first).to_contain_text("node ")
        node_id = re.search(r"node (\S+) ·", items.first.inner_text()).group(1)
        expect(items.first.get_by_role("button", name=re.compile("Show on graph"))).to_be_visible()
        # after its entities, HiRAG's local panel holds its text units (chunks), as HiRAG's context does
        expect(hirag.locator(".st-key-panel_0_local")).to_contain_text(  # the kinds, most first: HiRAG's 20,000-token text units
            re.compile(r"From \d+ (entity nodes, \d+ chunk|chunk nodes, \d+ entity)"))
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "ask-hirag-local")
        hirag.get_by_role("tab", name=re.compile(r"^Global \(\d+\)$")).click()
        expect(hirag.locator(".st-key-panel_0_global [data-testid='stExpander']").first).to_be_visible()

        for i in (0, 1):
            expect(pg.locator(f".st-key-route_{i} {CANVAS}")).to_have_count(1)
            handle = canvas_frame(pg, f".st-key-route_{i} {CANVAS}")
            roles = set(handle.evaluate("() => window.network.body.data.nodes.get().map(n => n.role)"))
            assert "entry" in roles and "result" in roles, roles
            if i == 0:
                assert "community" in roles, roles
                assert handle.evaluate("() => window.network.body.data.edges.length") > 0

        # the question is in the history, twice (one row per strategy), with a JSON export
        expect(pg.get_by_role("heading", name="History")).to_be_visible()
        download = pg.locator("[data-testid='stDownloadButton'] button", has_text="Download JSON")
        with pg.expect_download() as got:
            download.click()
        exported = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))["queries"]
        assert [(q["question"], q["strategy"]) for q in exported] == [(QUESTION, "hirag"), (QUESTION, "naive")]
        assert all(q["answer"] and q["result"]["sources"] for q in exported)
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "ask-side-by-side")

        # an item's "Show on graph" opens the Graph page on that node
        hirag.get_by_role("tab", name=re.compile(r"^Local \(\d+\)$")).click()
        items.first.get_by_role("button", name=re.compile("Show on graph")).click()
        expect(pg.locator("h1", has_text="Graph")).to_be_visible()
        expect(pg.get_by_text("Neighbourhood of the selected node.")).to_be_visible()
        expect(pg.locator(CANVAS)).to_have_count(1)
        handle = canvas_frame(pg)
        assert handle.evaluate(f"() => window.network.body.data.nodes.get({node_id!r}) !== null")
        assert not pg.js_errors, pg.js_errors
        assert not pg.blocked, pg.blocked  # nothing tried to leave the machine
    except BaseException:
        shot(pg, "ask-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
