"""Build and job runs as the app, the CLI and the worker see them: the `BuildRun` / `StageRun` rows, which run of a
workspace is active, cancelling, the version bump, and starting the background worker. Light on purpose: the
sidebar polls it every two seconds, so it imports no stage.

A build and a job are both `BuildRun` rows (`kind` "build", or a job kind: "promote", "whatif", "reembed", with its
parameters in `params`), with one `StageRun` row per stage or step. One run at a time per workspace: `check_idle`
raises JobBusy while `active_run` finds one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from sqlmodel import col, select

from core.config import Settings
from core.models import BuildRun, StageRun, Workspace, utcnow
from core.store import Store

FINISHED = ("done", "failed", "cancelled")
KIND_LABELS = {"build": "Build", "promote": "Promote", "whatif": "What-if run", "reembed": "Merge decision"}


class JobBusy(RuntimeError):
    """A build or another job of the workspace is running: the new one is refused (the message says which)."""


def insert_run(store: Store, ws: Workspace, settings: Settings, steps: list[tuple[str, str]], kind: str = "build",
               params: dict | None = None, message: str = "") -> BuildRun:
    """A queued run with one pending StageRun per (name, label) step, in order."""
    assert ws.id is not None  # a stored workspace
    with store.session() as s:
        run = BuildRun(workspace_id=ws.id, status="queued", kind=kind, params=params or {},
                       backend=settings.backend.kind, settings=settings.model_dump(mode="json"), message=message)
        s.add(run)
        s.commit()
        s.refresh(run)
        assert run.id is not None  # set by the commit
        for i, (name, label) in enumerate(steps):
            s.add(StageRun(run_id=run.id, workspace_id=ws.id, stage=name, ordinal=i, message=label))
        s.commit()
        return run


def active_run(store: Store, ws: Workspace, stale_after_s: float = 45.0) -> BuildRun | None:
    """The workspace's queued or running build, unless its worker stopped sending heartbeats."""
    assert ws.id is not None  # a stored workspace
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


def run_label(run: BuildRun) -> str:
    """"Build", or the job's own label ("Promote variant 'x'")."""
    kind = run.kind or "build"
    if kind == "build":
        return "Build"
    return str((run.params or {}).get("label") or KIND_LABELS.get(kind, kind))


def busy_message(run: BuildRun) -> str:
    what = "a build" if (run.kind or "build") == "build" else f"a job ({run_label(run)})"
    return (f"{what} of this workspace is running (run {run.id}); start once it has finished, or stop it "
            f"({'on the Build page' if (run.kind or 'build') == 'build' else 'on the Quality page'})")


def check_idle(store: Store, ws: Workspace) -> None:
    run = active_run(store, ws)
    if run is not None:
        raise JobBusy(busy_message(run))


def update_run(store: Store, run_id: int, **fields) -> None:
    with store.session() as s:
        run = s.get(BuildRun, run_id)
        for k, v in fields.items():
            setattr(run, k, v)
        s.add(run)
        s.commit()


def update_stage(store: Store, run_id: int, stage: str, **fields) -> None:
    with store.session() as s:
        row = s.exec(select(StageRun).where(StageRun.run_id == run_id, StageRun.stage == stage)).first()
        if row is None:
            return
        for k, v in fields.items():
            setattr(row, k, v)
        s.add(row)
        s.commit()


def get_run(store: Store, run_id: int) -> BuildRun | None:
    with store.session() as s:
        return s.get(BuildRun, run_id)


def result(store: Store, run_id: int) -> dict[str, dict]:
    """Step name -> the counts of its last progress: what the page reports of a finished job."""
    return {r.stage: dict(r.counts or {}) for r in store.stage_runs(run_id)}


_SEEN: dict[tuple[str, int], int] = {}
_SEEN_LOCK = threading.Lock()


def finished_since_seen(store: Store, ws_id: int) -> bool:
    """True, once per process, when a run (build or job) of the workspace finished since the last call. A worker's
    vector writes are not seen by a process that opened the same chromadb directory before them (its reads stay
    stale, or fail on an id it never saw), so the app reopens its vector handles then (`reopen_vector_stores`)."""
    with store.session() as s:
        last = s.exec(select(BuildRun.id).where(BuildRun.workspace_id == ws_id,
                                                col(BuildRun.status).in_(FINISHED))
                      .order_by(col(BuildRun.id).desc())).first()
    key = (str(store.path), ws_id)
    with _SEEN_LOCK:
        seen = _SEEN.get(key)
        _SEEN[key] = last or 0
    return seen is not None and (last or 0) != seen


def launch_worker(settings: Settings, run_id: int) -> subprocess.Popen:
    """Start `python -m core worker --run ID` detached from the caller, logging to STRATA_HOME/logs."""
    logs = Path(settings.storage.home) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["STRATA_HOME"] = str(Path(settings.storage.home).resolve())
    root = Path(__file__).resolve().parents[2]  # the checkout: core/build/runs.py -> ../../..
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


class Heartbeat:
    """Writes the run's heartbeat every few seconds from a thread, so a long unit (loading a model, one slow
    model call) never looks like a dead worker to the app."""

    def __init__(self, store: Store, run_id: int, every_s: float = 5.0):
        self.store, self.run_id, self.every_s = store, run_id, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat-{run_id}")

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                update_run(self.store, self.run_id, heartbeat=utcnow())
            except Exception:  # noqa: BLE001 - a missed beat is retried at the next tick
                pass

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every_s + 1)
