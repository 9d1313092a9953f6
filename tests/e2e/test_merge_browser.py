"""Entity resolution in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py`, Debian's chromium,
every request off the machine aborted). On the sample, which the app builds on first start, a reviewer opens
Quality → Entity resolution, accepts that "Ashby Fen" (the fen, named in the flood report) is "Ashby Fen Farm" (the
trial farm), and sees the kept entity with both names; on the Hierarchy page a community holding the farm says its
report is stale and its report downloads as Markdown; back on the review tab the merge is undone."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from pathlib import Path

import pytest

from core.text import truncate
from tests.e2e.conftest import open_page, shot, wait_for_sample_build

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

STALE = "stale: entity merges since this report was written"



def _db(home, sql: str, *args):
    with contextlib.closing(sqlite3.connect(home / "strata.db", timeout=10)) as con:
        return con.execute(sql, args).fetchall()


def test_accept_a_merge_see_the_entity_and_its_stale_reports_then_undo(app_server, page):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)
        (mid, kept_id, gone_id), = _db(home, "SELECT id, kept_id, merged_id FROM entitymerge WHERE status = "
                                             "'candidate' AND json_extract(evidence, '$.titles[1]') = 'Ashby Fen'")

        # 1. Quality → Entity resolution: the candidate with both entities and its evidence; accept it
        open_page(pg, "Quality")
        pg.get_by_role("tab", name="Entity resolution").click()
        row = pg.locator(f".st-key-mr_row_{mid}")  # one line of the compact table (issue 39 §3)
        expect(row.locator("[data-testid='stColumn']").nth(0)).to_contain_text("Ashby Fen Farm")  # kept
        expect(row.locator("[data-testid='stColumn']").nth(1)).to_contain_text("Ashby Fen")  # merged into it
        for evidence in (r"score 0\.\d\d", r"name similarity 0\.\d\d", r"cosine (0\.\d\d|—)",
                         r"shared neighbours 0\.\d\d", r"type \d\.\d\d", r"\d+ shared document"):
            expect(row).to_contain_text(re.compile(evidence))  # the score and every kind of evidence
        expect(row.get_by_role("radiogroup")).to_contain_text("Ashby Fen Farm")  # the name kept: the settled one
        expect(row.get_by_role("button", name="Keep apart")).to_be_visible()
        row.get_by_role("button", name="Merge").click()
        # the accept is a merge-decision job of the background worker (core/worker.py): the page says its
        # outcome once the worker has finished it
        expect(pg.locator("[data-testid='stAlert']", has_text="Merged “Ashby Fen” into “Ashby Fen Farm”")) \
            .to_be_visible(timeout=120_000)
        expect(row).to_have_count(0)  # no longer among the open candidates

        # 2. the reviewer's merges: the kept entity now carries both names; the merged one is out of the graph
        pg.locator("[data-testid='stRadio']", has_text="Show").get_by_text(
            re.compile(r"^Merged by a reviewer \(1\)$")).click()
        expect(row).to_contain_text("merged, named “Ashby Fen Farm”")
        expect(row).to_contain_text("Aliases: Ashby Fen Farm, Ashby Fen")
        expect(row).to_contain_text("not in the graph now")
        assert _db(home, "SELECT count(*) FROM node WHERE id = ?", gone_id) == [(0,)]
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "m1-merge-accepted")

        # 3. Hierarchy: a Leiden community holding the farm says its report is stale, and downloads as Markdown
        (title, level, size), = _db(
            home, "SELECT c.title, c.level, c.size FROM community c JOIN edge e ON e.dst = c.id AND e.kind = "
                  "'in_community' WHERE e.src = ? AND c.method = 'leiden' AND json_extract(c.data, '$.stale') "
                  "ORDER BY c.level DESC, c.size LIMIT 1", kept_id)
        open_page(pg, "Hierarchy")
        box = pg.get_by_role("combobox", name="Open a community")
        box.click()
        pg.keyboard.type(truncate(title, 80)[:30])
        pg.get_by_role("option").filter(has_text=f"level {level} · {size:,} members").first.click()
        detail = pg.locator(".st-key-hier_detail")
        expect(detail.locator("[data-testid='stAlert']")).to_contain_text(STALE)
        expect(detail.locator("[data-testid='stAlert']")).to_contain_text("“Ashby Fen” merged into “Ashby Fen Farm”")
        with pg.expect_download() as dl:
            detail.get_by_role("button", name="Download report (Markdown)").click()
        text = Path(dl.value.path()).read_text(encoding="utf-8")
        assert text.startswith("# ") and "**Stale:** entity merges since this report was written" in text
        assert "Ashby Fen Farm" in text
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "m2-hierarchy-stale")

        # 4. back to the review: undo the merge; both entities are back and the report is no longer stale
        open_page(pg, "Quality")
        pg.get_by_role("tab", name="Entity resolution").click()
        pg.locator("[data-testid='stRadio']", has_text="Show").get_by_text(
            re.compile(r"^Merged by a reviewer \(1\)$")).click()
        row.get_by_role("button", name="Undo merge").click()
        expect(pg.locator("[data-testid='stAlert']", has_text="merge undone: both entities are back")) \
            .to_be_visible(timeout=120_000)  # a job too
        assert _db(home, "SELECT count(*) FROM node WHERE id = ?", gone_id) == [(1,)]
        assert _db(home, "SELECT count(*) FROM community WHERE json_extract(data, '$.stale')") == [(0,)]
        assert not pg.js_errors, pg.js_errors
        assert not pg.blocked, pg.blocked
    except BaseException:
        shot(pg, "merge-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        raise
