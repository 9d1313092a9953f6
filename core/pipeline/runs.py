"""Build and job runs as the app, the CLI and the worker see them: the `BuildRun` / `StageRun` rows, which run of a
workspace is active, cancelling, the version bump, and starting the background worker. Light on purpose: the
sidebar polls it every two seconds, so it imports no stage.

A build and a job are both `BuildRun` rows (`kind` "build", or a job kind: "promote", "whatif", "reembed", with its
parameters in `params`), with one `StageRun` row per stage or step. One run at a time per workspace: `check_idle`
raises JobBusy while `active_run` finds one, and `insert_run` checks it again under the workspace's write lock.

Which worker runs a run is core/pipeline/lease.py: an atomic claim and a lease renewed by heartbeats. The rule for a
run whose worker went silent (its heartbeat older than the run's own `lease_s`, by the database's clock) or whose
worker's process is gone from this host (core/liveness.py): it is no longer active (`models.is_active`), so the app (Build / resume) or the CLI may start a new run of the workspace, which supersedes it (closed
here, in the same transaction; a worker still holding it loses its lease and stops) and resumes from the
checkpoints; until then an idle `worker --serve` may claim the silent run itself and resume it. Either way one
run of the workspace works at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from sqlalchemy import case, literal, update
from sqlmodel import col, select

from core.config import Settings
from core.models import UNFINISHED, BuildRun, StageRun, Workspace, is_active, utcnow
from core.secrets import private_dir, private_file, public_settings, redact, redact_text
from core.store import Store

FINISHED = ("done", "failed", "cancelled")
KIND_LABELS = {"build": "Build", "promote": "Promote", "whatif": "What-if run", "reembed": "Merge decision",
               "delete": "Delete documents", "evaluate": "Evaluation"}


class JobBusy(RuntimeError):
    """A build or another job of the workspace is running: the new one is refused (the message says which)."""


def lock_workspace(conn, ws_id: int) -> None:
    """Take the write lock on the workspace's row for the rest of the transaction (a no-op UPDATE): on PostgreSQL a
    row lock, on SQLite the database's write lock, so run inserts and claims of one workspace are serialized. It
    must be the transaction's first write (SQLite: a transaction that read first may not upgrade)."""
    conn.execute(update(Workspace.__table__).where(Workspace.__table__.c.id == ws_id)  # type: ignore[attr-defined]
                 .values(build_version=Workspace.__table__.c.build_version))  # type: ignore[attr-defined]


def insert_run(store: Store, ws: Workspace, settings: Settings, steps: list[tuple[str, str]], kind: str = "build",
               params: dict | None = None, message: str = "") -> BuildRun:
    """A queued run with one pending StageRun per (name, label) step, in order. Under the workspace's write lock:
    refused (JobBusy) while another run of the workspace is active (a run stopped while still queued does not
    count), and the workspace's older unfinished runs, all silent by then, are closed as superseded."""
    assert ws.id is not None  # a stored workspace
    with store.session() as s:
        lock_workspace(s.connection(), ws.id)
        prev = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id).order_by(col(BuildRun.id).desc())).first()
        if prev is not None and is_active(prev, store.now()) and not (prev.status == "cancelling" and
                                                                       prev.worker is None):
            raise JobBusy(busy_message(prev, on=ws.build_version))
        run = BuildRun(workspace_id=ws.id, status="queued", kind=kind, params=redact(params or {}),
                       backend=settings.backend.kind, settings=public_settings(settings), message=redact_text(message),
                       lease_s=settings.worker.lease_s, created_at=store.now())
        s.add(run)
        s.flush()
        assert run.id is not None  # set by the flush
        for i, (name, label) in enumerate(steps):
            s.add(StageRun(run_id=run.id, workspace_id=ws.id, stage=name, ordinal=i, message=label))
        t = BuildRun.__table__  # type: ignore[attr-defined]
        s.connection().execute(update(t).where(t.c.workspace_id == ws.id, t.c.id < run.id, t.c.status.in_(UNFINISHED))
                               .values(status=case((t.c.status == "running", literal("failed")),
                                                   else_=literal("cancelled")),
                                       message=case((t.c.status == "cancelling", literal("Stopped by the user")),
                                                    else_=literal(f"superseded by the {run_label(run).lower()} of "
                                                                  f"{started(run)}: its worker had stopped sending "
                                                                  "heartbeats")),
                                       finished_at=utcnow()))
        s.commit()
        return run


def active_run(store: Store, ws: Workspace) -> BuildRun | None:
    """The workspace's queued or running build or job, unless its worker stopped sending heartbeats or its process
    is gone (then the run is stale: see the module doc for who resumes it)."""
    assert ws.id is not None  # a stored workspace
    run = store.latest_run(ws.id)
    return run if run is not None and is_active(run, store.now()) else None


def request_cancel(store: Store, run_id: int) -> None:
    """Ask the run's worker to stop (it stops at its next unit): one conditional UPDATE, so a worker's own write
    in between is never undone and a finished run stays finished."""
    t = BuildRun.__table__  # type: ignore[attr-defined]
    with store.engine.begin() as conn:
        conn.execute(update(t).where(t.c.id == run_id, t.c.status.in_(("queued", "running")))
                     .values(status="cancelling"))


