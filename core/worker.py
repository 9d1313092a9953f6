"""The background worker and the jobs it runs: `python -m core worker --run ID` executes a build (core/pipeline/runner.py)
or a job; `python -m core worker --serve` is a long-running worker that claims the oldest queued run (or a run
whose worker went silent) of any workspace, runs it, and looks for the next. Several workers on one database never
run the same run: each claims it first (core/pipeline/lease.py). A job is work on a built workspace that runs through the same runner instead of in the app's process, with
the build's heartbeat, progress rows and cancel: promoting a what-if variant, a what-if run, a merge decision.

This module sits above core/quality, whose planners (`PLANNERS`) turn a job's parameters into its steps (a
`JobPlan`, core/pipeline/context.py); the build layer below never imports them.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict

from core import access
from core.access import User
from core.config import Settings
from core.evaluation.job import evaluate_plan
from core.models import LEASE_S, BuildRun, Workspace
from core.pipeline.context import BuildContext, JobPlan
from core.pipeline.delete import delete_plan
from core.pipeline.engine import engine_for
from core.pipeline.factory import job_settings, make_context
from core.pipeline.failures import EXIT_FAILED_UNITS, describe, failed_units
from core.pipeline.lease import Lease, claim_next
from core.pipeline.runner import run_build, run_job
from core.pipeline.runs import FINISHED, KIND_LABELS, check_idle, get_run, insert_run, launch_worker
from core.protocols import BackendError
from core.quality.data import build_settings
from core.quality.merge_job import merge_plan
from core.quality.promote import promote_plan, promote_settings
from core.quality.variants import VariantSettings, check_name, get_variant, variant_plan
from core.secrets import with_secrets
from core.store import Store

PLANNERS: dict[str, Callable[[dict], JobPlan]] = {"promote": promote_plan, "whatif": variant_plan,
                                                   "reembed": merge_plan, "delete": delete_plan,
                                                   "evaluate": evaluate_plan}


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


def start_delete(store: Store, user: User, ws: Workspace, settings: Settings, documents: list[str]) -> BuildRun:
    """Start the job that deletes `documents` (ids of this workspace) and what only they supported; access.Refused,
    logged, unless the user may delete documents of the workspace."""
    access.require(store, user, ws, "delete_documents")
    return start_job(store, ws, settings, "delete", {"documents": list(documents)})


def start_job(store: Store, ws: Workspace, settings: Settings, kind: str, params: dict) -> BuildRun:
    """Create the job and launch its background worker (the page then follows its StageRun rows)."""
    run = create_job(store, ws, settings, kind, params)
    assert run.id is not None
    launch_worker(settings, run.id)
    return run


def run_worker(store: Store, run_id: int, lease_s: float = LEASE_S) -> int:
    """`worker --run ID`: claim run `run_id` (a build or a job) and run it with the settings stored on its row.
    Exit status: 0 finished or stopped by the user, 1 failed, 2 no such run, 3 not claimed (another live worker
    holds it, or it finished or was superseded), 4 another worker took it over mid-run (this one stopped), 5
    (`EXIT_FAILED_UNITS`) finished with failed units (core/pipeline/failures.py; the next build retries them)."""
    if get_run(store, run_id) is None:
        print(f"no build run {run_id}", file=sys.stderr)
        return 2
    lease = Lease(store, run_id, lease_s)
    if not lease.claim():
        row = get_run(store, run_id)
        why = ("it is gone" if row is None else f"it is {row.status}" if row.status in FINISHED else
               f"worker {row.worker} holds it (last heartbeat {row.heartbeat})" if row.worker else
               "a newer run of its workspace superseded it")
        print(f"run {run_id} not claimed: {why}", file=sys.stderr)
        return 3
    return run_claimed(store, lease)


def _run_events(ctx: BuildContext, run_id: int, kind: str, params: dict, lease: Lease) -> str:
    """Run the build or job, printing its events; the last event's status."""
    last = ""
    if kind == "build":
        events = run_build(ctx, run_id, lease=lease)
    else:  # promote, what-if, merge decision: the job's own steps, planned by core/quality
        try:
            plan = plan_job(kind, params)
        except Exception as exc:  # recorded on the run, so the page says why the job never started
            lease.finish("failed", f"{type(exc).__name__}: {exc}"[:500])
            raise
        events = run_job(ctx, run_id, plan, lease=lease)
    for ev in events:
        print(f"run {run_id} [{ev.stage or 'build'}] {ev.status} {ev.done}/{ev.total} {ev.message}", flush=True)
        last = ev.status
    return last


