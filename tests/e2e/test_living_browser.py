"""A living workspace in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py`, Debian's chromium,
every request off the machine aborted). On the sample, which the app builds on first start, an analyst uploads one
more document with the uploader and presses "Add and build": only that document is chunked and extracted, and its
entities join the graph. Then, in "Delete documents", they pick it, read what only it supports, confirm, and the
delete job removes it and what only it supported, while the sample's own entities stay."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3

import pytest

from tests.e2e.conftest import BUILD_TIMEOUT_MS, assert_page_clean, shot, wait_for_sample_build

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(480)]

NEW_DOC = """# The Orrin Valley Observatory

The Orrin Valley Observatory was founded by the astronomer Teodor Vasko in 1911.
Teodor Vasko built the observatory on the hill above the Halden Barrier.
"""


def _db(home, sql: str, *args):
    with contextlib.closing(sqlite3.connect(home / "strata.db", timeout=10)) as con:
        return con.execute(sql, args).fetchall()


def _entities(home) -> set[str]:
    return {t for (t,) in _db(home, "SELECT title FROM node WHERE kind = 'entity' AND layer = 0")}


def test_add_a_document_to_a_built_workspace_then_delete_it(app_server, page, tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        wait_for_sample_build(pg, url)
        before = _entities(home)
        n_docs = _db(home, "SELECT count(*) FROM document")[0][0]
        assert "Teodor Vasko" not in before and "Halden Barrier" in before

        # 1. Upload one more document to the built sample and add it.
        pg.goto(url)
        expect(pg.locator("h1", has_text="Workspaces & upload")).to_be_visible(timeout=60_000)
        md = tmp_path / "orrin_observatory.md"
        md.write_text(NEW_DOC)
        pg.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files([str(md)])
        expect(pg.locator("[data-testid='stFileUploader']").get_by_role(
            "button", name="Remove orrin_observatory.md")).to_be_visible()
        pg.get_by_role("button", name=re.compile("Add and build")).click()
        expect(pg.get_by_text("1 document(s) added", exact=True)).to_be_visible(timeout=60_000)
        expect(pg.get_by_text("Only the new documents are chunked and extracted")).to_be_visible()
        sidebar = pg.locator("[data-testid='stSidebar']")
        expect(sidebar).to_contain_text("· build 2", timeout=BUILD_TIMEOUT_MS)
        (run_id,), = _db(home, "SELECT max(id) FROM buildrun WHERE kind = 'build' AND status = 'done'")
        chunked = _db(home, "SELECT json_extract(counts, '$.documents') FROM stagerun WHERE run_id = ? AND "
                            "stage = 'chunk'", run_id)
        assert chunked == [(1,)], "only the new document was chunked"
        after_add = _entities(home)
        assert {"Teodor Vasko", "Orrin Valley Observatory"} <= after_add and before <= after_add
        assert _db(home, "SELECT count(*) FROM document")[0][0] == n_docs + 1
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "l1-document-added")

        # 2. Delete it: pick it, read what only it supports, confirm.
        (doc_id,), = _db(home, "SELECT id FROM document WHERE filename = 'orrin_observatory.md'")
        panel = pg.locator("[data-testid='stExpander']", has_text="Delete documents")
        panel.locator("summary").click()
        picker = panel.locator("[data-testid='stMultiSelect']")
        warning = panel.locator("[data-testid='stAlert']")
        for attempt in range(4):  # the page redraws once when the sidebar sees the build end: a pick (or the text
            # typed into the picker) made during that redraw is dropped, and a user picks again
            if warning.is_visible():
                break
            try:
                if not picker.is_visible():  # (the expander drawn again closed)
                    panel.locator("summary").click()
                picker.locator("input").first.click(timeout=10_000)
                pg.keyboard.type("Orrin")
                pg.get_by_role("option", name=re.compile("orrin_observatory.md")).first.click(timeout=10_000)
                pg.keyboard.press("Escape")
                expect(warning).to_be_visible(timeout=15_000)
                break
            except (AssertionError, PlaywrightTimeout):
                if attempt == 3:
                    raise
                pg.keyboard.press("Escape")
        expect(warning).to_contain_text(re.compile(r"Deleting 1 document\(s\).*removes \d+ chunks?,"))
        expect(warning).to_contain_text(re.compile(r"(entity|entities) they share with other documents stay"))
        delete = panel.get_by_role("button", name=re.compile("^Delete$"))
        expect(delete).to_be_disabled()
        panel.get_by_text("Delete these documents").click()
        expect(delete).to_be_enabled()
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "l2-delete-confirm")
        delete.click()
        expect(pg.get_by_text("Deleting 1 document(s)")).to_be_visible(timeout=60_000)
        expect(sidebar).to_contain_text("· build 3", timeout=BUILD_TIMEOUT_MS)
        status = _db(home, "SELECT status, message FROM buildrun WHERE kind = 'delete' ORDER BY id DESC LIMIT 1")
        assert status and status[0][0] == "done", status

        # 3. The document and what only it supported are gone; the sample's own entities stay.
        assert _db(home, "SELECT count(*) FROM document WHERE id = ?", doc_id) == [(0,)]
        assert _db(home, "SELECT count(*) FROM node WHERE document_id = ?", doc_id) == [(0,)]
        after_delete = _entities(home)
        assert "Teodor Vasko" not in after_delete and "Orrin Valley Observatory" not in after_delete
        assert "Halden Barrier" in after_delete, "an entity the sample also names stays"
        assert after_delete == before, "exactly what the sample had before the document was added"
        pg.reload()
        expect(pg.locator("h1", has_text="Workspaces & upload")).to_be_visible(timeout=60_000)
        assert_page_clean(pg)
        if os.environ.get("STRATA_E2E_SCREENSHOTS"):
            shot(pg, "l3-document-deleted")
    except Exception:
        shot(pg, "living-failure")
        print(log_path.read_text()[-4000:])
        raise
