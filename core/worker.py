"""The background worker and the jobs it runs: `python -m core worker --run ID` executes a build (core/build/runner.py)
or a job. A job is work on a built workspace that runs through the same runner instead of in the app's process, with
the build's heartbeat, progress rows and cancel: promoting a what-if variant, a what-if run, a merge decision.

This module sits above core/quality, whose planners (`PLANNERS`) turn a job's parameters into its steps (a
`JobPlan`, core/build/context.py); the build layer below never imports them.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict

from core.build.context import JobPlan
from core.build.factory import job_settings, make_context
from core.build.runner import run_build, run_job
from core.build.runs import KIND_LABELS, check_idle, insert_run, launch_worker, update_run
from core.config import Settings
from core.models import BuildRun, Workspace, utcnow
from core.protocols import BackendError
from core.quality.data import build_settings
from core.quality.merge_job import merge_plan
from core.quality.promote import promote_plan, promote_settings
from core.quality.variants import VariantSettings, check_name, get_variant, variant_plan
from core.store import Store

PLANNERS: dict[str, Callable[[dict], JobPlan]] = {"promote": promote_plan, "whatif": variant_plan,
                                                   "reembed": merge_plan}


def plan_job(kind: str, params: dict) -> JobPlan:
    if kind not in PLANNERS:
        raise ValueError(f"unknown job kind {kind!r}")
    return PLANNERS[kind](dict(params))


def create_job(store: Store, ws: Workspace, settings: Settings, kind: str, params: dict) -> BuildRun:
    """A queued job row with one pending StageRun per step (refused while a run of the workspace is active; the
    plan is made here too, so bad parameters fail before anything is written)."""
    check_idle(store, ws)
    plan = plan_job(kind, params)
    params = dict(params) | {"label": plan.label or KIND_LABELS[kind]}
    return insert_run(store, ws, settings, [(name, label) for name, label, _ in plan.steps], kind, params,
                      params["label"])


def start_job(store: Store, ws: Workspace, settings: Settings, kind: str, params: dict) -> BuildRun:
    """Create the job and launch its background worker (the page then follows its StageRun rows)."""
    run = create_job(store, ws, settings, kind, params)
    assert run.id is not None
    launch_worker(settings, run.id)
    return run


def run_worker(store: Store, run_id: int) -> int:
    """Entry point of the background worker: run the build or job `run_id` with the settings stored on its row."""
    with store.session() as s:
        run = s.get(BuildRun, run_id)
        if run is None:
            print(f"no build run {run_id}", file=sys.stderr)
            return 2
        ws = s.get(Workspace, run.workspace_id)
        settings = Settings.model_validate(run.settings)
        kind, params = run.kind or "build", dict(run.params or {})
    try:
        assert ws is not None, f"workspace {run.workspace_id} is gone"  # deleted with its runs: recorded as failed
        ctx = make_context(store, ws, settings)
    except Exception as exc:  # recorded on the run, so the app shows why the build never started
        msg = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        update_run(store, run_id, status="failed", message=msg[:500], error=traceback.format_exc()[-4000:],
                    finished_at=utcnow())
        print(msg, file=sys.stderr)
        return 1
    try:
        if kind == "build":
            events = run_build(ctx, run_id)
        else:  # promote, what-if, merge decision: the job's own steps, planned by core/quality
            try:
                plan = plan_job(kind, params)
            except Exception as exc:  # recorded on the run, so the page says why the job never started
                update_run(store, run_id, status="failed", message=f"{type(exc).__name__}: {exc}"[:500],
                           finished_at=utcnow())
                raise
            events = run_job(ctx, run_id, plan)
        for ev in events:
            print(f"[{ev.stage or 'build'}] {ev.status} {ev.done}/{ev.total} {ev.message}", flush=True)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def start_promote(store, ws: Workspace, settings: Settings, name: str) -> BuildRun:
    """Start a promote job for variant `name` (refused with JobBusy while a build or job runs)."""
    get_variant(store, ws, name)  # an unknown name is said now, not by the worker
    return start_job(store, ws, promote_settings(store, ws, settings), "promote", {"variant": name})


def start_variant(store, ws: Workspace, name: str, vs: VariantSettings, settings: Settings) -> BuildRun:
    """Start a what-if job (the name and settings are checked now; refused with JobBusy while a build or job
    of the workspace runs)."""
    assert ws.id is not None  # a row read from or written to the store has its key
    name = check_name(store, ws, name)
    vs = vs.check()
    return start_job(store, ws, job_settings(build_settings(store, ws.id, settings), ws), "whatif",
                     {"name": name, "settings": asdict(vs)})
