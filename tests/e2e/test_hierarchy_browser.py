"""The hierarchy in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py` on an empty STRATA_HOME,
Debian's chromium, every request off the machine aborted): the Build page draws the communities as a sunburst while
the sample workspace builds on first start; on the Hierarchy page a click on a sector (its arc, or its label) opens
that community's report, members and sources. The charts are Vega-Lite, drawn as SVG: a sector is an element of
role "graphics-symbol" whose aria-label says its title, level and members."""

from __future__ import annotations

import os
import re
import sqlite3
import time

import pytest

from tests.e2e.conftest import BUILD_TIMEOUT_MS, CANVAS, canvas_frame, open_page, shot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]



def _leiden_titles(home) -> dict[str, str]:
    with sqlite3.connect(home / "strata.db", timeout=10) as con:
        return dict(con.execute("select id, title from community where method = 'leiden'"))



def test_hierarchy_grows_on_the_build_page_and_a_click_opens_a_community(fresh_app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = fresh_app_server
    pg = page
    try:
        # 1. First start: the sample builds in the background; the Build page draws the hierarchy once it exists.
        pg.goto(url.rstrip("/") + "/build")
        expect(pg.locator("h1", has_text="Build")).to_be_visible(timeout=60_000)
        so_far = pg.locator(".st-key-hierarchy_so_far")
        expect(so_far).to_contain_text("Hierarchy so far", timeout=BUILD_TIMEOUT_MS)
        sectors = so_far.locator("[data-testid='stVegaLiteChart'] [aria-roledescription='arc mark']")
        expect(sectors.nth(1)).to_be_attached(timeout=30_000)  # the root and at least one community
        caption = so_far.locator("[data-testid='stCaptionContainer']").first.inner_text()
        m = re.search(r"Hierarchy so far: Leiden communities \(GraphRAG\), ([\d,]+) at level 0", caption)
        assert m, caption
        # every level-0 community has its sector; the live fragment redraws the picture every second, so a count
        # taken during a redraw can read 0: look again until it holds
        want, deadline = 1 + int(m.group(1).replace(",", "")), time.monotonic() + 30
        while sectors.count() < want and time.monotonic() < deadline:
            time.sleep(0.3)
        assert sectors.count() >= want, (sectors.count(), want)
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "h1-build-hierarchy-so-far")
        # the Hierarchy page reads a finished build
        done = pg.locator("[data-testid='stAlert']").filter(
            has_text=re.compile(r"Build \d+ finished|Build failed|stopped without finishing"))
        expect(done.first).to_be_visible(timeout=BUILD_TIMEOUT_MS)
        assert re.search(r"Build \d+ finished", done.first.inner_text()), done.first.inner_text()
        expect(so_far.locator("[data-testid='stVegaLiteChart']")).to_have_count(1)  # the picture stays after the build

        # 2. The Hierarchy page: a sunburst (Vega's SVG: each sector an arc mark whose aria-label says its title,
        # level and members); a click on a community's arc opens it below, and so does a click on a label.
        open_page(pg, "Hierarchy")
        chart = pg.locator("[data-testid='stVegaLiteChart']")
        arcs = chart.locator("[aria-roledescription='arc mark']")
        expect(arcs.nth(1)).to_be_attached(timeout=30_000)
        titles = _leiden_titles(home)
        assert titles
        detail = pg.locator(".st-key-hier_detail")
        expect(detail).to_have_count(0)
        heading = detail.locator("h3")
        communities = chart.locator("[aria-roledescription='arc mark'][aria-label*=' · level ']")
        labelled = {t.get_attribute("aria-label") for t in chart.locator("[aria-roledescription='text mark']").all()}
        plain = [a for a in communities.all() if a.get_attribute("aria-label") not in labelled]
        target = plain[0] if plain else communities.first  # an arc no label covers, where there is one
        about = target.get_attribute("aria-label") or ""
        target.click(force=True)
        expect(heading).to_be_visible(timeout=30_000)
        opened = heading.inner_text().strip()
        assert opened in titles.values(), (opened, sorted(titles.values())[:5])
        assert about.startswith(opened[:60]), (about, opened)
        # a label: the sector under it opens (the chart's one selection covers arcs and labels)
        labels = chart.locator("[aria-roledescription='text mark'][aria-label*=' · level ']")
        expect(labels.first).to_be_attached()
        other = next((t for t in labels.all() if not (t.get_attribute("aria-label") or "").startswith(opened[:60])),
                     None)
        assert other is not None, "no other labelled community"
        label = (other.text_content() or "").rstrip("…").strip()
        other.click()
        expect(heading).not_to_have_text(opened, timeout=30_000)
        opened = heading.inner_text().strip()
        assert opened in titles.values() and opened.startswith(label), (opened, label)
        expect(pg.get_by_role("combobox", name="Open a community")).to_have_value(
            re.compile("^" + re.escape(opened[:30])))  # the list beside the chart follows the click
        # its report, members and sources
        expect(detail).to_contain_text("importance")
        expect(detail.locator("[data-testid='stCaptionContainer']").first).to_contain_text("members")
        detail.get_by_role("tab", name="Members").click()
        expect(detail.get_by_text(re.compile(r"^Entity \(\d+\)$")).first).to_be_visible()
        detail.get_by_role("tab", name="Sources").click()
        expect(detail.get_by_text(re.compile(r"document\(s\) mention its members"))).to_be_visible()
        expect(detail.locator("[data-testid='stSelectbox']", has_text="Read a source document")).to_be_visible()
        detail.get_by_role("tab", name="Subgraph").click()
        expect(detail.locator(CANVAS)).to_have_count(1)
        canvas_frame(pg, f".st-key-hier_detail {CANVAS}")
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "h2-hierarchy-community-opened")
        assert not pg.js_errors, pg.js_errors
    except BaseException:
        shot(pg, "hierarchy-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
