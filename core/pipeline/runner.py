"""Ordered build stages, the runner that records them in the database, and the background worker launcher.

A stage is `stage(ctx: BuildContext) -> Iterator[Progress]` (core/pipeline/context.py). The runner writes every
stage's progress to `StageRun` rows and a heartbeat to `BuildRun`, which is what the app polls, so a reload or a
second tab sees the same run. It writes them as the holder of the run's lease (core/pipeline/lease.py): a worker
that lost the run to another stops at its next unit and writes nothing more.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator

from sqlalchemy import update

from core.config import Settings
from core.models import BuildRun, Workspace, utcnow
from core.pipeline.context import BuildContext, Cancelled, Event, JobPlan, Progress, Stage
from core.pipeline.failures import count_failed, finished_message, plural
from core.pipeline.lease import NOW, Lease, LeaseLost
from core.pipeline.runs import get_run, insert_run, record_version
from core.pipeline.stages.attributed import attributed_stage
from core.pipeline.stages.augment import augment_stage
from core.pipeline.stages.chunk import chunk_stage
from core.pipeline.stages.communities import communities_stage
from core.pipeline.stages.embed import embed_stage
from core.pipeline.stages.extract import extract_stage
from core.pipeline.stages.index import index_stage
from core.pipeline.stages.layers import layers_stage
from core.pipeline.stages.lexical import lexical_stage
from core.pipeline.stages.merge import merge_stage
from core.pipeline.stages.reports import reports_stage
from core.pipeline.stages.resolve import resolve_stage
from core.protocols import BackendError
from core.store import Store, release_memory

# Memory is handed back (a full collection and malloc_trim) only after a stage that ran this long: a short stage let go
# of little, and a full collection costs 0.4-1 s in a process that holds torch and spaCy (the test suite's hundreds of
# small builds paid it after every stage: its main pass 1,950 -> 2,475 s). Every stage of the 1M-token build runs longer.
RELEASE_AFTER_S = 5.0


class RunTaken(RuntimeError):
    """The run could not be claimed: another live worker holds it, or it finished or was superseded."""


def stages() -> list[tuple[str, str, Stage]]:
    """(name, label, function) in build order."""
    return [
        ("chunk", "Chunk documents", chunk_stage),
        ("extract", "Extract entities, relationships, statements", extract_stage),
        ("resolve", "Settle entity names and types", resolve_stage),
        ("embed", "Embed chunks, statements and entities", embed_stage),
        ("merge", "Entity resolution: merge candidates", merge_stage),
        ("layers", "HiRAG summary layers", layers_stage),
        ("communities", "WCC, Leiden (GraphRAG) and HiRAG communities", communities_stage),
        ("attributed", "ArchRAG attributed communities and C-HNSW", attributed_stage),
        ("reports", "Community reports", reports_stage),
        ("lexical", "HLG facts and topics", lexical_stage),
        ("augment", "NodeRAG attributes, high-level elements, semantic edges", augment_stage),
        ("index", "Index community reports", index_stage),
    ]


def stage_names() -> list[str]:
    return [name for name, _, _ in stages()]


def create_run(store: Store, ws: Workspace, settings: Settings) -> BuildRun:
    """A queued build of every stage (the worker, or the CLI in-process, then runs it with `run_build`)."""
    return insert_run(store, ws, settings, [(name, label) for name, label, _ in stages()])


def run_build(ctx: BuildContext, run_id: int, only: list[str] | None = None,
              steps: list[tuple[str, str, Stage]] | None = None,
              finish: Callable[[BuildContext], str] | None = None, lease: Lease | None = None) -> Iterator[Event]:
    """Run every stage (or `only` these) of run `run_id`, recording progress; yields an Event per update. A job
    (core/worker.py) passes its own `steps` and `finish` (what to do once every step is done, returning the
    run's final message) instead of the build's stages and its version bump. `lease`: the caller's claim on the
    run (a worker claims before it builds its context); without one the run is claimed here, and RunTaken raised
    when another live worker holds it. A lost lease ends the run's events with one of status "lost"."""
    if lease is None:
        lease = Lease(ctx.store, run_id, ctx.settings.worker.lease_s)
        if not lease.claim():
            raise RunTaken(f"run {run_id} is held by another live worker, finished, or superseded by a newer run")
    ctx.index.write_guard = lease.holding  # vector writes: only while the lease holds
    try:
        with lease.heartbeat(), lease.guard():  # every other write of the run: conditional on the lease
            yield from _run_stages(ctx, lease, only, steps, finish)
    finally:
        ctx.index.write_guard = None


def _run_stages(ctx: BuildContext, lease: Lease, only: list[str] | None,
                steps: list[tuple[str, str, Stage]] | None = None,
                finish: Callable[[BuildContext], str] | None = None) -> Iterator[Event]:
    store, run_id = ctx.store, lease.run_id
    last_write = 0.0
    ctx.should_stop = lease.should_stop
    ctx.failures.run_id = run_id  # units whose language call fails are recorded, the stage goes on (failures.py)
    if lease.state() == "cancelling":  # stopped while still queued: honour it
        lease.finish("cancelled", "Stopped by the user")
        yield Event(run_id, "", "cancelled", 0, 0, "Stopped by the user", {})
        return
    stage_name = ""
    row = get_run(store, run_id)
    if row is not None:  # where its units run (core/pipeline/engine.py), for the Build page and `core stats`
        lease.write(params=dict(row.params or {}) | {"engine": ctx.engine.describe()})
    todo = [(name, label, fn) for name, label, fn in (stages() if steps is None else steps) if not only or name in only]
    try:
        for name, label, fn in todo:
            stage_name = name
            ctx.failures.begin(name)
            t0 = time.perf_counter()
            lease.write(stage=name, message=label)
            lease.write_stage(name, status="running", started_at=utcnow())
            yield Event(run_id, name, "running", 0, 0, label, {})
            last: Progress | None = None
            for p in fn(ctx):
                last = p
                now = time.perf_counter()
                if now - last_write > 0.4 or p.done == p.total:
                    last_write = now
                    lease.write_stage(name, done=p.done, total=p.total, message=p.message or label,
                                      counts=p.counts, seconds=now - t0)
                    lease.write(heartbeat=NOW, message=p.message or label)
                yield Event(run_id, name, "running", p.done, p.total, p.message, p.counts)
                if ctx.should_stop():
                    raise lease.stop_error()
            if ctx.should_stop() and lease.lost.is_set():  # a stage that saw the loss returned early
                raise LeaseLost()
            secs = time.perf_counter() - t0
            fin = last or Progress(1, 1, label)
            n_failed = ctx.failures.settle(name)
            fin_message = (fin.message or label) + (f" ({plural(n_failed)})" if n_failed else "")
            lease.write_stage(name, status="done", done=fin.total, total=fin.total, counts=fin.counts,
                              seconds=secs, finished_at=utcnow(), message=fin_message)
            yield Event(run_id, name, "done", fin.total, fin.total, fin_message, fin.counts)
            if secs >= RELEASE_AFTER_S:  # what a long stage let go of, back to the system before the next one
                release_memory()
        if lease.state() == "lost":  # another worker holds the run now: it finishes it
            raise LeaseLost()
        done_message = finished_message("Build finished" if finish is None else finish(ctx),
                                        count_failed(store, ctx.ws_id, run_id))
        if finish is None:
            store.analyze()
            finish_build(store, ctx.ws_id, ctx.backend.name, ctx.backend.model, ctx.embedder.name, run_id)
        if not lease.finish("done", done_message):
            raise LeaseLost()
        yield Event(run_id, "", "done", 1, 1, done_message, {})
    except LeaseLost:
        yield Event(run_id, stage_name, "lost", 0, 0, "another worker took the run over: stopped", {})
    except Cancelled:
        if lease.lost.is_set():
            yield Event(run_id, stage_name, "lost", 0, 0, "another worker took the run over: stopped", {})
            return
        lease.write_stage(stage_name, status="cancelled")
        lease.finish("cancelled", "Stopped by the user")
        yield Event(run_id, stage_name, "cancelled", 0, 0, "Stopped by the user", {})
    except Exception as exc:  # recorded for the UI, then re-raised for the CLI's exit status
        if lease.state() == "lost":  # a write that failed because the run is another worker's now: stop quietly
            yield Event(run_id, stage_name, "lost", 0, 0, "another worker took the run over: stopped", {})
            return
        msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BackendError) else str(exc)
        lease.write_stage(stage_name, status="failed", message=msg[:500])
        lease.finish("failed", msg[:500], error=traceback.format_exc()[-4000:])
        yield Event(run_id, stage_name, "failed", 0, 0, msg, {})
        raise


