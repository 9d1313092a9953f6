"""Several workers on one database (core/pipeline/lease.py), with real worker processes, on SQLite and on PostgreSQL
(the `db` fixture runs every test on both; the PostgreSQL server is tests/pg.py's):

* two `worker --serve` processes and three queued builds: every build done exactly once, each claimed by exactly
  one worker, its stage progress written by that worker alone;
* a worker killed with SIGKILL in the middle of a build: once its lease expires a `--serve` worker takes the run
  over and resumes it, and the workspace equals an uninterrupted build;
* a stalled worker (SIGSTOP) whose run another worker took over writes nothing when it wakes up;
* no lost updates: concurrent stop requests, heartbeats, progress writes and version bumps from threads and
  processes all land.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlmodel import select

from core.models import BuildRun, Checkpoint
from core.pipeline.lease import Lease, claim_next
from core.pipeline.runner import create_run
from core.pipeline.runs import active_run, get_run, launch_worker, request_cancel
from core.store import Store
from core.workspace import ingest_paths
from tests.conftest import ROOT, build_workspace
from tests.stages.test_pipeline import snapshot

LEASE_S = 3.0  # the tests' lease: a silent worker's run is taken over after 3 s instead of 45 s


# both databases in the main pass; the second pass (`make test-stores`, on PostgreSQL) runs the postgres cases only (a missing
# PostgreSQL is an error naming the package, tests/pg.py, never a skip)
DATABASES = ["postgres"] if os.environ.get("STRATA_TEST_DATABASE") == "postgres" else ["sqlite", "postgres"]


@pytest.fixture(params=DATABASES)
def db(request, tmp_path, make_settings):
    """Settings on a fresh SQLite file or PostgreSQL database under tmp_path/home, with the tests' short lease."""
    settings = make_settings(tmp_path / "home")
    if request.param == "postgres":
        from tests.pg import database_for

        settings.storage.database_url = database_for(settings.storage.home)
    else:
        settings.storage.database_url = None
    settings.worker.lease_s = LEASE_S
    return settings


