"""Ordered build stages, the runner that records them in the database, and the background worker launcher.

A stage is `stage(ctx: BuildContext) -> Iterator[Progress]` (core/build/context.py). The runner writes every
stage's progress to `StageRun` rows and a heartbeat to `BuildRun`, which is what the app polls, so a reload or a
second tab sees the same run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from core.backends.base import BackendError, Embedder, LanguageBackend
from core.build.context import BuildContext, Cancelled, Event, Progress, Stage
from core.config import Settings
from core.index.vectors import VectorIndex
from core.models import BuildRun, StageRun, Workspace, utcnow
from core.store import Store


def stages() -> list[tuple[str, str, Stage]]:
    """(name, label, function) in build order."""
    from core.build.stages.attributed import attributed_stage
    from core.build.stages.augment import augment_stage
    from core.build.stages.chunk import chunk_stage
    from core.build.stages.embed import embed_stage, index_stage
    from core.build.stages.extract import extract_stage
    from core.build.stages.layers import layers_stage
    from core.build.stages.lexical import lexical_stage
    from core.build.stages.reports import reports_stage
    from core.extract.resolve import resolve_stage
    from core.graph.communities import communities_stage
    from core.resolution.merge import merge_stage

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


# -- context ---------------------------------------------------------------------------------------------------
def make_backend(settings: Settings, store: Store | None) -> LanguageBackend:
    if settings.backend.kind == "ollama":
        from core.backends.cache import CallCache
        from core.backends.ollama_backend import OllamaBackend

        return OllamaBackend(settings.backend, CallCache(store) if store else None)
    from core.backends.offline import OfflineBackend

    return OfflineBackend(settings.extract.max_entities_per_chunk, settings.extract.max_relationships_per_chunk,
                          settings.extract.offline_extractor)


def open_index(settings: Settings, ws_name: str, embedder_name: str) -> VectorIndex:
    return VectorIndex(settings.storage.vector_dir(ws_name), embedder_name)


def make_context(store: Store, ws: Workspace, settings: Settings, embedder: Embedder | None = None) -> BuildContext:
    from core.backends.embedders import make_embedder

    if settings.backend.kind == "ollama":
        from core.backends.ollama_backend import require_ready

        require_ready(settings.backend, need_embed=settings.embed.embedder == "ollama")
    emb = embedder or make_embedder(settings.embed, settings.backend, settings.storage.home / "models")
    return BuildContext(
        store=store,
        ws=ws,
        settings=settings,
        backend=make_backend(settings, store),
        embedder=emb,
        index=open_index(settings, ws.name, emb.name),
    )


# -- runs --------------------------------------------------------------------------------------------------------
def create_run(store: Store, ws: Workspace, settings: Settings) -> BuildRun:
    with store.session() as s:
        run = BuildRun(workspace_id=ws.id, status="queued", backend=settings.backend.kind,
                       settings=settings.model_dump(mode="json"))
        s.add(run)
        s.commit()
        s.refresh(run)
        for i, (name, label, _) in enumerate(stages()):
            s.add(StageRun(run_id=run.id, workspace_id=ws.id, stage=name, ordinal=i, message=label))
        s.commit()
        return run


def active_run(store: Store, ws: Workspace, stale_after_s: float = 45.0) -> BuildRun | None:
    """The workspace's queued or running build, unless its worker stopped sending heartbeats."""
    run = store.latest_run(ws.id)
    if run is None or run.status not in ("queued", "running", "cancelling"):
        return None
    beat = run.heartbeat or run.created_at
    if (utcnow() - beat).total_seconds() > stale_after_s:
        return None
    return run


def request_cancel(store: Store, run_id: int) -> None:
    with store.session() as s:
        run = s.get(BuildRun, run_id)
        if run and run.status in ("queued", "running"):
            run.status = "cancelling"
            s.add(run)
            s.commit()


class _Heartbeat:
    """Writes the run's heartbeat every few seconds from a thread, so a long unit (loading a model, one slow
    model call) never looks like a dead worker to the app."""

    def __init__(self, store: Store, run_id: int, every_s: float = 5.0):
        self.store, self.run_id, self.every_s = store, run_id, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{run_id}")

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                _update_run(self.store, self.run_id, heartbeat=utcnow())
            except Exception:  # noqa: BLE001 - a missed beat is retried at the next tick
                pass

    def __enter__(self) -> "_Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 1)


def run_build(ctx: BuildContext, run_id: int, only: list[str] | None = None) -> Iterator[Event]:
    """Run every stage (or `only` these) of run `run_id`, recording progress; yields an Event per update."""
    with _Heartbeat(ctx.store, run_id):
        yield from _run_stages(ctx, run_id, only)


