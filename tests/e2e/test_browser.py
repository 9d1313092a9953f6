"""A newcomer's first hour, in a real browser: `streamlit run app.py` on 127.0.0.1 and a free port, Debian's chromium
driven by Playwright, every request that leaves the machine aborted.

The journey starts at the ROOT URL, as a first-time user does, and never uses a deep link: the sample builds on
first start while the user watches the status change on the page they are on; they create a workspace by name,
upload a Markdown file and a broken binary with the uploader, press "Add and build" and again watch the status
change without a click; then Build, Hierarchy, Graph (the canvas has nodes), Ask with three strategies (three
answers, their panels and their drawn paths), away from Ask and back (the answers are still there), and finally
delete the workspace. On every page: no Streamlit exception box and no JavaScript error.

Screenshots of every step go to tests/e2e/artifacts/first-hour-*.png."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import (
    BUILD_TIMEOUT_MS,
    CANVAS,
    assert_page_clean,
    canvas_nodes,
    click_node,
    on_top,
    open_page,
    shot,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

WS = "lighthouse-notes"
UPLOAD_NAME = "brackwater_lighthouse.md"
UPLOAD_TEXT = """# The Brackwater Lighthouse

The Brackwater Lighthouse stands on Gull Point, north of the fishing town of Saltmere. The Orrin Shipwright Company
built the Brackwater Lighthouse in 1887 for the Saltmere Harbour Trust.

In 1998 the keeper Tamsin Achterberg restored the Fresnel lens of the Brackwater Lighthouse. Tamsin Achterberg had
learned lens grinding at the Pellow Glassworks in Saltmere, and the Saltmere Maritime Society paid for the repair.