def _env(settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(STRATA_HOME=str(settings.storage.home), STRATA_WORKER_LEASE_S=str(settings.worker.lease_s),
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    if settings.storage.database_url:
        env["STRATA_DATABASE_URL"] = settings.storage.database_url
    else:
        env.pop("STRATA_DATABASE_URL", None)
    return env


def _serve(settings, log: Path) -> subprocess.Popen:
    """A `python -m core worker --serve` process on the settings' database, logging to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")  # noqa: SIM115 - handed to the child
    return subprocess.Popen([sys.executable, "-m", "core", "worker", "--serve", "--poll", "0.2"], cwd=str(ROOT),
                            env=_env(settings), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _wait_for(cond, timeout: float, what: str, every: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _claims(*logs: Path) -> list[tuple[str, int, Path]]:
    """(worker token, run id, log) of every "claimed run" line."""
    out = []
    for log in logs:
        for m in re.finditer(r"^worker (\S+) claimed run (\d+)$", log.read_text(), re.M):
            out.append((m.group(1), int(m.group(2)), log))
    return out


def test_two_serving_workers_run_three_builds_each_exactly_once(db, tiny_corpus):
    store = Store(db.storage.db_url)
    runs = {}
    for name in ("w1", "w2", "w3"):
        ws = store.create_workspace(name)
        ingest_paths(store, ws, [tiny_corpus], db)
        runs[create_run(store, ws, db).id] = ws
    logs = [db.storage.home / "serve-a.log", db.storage.home / "serve-b.log"]
    workers = [_serve(db, log) for log in logs]
    try:
        _wait_for(lambda: all(get_run(store, i).status in ("done", "failed", "cancelled") for i in runs), 600,
                  "the three builds", every=0.5)
    finally:
        _stop(*workers)
    text = {log: log.read_text() for log in logs}
    claims = _claims(*logs)
    assert sorted(run for _, run, _ in claims) == sorted(runs), f"each run claimed exactly once: {claims}\n{text}"
    for token, run_id, log in claims:
        row = get_run(store, run_id)
        assert row.status == "done", (row.message, row.error, text[log])
        assert row.worker == token, "the run's holder is the worker that claimed it"
        assert row.pid != os.getpid()
        # the run's stage lines are in its claimer's log only: no other worker ran any of its stages
        assert f"run {run_id} [extract] done" in text[log]
        assert all(f"run {run_id} [" not in t for other, t in text.items() if other != log)
        assert all(r.status == "done" for r in store.stage_runs(run_id))
    for ws in runs.values():  # (not compared with each other: content ids, hence tie orders, include the workspace)
        counts = store.counts(ws.id)
        assert counts["chunk"] > 0 and counts["entity"] > 0 and counts["community"] > 0
    assert [store.require_workspace(n).build_version for n in ("w1", "w2", "w3")] == [1, 1, 1]
    assert all(active_run(store, ws) is None for ws in runs.values())


def test_a_killed_workers_build_is_resumed_by_another_and_equals_an_uninterrupted_build(db, tiny_corpus, embedder,
                                                                                      tmp_path):
    db.worker.lease_s = 45.0  # the default lease: only the dead process can explain a quick takeover
    store = Store(db.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_corpus], db)
    run = create_run(store, ws, db)
    first = launch_worker(db, run.id)

    def extract_started():
        return any(r.stage == "extract" and r.status != "pending" for r in store.stage_runs(run.id))

    try:
        _wait_for(extract_started, 300, "the extract stage to start", every=0.02)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed = get_run(store, run.id)
    assert killed.status == "running" and killed.worker and killed.pid == first.pid, "a killed worker records nothing"
    # its heartbeat is recent, but its process is gone from this host: the run is known dead at once
    assert active_run(store, ws) is None

    log = db.storage.home / "serve.log"
    server = _serve(db, log)
    try:
        _wait_for(lambda: get_run(store, run.id).worker != killed.worker, 20, "the dead worker's run to be claimed",
                  every=0.05)
        claimed_after = (store.now() - killed.heartbeat.replace(tzinfo=store.now().tzinfo)).total_seconds()
        _wait_for(lambda: get_run(store, run.id).status in ("done", "failed"), 600, "the resumed build", every=0.5)
    finally:
        _stop(server)
    text = log.read_text()
    row = get_run(store, run.id)
    assert row.status == "done", (row.message, row.error, text)
    assert claimed_after < 20, "claimed long before the run's 45 s lease ran out"
    ((token, claimed, _),) = _claims(log)
    assert claimed == run.id and row.worker == token != killed.worker and row.pid == server.pid
    if re.search(rf"^run {run.id} \[chunk\] done", text, re.M):  # the chunk stage had finished before the kill
        assert re.search(rf"^run {run.id} \[chunk\] done 0/0", text, re.M), "no document was chunked twice"
    assert all(r.status == "done" for r in store.stage_runs(run.id))
    assert store.require_workspace("w").build_version == 1

    ref = build_workspace(tmp_path / "ref", [tiny_corpus], embedder)
    assert ws.id == ref.ws.id, "content ids include the workspace id"
    got, want = snapshot(store, ws.id), snapshot(ref.store, ref.ws.id)
    assert got["counts"] == want["counts"]
    assert got["nodes"] == want["nodes"]
    assert got["edges"] == want["edges"]
    assert got["communities"] == want["communities"]
    with store.session() as s:
        units = list(s.exec(select(Checkpoint.stage, Checkpoint.unit).where(Checkpoint.workspace_id == ws.id)))
    assert len(units) == len(set(units))


def test_a_stalled_worker_that_lost_its_run_writes_nothing_when_it_wakes(db, tiny_corpus):
    store = Store(db.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_corpus], db)
    run = create_run(store, ws, db)
    stalled = launch_worker(db, run.id)

    def stages_of():
        return [(r.stage, r.status, r.done, r.total, r.finished_at) for r in store.stage_runs(run.id)]

    try:
        _wait_for(lambda: get_run(store, run.id).stage == "extract", 300, "the extract stage", every=0.02)
        stalled.send_signal(signal.SIGSTOP)
        code, done, rows, vectors, stages = _take_over_then_wake(db, store, ws.name, run.id, stalled, 0.0, stages_of)
    finally:
        if stalled.poll() is None:
            stalled.send_signal(signal.SIGCONT)
            stalled.kill()
    wlog = (db.storage.home / "logs" / f"run-{run.id}.log").read_text()
    assert code in (1, 4), wlog  # 4: stopped at its next check; 1: its unit's write failed against the new rows
    after = get_run(store, run.id)
    assert (after.status, after.worker, after.message, after.finished_at) == (
        "done", done.worker, done.message, done.finished_at), "the woken worker overwrote its successor's run"
    assert stages_of() == stages
    assert store.require_workspace("w").build_version == 1
    changed = {t for t, digest in every_row(store).items() if rows.get(t) != digest}
    assert not changed, f"the woken worker changed rows of {sorted(changed)}\n{wlog}"
    assert every_vector(db, ws.name) == vectors, "the woken worker wrote vectors"


def _take_over_then_wake(db, store: Store, ws_name: str, run_id: int, stalled: subprocess.Popen, settle_s: float,
                         also=list):
    """With `stalled` stopped (SIGSTOP): a `worker --serve` takes its run over and finishes it; after `settle_s`,
    what is stored then (every row, every vector, `also()`) is read and the stalled worker woken (SIGCONT) and
    waited for. (exit code, the finished run, rows, vectors, also())."""
    first = get_run(store, run_id).worker
    log = db.storage.home / "serve.log"
    server = _serve(db, log)
    try:
        _wait_for(lambda: get_run(store, run_id).status in ("done", "failed"), 600, "the taken-over build", every=0.5)
        done = get_run(store, run_id)
        assert done.status == "done" and done.worker != first, (done.message, log.read_text())
        time.sleep(settle_s)
        seen = (every_row(store), every_vector(db, ws_name), also())
        stalled.send_signal(signal.SIGCONT)
        return stalled.wait(timeout=120), done, *seen
    finally:
        _stop(server)


def every_row(store: Store) -> dict[str, str]:
    """table -> a digest of all its rows (every column, row ids included), to tell whether anything was written."""
    import hashlib

    from sqlalchemy import text
    from sqlmodel import SQLModel

    out = {}
    with store.engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            rows = sorted(repr(tuple(r)) for r in conn.execute(text(f'SELECT * FROM "{table.name}"')))
            out[table.name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    return out


def every_vector(settings, ws_name: str) -> dict[str, dict[str, str]]:
    from core.pipeline.factory import open_index
    from tests.snapshots import COLLECTIONS

    index = open_index(settings, ws_name, "minilm")
    return {kind: index.existing(kind) for kind in COLLECTIONS}


CLAIMER = """
import sys, time
from core.pipeline.lease import claim_next
from core.store import Store
store = Store(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # all claimers start at once
while (lease := claim_next(store, 30.0)) is not None:
    print(lease.run_id, lease.token, flush=True)
"""


STARTER = """
import sys, time
from core.pipeline.runner import create_run
from core.pipeline.runs import JobBusy
from core.config import Settings
from core.store import Store
settings = Settings.from_env()
store = Store(settings.storage.db_url)
ws = store.require_workspace("shared")
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # every user clicks at once
try:
    print("started", create_run(store, ws, settings).id, flush=True)
except JobBusy as exc:
    print("refused", exc, flush=True)
"""


def test_app_users_starting_one_workspace_at_once_start_one_run(db, tiny_corpus):
    """Four app processes press "Build / resume" on one workspace in the same instant: one run starts, the other
    three are told which run holds the workspace (the start race of two tabs, now under the workspace's lock)."""
    store = Store(db.storage.db_url)
    ingest_paths(store, store.create_workspace("shared"), [tiny_corpus], db)
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(start)], cwd=str(ROOT), env=_env(db),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    lines = [out.strip() for out, _ in outs]
    started = [ln for ln in lines if ln.startswith("started")]
    assert len(started) == 1, lines
    run_id = int(started[0].split()[1])
    # the refused are told which build holds the workspace: the first build of this one (never a row id)
    assert all("(build 1)" in ln for ln in lines if ln.startswith("refused")), lines
    ws = store.require_workspace("shared")
    with store.session() as s:
        assert [r.id for r in s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id))] == [run_id]


def test_racing_claimers_take_every_queued_run_exactly_once(db):
    store = Store(db.storage.db_url)
    runs = [create_run(store, store.create_workspace(f"w{i}"), db).id for i in range(8)]
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, db.storage.db_url, str(start)], cwd=str(ROOT),
                              env=_env(db), stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4
    claims = [line.split() for out in outs for line in out.splitlines()]
    assert sorted(int(run) for run, _ in claims) == runs, claims
    assert all(get_run(store, int(run)).worker == token for run, token in claims)
    # and threads of one process racing for one run: one wins
    run = create_run(store, store.create_workspace("one"), db).id
    leases = [Lease(store, run, 30.0) for _ in range(8)]
    barrier = threading.Barrier(len(leases))
    won: list[bool] = []

    def claim(lease: Lease) -> None:
        barrier.wait()
        won.append(lease.claim())

    threads = [threading.Thread(target=claim, args=(lease,)) for lease in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 7 + [True]


def test_concurrent_stop_requests_heartbeats_and_bumps_are_never_lost(db):
    store = Store(db.storage.db_url)
    ws = store.create_workspace("w")
    run = create_run(store, ws, db)
    lease = Lease(store, run.id, 30.0)
    assert lease.claim()
    assert not Lease(store, run.id, 30.0).claim(), "a live lease is not claimed twice"
    assert claim_next(store, 30.0) is None

    stop = threading.Event()
    errors: list[BaseException] = []

    def beat():
        try:
            while not stop.is_set():
                assert lease.renew()
                lease.write(message="working")
                lease.write_stage("extract", done=1, total=2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def bump():
        try:
            for _ in range(25):
                store.bump_version(ws.id)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=beat) for _ in range(3)] + [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    script = ("import sys; from core.store import Store; s = Store(sys.argv[1])\n"
              "for _ in range(25): s.bump_version(int(sys.argv[2]))")
    procs = [subprocess.Popen([sys.executable, "-c", script, db.storage.db_url, str(ws.id)], cwd=str(ROOT),
                              env=_env(db)) for _ in range(2)]
    time.sleep(0.5)
    request_cancel(store, run.id)  # while the heartbeats and progress writes go on
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert not errors, errors
    row = get_run(store, run.id)
    assert row.status == "cancelling", "a heartbeat or progress write undid the stop request"
    assert row.message == "working" and row.worker == lease.token
    assert store.require_workspace("w").build_version == 4 * 25 + 2 * 25
    # the stop came after the last step: the run is done (its work finished) and says the request came too late
    assert lease.finish("done", "Build finished")
    row = get_run(store, run.id)
    assert (row.status, row.message) == ("done", "Build finished (the stop request came after the last step)")
    assert not lease.renew() and lease.lost.is_set(), "a finished run's lease is over"
    request_cancel(store, run.id)
    assert get_run(store, run.id).status == "done"


def test_a_lost_lease_stops_the_runner_before_its_final_write(db, tiny_corpus, embedder):
    from core.pipeline.factory import make_context
    from core.pipeline.runner import run_build

    store = Store(db.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_corpus], db)
    run = create_run(store, ws, db)
    old = Lease(store, run.id, LEASE_S)
    assert old.claim()
    events, new = [], Lease(store, run.id, LEASE_S)
    for ev in run_build(make_context(store, ws, db, embedder=embedder), run.id, lease=old):
        events.append(ev)
        if ev.stage == "extract" and ev.status == "running" and ev.done > 0 and new.run_id and not new.beating:
            with store.session() as s:  # the lease expired while this worker stalled ...
                row = s.get(BuildRun, run.id)
                row.heartbeat = row.heartbeat.replace(year=2000)
                s.add(row)
                s.commit()
            assert new.claim(), "... and another worker took the run over"
            new.beating = True  # (only once)
    assert new.beating and events[-1].status == "lost" and events[-1].stage == "extract", events[-3:]
    row = get_run(store, run.id)
    assert (row.status, row.worker) == ("running", new.token), "the old worker wrote nothing after losing the run"
    assert "resumed by worker" in row.message
    (extract,) = [r for r in store.stage_runs(run.id) if r.stage == "extract"]
    assert extract.status == "running" and extract.finished_at is None
    assert store.require_workspace("w").build_version == 0