def finish_build(store: Store, ws_id: int, backend: str, chat_model: str, embedder: str,
                 run_id: int | None = None) -> None:
    """A finished build: the workspace's version + 1 (one atomic UPDATE: a concurrent bump is never lost) and the
    backend, model and embedder it was built with; the new version is the run's build number (`BuildRun.version`)."""
    t = Workspace.__table__  # type: ignore[attr-defined]
    with store.engine.begin() as conn:
        version = conn.execute(update(t).where(t.c.id == ws_id)
                               .values(build_version=t.c.build_version + 1, backend=backend, chat_model=chat_model,
                                       embedder=embedder).returning(t.c.build_version)).scalar()
        if run_id is not None:
            record_version(conn, run_id, version)


def run_job(ctx: BuildContext, run_id: int, plan: JobPlan, lease: Lease | None = None) -> Iterator[Event]:
    """Run job `run_id` (the worker calls this): runner.run_build over the plan's steps; the graph-changing steps
    that finished decide the version bump, whether the job ends, is stopped or fails."""
    bumped = False

    def finish(c: BuildContext) -> str:
        nonlocal bumped
        bumped = bool(plan.changes) and c.store.bump_version(c.ws_id) > 0
        return plan.done_message

    try:
        yield from run_build(ctx, run_id, steps=plan.steps, finish=finish, lease=lease)
    finally:  # a step stopped or failed half-way may have changed rows too: reload rather than show stale views
        started = {r.stage for r in ctx.store.stage_runs(run_id) if r.status != "pending"}
        if not bumped and started & plan.changes:
            ctx.store.bump_version(ctx.ws_id)