Today the Saltmere Maritime Society maintains the Brackwater Lighthouse and opens it to visitors every summer.
The Saltmere Harbour Trust sold Gull Point to the Saltmere Maritime Society in 1976.
"""
BINARY_NAME = "scanned_contract.pdf"
QUESTION = "Who restored the Fresnel lens of the Brackwater Lighthouse, and where did she learn lens grinding?"
STRATEGIES = [("HiRAG", "hirag"), ("NodeRAG", "noderag"), ("GraphRAG local", "graphrag-local")]


def _sidebar(pg):
    return pg.locator("[data-testid='stSidebar']")


def _status_cell(pg, workspace: str):
    """The workspaces table's row for `workspace`, as text (the grid draws on a canvas; its rows are in the DOM
    for screen readers)."""
    return pg.locator("[data-testid='stDataFrame']").first.locator("tr[role='row']").filter(
        has=pg.locator("td", has_text=re.compile(rf"^{re.escape(workspace)}$")))


def _add_strategies(pg, labels: list[str]) -> None:
    box = pg.locator("[data-testid='stMultiSelect']", has_text="Strategies")
    for label in labels:
        box.locator("input").first.click()
        pg.keyboard.type(label)  # the list is long: filter it as a user would
        pg.get_by_role("option", name=re.compile(rf"^{re.escape(label)}")).first.click()
    pg.keyboard.press("Escape")


def test_first_hour_from_the_root_url(fresh_app_server, page, tmp_path):
    from playwright.sync_api import expect

    url, home, log_path = fresh_app_server
    pg = page
    try:
        # 1. The root URL: the Workspaces page, the offline backend named, the sample building on first start.
        #    Nobody clicks: the sidebar and the table follow the worker until the sample is built.
        pg.goto(url)
        expect(pg.locator("h1", has_text="Workspaces & upload")).to_be_visible(timeout=60_000)
        expect(_sidebar(pg)).to_contain_text("Backend: offline")
        shot(pg, "first-hour-01-root")
        expect(_sidebar(pg)).to_contain_text("· build 1", timeout=BUILD_TIMEOUT_MS)
        expect(_status_cell(pg, "sample")).to_contain_text("built")
        expect(_sidebar(pg)).not_to_contain_text("Building")
        assert_page_clean(pg)
        shot(pg, "first-hour-02-sample-built")

        # 2. Create a workspace by name: it becomes the current one, with no error.
        pg.get_by_label("Name").fill(WS)
        pg.get_by_role("button", name=re.compile("Create")).click()
        expect(pg.get_by_role("heading", name=f"Add documents to “{WS}”")).to_be_visible()
        expect(_sidebar(pg).get_by_role("combobox", name="Workspace")).to_have_value(WS)
        expect(_status_cell(pg, WS)).to_contain_text("not built")
        assert_page_clean(pg)
        shot(pg, "first-hour-03-created")

        # 3. Upload a Markdown file and a broken binary with the uploader; add and build.
        md = tmp_path / UPLOAD_NAME
        md.write_text(UPLOAD_TEXT, encoding="utf-8")
        junk = tmp_path / BINARY_NAME
        junk.write_bytes(bytes(range(256)) * 16)  # a .pdf that is not a PDF
        pg.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files([str(md), str(junk)])
        uploader = pg.locator("[data-testid='stFileUploader']")
        for name in (UPLOAD_NAME, BINARY_NAME):
            expect(uploader.get_by_role("button", name=f"Remove {name}")).to_be_visible()
        add = pg.get_by_role("button", name=re.compile("Add and build"))
        expect(add).to_be_enabled()
        add.click()
        # (exact: the "Last uploads" list below repeats it after the upload's time)
        expect(pg.get_by_text("1 document(s) added, 1 refused", exact=True)).to_be_visible(timeout=60_000)
        refusal = pg.locator("[data-testid='stAlert']", has_text=BINARY_NAME)
        expect(refusal).to_contain_text("refused")
        shot(pg, "first-hour-04-added")

        # 4. Watch the status change on this page, without a click: building, then built.
        expect(_sidebar(pg)).to_contain_text("Building", timeout=30_000)
        expect(_status_cell(pg, WS)).to_contain_text("building")
        shot(pg, "first-hour-05-building")
        expect(_sidebar(pg)).to_contain_text("· build 1", timeout=BUILD_TIMEOUT_MS)
        expect(_status_cell(pg, WS)).to_contain_text("built")
        expect(_status_cell(pg, WS)).not_to_contain_text("building")
        assert_page_clean(pg)
        shot(pg, "first-hour-06-built")

        # 5. Build, through the upload report's "Watch the build" link: finished, one document.
        pg.locator("[data-testid='stPageLink']", has_text="Watch the build").click()
        expect(pg.locator("h1", has_text="Build")).to_be_visible()
        expect(pg.locator("[data-testid='stAlert']", has_text=re.compile(r"Build \d+ finished"))).to_be_visible()
        expect(pg.locator("[data-testid='stMetric']", has_text="Documents")).to_contain_text("1")
        assert_page_clean(pg)
        shot(pg, "first-hour-07-build")

        # 6. Hierarchy: a picture of the hierarchy.
        open_page(pg, "Hierarchy")
        expect(pg.locator("[data-testid='stVegaLiteChart'] [role='graphics-symbol']").first).to_be_visible(
            timeout=60_000)  # the Vega-Lite chart has drawn its marks
        assert_page_clean(pg)
        shot(pg, "first-hour-08-hierarchy")

        # 7. Graph: the canvas has nodes, the uploaded document among them.
        open_page(pg, "Graph")
        nodes = canvas_nodes(pg)
        assert any(n["kind"] == "document" and "Brackwater" in n["label"] for n in nodes), nodes[:5]
        assert_page_clean(pg)
        shot(pg, "first-hour-09-graph")

        # 8. Ask with three strategies: three answers side by side, each with its panels, and three drawn paths.
        open_page(pg, "Ask")
        pg.get_by_label("Question").fill(QUESTION)
        ms = pg.locator("[data-testid='stMultiSelect']", has_text="Strategies")
        expect(ms).to_contain_text("HiRAG (local + bridge + global)")  # the default
        _add_strategies(pg, [label for label, _ in STRATEGIES[1:]])
        pg.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()
        heads = pg.get_by_role("heading", name=re.compile(r"^Answer · "))
        expect(heads).to_have_count(3, timeout=120_000)
        for i, (label, _) in enumerate(STRATEGIES):
            assert label in heads.nth(i).inner_text()
            column = pg.locator(f".st-key-details_{i}")  # what it retrieved, below the answers
            for section in ("Local", "Bridge", "Global"):
                expect(column.get_by_role("tab", name=re.compile(rf"^{section} \(\d+\)$"))).to_be_visible()
            expect(column.get_by_role("heading", name="Sources")).to_be_visible()
        # offline, each answer opens on its best evidence: quoted sentences with their documents, and one line saying
        # no model wrote them
        answers = [pg.locator(f".st-key-answer_{i} .st-key-evidence_{i}").inner_text() for i in range(3)]
        assert all(a.startswith("Best evidence") for a in answers), answers
        for i in range(3):
            expect(pg.locator(f".st-key-answer_{i}").get_by_text("No language model wrote this")).to_be_visible()
        assert "Tamsin Achterberg" in " ".join(answers)
        pg.locator("label", has_text="Show the whole retrieval paths").click()  # drawn on demand
        for i in range(3):
            pg.get_by_role("tab", name=re.compile(rf"^Path · {STRATEGIES[i][0]}")).click()
            drawn = canvas_nodes(pg, f".st-key-route_{i} {CANVAS}")
            assert {"entry", "result"} <= {n["role"] for n in drawn}, {n["role"] for n in drawn}
        assert_page_clean(pg)
        shot(pg, "first-hour-10-ask")

        # 9. Leave Ask through a node of a drawn path (a click names it and offers it on the Graph page), then
        #    come back: the answers, the question and the strategies are still there.
        pg.get_by_role("tab", name=re.compile(rf"^Path · {STRATEGIES[0][0]}")).click()
        route = f".st-key-route_0 {CANVAS}"
        # an entry node no other node is drawn over (a click on it must land on it)
        entry = next(n for n in canvas_nodes(pg, route) if n["role"] == "entry" and on_top(pg, n["id"], route))
        click_node(pg, entry["id"], route)
        expect(pg.get_by_text(f"Clicked: {entry['label']}")).to_be_visible()
        pg.locator(".st-key-path_0").get_by_role("button", name=re.compile("Show on graph")).click()
        expect(pg.locator("h1", has_text="Graph")).to_be_visible()
        expect(pg.get_by_text("Neighbourhood of the selected node.")).to_be_visible()
        assert entry["id"] in {n["id"] for n in canvas_nodes(pg)}
        assert_page_clean(pg)
        open_page(pg, "Ask")
        expect(pg.get_by_role("heading", name=re.compile(r"^Answer · "))).to_have_count(3)
        expect(pg.get_by_label("Question")).to_have_value(QUESTION)
        expect(pg.get_by_text(f"Question: {QUESTION}")).to_be_visible()
        assert [pg.locator(f".st-key-answer_{i} .st-key-evidence_{i}").inner_text() for i in range(3)] == answers
        assert_page_clean(pg)
        shot(pg, "first-hour-11-ask-again")

        # 10. Delete the workspace: gone from the table and the picker; the sample is current again.
        open_page(pg, "Workspaces & upload")
        pg.get_by_text("Danger zone").click()
        confirm = pg.get_by_label(re.compile("to delete this workspace"))
        confirm.fill(WS)
        confirm.press("Enter")  # Streamlit takes a text field's value on Enter or when it loses focus
        pg.get_by_role("button", name=re.compile("Delete workspace")).click()
        expect(pg.get_by_role("heading", name="Add documents to “sample”")).to_be_visible()
        expect(_status_cell(pg, WS)).to_have_count(0)
        expect(pg.get_by_text("1 document(s) added")).to_have_count(0)  # its upload report went with it
        assert not (home / "vectors" / WS).exists()
        assert_page_clean(pg)
        shot(pg, "first-hour-12-deleted")
        assert not pg.blocked, pg.blocked  # nothing tried to leave the machine
    except BaseException:
        shot(pg, "first-hour-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        for log in sorted((home / "logs").glob("run-*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}")
        raise


def test_a_deep_link_still_runs_the_router(fresh_app_server, page):
    """A bookmark to a page (here /build) draws the shared sidebar and navigation too, not the page file alone."""
    from playwright.sync_api import expect

    url, _home, _log = fresh_app_server
    page.goto(url.rstrip("/") + "/build")
    expect(page.locator("h1", has_text="Build")).to_be_visible(timeout=60_000)
    expect(_sidebar(page)).to_contain_text("Backend: offline")
    expect(page.locator("[data-testid='stSidebarNav']")).to_contain_text("Workspaces & upload")
    assert_page_clean(page)