def test_a_worker_woken_mid_unit_after_losing_its_run_changes_no_row(db, tiny_corpus, monkeypatch):
    """The first worker is stopped (SIGSTOP) while it waits for a model reply, so it wakes in the middle of a unit with
    the reply in hand and rows to write. By then another worker has claimed and finished the run: every write of the
    woken one (its extraction, the call cache, vectors, progress) fails on the lease, in its own transaction.

    Its units run in its own process here (STRATA_DASK_WORKERS=0), so the stopped process is the one waiting for the
    reply. On a Dask cluster (core/pipeline/engine.py) a unit's call is made, and its reply put in the call cache, by a
    worker of the cluster, which SIGSTOP of the lease holder does not stop: the cache is keyed by the prompt, so such
    a write stores a reply to its own prompt; every other write is the lease holder's, as here."""
    from tests.fake_ollama import FakeOllama, Reply, Sleep

    monkeypatch.setenv("STRATA_DASK_WORKERS", "0")
    with FakeOllama() as fake:
        db.backend.kind = "ollama"
        db.backend.ollama_host = fake.url
        db.backend.timeout_s = 60.0
        db.backend.concurrency = 1
        fake.script["/api/chat"].append(Sleep(4.0, Reply()))  # the first chat reply comes 4 s late
        store = Store(db.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], db)
        run = create_run(store, ws, db)
        stalled = launch_worker(db, run.id)
        try:
            _wait_for(lambda: fake.count("/api/chat") >= 1, 300, "the first model call", every=0.02)
            stalled.send_signal(signal.SIGSTOP)  # waiting for its reply, mid-unit
            # after 4.5 s the late reply is in the stopped worker's socket
            code, _, rows, vectors, _ = _take_over_then_wake(db, store, ws.name, run.id, stalled, 4.5, list)
        finally:
            if stalled.poll() is None:
                stalled.send_signal(signal.SIGCONT)
                stalled.kill()
        wlog = (db.storage.home / "logs" / f"run-{run.id}.log").read_text()
        assert code == 4, wlog  # it noticed the loss: "another worker took the run over"
        changed = {t for t, digest in every_row(store).items() if rows.get(t) != digest}
        assert not changed, f"the woken worker changed rows of {sorted(changed)}\n{wlog}"
        assert every_vector(db, ws.name) == vectors, "the woken worker wrote vectors"


