"""Jobs through the runner (core/worker.py) on real copies of one build of data/sample: a promote job run by the
background worker records its steps' progress and leaves the very rows a promote in the caller's process leaves; a
what-if job stores its variant and bumps nothing; a merge decision's accept and undo, each a worker job, restore every
row and both vectors bit for bit; a build is refused while a job runs and a job while a build runs; a stopped promote
stops between steps with the stored partition whole; a database from before jobs gains their columns."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest
from sqlmodel import select

from core import worker
from core.access import LOCAL
from core.config import Settings
from core.index import vectors
from core.models import BuildRun, Community, CommunityVariant, Edge, EntityMerge, Node
from core.pipeline import factory
from core.pipeline import runs as build_runs
from core.pipeline.factory import make_context, open_index
from core.pipeline.runner import create_run, run_job
from core.pipeline.runs import active_run, launch_worker, request_cancel
from core.quality import promote as P
from core.quality import variants as V
from core.quality.data import load_base, stored_groups
from core.resolution import review as rv
from core.store import Store
from tests.chroma_server import copy_vectors
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.stores import copy_db


@pytest.fixture(scope="module")
def master(tmp_path_factory, embedder):
    """The sample built once (heuristic extraction: it leaves merge candidates), with a variant "res-2" stored."""
    settings = Settings()
    settings.extract.offline_extractor = "heuristic"
    built = build_workspace(tmp_path_factory.mktemp("jobs_master"), [SAMPLE_DIR], embedder, name="sample",
                            settings=settings)
    index = open_index(built.settings, "sample", embedder.name)
    vs = V.defaults(built.store, built.ws.id, built.settings)
    list(V.run_variant(built.store, index, built.ws, "res-2", V.VariantSettings(**{**vs.__dict__, "resolution": 2.0}),
                       built.settings))
    if built.store.is_sqlite:  # the copies read the file
        with built.store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return built


def _copy(master, dest):
    """A private copy of the built sample (database and vectors): (settings, store, workspace)."""
    shutil.copytree(master.settings.storage.home, dest)
    mine = master.settings.model_copy(deep=True)
    mine.storage.home = dest
    mine.storage.chroma_url = copy_vectors(master.settings.storage.chroma_url, dest)  # on a server: its own copy
    mine.storage.database_url = copy_db(master.settings.storage.database_url, dest)  # on PostgreSQL: its own copy
    store = Store(mine.storage.db_url)
    return mine, store, store.require_workspace("sample")


def _wait(proc, settings, run_id: int) -> None:
    log = settings.storage.home / "logs" / f"run-{run_id}.log"
    try:
        assert proc.wait(timeout=400) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def _fresh_index(settings, embedder):
    """The workspace's vectors as a process that opens them now sees them (a worker wrote them)."""
    vectors.reopen_vector_stores()
    return open_index(settings, "sample", embedder.name)


def _rows(store, ws_id, table, **where):
    with store.session() as s:
        q = select(table).where(table.workspace_id == ws_id)
        for k, v in where.items():
            q = q.where(getattr(table, k) == v)
        return sorted(repr(sorted(r.model_dump().items())) for r in s.exec(q))


def _version(store, ws_id) -> int:
    return store.require_workspace("sample").build_version


