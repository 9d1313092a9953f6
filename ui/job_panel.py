"""The job panel of the Quality and Evaluate pages: the workspace's running job (a promote, a what-if run, a merge
decision or an evaluation, run by the background worker: core/worker.py) with its steps' progress and a Stop
button, redrawn every second while it runs, whoever started it. When the job this session started ends, the whole page is drawn again (its tabs read the
new rows) and the job's outcome is said once."""

from __future__ import annotations

import streamlit as st

from core.models import BuildRun, Workspace
from core.pipeline import runs
from core.pipeline.failures import failed_units, plural
from core.pipeline.runs import active_run, request_cancel
from ui import failed_units as FU
from ui import guard
from ui import resources as R
from ui.text import md_escape

WATCH = "quality_job"  # session state: id of the job this session started
EVERY_S = 1.0


def watch(run: BuildRun) -> None:
    """Follow `run` (just started by this session): its outcome is said when it ends."""
    st.session_state[WATCH] = run.id


def watching() -> int | None:
    return st.session_state.get(WATCH)


def finished_watched(store, kinds: tuple[str, ...] | None = None) -> BuildRun | None:
    """The job this session started (of one of `kinds`, default any), once it has ended (then no longer
    followed), else None: the page that says how such a job ended takes it."""
    run_id = watching()
    run = runs.get_run(store, run_id) if run_id is not None else None
    if run is not None and kinds is not None and (run.kind or "build") not in kinds:
        return None
    if run_id is not None and (run is None or run.status in runs.FINISHED):
        st.session_state.pop(WATCH, None)
        return run
    return None


def _steps(run: BuildRun) -> None:
    assert run.id is not None  # a row read from the store has its key
    steps = R.store().stage_runs(run.id)
    finished = sum(1 for s in steps if s.status == "done")
    cur = next((s for s in steps if s.status == "running"), None)
    frac = finished / max(1, len(steps))
    if cur is not None and cur.total:
        frac += (cur.done / cur.total) / max(1, len(steps))
    text = (f"Step {finished + 1}/{len(steps)}: {cur.message}" if cur else f"{finished}/{len(steps)} steps done")
    st.progress(min(1.0, frac), text=md_escape(text))


def draw(ws: Workspace) -> None:
    """The running job of `ws` (nothing when none runs). A build running is shown as such: jobs wait for it."""
    store = R.store()
    run = active_run(store, ws)
    if run is None:
        return
    if (run.kind or "build") == "build":
        st.info("A build of this workspace is running (see the Build page): what-if runs, promotes and merge "
                "decisions wait until it has finished.", icon=":material/construction:")
        return
    assert run.id is not None  # a row read from the store has its key
    run_id: int = run.id

    @st.fragment(run_every=EVERY_S)
    def live() -> None:
        now = runs.get_run(store, run_id)
        if now is None or now.status in runs.FINISHED:
            st.rerun()  # the whole page: the tabs read what the job wrote, the outcome is said
        with st.container(border=True, key="job_panel"):
            a, b = st.columns([5, 1])
            state = "stopping…" if now.status == "cancelling" else now.status
            a.markdown(f"**{md_escape(runs.run_label(now))}** · {state} · {runs.job_build(now, ws.build_version)}")
            stop = b.button("Stop", key="job_stop", icon=":material/stop:",
                            disabled=now.status == "cancelling" or not guard.allowed(ws, "stop"))
            if stop and guard.check(ws, "stop"):
                request_cancel(store, run_id)  # now.id: now is run `run_id`
                st.toast("Stopping after the current unit…")
            _steps(now)

    live()


def failed(ws: Workspace) -> None:
    """The failed units of the workspace's last job while they are outstanding (a promote whose reports failed):
    the job finished "with N failed units"; the next build retries them (core/pipeline/failures.py)."""
    store = R.store()
    assert ws.id is not None  # a row read from the store has its key
    run = store.latest_run(ws.id, tuple(k for k in runs.KIND_LABELS if k != "build"))
    units = failed_units(store, ws.id, run.id) if run is not None and run.status == "done" else []
    if run is None or not units:
        return
    with st.expander(f"{md_escape(runs.run_name(run, {}))} finished with {plural(len(units))}",  # a job: no build
                     expanded=True, icon=":material/error:"):
        st.caption("Their model calls still failed after their retries, so nothing was stored for them. The next "
                   "build retries them (Build / resume, or Retry failed units, on the Build page).")
        FU.table(units, "job_failed_units", ws.id)
