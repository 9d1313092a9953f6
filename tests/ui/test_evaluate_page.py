"""The Evaluate page with AppTest, on a private copy of the built sample: a first visit opens New evaluation; a
probe set is generated (the seeded set core/evaluation/probes.py makes, labelled generated), the run started as a
job of the background worker; the page then shows its figures (baselines marked); after a promote the Quality page
offers the re-run, whose two runs make the What-if tab's recall effect. Uploading a questions file, dropping a
question in the editor, a question's paths and Compare are driven in a real browser
(tests/e2e/test_evaluate_browser.py)."""

from __future__ import annotations

import time

import pytest

from core.access import LOCAL
from core.config import Settings
from core.evaluation import probes, records
from core.pipeline.runs import FINISHED
from core.quality.variants import defaults, list_variants
from core.store import Store
from core.worker import start_promote, start_variant
from tests.ui.conftest import app_home, open_page, run, sample_copy


@pytest.fixture(scope="module")
def eval_home(tmp_path_factory, sample_built):
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_eval_ui")
    with app_home(home):
        yield store


def _done(store: Store, ws_id: int, timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ev = records.latest_evaluation(store, ws_id)
        if ev is not None and records.status(store, ev) in ("done", "failed", "cancelled"):
            return ev
        time.sleep(0.5)
    raise AssertionError("the evaluation did not finish")


def test_probes_generated_edited_run_and_their_figures_shown(eval_home):
    store = eval_home
    ws = store.require_workspace("sample")
    at = open_page("views/evaluate.py", "Evaluate")
    assert any("No evaluation" in x.value for x in at.info) or at.session_state["ev_tab"] == "New evaluation"
    at.radio(key="ev_source").set_value("Generate probes from this workspace")
    run(at)
    at.number_input(key="ev_n_multi").set_value(4)
    at.number_input(key="ev_n_single").set_value(4)
    at.number_input(key="ev_seed").set_value(3)
    next(b for b in at.button if "Generate probes" in b.label).click()
    run(at)
    draft = at.session_state["ev_draft"]
    made = probes.probe_set(store, ws.id, 4, 4, 3)
    assert [q["question"] for q in draft["questions"]] == [q["question"] for q in made]  # seeded: the same set
    assert all(q["generated"] for q in draft["questions"]) and len(made) == 8
    assert any("8 question(s)" in m.value and "8 generated" in m.value for m in at.markdown)

    run_button = next(b for b in at.button if b.label.startswith("Run on"))
    assert run_button.label == "Run on 8 question(s)"
    at.multiselect(key="ev_strategies").set_value(["hirag", "graphrag-local"])  # a form: sent with the submit
    run_button.click()
    run(at)
    ev = _done(store, ws.id)
    assert ev.status == "done" and len(ev.questions) == 8 and ev.meta["generated"] == 8
    assert set(ev.strategies) == {"hirag", "graphrag-local", "naive", "bm25"}  # the baselines always added

    run(at)  # the page's next run: Results, the figures of every strategy, the baselines marked
    assert at.session_state["ev_tab"] == "Results"
    table = next(d.value for d in at.dataframe if "recall@2" in d.value.columns)  # (AppTest keeps no key)
    assert len(table) == 4
    marked = [s for s in table["strategy"] if "◆" in s]
    assert len(marked) == 2 and any("dense baseline" in s for s in marked)
    assert any("8 questions (8 generated)" in str(o) for o in at.selectbox(key="ev_pick").options)


def _job(store: Store, ws_id: int, kinds: tuple[str, ...], timeout: float = 400):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = store.latest_run(ws_id, kinds)
        if r is not None and r.status in FINISHED:
            return r
        time.sleep(0.5)
    raise AssertionError(f"no {kinds} job finished")


def test_after_a_promote_the_re_run_is_offered_and_the_what_if_tab_shows_each_partition_s_recall(eval_home):
    """Run after the test above (its evaluation is the one re-run)."""
    store = eval_home
    ws = store.require_workspace("sample")
    first = _done(store, ws.id)
    settings = Settings.from_env()
    vs = defaults(store, ws.id, settings)
    vs.resolution = 3.0
    assert _job(store, ws.id, ("whatif",)) if start_variant(store, LOCAL, ws, "res-3", vs, settings) else False
    start_promote(store, LOCAL, ws, settings, "res-3")
    assert _job(store, ws.id, ("promote",)).status == "done"
    ws = store.require_workspace("sample")
    assert records.outdated(ws, first)

    q = open_page("views/quality.py", "Quality")  # the Quality page offers the re-run
    links = [x for x in q.get("page_link")]
    assert any("re-run it on the Evaluate page" in str(x.proto.label) for x in links)
    at = open_page("views/evaluate.py", "Evaluate")
    assert any("changed since the last evaluation" in x.value for x in at.info)
    next(b for b in at.button if b.key == "ev_rerun").click()
    run(at)
    again = _done(store, ws.id)
    assert again.id != first.id and again.question_hash == first.question_hash and again.partition == "res-3"

    q = open_page("views/quality.py", "Quality")
    q.session_state["q_tab"] = "What-if"  # the page's lazy tabs draw only the open one
    run(q)
    rows = next(d.value for d in q.dataframe if "partition" in d.value.columns and "evaluation" in d.value.columns)
    by = {r["partition"]: r for _, r in rows.iterrows()}
    snapshot = next(v.name for v in list_variants(store, ws) if v.name.startswith("before-"))
    assert str(by["current"]["evaluation"]).startswith(f"#{again.id} ")
    assert str(by[snapshot]["evaluation"]).startswith(f"#{first.id} ")  # measured as "built", before the promote
    assert by["res-3"]["evaluation"] == f"#{again.id} (build {again.build_version})"  # promoted: the same partition
    cell = by[snapshot]["graphrag-local recall@5"]
    assert "[" in cell and "(" in cell  # its recall, and the change against the current partition with an interval
    assert "(" not in by["current"]["graphrag-local recall@5"]