def test_a_promote_job_in_the_worker_records_progress_and_leaves_the_rows_of_a_promote(master, tmp_path, embedder):
    s1, st1, w1 = _copy(master, tmp_path / "inline")
    s2, st2, w2 = _copy(master, tmp_path / "job")
    v0 = w2.build_version
    list(P.promote(P.promote_context(st1, w1, s1, embedder), "res-2"))  # in this process: the reference

    run = worker.create_job(st2, w2, P.promote_settings(st2, w2, s2), "promote", {"variant": "res-2"})
    assert [r.stage for r in st2.stage_runs(run.id)] == ["replace", "reports", "augment", "index"]
    assert {r.status for r in st2.stage_runs(run.id)} == {"pending"}
    assert active_run(st2, w2).id == run.id
    _wait(launch_worker(s2, run.id), s2, run.id)

    with st2.session() as s:
        row = s.get(BuildRun, run.id)
    assert (row.status, row.kind, row.message) == ("done", "promote", "variant 'res-2' promoted")
    assert row.heartbeat is not None and row.pid is not None
    steps = st2.stage_runs(run.id)
    assert all(r.status == "done" and r.total >= 1 and r.done == r.total for r in steps), steps
    assert steps[0].counts["variant"] == "res-2" and steps[0].counts["snapshot"].startswith("before-")
    assert build_runs.result(st2, run.id)["replace"]["communities"] == steps[0].counts["communities"]
    assert _version(st2, w2.id) == v0 + 1 == _version(st1, w1.id)
    assert active_run(st2, w2) is None
    # the very rows of the promote made in this process: communities (ids, members, reports), nodes, edges
    for table in (Community, Node, Edge):
        assert _rows(st2, w2.id, table) == _rows(st1, w1.id, table), table.__name__
    vec1 = _fresh_index(s1, embedder).existing("community")
    vec2 = _fresh_index(s2, embedder).existing("community")
    assert set(vec2) == set(vec1) and set(vec2) >= {c.id for c in _leiden(st2, w2.id)}
    # and the workspace's build settings are still the build's (a job is no build)
    assert V.defaults(st2, w2.id, s2) == V.defaults(st1, w1.id, s1)


def _leiden(store, ws_id):
    with store.session() as s:
        return list(s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == "leiden")))


def test_a_what_if_job_stores_its_variant_and_bumps_nothing(master, tmp_path, embedder):
    from core.worker import run_worker

    settings, store, ws = _copy(master, tmp_path / "whatif")
    v0 = ws.build_version
    vs = V.VariantSettings(resolution=1.5, use_weights=False, max_cluster_size=6, max_levels=3, seed=7)
    run = worker.create_job(store, ws, factory.job_settings(settings, ws), "whatif",
                          {"name": "job-made", "settings": vs.__dict__})
    assert run_worker(store, run.id) == 0
    (step,) = store.stage_runs(run.id)
    assert step.stage == "variant" and step.status == "done" and step.counts["variant"] == "job-made"
    v = V.get_variant(store, ws, "job-made")
    assert V.VariantSettings.from_dict(v.settings) == vs
    list(V.run_variant(store, open_index(settings, "sample", embedder.name), ws, "inline", vs, settings))
    assert v.partition == V.get_variant(store, ws, "inline").partition  # what the page's process would have made
    assert _version(store, ws.id) == v0


def test_a_build_is_refused_while_a_job_runs_and_a_job_while_a_build_runs(master, tmp_path, capsys, embedder,
                                                                         monkeypatch):
    from core.__main__ import main

    settings, store, ws = _copy(master, tmp_path / "busy")
    monkeypatch.setenv("STRATA_HOME", str(settings.storage.home))
    for var, value in (("STRATA_DATABASE_URL", settings.storage.database_url),  # the CLI on the same stores
                       ("STRATA_CHROMA_URL", settings.storage.chroma_url)):
        if value:
            monkeypatch.setenv(var, value)
        else:
            monkeypatch.delenv(var, raising=False)
    job = worker.create_job(store, ws, settings, "promote", {"variant": "res-2"})  # queued: active, no worker yet
    assert build_runs.run_label(active_run(store, ws)) == "Promote variant 'res-2'"
    with pytest.raises(build_runs.JobBusy, match=r"a job \(Promote variant 'res-2'\) of this workspace is running"):
        worker.create_job(store, ws, settings, "whatif", {"name": "x", "settings": {}})
    with pytest.raises(V.VariantError, match="running"):
        list(P.promote(P.promote_context(store, ws, settings, embedder), "res-2"))
    with pytest.raises(rv.MergeError, match="running"):
        rv.decline(store, ws.id, rv.merge_table(store, ws.id)[0].id)
    runs = len(_rows(store, ws.id, BuildRun))
    assert main(["build", "--workspace", "sample"]) == 2
    assert "Promote variant 'res-2'" in capsys.readouterr().err
    assert len(_rows(store, ws.id, BuildRun)) == runs, "no build run created"

    request_cancel(store, job.id)  # stopped while queued
    build = create_run(store, ws, settings)
    with pytest.raises(build_runs.JobBusy, match="a build of this workspace is running"):
        worker.create_job(store, ws, settings, "promote", {"variant": "res-2"})
    with pytest.raises(build_runs.JobBusy):
        worker.start_variant(store, LOCAL, ws, "y", V.VariantSettings(), settings)
    with store.session() as s:
        row = s.get(BuildRun, build.id)
        row.status = "done"
        s.add(row)
        s.commit()
    assert active_run(store, ws) is None


