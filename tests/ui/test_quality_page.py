"""The Quality page's buttons with AppTest, on a private copy of the built sample (database and vectors): in the
entity-resolution tab "Reject" then "Undo reject", and "Accept N candidate(s)" at once; in the what-if tab "Run
variant", "Delete" and "Promote" (with its confirmation). A bulk accept, a variant run and a promote are jobs of the
background worker (core/worker.py): the test waits for the worker, then the page says the outcome. The job panel
(progress, Stop) and the refusals while a job runs are checked on a job row whose worker has not started. "Accept" /
"Undo merge" and the Metrics tab's "Open on graph" are clicked in a real browser (tests/e2e/test_merge_browser.py,
tests/e2e/test_quality_browser.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.quality.variants import list_variants
from core.resolution import review as rv
from core.store import Store
from tests.ui.conftest import app_home, open_lazy, open_page, run, sample_copy, wait_for_job


@pytest.fixture(scope="module")
def quality_home(tmp_path_factory, sample_built):
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_quality_ui")
    with app_home(home):
        yield store


@pytest.fixture
def page(quality_home) -> AppTest:
    return open_page("views/quality.py", "Quality", timeout=240)


def _tab(at: AppTest, name: str) -> AppTest:
    """Open one of the page's lazy tabs (only the open one is drawn)."""
    at.session_state["q_tab"] = name
    return run(at)


def _button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def _status(store: Store, merge_id: int) -> str:
    ws = store.require_workspace("sample")
    return next(r.status for r in rv.merge_table(store, ws.id) if r.id == merge_id)


def test_reject_then_undo_reject(page, quality_home):
    store = quality_home
    ws = store.require_workspace("sample")
    row = next(r for r in rv.filter_rows(rv.merge_table(store, ws.id), "candidate") if r.titles[1] == "Ashby Fen")
    _tab(page, "Entity resolution")
    _button(page, f"mr_reject_{row.id}").click()
    run(page)
    assert _status(store, row.id) == "rejected"
    page.radio(key="mr_status").set_value("rejected")
    run(page)
    _button(page, f"mr_unreject_{row.id}").click()
    run(page)
    assert _status(store, row.id) == "candidate"


def test_accept_many_at_once(page, quality_home):
    store = quality_home
    ws = store.require_workspace("sample")
    v0 = ws.build_version
    _tab(page, "Entity resolution")
    page.slider(key="mr_bulk_score").set_value(0.85)
    run(page)
    bulk = _button(page, "mr_bulk")
    n = int(bulk.label.split()[1])
    assert n >= 2 and not bulk.disabled
    bulk.click()
    run(page)
    job = wait_for_job(store, "sample")
    assert (job.kind, job.status) == ("reembed", "done")
    run(page)
    assert any(s.value == f"Merged {n} candidate(s)." for s in page.success), [s.value for s in page.success]
    merged = rv.filter_rows(rv.merge_table(store, ws.id), "merged")
    assert len(merged) == n
    assert store.require_workspace("sample").build_version == v0 + 1
    for r in sorted(merged, key=lambda r: r.id, reverse=True):  # leave the copy as it was, latest merge first
        rv.revert(store, ws.id, r.id, *_index_and_embedder(ws))


def test_merge_one_pair_under_the_other_name(page, quality_home):
    """The compact table's keep-which-name choice (issue 39 §3): the radio offers both names, the settled one
    first chosen; picking the merged entity's name and pressing Merge gives the kept entity that name."""
    from core.models import Node

    store = quality_home
    ws = store.require_workspace("sample")
    row = next(r for r in rv.filter_rows(rv.merge_table(store, ws.id), "all")  # a candidate, or undone by a test
               if r.titles[1] == "Ashby Fen" and r.status in ("candidate", "undone"))
    _tab(page, "Entity resolution")
    if row.status == "undone":
        page.radio(key="mr_status").set_value("undone")
        run(page)
    names = page.radio(key=f"mr_name_{row.id}")
    assert names.options == [row.titles[0], row.titles[1]] and names.value == row.titles[0]
    names.set_value(row.titles[1])
    run(page)
    _button(page, f"mr_accept_{row.id}").click()
    run(page)
    job = wait_for_job(store, "sample")
    assert (job.kind, job.status) == ("reembed", "done")
    run(page)
    assert any(s.value.startswith(f"Merged “{row.titles[1]}” into “{row.titles[0]}”, now named “{row.titles[1]}”")
               for s in page.success), [s.value for s in page.success]
    with store.session() as s:
        assert s.get(Node, row.kept_id).title == "Ashby Fen" and s.get(Node, row.merged_id) is None
    rv.revert(store, ws.id, row.id, *_index_and_embedder(ws))  # leave the copy as it was
    with store.session() as s:
        assert s.get(Node, row.kept_id).title == row.titles[0]


