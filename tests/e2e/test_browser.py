"""The app in a real browser, as a user would use it: `streamlit run app.py` on 127.0.0.1 and a free port, Debian's
chromium driven by Playwright, every request that leaves the machine aborted.

One journey: the sample workspace builds on first start; a Markdown file and a broken binary are uploaded, the
first is added and built, the second refused; the graph is drawn in its iframe; a question about the uploaded file
is answered beside its local / bridge / global context and sources.

Screenshots go to tests/e2e/artifacts/ on failure (and at every step with STRATA_E2E_SCREENSHOTS=1)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import open_page

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
BUILD_TIMEOUT_MS = 180_000

UPLOAD_NAME = "brackwater_lighthouse.md"
UPLOAD_TEXT = """# The Brackwater Lighthouse

The Brackwater Lighthouse stands on Gull Point, north of the fishing town of Saltmere. The Orrin Shipwright Company
built the Brackwater Lighthouse in 1887 for the Saltmere Harbour Trust.

In 1998 the keeper Tamsin Achterberg restored the Fresnel lens of the Brackwater Lighthouse. Tamsin Achterberg had
learned lens grinding at the Pellow Glassworks in Saltmere, and the Saltmere Maritime Society paid for the repair.

Today the Saltmere Maritime Society maintains the Brackwater Lighthouse and opens it to visitors every summer.
"""
BINARY_NAME = "scanned_contract.pdf"
QUESTION = "Who restored the Fresnel lens of the Brackwater Lighthouse, and where did she learn lens grinding?"


# -- screenshots ----------------------------------------------------------------------------------------------------
def _shot(pg, name: str, always: bool = True) -> None:
    if not always and not os.environ.get("STRATA_E2E_SCREENSHOTS"):
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(Exception):
        # Streamlit scrolls inside its own container, so a full-page shot is one viewport: grow the viewport instead
        size = pg.viewport_size
        pg.set_viewport_size({"width": size["width"], "height": 2600})
        pg.wait_for_timeout(300)
        pg.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        pg.set_viewport_size(size)


def _step(pg, name: str) -> None:
    _shot(pg, name, always=False)


# -- helpers: what a user sees and clicks ---------------------------------------------------------------------------
def _go(pg, title: str) -> None:
    """Open a page from the sidebar navigation and wait for its title."""
    open_page(pg, title)


def _build_finished(pg, after_run: int = 0) -> int:
    """On the Build page: wait for 'Build finished · run N' with N > after_run and return N; fail at once when the
    page says the build failed or its worker is gone."""
    from playwright.sync_api import expect

    finished = re.compile(r"Build finished · run (\d+)")
    outcome = pg.locator("[data-testid='stAlert']").filter(
        has_text=re.compile(r"Build finished · run \d+|Build failed|stopped without finishing"))
    deadline = time.monotonic() + BUILD_TIMEOUT_MS / 1000
    while True:
        left_ms = int((deadline - time.monotonic()) * 1000)
        assert left_ms > 0, f"no build after run {after_run} finished in {BUILD_TIMEOUT_MS // 1000} s"
        expect(outcome.first).to_be_visible(timeout=left_ms)
        text = outcome.first.inner_text()
        m = finished.search(text)
        assert m, f"the build did not finish: {text}"
        if int(m.group(1)) > after_run:
            return int(m.group(1))
        pg.wait_for_timeout(500)  # still the previous run on screen: the page is about to show the new one


def _sidebar_build(pg) -> int:
    from playwright.sync_api import expect

    cap = pg.locator("[data-testid='stSidebar'] [data-testid='stCaptionContainer']", has_text="· build ")
    expect(cap.first).to_be_visible()
    return int(re.search(r"· build (\d+)", cap.first.inner_text()).group(1))


# -- the journey --------------------------------------------------------------------------------------------------
def test_user_journey(app_server, page, tmp_path):
    from playwright.sync_api import expect

    url, home, log_path = app_server
    pg = page
    try:
        # 1. First start, through a deep link: the router still runs (sidebar, sample workspace created and
        #    built in the background), rather than the page file alone.
        pg.goto(url.rstrip("/") + "/build")
        expect(pg.locator("h1", has_text="Build")).to_be_visible(timeout=60_000)
        expect(pg.locator("[data-testid='stSidebar']")).to_contain_text("Backend: offline")
        expect(pg.locator("[data-testid='stSidebarNav']")).to_contain_text("Workspaces & upload")
        first_run = _build_finished(pg)
        _go(pg, "Workspaces & upload")
        expect(pg.locator("h1", has_text="Workspaces & upload")).to_be_visible(timeout=60_000)
        _step(pg, "01-workspaces-first-start")
        _go(pg, "Build")
        _build_finished(pg)
        _step(pg, "02-sample-built")
        expect(pg.locator("[data-testid='stMetric']", has_text="Documents")).to_contain_text("15")
        build_before = _sidebar_build(pg)
        assert build_before >= 1

        # 2. Upload a Markdown file and a broken binary; add and build.
        _go(pg, "Workspaces & upload")
        expect(pg.locator("[data-testid='stDataFrame']").first).to_be_visible()
        md = tmp_path / UPLOAD_NAME
        md.write_text(UPLOAD_TEXT, encoding="utf-8")
        junk = tmp_path / BINARY_NAME
        junk.write_bytes(bytes(range(256)) * 16)  # a .pdf that is not a PDF
        pg.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files([str(md), str(junk)])
        uploader = pg.locator("[data-testid='stFileUploader']")
        for name in (UPLOAD_NAME, BINARY_NAME):  # long names are shortened on screen; the remove buttons say all
            expect(uploader.get_by_role("button", name=f"Remove {name}")).to_be_visible()
        add = pg.get_by_role("button", name=re.compile("Add and build"))
        expect(add).to_be_enabled()
        _step(pg, "03-files-chosen")
        add.click()
        expect(pg.get_by_text("1 document(s) added", exact=False)).to_be_visible(timeout=60_000)
        refusal = pg.locator("[data-testid='stAlert']", has_text=BINARY_NAME)
        expect(refusal).to_contain_text("refused")
        expect(refusal).to_contain_text("PDF")
        expect(pg.locator("[data-testid='stAlert']", has_text=UPLOAD_NAME)).to_have_count(0)
        _step(pg, "04-added-and-refused")

        # 3. The new build finishes; the sidebar shows the next build number.
        pg.locator("[data-testid='stPageLink']", has_text="Watch the build").click()
        expect(pg.locator("h1", has_text="Build")).to_be_visible()
        second_run = _build_finished(pg, after_run=first_run)
        assert second_run > first_run
        expect(pg.locator("[data-testid='stMetric']", has_text="Documents")).to_contain_text("16")
        expect(pg.locator("[data-testid='stSidebar']")).to_contain_text(f"· build {build_before + 1}")
        _step(pg, "05-upload-built")

        # 4. The graph: pyvis in an iframe, drawn offline, with the uploaded document among its nodes.
        _go(pg, "Graph")
        iframe = pg.locator("iframe[title='st.iframe']")
        expect(iframe).to_have_count(1, timeout=60_000)
        assert iframe.get_attribute("srcdoc")
        frame = pg.frame_locator("iframe[title='st.iframe']")
        expect(frame.locator("canvas").first).to_be_attached(timeout=30_000)
        handle = iframe.element_handle().content_frame()
        if handle is not None:
            handle.wait_for_function("() => window.network && window.network.body.data.nodes.length > 0",
                                     timeout=30_000)
            n_nodes = handle.evaluate("() => window.network.body.data.nodes.length")
            docs = handle.evaluate("() => window.network.body.data.nodes.get()"
                                   ".filter(n => n.kind === 'document').map(n => n.label)")
        else:  # same-origin srcdoc frame reached from the page
            js = "document.querySelector(\"iframe[title='st.iframe']\").contentWindow"
            pg.wait_for_function(f"() => {js}.network && {js}.network.body.data.nodes.length > 0", timeout=30_000)
            n_nodes = pg.evaluate(f"() => {js}.network.body.data.nodes.length")
            docs = pg.evaluate(f"() => {js}.network.body.data.nodes.get()"
                               ".filter(n => n.kind === 'document').map(n => n.label)")
        assert n_nodes > 0
        assert any("Brackwater" in d for d in docs), docs
        _step(pg, "06-graph")

        # 5. Ask about the uploaded file with HiRAG: three panels with items, and sources.
        _go(pg, "Ask")
        pg.get_by_label("Question").fill(QUESTION)
        pg.locator("[data-testid='stFormSubmitButton'] button", has_text="Ask").click()
        expect(pg.get_by_role("heading", name="Sources")).to_be_visible(timeout=120_000)
        expect(pg.get_by_role("heading", name=re.compile("Answer · HiRAG"))).to_be_visible()
        # (the page streams in: wait on each expected element rather than counting at once)
        for key, head in (("local", "Local"), ("bridge", "Bridge"), ("global", "Global")):
            panel = pg.locator(f".st-key-panel_{key}")
            expect(panel).to_contain_text(head)
            items = panel.locator("[data-testid='stExpander']")
            expect(items.first, f"the {head} panel has no items").to_be_visible()
            assert items.count() >= 1
        sources = pg.locator("[data-testid='stExpander'] summary").filter(has_text=re.compile(r"\[\d+\] "))
        expect(sources.first).to_contain_text("Brackwater Lighthouse")
        expect(pg.locator("[data-testid='stMarkdownContainer']", has_text="Tamsin Achterberg").first).to_be_visible()
        _step(pg, "07-ask")

        assert not pg.js_errors, pg.js_errors
    except BaseException:
        _shot(pg, "journey-failure")
        print(f"server log ({log_path}):\n{log_path.read_text(errors='replace')[-4000:]}")
        for log in sorted((home / "logs").glob("run-*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}")
        raise