def test_stopping_a_promote_job_stops_between_steps_with_the_partition_whole(master, tmp_path, embedder):
    settings, store, ws = _copy(master, tmp_path / "stop")
    v0 = ws.build_version
    index = open_index(settings, "sample", embedder.name)
    base = load_base(store, index, ws.id).extracted()
    target = {(g.level, frozenset(base.ids[i] for i in g.members.tolist()))
              for g in V.variant_groups(base, V.get_variant(store, ws, "res-2"))}
    run = worker.create_job(store, ws, P.promote_settings(store, ws, settings), "promote", {"variant": "res-2"})
    ctx = make_context(store, ws, P.promote_settings(store, ws, settings), embedder=embedder)
    events = []
    for ev in run_job(ctx, run.id, worker.plan_job("promote", {"variant": "res-2"})):
        events.append(ev)
        if ev.stage == "replace" and ev.status == "done":
            request_cancel(store, run.id)  # the user presses Stop once the partition is replaced
    assert events[-1].status == "cancelled" and events[-1].stage == "reports"
    with store.session() as s:
        assert s.get(BuildRun, run.id).status == "cancelled"
    assert [(r.stage, r.status) for r in store.stage_runs(run.id)] == [
        ("replace", "done"), ("reports", "cancelled"), ("augment", "pending"), ("index", "pending")]
    # the stored partition is the variant's, whole: every community of it, every parent present
    groups = stored_groups(store, ws.id, "leiden", {e: i for i, e in enumerate(base.ids)})
    assert {(g.level, frozenset(base.ids[i] for i in g.members.tolist())) for g in groups} == target
    rows = _leiden(store, ws.id)
    assert all(r.parent_id in {c.id for c in rows} for r in rows if r.parent_id)
    assert _version(store, ws.id) == v0 + 1, "the graph changed: the app's cached views reload"
    assert active_run(store, ws) is None
    # a job stopped before its first step changed nothing
    snaps = len(_rows(store, ws.id, CommunityVariant))
    run2 = worker.create_job(store, ws, settings, "promote", {"variant": "res-2"})
    request_cancel(store, run2.id)
    assert [e.status for e in run_job(ctx, run2.id, worker.plan_job("promote", {"variant": "res-2"}))] == ["cancelled"]
    assert _version(store, ws.id) == v0 + 1 and len(_rows(store, ws.id, CommunityVariant)) == snaps