def test_kill_9_of_a_cli_build_then_build_again_resumes_at_once(db, tiny_corpus):
    """`python -m core build` killed with SIGKILL mid-build: the next `python -m core build` of the workspace resumes it
    at once (its process is gone from this host), not "a build of this workspace is running" until the lease ends."""
    db.worker.lease_s = 45.0
    env = _env(db)
    cmd = [sys.executable, "-m", "core", "build", "--workspace", "w", "--quiet"]
    first = subprocess.Popen(cmd + [str(tiny_corpus)], cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    store = Store(db.storage.db_url)

    def extracting():
        ws = store.get_workspace("w")
        run = store.latest_run(ws.id) if ws is not None else None
        return run is not None and any(r.stage == "extract" and r.status != "pending" for r in store.stage_runs(run.id))

    try:
        _wait_for(extracting, 300, "the CLI build's extract stage", every=0.02)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed = store.latest_run(store.require_workspace("w").id)
    assert killed.status == "running", "a killed build records nothing"
    t0 = time.monotonic()
    again = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "is running" not in again.stderr
    assert time.monotonic() - t0 < 300
    runs = [get_run(store, killed.id), store.latest_run(store.require_workspace("w").id)]
    assert runs[0].status == "failed" and "superseded" in runs[0].message, runs[0].message
    assert runs[1].status == "done" and runs[1].id > killed.id


def test_a_frozen_transaction_on_the_run_row_does_not_block_the_takeover_forever(tmp_path, make_settings):
    """PostgreSQL: a worker frozen between its heartbeat's UPDATE and its COMMIT holds the run's row lock; the server
    ends that idle transaction after the store's `idle_transaction_s`, so another worker claims the run once its lease
    has expired (without the timeout the claim waits on the lock for ever)."""
    import threading

    from sqlalchemy import text

    from core.pipeline.lease import Lease, claim_next
    from tests.pg import database_for

    settings = make_settings(tmp_path / "home")
    url = database_for(settings.storage.home)
    frozen_store = Store(url, idle_transaction_s=2.0)
    ws = frozen_store.create_workspace("w")
    run = create_run(frozen_store, ws, settings)
    first = Lease(frozen_store, run.id, 0.5)
    assert first.claim()
    frozen = frozen_store.engine.connect()
    tx = frozen.begin()
    frozen.execute(text("UPDATE buildrun SET message = 'frozen mid-heartbeat' WHERE id = :i"), {"i": run.id})
    time.sleep(1.0)  # the lease (0.5 s) expires while the frozen transaction holds the row
    got: list = []
    claimer = threading.Thread(target=lambda: got.append(claim_next(Store(url), 0.5)), daemon=True)
    t0 = time.monotonic()
    claimer.start()
    claimer.join(timeout=30)
    assert not claimer.is_alive(), "the claim still waits on the frozen transaction's lock"
    assert got and got[0] is not None and got[0].run_id == run.id, "the run was not taken over"
    assert time.monotonic() - t0 < 30
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError, match="idle-in-transaction timeout"):  # the server ended the frozen transaction
        tx.commit()
    frozen.close()


def test_a_write_refused_on_a_lost_lease_is_not_committed_by_the_next_user_of_its_connection(db):
    """A commit the lease guard refuses (LeaseLost) leaves nothing pending on its pooled connection: the lease's own
    writes afterwards (heartbeats, which the guard skips) must not commit the refused rows along with theirs (seen in
    CI: a woken worker's refused call-cache row appeared after its next heartbeat)."""
    from sqlalchemy import update

    from core.models import LLMCall
    from core.pipeline.lease import LeaseLost

    store = Store(db.storage.db_url)
    ws = store.create_workspace("w")
    run = create_run(store, ws, db)
    lease = Lease(store, run.id, LEASE_S)
    assert lease.claim()
    with store.session() as s:  # another worker took the run over
        s.exec(update(BuildRun).where(BuildRun.id == run.id).values(worker="someone-else"))  # type: ignore[call-overload]
        s.commit()
    with lease.guard():
        with pytest.raises(LeaseLost):
            store.save_call(LLMCall(key="refused", backend="ollama", model="m", task="extract", request={},
                                    response="{}", ms=1.0))
    for _ in range(12):  # every pooled connection in turn: none carries the refused row into its commit
        assert not lease.renew()
    assert store.cached_call("refused") is None
