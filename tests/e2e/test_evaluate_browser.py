"""The Evaluate page in a real browser (fixtures in conftest.py: a fresh `streamlit run app.py` from the root URL,
Debian's chromium, every request off the machine aborted). On the sample, which the app builds on first start, an
analyst uploads a questions file (the sample's own questions plus a row naming no document of the workspace, which
is listed and left out), runs it, sees the figures table and the recall plot as the background job fills them, opens
a question and sees the best strategies' paths (then every strategy's) drawn with its gold documents highlighted, leaves the page and finds the
figures on return, downloads the run as CSV, runs the same questions again and compares the two runs."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import CANVAS, assert_page_clean, canvas_nodes, open_page, shot, wait_for_sample_build

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
EVIL = "<img src=x onerror=\"window.__pwned=1\"> **bold**"  # a hostile question: shown as text, never run
DONE_MS = 240_000  # an evaluation of 7 questions × 15 strategies by the worker on a busy 2-core machine


def _db(home, sql: str, *args):
    with contextlib.closing(sqlite3.connect(home / "strata.db", timeout=10)) as con:
        return con.execute(sql, args).fetchall()


def _questions_file(tmp: Path) -> tuple[Path, int]:
    rows = json.loads((ROOT / "data" / "sample_questions.json").read_text())
    lines = [json.dumps({"id": f"s{i}", "question": r["question"], "gold_files": r["documents"]})
             for i, r in enumerate(rows, 1)]
    lines.append(json.dumps({"id": "evil", "question": EVIL + " Where did Amara Okafor study?",
                             "gold_files": ["amara_okafor_profile.md"]}))
    lines.append(json.dumps({"id": "nowhere", "question": "Who built the <b>Moon</b> bridge?",
                             "gold_titles": ["A document nobody uploaded"]}))
    out = tmp / "my-questions.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out, len(rows) + 1


def _drop(pg, row: int, n: int, attempts: int = 3) -> None:
    """Untick question `row` (0-based) in the editor, so that n - 1 of the n questions run (a canvas grid: select
    the cell, Space toggles it). A redraw that replaces the grid under the click is met by trying again."""
    from playwright.sync_api import expect

    want = pg.get_by_role("button", name=f"Run on {n - 1} question(s)")
    expect(pg.get_by_role("button", name=re.compile(r"^Run on \d+ question"))).to_be_visible(timeout=30_000)
    for i in range(attempts):
        if want.count():
            return  # already unticked (the editor kept its edit)
        expect(pg.get_by_role("button", name=f"Run on {n} question(s)")).to_be_visible(timeout=30_000)
        pg.wait_for_timeout(1_000)  # the page settled
        box = pg.locator(".st-key-ev_editor_box [data-testid='stDataFrame']").bounding_box()
        pg.mouse.click(box["x"] + 30, box["y"] + 35 * (row + 1) + 17)  # the keep column, under the header
        pg.keyboard.press(" ")
        try:
            expect(want).to_be_visible(timeout=10_000)
            return
        except AssertionError:
            if i == attempts - 1:
                raise


def _run(pg, n: int) -> None:
    from playwright.sync_api import expect

    pg.get_by_role("button", name=f"Run on {n} question(s)").click()
    # the job runs in the background worker; the Results tab opens and fills as it measures
    expect(pg.get_by_role("tab", name="Results", selected=True)).to_be_visible(timeout=30_000)
    expect(pg.locator(".st-key-ev_status_done")).to_be_attached(timeout=DONE_MS)


def _pick(pg, box: str, option: str, attempts: int = 3) -> None:
    """Choose `option` in the select box `box`; a redraw that closes the list while it opens is met by trying again,
    as a user would."""
    from playwright.sync_api import Error as PlaywrightError

    for i in range(attempts):
        try:
            pg.get_by_role("combobox", name=box).click()
            pg.get_by_role("option").filter(has_text=option).first.click(timeout=10_000)
            return
        except PlaywrightError:
            if i == attempts - 1:
                raise
            pg.keyboard.press("Escape")


def test_upload_run_open_a_question_leave_return_and_compare(app_server, page, tmp_path):
    from playwright.sync_api import expect

    url, home, _log = app_server
    pg = page
    qfile, n = _questions_file(tmp_path)
    wait_for_sample_build(pg, url)
    pg.goto(url)  # the root URL, as a first-time user meets it
    open_page(pg, "Evaluate")

    # 1. no evaluation yet: New evaluation is open; the questions file is read, the bad row listed and left out
    expect(pg.get_by_role("tab", name="New evaluation", selected=True)).to_be_visible()
    pg.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(qfile))
    rejected = pg.locator("[data-testid='stExpander']", has_text="1 row(s) left out")
    expect(rejected).to_be_visible(timeout=30_000)
    expect(pg.get_by_text(f"{n} question(s) from file my-questions.jsonl")).to_be_visible()
    _drop(pg, 1, n)  # s2 left out of this run
    n -= 1
    _run(pg, n)

    # 2. the figures: a table (every strategy, baselines marked) and the recall@k plot with intervals
    expect(pg.locator(".st-key-ev_table")).to_be_visible()
    expect(pg.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
    (ev_id, status), = _db(home, "SELECT id, status FROM evaluation")
    assert status == "done"
    strategies = json.loads(_db(home, "SELECT strategies FROM evaluation")[0][0])
    assert {"naive", "bm25", "hirag", "archrag", "noderag", "hlg-topic"} <= set(strategies)
    assert _db(home, "SELECT count(*) FROM evaluationresult WHERE evaluation_id = ?", ev_id) == \
        [(n * len(strategies),)]
    if os.environ.get("STRATA_E2E_SCREENSHOTS"):
        shot(pg, "ev1-results")

    # 3. open a question: the 3 best strategies' paths and dense's, then every strategy's ("Draw all"), gold
    # documents highlighted on the drawings
    expect(pg.locator(".st-key-ev_leads")).to_contain_text("Who won")
    view = pg.locator(".st-key-ev_question")
    _pick(pg, "Open a question", "s1 · ")
    expect(view).to_contain_text("Gold: halden_barrier_overview.md")
    expect(view.locator(CANVAS)).to_have_count(4, timeout=60_000)
    expect(pg.locator(".st-key-ev_strategy_naive")).to_be_visible()
    view.get_by_role("button", name=re.compile(r"Draw all")).click()
    expect(view.locator(CANVAS)).to_have_count(len(strategies), timeout=120_000)
    hirag = canvas_nodes(pg, f".st-key-route_ev_hirag {CANVAS}")
    gold = [x for x in hirag if x["gold"]]
    assert gold, "no gold node highlighted on HiRAG's path"
    assert {x["kind"] for x in gold} <= {"document", "chunk"}
    expect(pg.locator(".st-key-ev_strategy_hirag")).to_contain_text("in the top 10")
    expect(pg.locator(".st-key-ev_strategy_hirag [data-testid='stTab']")).to_have_count(0)  # the context on demand
    view.get_by_text("Show each strategy's local / bridge / global context").click()
    expect(pg.locator(".st-key-ev_strategy_hirag [data-testid='stTab']")).to_have_count(3)  # local/bridge/global
    if os.environ.get("STRATA_E2E_SCREENSHOTS"):
        shot(pg, "ev2-question")

    # a hostile question is shown as its text: nothing of it runs or becomes markup
    _pick(pg, "Open a question", "evil · ")
    expect(view).to_contain_text('<img src=x onerror="window.__pwned=1"> **bold**', timeout=60_000)
    assert pg.evaluate("() => window.__pwned") is None and pg.locator("img[src='x']").count() == 0

    # 4. leave the page and come back: the evaluation is kept and shown
    open_page(pg, "Ask")
    open_page(pg, "Evaluate")
    expect(pg.get_by_role("tab", name="Results", selected=True)).to_be_visible()
    expect(pg.locator(".st-key-ev_table")).to_be_visible()

    # 5. the run as CSV: one row per question and strategy, the same found ranks as stored
    with pg.expect_download() as dl:
        pg.get_by_role("button", name="CSV", exact=True).click()
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    assert len(rows) == n * len(strategies)
    stored = {(q, s): json.loads(f) for q, s, f in _db(home, "SELECT question, strategy, found FROM "
                                                            "evaluationresult WHERE evaluation_id = ?", ev_id)}
    ids = [q["id"] for q in json.loads(_db(home, "SELECT questions FROM evaluation WHERE id = ?", ev_id)[0][0])]
    assert "s2" not in ids and len(ids) == n
    for r in rows:
        assert [int(x) for x in r["found_ranks"].split("|")] == stored[(ids.index(r["question_id"]), r["strategy"])]

    # 6. the same questions again, then the two runs compared
    pg.get_by_role("tab", name="New evaluation").click()  # the questions read before are still there
    _drop(pg, 1, n + 1)  # the same set again: s2 left out
    _run(pg, n)
    assert len(_db(home, "SELECT id FROM evaluation WHERE status = 'done'")) == 2
    pg.get_by_role("tab", name="Compare").click()
    expect(pg.locator(".st-key-ev_cmp_box")).to_be_visible(timeout=30_000)
    expect(pg.locator(".js-plotly-plot").first).to_be_visible()
    expect(pg.get_by_text("Every question ties.")).to_be_visible()  # the same build: no question changed
    if os.environ.get("STRATA_E2E_SCREENSHOTS"):
        shot(pg, "ev3-compare")
    assert_page_clean(pg)