def test_merge_decisions_as_worker_jobs_restore_rows_and_vectors_bit_for_bit(master, tmp_path, embedder):
    settings, store, ws = _copy(master, tmp_path / "merge")
    (row,) = [m for m in rv.merge_table(store, ws.id) if m.titles == ["Ashby Fen Farm", "Ashby Fen"]]
    K, M = row.kept_id, row.merged_id
    before = [_rows(store, ws.id, t) for t in (Node, Edge, Community)]
    vec = open_index(settings, "sample", embedder.name).vectors("entity", [K, M])
    v0 = ws.build_version
    s_job = factory.job_settings(settings, ws)

    run = worker.start_job(store, ws, s_job, "reembed", {"action": "accept", "merge_ids": [row.id]})
    proc_wait_done(store, settings, run.id)
    assert [(r.stage, r.status) for r in store.stage_runs(run.id)] == [("decide", "done"), ("reembed", "done")]
    assert build_runs.result(store, run.id)["decide"]["merged"] == 1
    assert build_runs.result(store, run.id)["reembed"]["reembedded"] == 1
    assert _version(store, ws.id) == v0 + 1
    with store.session() as s:
        assert s.get(Node, M) is None and s.get(EntityMerge, row.id).status == "merged"
        node = s.get(Node, K)
    after = _fresh_index(settings, embedder).vectors("entity", [K, M])
    assert set(after) == {K}
    assert np.allclose(after[K], embedder.embed([f"{node.title}: {node.text[:1000]}"])[0], atol=1e-5)

    run = worker.start_job(store, ws, s_job, "reembed", {"action": "undo", "merge_ids": [row.id]})
    proc_wait_done(store, settings, run.id)
    assert [_rows(store, ws.id, t) for t in (Node, Edge, Community)] == before
    back = _fresh_index(settings, embedder).vectors("entity", [K, M])
    assert np.array_equal(back[K], vec[K]) and np.array_equal(back[M], vec[M])
    assert _version(store, ws.id) == v0 + 2


def proc_wait_done(store, settings, run_id: int) -> None:
    """Wait for the worker `start_job` launched (it is not our child: poll its run)."""
    import time

    deadline = time.monotonic() + 400
    while time.monotonic() < deadline:
        with store.session() as s:
            run = s.get(BuildRun, run_id)
        if run.status in build_runs.FINISHED:
            log = settings.storage.home / "logs" / f"run-{run_id}.log"
            assert run.status == "done", (run.message, log.read_text()[-3000:])
            return
        time.sleep(0.5)
    raise AssertionError(f"job {run_id} did not finish")


def test_a_database_from_before_jobs_gains_their_columns(tmp_path):
    path = tmp_path / "old.db"
    store = Store(path)
    ws = store.create_workspace("w")
    store.engine.dispose()
    with sqlite3.connect(path) as conn:  # the table as it was before jobs, with one finished build in it
        conn.execute("ALTER TABLE buildrun DROP COLUMN kind")
        conn.execute("ALTER TABLE buildrun DROP COLUMN params")
        conn.execute("INSERT INTO buildrun (workspace_id, status, backend, settings, stage, message, error, "
                     "created_at) VALUES (?, 'done', 'offline', '{}', '', '', '', '2024-01-01 00:00:00')", (ws.id,))
    store = Store(path)
    with store.session() as s:
        (old,) = s.exec(select(BuildRun)).all()
    assert old.kind == "build" and not old.params
    run = worker.create_job(store, ws, Settings(), "whatif", {"name": "v", "settings": {}})
    assert build_runs.get_run(store, run.id).params["name"] == "v"
    assert store.latest_run(ws.id, ("build",)).id == old.id


def test_a_database_from_before_who_asked_gains_the_column(tmp_path):
    """A query log written before questions recorded who asked: the column is added, the old rows say nobody, and
    a new question names its asker."""
    from core.history import list_queries
    from core.models import QueryLog

    path = tmp_path / "old.db"
    store = Store(path)
    ws = store.create_workspace("w")
    store.engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE querylog DROP COLUMN asked_by")
        conn.execute("INSERT INTO querylog (workspace_id, question, strategy, answer, result, ms, created_at) "
                     "VALUES (?, 'old?', 'naive', '', '{}', 1.0, '2024-01-01 00:00:00')", (ws.id,))
    store = Store(path)
    with store.session() as s:
        s.add(QueryLog(workspace_id=ws.id, question="new?", strategy="naive", asked_by="ana@example.org"))
        s.commit()
    assert [(e.question, e.asked_by) for e in list_queries(store, ws.id)] == [("new?", "ana@example.org"),
                                                                              ("old?", None)]
