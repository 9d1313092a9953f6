"""The Quality page in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py` whose first start
builds the sample workspace, Debian's chromium, every request off the machine aborted): the Metrics tab shows the
level's figures (the modularity the build recorded), its plots and the worst communities; the What-if tab runs a
variant at resolution 2 and shows the comparison table with NMI and ARI against the current partition; the worst
community opens on the Graph page."""

from __future__ import annotations

import json
import os
import re
import sqlite3

import pytest

from tests.e2e.conftest import open_page, shot, wait_for_sample_build

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]




def _build_modularity(home) -> dict:
    with sqlite3.connect(home / "strata.db", timeout=10) as con:
        (counts,) = con.execute("select counts from stagerun where stage = 'communities' and status = 'done' "
                                "order by id desc limit 1").fetchone()
    return json.loads(counts)["modularity"]


def test_quality_metrics_and_a_what_if_variant(app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)

        # 1. Metrics: the figures of Leiden level 0, the three plots and the worst communities first
        open_page(pg, "Quality")
        figures = pg.locator(".st-key-q_figures")
        expect(figures.locator("[data-testid='stMetric']")).to_have_count(9, timeout=60_000)
        modularity = figures.locator("[data-testid='stMetric']").filter(has_text="Modularity")
        value = modularity.locator("[data-testid='stMetricValue']").inner_text().strip()
        assert value == f"{_build_modularity(home)['0']:.3f}", value  # the build's own figure for level 0
        expect(figures.locator("[data-testid='stMetric']").filter(has_text="Coverage")
               .locator("[data-testid='stMetricValue']")).to_have_text(re.compile(r"^\d+\.\d%$"))
        plots = pg.locator(".st-key-q_plots [data-testid='stVegaLiteChart']")
        expect(plots).to_have_count(4)  # the metrics against their reference lines, levels, sizes, size/conductance
        points = plots.locator("[role='graphics-symbol'][aria-label*='conductance (lower is better)']")
        expect(points.first).to_be_attached()  # the scatter has its points (Vega's SVG marks, labelled)
        assert points.count() >= 5, points.count()
        worst = pg.locator(".st-key-q_worst_0")
        expect(worst).to_contain_text("badness")
        expect(worst.get_by_role("button", name="Open on graph")).to_be_visible()
        # another level: the figures follow
        pg.get_by_role("combobox", name="Level").click()
        pg.get_by_role("option", name="level 1").click()
        expect(figures.locator("[data-testid='stMetric']").filter(has_text="Modularity")
               .locator("[data-testid='stMetricValue']")).to_have_text(f"{_build_modularity(home)['1']:.3f}")
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "q1-quality-metrics")

        # 2. What-if: a variant at resolution 2 and its comparison with the current partition
        pg.get_by_role("tab", name="What-if").click()
        form = pg.locator("[data-testid='stForm']")
        expect(form).to_be_visible()
        form.get_by_label("Variant name").fill("res2")
        res = form.get_by_role("spinbutton", name="Resolution")
        res.fill("2.00")
        res.press("Tab")
        form.get_by_role("button", name="Run variant").click()
        table = pg.locator(".st-key-wi_table table")
        expect(table).to_contain_text("res2", timeout=120_000)
        head = table.locator("thead").inner_text()
        assert "NMI vs current" in head and "ARI vs current" in head, head
        cols = [c.inner_text().strip() for c in table.locator("thead th").all()]
        rows = [[c.inner_text().strip() for c in r.locator("td").all()] for r in table.locator("tbody tr").all()]
        nmi, ari = cols.index("NMI vs current"), cols.index("ARI vs current")
        current = [r for r in rows if r[0] == "current"]
        variant = [r for r in rows if r[0] == "res2"]
        assert current and variant, rows
        assert all(r[nmi] == "1.000" and r[ari] == "1.000" for r in current), current
        v0 = next(r for r in variant if r[1] == "0")
        assert 0.0 <= float(v0[nmi]) < 1.0 and float(v0[ari]) < 1.0, v0
        assert int(v0[cols.index("communities")]) > int(next(r for r in current if r[1] == "0")[2])
        expect(pg.locator(".st-key-wi_compare_box .js-plotly-plot")).to_have_count(1)
        expect(pg.locator("[data-testid='stAlert']").filter(has_text="Variant res2 made")).to_be_visible()
        # a second run under the same name is refused in words
        form.get_by_label("Variant name").fill("res2")
        form.get_by_role("button", name="Run variant").click()
        expect(pg.locator("[data-testid='stAlert']").filter(has_text="already exists")).to_be_visible()
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            table.scroll_into_view_if_needed()
            shot(pg, "q2-quality-what-if")
        # 3. The worst community opens on the Graph page (focus on its id)
        pg.get_by_role("tab", name="Metrics").click()
        pg.locator(".st-key-q_worst_0").get_by_role("button", name="Open on graph").click()
        expect(pg.locator("h1", has_text="Graph")).to_be_visible()
        expect(pg.locator("[data-testid='stAlert']").filter(has_text="Neighbourhood")).to_be_visible()
        assert not pg.js_errors, pg.js_errors
        assert not pg.blocked, pg.blocked
    except BaseException:
        shot(pg, "quality-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