def test_metrics_tab_reads_the_level_in_one_line(page, quality_home):
    from core.quality.data import METHODS
    from ui.text import md_escape

    run(page)
    [box] = _keyed(page, "q_reading")
    line = next(n.value for n in _walk(box) if getattr(n, "type", None) == "markdown")
    assert line.startswith(f"**{md_escape(METHODS['leiden'])}, level ") and "modularity 0" in line
    assert "singletons" in line and line.endswith(".**")
    assert not any(t.key == "wi_name" for t in page.text_input), "only the open tab is drawn"
    # every community of the level in a table, drawn on demand (no data grid before the first plot)
    assert not any("badness" in d.value.columns for d in page.dataframe)
    toggle = next(t for t in page.toggle if t.label.startswith("All ") and t.label.endswith(" communities of this level"))
    toggle.set_value(True)
    run(page)
    table = next(d.value for d in page.dataframe if "badness" in d.value.columns)
    assert f"All {len(table):,} communities" in toggle.label and len(table) > 0
    # the worst communities' reports are drawn when opened (ui/lazy.py), not sent closed with the page
    [worst] = _keyed(page, "q_worst_0")
    [report] = [n for n in _walk(worst) if getattr(n, "type", None) == "expander" and n.label == "Report"]
    assert not [n for n in _walk(report) if getattr(n, "type", None) == "markdown"]
    open_lazy(page)
    [worst] = _keyed(page, "q_worst_0")
    [report] = [n for n in _walk(worst) if getattr(n, "type", None) == "expander" and n.label == "Report"]
    assert any(len(n.value) > 40 for n in _walk(report) if getattr(n, "type", None) == "markdown")


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _index_and_embedder(ws):
    from ui import resources as R

    return R.vector_index(ws.name, ws.embedder), R.embedder(ws.embedder)


def test_run_delete_and_promote_variants(page, quality_home):
    store = quality_home
    ws = store.require_workspace("sample")
    _tab(page, "What-if")
    for name, resolution in (("finer", 2.0), ("throwaway", 1.5)):
        page.text_input(key="wi_name").input(name)
        page.number_input(key="wi_resolution").set_value(resolution)
        next(b for b in page.button if b.label == "Run variant").click()
        run(page)
        assert wait_for_job(store, "sample").status == "done"
        run(page)
        assert any(s.value.startswith(f"Variant **{name}** made") for s in page.success)
    assert {v.name for v in list_variants(store, ws)} >= {"finer", "throwaway"}
    doomed = next(v for v in list_variants(store, ws) if v.name == "throwaway")
    _button(page, f"wi_del_{doomed.id}").click()
    run(page)
    assert "throwaway" not in {v.name for v in list_variants(store, ws)}

    page.selectbox(key="wi_promote_pick").set_value("finer")
    run(page)
    assert _button(page, "wi_promote").disabled, "promote waits for its confirmation"
    page.checkbox(key="wi_promote_sure").check()
    run(page)
    v0 = store.require_workspace("sample").build_version
    _button(page, "wi_promote").click()
    run(page)
    job = wait_for_job(store, "sample")
    assert (job.kind, job.status) == ("promote", "done")
    assert [s.status for s in store.stage_runs(job.id)] == ["done"] * 4
    run(page)
    assert any(s.value.startswith("Promoted **finer**") for s in page.success), [s.value for s in page.success]
    assert store.require_workspace("sample").build_version > v0
    assert any(v.name.startswith("before-") for v in list_variants(store, ws)), "the replaced partition is kept"