def _run_stages(ctx: BuildContext, run_id: int, only: list[str] | None) -> Iterator[Event]:
    store = ctx.store
    last_write = 0.0

    def cancelled() -> bool:
        with store.session() as s:
            run = s.get(BuildRun, run_id)
            return run is not None and run.status == "cancelling"

    ctx.should_stop = cancelled
    if cancelled():  # stopped while still queued: honour it instead of overwriting it with "running"
        _update_run(store, run_id, status="cancelled", finished_at=utcnow(), message="Stopped by the user")
        yield Event(run_id, "", "cancelled", 0, 0, "Stopped by the user", {})
        return
    _update_run(store, run_id, status="running", pid=os.getpid(), heartbeat=utcnow())
    stage_name = ""
    try:
        for name, label, fn in stages():
            if only and name not in only:
                continue
            stage_name = name
            t0 = time.perf_counter()
            _update_run(store, run_id, stage=name, message=label)
            _update_stage(store, run_id, name, status="running", started_at=utcnow())
            yield Event(run_id, name, "running", 0, 0, label, {})
            last: Progress | None = None
            for p in fn(ctx):
                last = p
                now = time.perf_counter()
                if now - last_write > 0.4 or p.done == p.total:
                    last_write = now
                    _update_stage(store, run_id, name, done=p.done, total=p.total, message=p.message or label,
                                  counts=p.counts, seconds=now - t0)
                    _update_run(store, run_id, heartbeat=utcnow(), message=p.message or label)
                yield Event(run_id, name, "running", p.done, p.total, p.message, p.counts)
                if ctx.should_stop():
                    raise Cancelled()
            secs = time.perf_counter() - t0
            fin = last or Progress(1, 1, label)
            _update_stage(store, run_id, name, status="done", done=fin.total, total=fin.total, counts=fin.counts,
                          seconds=secs, finished_at=utcnow(), message=fin.message or label)
            yield Event(run_id, name, "done", fin.total, fin.total, fin.message, fin.counts)
        store.analyze()
        with store.session() as s:
            ws = s.get(Workspace, ctx.ws.id)
            ws.build_version += 1
            ws.backend = ctx.backend.name
            ws.chat_model = ctx.backend.model
            ws.embedder = ctx.embedder.name
            s.add(ws)
            s.commit()
        _update_run(store, run_id, status="done", finished_at=utcnow(), message="Build finished", heartbeat=utcnow())
        yield Event(run_id, "", "done", 1, 1, "Build finished", {})
    except Cancelled:
        _update_stage(store, run_id, stage_name, status="cancelled")
        _update_run(store, run_id, status="cancelled", finished_at=utcnow(), message="Stopped by the user")
        yield Event(run_id, stage_name, "cancelled", 0, 0, "Stopped by the user", {})
    except Exception as exc:  # recorded for the UI, then re-raised for the CLI's exit status
        msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, BackendError) else str(exc)
        _update_stage(store, run_id, stage_name, status="failed", message=msg[:500])
        _update_run(store, run_id, status="failed", finished_at=utcnow(), error=traceback.format_exc()[-4000:],
                    message=msg[:500])
        yield Event(run_id, stage_name, "failed", 0, 0, msg, {})
        raise


def _update_run(store: Store, run_id: int, **fields) -> None:
    with store.session() as s:
        run = s.get(BuildRun, run_id)
        for k, v in fields.items():
            setattr(run, k, v)
        s.add(run)
        s.commit()


def _update_stage(store: Store, run_id: int, stage: str, **fields) -> None:
    from sqlmodel import select

    with store.session() as s:
        row = s.exec(select(StageRun).where(StageRun.run_id == run_id, StageRun.stage == stage)).first()
        if row is None:
            return
        for k, v in fields.items():
            setattr(row, k, v)
        s.add(row)
        s.commit()


def launch_worker(settings: Settings, run_id: int) -> subprocess.Popen:
    """Start `python -m core worker --run ID` detached from the caller, logging to STRATA_HOME/logs."""
    logs = Path(settings.storage.home) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["STRATA_HOME"] = str(Path(settings.storage.home).resolve())
    root = Path(__file__).resolve().parents[2]  # the checkout: core/build/runner.py -> ../../..
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    log = open(logs / f"run-{run_id}.log", "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [sys.executable, "-m", "core", "worker", "--run", str(run_id)],
        cwd=str(root),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def run_worker(store: Store, run_id: int) -> int:
    """Entry point of the background worker: run the build with the settings stored on the run."""
    with store.session() as s:
        run = s.get(BuildRun, run_id)
        if run is None:
            print(f"no build run {run_id}", file=sys.stderr)
            return 2
        ws = s.get(Workspace, run.workspace_id)
        settings = Settings.model_validate(run.settings)
    try:
        ctx = make_context(store, ws, settings)
    except Exception as exc:  # recorded on the run, so the app shows why the build never started
        msg = str(exc) if isinstance(exc, BackendError) else f"{type(exc).__name__}: {exc}"
        _update_run(store, run_id, status="failed", message=msg[:500], error=traceback.format_exc()[-4000:],
                    finished_at=utcnow())
        print(msg, file=sys.stderr)
        return 1
    try:
        for ev in run_build(ctx, run_id):
            print(f"[{ev.stage or 'build'}] {ev.status} {ev.done}/{ev.total} {ev.message}", flush=True)
    except Exception:
        traceback.print_exc()
        return 1
    return 0