def run_claimed(store: Store, lease: Lease) -> int:
    """Run the run `lease` holds (see `run_worker` for the exit status), renewing the lease from the claim on."""
    run_id = lease.run_id
    print(f"worker {lease.token} claimed run {run_id}", flush=True)
    with lease.heartbeat():
        with store.session() as s:
            run = s.get(BuildRun, run_id)
            assert run is not None  # claimed just now; runs are deleted only with their workspace
            ws = s.get(Workspace, run.workspace_id)
            # the stored settings hold no secret (core/secrets.py): the database and server URLs' passwords, the
            # API key and the Chroma token come from this worker's environment (launch_worker sets it)
            settings = with_secrets(Settings.model_validate(run.settings), Settings.from_env())
            kind, params = run.kind or "build", dict(run.params or {})
        with ExitStack() as stack:
            try:
                assert ws is not None and ws.id is not None, f"workspace {run.workspace_id} is gone"  # recorded
                engine = stack.enter_context(engine_for(settings, store, ws.id))
                ctx = make_context(store, ws, settings, engine=engine)
            except Exception as exc:  # recorded on the run, so the app shows why the build never started
                msg = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
                lease.finish("failed", msg[:500], error=traceback.format_exc()[-4000:])
                print(msg, file=sys.stderr)
                return 1
            last = ""
            try:
                print(f"run {run_id}: units run on {engine.describe()}", flush=True)
                last = _run_events(ctx, run_id, kind, params, lease)
            except Exception:
                traceback.print_exc()
                return 1
    if last == "lost":
        print(f"worker {lease.token} lost run {run_id} to another worker", flush=True)
        return 4
    print(f"worker {lease.token} finished run {run_id}: {last}", flush=True)
    failed = failed_units(store, ctx.ws_id, run_id) if last == "done" else []
    for line in describe(failed):
        print(f"run {run_id} failed unit: {line}", flush=True)
    return EXIT_FAILED_UNITS if failed else 0


def serve(store: Store, lease_s: float = LEASE_S, poll_s: float = 2.0,
          stop: threading.Event | None = None, max_runs: int | None = None) -> int:
    """`worker --serve`: claim the oldest claimable run of any workspace (queued, or held by a worker silent for
    its run's lease, or whose process is gone from this host; its newest run only, see core/pipeline/lease.py), run it, repeat; idle, look again every
    `poll_s` seconds. SIGTERM or SIGINT stops it after the current run (a run cut short resumes elsewhere once its
    lease expires). `max_runs` (tests): return after that many runs."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    print(f"worker serving {store.path}: lease {lease_s:g} s, poll {poll_s:g} s", flush=True)
    runs = 0
    while not stop.is_set() and (max_runs is None or runs < max_runs):
        lease = claim_next(store, lease_s)
        if lease is None:
            stop.wait(poll_s)
            continue
        from core.index.vectors import reopen_vector_stores
        from core.store import release_memory

        reopen_vector_stores()  # another worker may have written this workspace's vectors since this one read them
        run_claimed(store, lease)
        release_memory()
        runs += 1
    return 0


def start_promote(store, user: User, ws: Workspace, settings: Settings, name: str) -> BuildRun:
    """Start a promote job for variant `name` (access.Refused, logged, unless the user may run what-if variants of
    the workspace; JobBusy while a build or job runs)."""
    access.require(store, user, ws, "whatif")
    get_variant(store, ws, name)  # an unknown name is said now, not by the worker
    return start_job(store, ws, promote_settings(store, ws, settings), "promote", {"variant": name})


def start_variant(store, user: User, ws: Workspace, name: str, vs: VariantSettings, settings: Settings) -> BuildRun:
    """Start a what-if job (access.Refused, logged, unless the user may; the name and settings are checked now;
    refused with JobBusy while a build or job of the workspace runs)."""
    access.require(store, user, ws, "whatif")
    assert ws.id is not None  # a row read from or written to the store has its key
    name = check_name(store, ws, name)
    vs = vs.check()
    return start_job(store, ws, job_settings(build_settings(store, ws.id, settings), ws), "whatif",
                     {"name": name, "settings": asdict(vs)})
