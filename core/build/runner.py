"""Ordered build stages, the runner that records them in the database, and the background worker launcher.

A stage is `stage(ctx: BuildContext) -> Iterator[Progress]` (core/build/context.py). The runner writes every
stage's progress to `StageRun` rows and a heartbeat to `BuildRun`, which is what the app polls, so a reload or a
second tab sees the same run.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterator

from core.build.context import BuildContext, Cancelled, Event, JobPlan, Progress, Stage
from core.build.runs import Heartbeat, insert_run, update_run, update_stage
from core.build.stages.attributed import attributed_stage
from core.build.stages.augment import augment_stage
from core.build.stages.chunk import chunk_stage
from core.build.stages.communities import communities_stage
from core.build.stages.embed import embed_stage
from core.build.stages.extract import extract_stage
from core.build.stages.index import index_stage
from core.build.stages.layers import layers_stage
from core.build.stages.lexical import lexical_stage
from core.build.stages.merge import merge_stage
from core.build.stages.reports import reports_stage
from core.build.stages.resolve import resolve_stage
from core.config import Settings
from core.models import BuildRun, Workspace, utcnow
from core.protocols import BackendError
from core.store import Store


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
              finish: Callable[[BuildContext], str] | None = None) -> Iterator[Event]:
    """Run every stage (or `only` these) of run `run_id`, recording progress; yields an Event per update. A job
    (core/worker.py) passes its own `steps` and `finish` (what to do once every step is done, returning the
    run's final message) instead of the build's stages and its version bump."""
    with Heartbeat(ctx.store, run_id):
        yield from _run_stages(ctx, run_id, only, steps, finish)


def _run_stages(ctx: BuildContext, run_id: int, only: list[str] | None,
                steps: list[tuple[str, str, Stage]] | None = None,
                finish: Callable[[BuildContext], str] | None = None) -> Iterator[Event]:
    store = ctx.store
    last_write = 0.0

    def cancelled() -> bool:
        with store.session() as s:
            run = s.get(BuildRun, run_id)
            return run is not None and run.status == "cancelling"

    ctx.should_stop = cancelled
    if cancelled():  # stopped while still queued: honour it instead of overwriting it with "running"
        update_run(store, run_id, status="cancelled", finished_at=utcnow(), message="Stopped by the user")
        yield Event(run_id, "", "cancelled", 0, 0, "Stopped by the user", {})
        return
    update_run(store, run_id, status="running", pid=os.getpid(), heartbeat=utcnow())
    stage_name = ""
    try:
        for name, label, fn in (stages() if steps is None else steps):
            if only and name not in only:
                continue
            stage_name = name
            t0 = time.perf_counter()
            update_run(store, run_id, stage=name, message=label)
            update_stage(store, run_id, name, status="running", started_at=utcnow())
            yield Event(run_id, name, "running", 0, 0, label, {})
            last: Progress | None = None
            for p in fn(ctx):
                last = p
                now = time.perf_counter()
                if now - last_write > 0.4 or p.done == p.total:
                    last_write = now
                    update_stage(store, run_id, name, done=p.done, total=p.total, message=p.message or label,
                                  counts=p.counts, seconds=now - t0)
                    update_run(store, run_id, heartbeat=utcnow(), message=p.message or label)
                yield Event(run_id, name, "running", p.done, p.total, p.message, p.counts)
                if ctx.should_stop():
                    raise Cancelled()
            secs = time.perf_counter() - t0
            fin = last or Progress(1, 1, label)
            update_stage(store, run_id, name, status="done", done=fin.total, total=fin.total, counts=fin.counts,
                          seconds=secs, finished_at=utcnow(), message=fin.message or label)
            yield Event(run_id, name, "done", fin.total, fin.total, fin.message, fin.counts)
        done_message = "Build finished" if finish is None else finish(ctx)
        if finish is None:
            store.analyze()
            with store.session() as s:
                ws = s.get(Workspace, ctx.ws_id)
                assert ws is not None  # the workspace being built
                ws.build_version += 1
                ws.backend = ctx.backend.name
                ws.chat_model = ctx.backend.model
                ws.embedder = ctx.embedder.name
                s.add(ws)
                s.commit()
        update_run(store, run_id, status="done", finished_at=utcnow(), message=done_message, heartbeat=utcnow())
        yield Event(run_id, "", "done", 1, 1, done_message, {})
    except Cancelled:
        update_stage(store, run_id, stage_name, status="cancelled")
        update_run(store, run_id, status="cancelled", finished_at=utcnow(), message="Stopped by the user")
        yield Event(run_id, stage_name, "cancelled", 0, 0, "Stopped by the user", {})
    except Exception as exc:  # recorded for the UI, then re-raised for the CLI's exit status
        msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BackendError) else str(exc)
        update_stage(store, run_id, stage_name, status="failed", message=msg[:500])
        update_run(store, run_id, status="failed", finished_at=utcnow(), error=traceback.format_exc()[-4000:],
                    message=msg[:500])
        yield Event(run_id, stage_name, "failed", 0, 0, msg, {})
        raise


def run_job(ctx: BuildContext, run_id: int, plan: JobPlan) -> Iterator[Event]:
    """Run job `run_id` (the worker calls this): runner.run_build over the plan's steps; the graph-changing steps
    that finished decide the version bump, whether the job ends, is stopped or fails."""
    bumped = False

    def finish(c: BuildContext) -> str:
        nonlocal bumped
        bumped = bool(plan.changes) and c.store.bump_version(c.ws_id) > 0
        return plan.done_message

    try:
        yield from run_build(ctx, run_id, steps=plan.steps, finish=finish)
    finally:  # a step stopped or failed half-way may have changed rows too: reload rather than show stale views
        started = {r.stage for r in ctx.store.stage_runs(run_id) if r.status != "pending"}
        if not bumped and started & plan.changes:
            ctx.store.bump_version(ctx.ws_id)