def test_metrics_tab_measures_each_method_or_says_it_is_absent(page, quality_home):
    """Leiden (GraphRAG's, extracted entities only), HiRAG's communities (with summary entities) and HiRAG's layers
    are measured; a method the build has none of (NodeRAG's own communities before the augment stage writes
    them) says so instead of failing."""
    from sqlmodel import select

    from core.models import Community, Node

    ws = quality_home.require_workspace("sample")
    with quality_home.session() as s:
        present = set(s.exec(select(Community.method).where(Community.workspace_id == ws.id).distinct()).all())
        summaries = set(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                     Node.layer > 0)).all())
    assert {"leiden", "hirag"} <= present
    run(page)
    assert page.radio(key="q_method").options == ["Leiden (GraphRAG)", "HiRAG communities", "NodeRAG communities",
                                                  "Attributed (ArchRAG)", "HiRAG layers"]
    for method in ("leiden", "hirag", "noderag", "hirag_layers"):
        page.radio(key="q_method").set_value(method)
        run(page)
        assert not page.exception, method
        infos = [i.value for i in page.info]
        if method in present or (method == "hirag_layers" and summaries):
            assert not any(v.startswith("No ") for v in infos), (method, infos)
            assert page.selectbox(key=f"q_level_{method}").options
        else:
            assert any(v.startswith("No NodeRAG communities") for v in infos), infos


def test_the_job_panel_shows_a_running_job_stops_it_and_other_starts_are_refused(page, quality_home):
    """A queued job row whose heartbeat this test keeps fresh (as its worker would) stands for a running job."""
    from core import worker
    from core.config import Settings
    from core.models import BuildRun, utcnow
    from core.pipeline import runs
    from core.pipeline.runs import active_run
    from ui.text import md_escape

    store = quality_home
    ws = store.require_workspace("sample")
    job = worker.create_job(store, ws, Settings(), "whatif", {"name": "panel", "settings": {}})

    def beat() -> None:
        with store.session() as s:
            row = s.get(BuildRun, job.id)
            row.heartbeat = utcnow()
            s.add(row)
            s.commit()

    try:
        beat()
        run(page)
        assert _keyed(page, "job_panel"), "the job panel is drawn"
        label = md_escape("What-if run 'panel'")
        assert any(m.value == f"**{label}** · queued · on build {ws.build_version}" for m in page.markdown)
        assert [p.proto.text for p in page.get("progress") if "steps done" in p.proto.text] == ["0/1 steps done"]
        cand = rv.filter_rows(rv.merge_table(store, ws.id), "candidate")[0]
        _tab(page, "Entity resolution")
        assert _button(page, f"mr_reject_{cand.id}").disabled, "decisions wait for the job"
        _tab(page, "What-if")
        page.text_input(key="wi_name").input("refused")
        next(b for b in page.button if b.label == "Run variant").click()
        beat()
        run(page)
        assert any("a job (What-if run 'panel') of this workspace is running" in e.value.replace("\\", "")
                   for e in page.error)  # (drawn escaped: ui/text.py md_escape)
        assert "refused" not in {v.name for v in list_variants(store, ws)}
        beat()
        build = open_page("views/build.py", "Build")
        assert next(b for b in build.button if b.label == "Build / resume").disabled
        assert any(i.value.startswith("What-if run 'panel' is running") for i in build.info)
        _button(page, "job_stop").click()
        beat()
        run(page)
        assert runs.get_run(store, job.id).status == "cancelling"
    finally:  # no worker will pick it up: close it as a worker would have
        with store.session() as s:
            row = s.get(BuildRun, job.id)
            row.status = "cancelled"
            s.add(row)
            s.commit()
    assert active_run(store, ws) is None


def _keyed(at: AppTest, key: str) -> list:
    return [n for n in _walk(at.main) if getattr(n, "key", None) == key]