def run_label(run: BuildRun) -> str:
    """"Build", or the job's own label ("Promote variant 'x'")."""
    kind = run.kind or "build"
    if kind == "build":
        return "Build"
    return str((run.params or {}).get("label") or KIND_LABELS.get(kind, kind))


def record_version(conn, run_id: int, version: int | None) -> None:
    """Store on a finished build the workspace's build_version it made: its number, "build N" (`build_numbers`)."""
    t = BuildRun.__table__  # type: ignore[attr-defined]
    conn.execute(update(t).where(t.c.id == run_id).values(version=version))


def build_numbers(store: Store, ws_id: int) -> dict[int, int]:
    """Run id -> build number of the workspace's finished builds: what the user reads ("build 3"), never the row id.
    A build's number is the workspace's build_version it made (stored by the runner; the sidebar shows the current
    one, evaluations the one they measured); a job that changes the graph (a promote, a merge decision) bumps the
    version too, so the next build's number follows it. A row of an older release, stored without its number, takes
    its rank among the workspace's finished builds (its version when no job changed the graph in between)."""
    with store.session() as s:
        rows = s.exec(select(BuildRun.id, BuildRun.version)
                      .where(BuildRun.workspace_id == ws_id, BuildRun.kind == "build", BuildRun.status == "done")
                      .order_by(col(BuildRun.id))).all()
    return {rid: version or rank for rank, (rid, version) in enumerate(rows, 1) if rid is not None}


def started(run: BuildRun) -> str:
    """When the run was created, for people: "28 Nov 11:24 UTC"."""
    return f"{run.created_at:%d %b %H:%M} UTC"


def run_name(run: BuildRun, numbers: dict[int, int]) -> str:
    """What a run is called on the pages: "build 3" for a finished build (`numbers`: `build_numbers`), else its
    label and when it started ("Build of 28 Nov 11:24 UTC", "Promote variant 'x' of ...")."""
    if run.id in numbers:
        return f"build {numbers[run.id]}"
    return f"{run_label(run)} of {started(run)}"


def run_names(store: Store, ws_id: int, run_ids: set[int]) -> dict[int, str]:
    """Run id -> `run_name` of those of the workspace's runs (a failed unit's run, say)."""
    if not run_ids:
        return {}
    with store.session() as s:
        rows = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws_id, col(BuildRun.id).in_(run_ids))).all()
    numbers = build_numbers(store, ws_id)
    return {r.id: run_name(r, numbers) for r in rows if r.id is not None}


def job_build(run: BuildRun, version: int) -> str:
    """Which build a running job is, the workspace's graph being build `version`: a build makes the next one
    ("build N + 1"), another job works on this one ("on build N")."""
    return f"build {version + 1}" if (run.kind or "build") == "build" else f"on build {version}"


def busy_message(run: BuildRun, advice: str = "start once it has finished, or stop it", on: int | None = None) -> str:
    """Why a start is refused, naming the running job as the pages do (`on`: the workspace's build_version): a build
    by the build it makes (build N + 1), another job by the build it works on (on build N), else by when it started
    (a row id is no number the user ever sees)."""
    what = "a build" if (run.kind or "build") == "build" else f"a job ({run_label(run)})"
    where = f"started {started(run)}" if on is None else job_build(run, on)
    return (f"{what} of this workspace is running ({where}); {advice} "
            f"({'on the Build page' if (run.kind or 'build') == 'build' else 'on the Quality page'})")


def check_idle(store: Store, ws: Workspace, advice: str = "start once it has finished, or stop it") -> None:
    """JobBusy (saying which run, and `advice`) while a run of the workspace is active."""
    run = active_run(store, ws)
    if run is not None:
        raise JobBusy(busy_message(run, advice, on=ws.build_version))


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
    """Start `python -m core worker --run ID` detached from the caller, logging to STRATA_HOME/logs, on the caller's
    database and vector store (STRATA_DATABASE_URL / STRATA_CHROMA_URL from `settings`) with their secrets (the
    run's stored settings hold none: core/secrets.py), through the environment only."""
    logs = private_dir(Path(settings.storage.home) / "logs")  # 0700, its logs 0600 (core/secrets.py)
    env = dict(os.environ)
    env["STRATA_HOME"] = str(Path(settings.storage.home).resolve())
    # the caller's stores, also when they were set in code (tests) rather than in this process's environment
    for var, value in (("STRATA_DATABASE_URL", settings.storage.database_url),
                       ("STRATA_CHROMA_URL", settings.storage.chroma_url)):
        if value:
            env[var] = value
        else:
            env.pop(var, None)
    if settings.storage.chroma_ca:  # else the caller's environment's, if any
        env["STRATA_CHROMA_CA"] = settings.storage.chroma_ca
    for var, secret in (("STRATA_CHROMA_TOKEN", settings.storage.chroma_token),
                        ("STRATA_OPENAI_API_KEY", settings.backend.api_key)):
        if secret is not None and secret.get_secret_value():  # else the caller's environment's, if any
            env[var] = secret.get_secret_value()
    env["STRATA_WORKER_LEASE_S"] = str(settings.worker.lease_s)
    root = Path(__file__).resolve().parents[2]  # the checkout: core/pipeline/runs.py -> ../../..
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    log = open(private_file(logs / f"run-{run_id}.log"), "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen(
        [sys.executable, "-m", "core", "worker", "--run", str(run_id)],
        cwd=str(root),
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
