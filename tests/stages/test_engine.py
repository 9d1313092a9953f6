"""A build whose units run on Dask distributed is the build whose units run in one process (core/pipeline/engine.py).

Four documents of the sample corpus are built three ways: every unit in this process (the reference), on a
LocalCluster of two worker processes, and on a cluster of its own (`dask scheduler` and two `dask worker` processes
started here) that the build attaches to by address. The three graphs, communities and vectors are equal exactly
(tests/snapshots.py). The Makefile's runtime pass runs this file again on the other MiniLM runtime, which the worker
processes take from the environment and the workspace's record as the build's own embedder does.

A worker killed with SIGKILL while it extracts costs only its units in flight: against a model server that takes
0.3 s a call, the chat calls of the build exceed a clean build's by at most the units in flight, and the graph is
the same; one killed while the embed stage's pieces run leaves every vector as it was.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.explore.verdict import build_verdict
from core.pipeline.engine import INLINE, attach, local_engine
from core.pipeline.factory import make_context
from core.stats import workspace_stats
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.fake_ollama import FakeOllama
from tests.net import free_port
from tests.snapshots import differences, full_snapshot

FILES = sorted(SAMPLE_DIR.glob("*"))[:4]


def _snapshot(built):
    return full_snapshot(built.store, built.ws, built.settings, built.embedder.name)


def _on_workers(engine) -> dict[str, int]:
    """worker address -> how many build settings its process has made parts for (core/pipeline/tasks.py)."""
    return engine.client.run(lambda: len(__import__("core.pipeline.tasks", fromlist=["_"])._WORKER_PARTS))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, embedder):
    return build_workspace(tmp_path_factory.mktemp("inline"), FILES, embedder, name="w")


def test_a_build_on_a_local_cluster_is_the_single_process_build(tmp_path, embedder, reference):
    engine = local_engine(2)
    try:
        assert engine.describe() == "local cluster, 2 workers"
        built = build_workspace(tmp_path / "h", FILES, embedder, name="w", engine=engine)
        used = _on_workers(engine)
        # offline, the quick extractive units go to the cluster 64 to a task, but HiRAG's summary entities stay in
        # the lease holder, in order: they are named with word readings counted over the clusters before them
        ctx = make_context(built.store, built.ws, built.settings, embedder=embedder)
        ctx.use_engine(engine)
        assert ctx.model_engine.batch == 64 and ctx.model_engine.client is engine.client
        assert ctx.summary_engine is INLINE
    finally:
        engine.close()
    assert len(used) == 2 and all(n >= 1 for n in used.values()), f"both workers ran units: {used}"
    # `core stats` and the Build page's verdict say where the units ran
    assert workspace_stats(built.store, built.ws)["engine"] == "local cluster, 2 workers"
    run = built.store.latest_run(built.ws.id, ("build",))
    assert run is not None and "on local cluster, 2 workers" in build_verdict(built.store, built.ws, run).headline
    assert workspace_stats(reference.store, reference.ws)["engine"] == "this process"
    ref, got = _snapshot(reference), _snapshot(built)
    assert len(ref["nodes"]) > 100 and len(ref["vectors"]) > 100
    assert not differences(ref, got)


@pytest.fixture
def own_cluster(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1, as docs/DEPLOY.md starts them."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).with_name("dask"))
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(root))
    logs = [open(tmp_path / f"dask-{i}.log", "w") for i in range(3)]  # noqa: SIM115 - closed below
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=logs[0], stderr=subprocess.STDOUT, env=env)]
    procs += [subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--no-dashboard", "--name", f"w{i}"],
                               stdout=logs[i + 1], stderr=subprocess.STDOUT, env=env, cwd=root)
              for i in range(2)]
    try:
        yield address
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs:
            f.close()


def test_a_build_attached_to_a_running_cluster_is_the_single_process_build(tmp_path, embedder, reference,
                                                                          own_cluster):
    engine = attach(own_cluster)
    try:
        deadline = time.monotonic() + 60
        while engine.workers() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert engine.describe() == f"{own_cluster}, 2 workers"
        built = build_workspace(tmp_path / "h", FILES, embedder, name="w", engine=engine)
        used = _on_workers(engine)
    finally:
        engine.close()
    assert len(used) == 2 and all(n >= 1 for n in used.values()), f"both workers ran units: {used}"
    assert not differences(_snapshot(reference), _snapshot(built))


def _ollama_settings(make_settings, home: Path, url: str):
    s = make_settings(home)
    s.backend.kind = "ollama"
    s.backend.ollama_host = url
    s.backend.timeout_s = 10.0
    s.backend.retries = 1
    s.archrag.min_clusters = 2
    return s


def test_a_killed_worker_costs_only_its_units_in_flight(tmp_path, embedder, make_settings):
    files = FILES
    with FakeOllama() as fake:
        fake.chat_delay_s = 0.3
        clean = build_workspace(tmp_path / "clean", files, embedder,
                                settings=_ollama_settings(make_settings, tmp_path / "clean", fake.url))
        clean_calls = fake.chat_requests
        engine = local_engine(2)
        killed: list[int] = []

        def kill_one_while_extracting(store) -> None:
            """SIGKILL one worker while the extract stage runs, once the server has had a few of its calls."""
            from sqlmodel import select

            from core.models import StageRun

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                with store.session() as s:
                    row = s.exec(select(StageRun).where(StageRun.stage == "extract",
                                                        StageRun.status == "running")).first()
                if row is not None and fake.chat_requests - calls_before >= 3 and (not row.total or row.done < row.total):
                    pid = next(iter(engine.client.run(os.getpid).values()))
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                time.sleep(0.05)

        try:
            settings = _ollama_settings(make_settings, tmp_path / "dist", fake.url)
            from core.store import Store

            watcher = threading.Thread(target=kill_one_while_extracting, args=(Store(settings.storage.db_url),),
                                       daemon=True)
            calls_before = fake.chat_requests
            watcher.start()
            dist = build_workspace(tmp_path / "dist", files, embedder, settings=settings, engine=engine)
            watcher.join(timeout=5)
        finally:
            engine.close()
        dist_calls = fake.chat_requests - calls_before
    assert killed, "a worker was killed during extraction"
    in_flight = 2  # two workers of one thread each: at most one unit each in flight when one is killed
    assert clean_calls <= dist_calls <= clean_calls + in_flight, (clean_calls, dist_calls)
    assert not differences(_snapshot(clean), _snapshot(dist))


def test_a_model_hosts_limit_holds_across_the_clusters_workers(tmp_path, embedder, make_settings):
    """Two workers of two threads each could send four calls at once; the host's one slot (concurrency 1) is one
    semaphore for the whole cluster (core/backends/hosts.py `cluster_slot`), so the server never sees two."""
    with FakeOllama() as fake:
        fake.chat_delay_s = 0.05
        settings = _ollama_settings(make_settings, tmp_path / "h", fake.url)
        settings.backend.concurrency = 1
        engine = local_engine(2, threads=2)
        try:
            build_workspace(tmp_path / "h", FILES[:1], embedder, settings=settings, engine=engine)
            used = _on_workers(engine)
        finally:
            engine.close()
    assert fake.chat_requests > 10 and any(n >= 1 for n in used.values()), (fake.chat_requests, used)
    assert fake.max_inflight == 1


def test_batched_units_and_work_sent_ahead_keep_their_order_and_yield_to_the_stage():
    """`batched(k)` sends k units per task and gives each unit's result back in order; work sent `ahead` comes back
    in order too, and runs only where the stage's own tasks leave a core: a stage's `map` sent after 12 slow units
    ahead is answered while most of them still wait; they run on all workers but one (here one after another)."""
    engine = local_engine(2)
    try:
        assert list(engine.batched(3).map(lambda x: x * x, range(10))) == [x * x for x in range(10)]
        assert engine.batched(1) is engine

        def slow(x):
            time.sleep(0.25)
            return -x

        def timed(x):
            start = time.time()
            time.sleep(0.25)
            return -x, start, time.time()

        sent = engine.ahead(timed, range(12), cpu=True)
        time.sleep(0.5)  # one worker is busy with the work sent ahead, the other is left free
        assert list(engine.map(lambda x: x + 1, range(4), cpu=True)) == [1, 2, 3, 4]
        waiting = sum(not f.done() for f in sent.futures)
        assert waiting >= 6, f"the stage's units waited for the work sent ahead ({waiting} of 12 still waiting)"
        spans = list(sent.results())
        assert [x for x, _, _ in spans] == [-x for x in range(12)]
        assert all(a[2] <= b[1] for a, b in zip(spans, spans[1:])), f"on all workers but one: {spans}"
    finally:
        engine.close()


def test_a_worker_killed_while_it_embeds_leaves_the_same_vectors(tmp_path, embedder, reference, make_settings):
    """SIGKILL of one worker while the embed stage's pieces run on the cluster: Dask runs its pieces again on the
    other worker (or the one its nanny starts), and the graph and every vector are the single-process build's."""
    from sqlmodel import select

    from core.models import StageRun
    from core.store import Store

    settings = make_settings(tmp_path / "h")
    engine = local_engine(2)
    killed: list[int] = []

    def kill_one_while_embedding(store) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            with store.session() as s:
                row = s.exec(select(StageRun).where(StageRun.stage == "embed", StageRun.status == "running")).first()
            if row is not None:
                pid = next(iter(engine.client.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_one_while_embedding, args=(Store(settings.storage.db_url),), daemon=True)
    try:
        watcher.start()
        built = build_workspace(tmp_path / "h", FILES, embedder, name="w", settings=settings, engine=engine)
        watcher.join(timeout=5)
    finally:
        engine.close()
    assert killed, "a worker was killed during the embed stage"
    assert not differences(_snapshot(reference), _snapshot(built))


# `python -m core build`, then the modules the process loaded (what the lease holder holds in memory)
_LOADED = ("import runpy, sys\n"
           "try:\n    runpy.run_module('core', run_name='__main__', alter_sys=True)\n"
           "except SystemExit as exc:\n    print('EXIT', exc.code, file=sys.stderr)\n"
           "print('LOADED', [m for m in ('torch', 'onnxruntime', 'sentence_transformers', 'spacy') if m in sys.modules],"
           " file=sys.stderr)\n")


def test_a_cluster_builds_lease_holder_loads_neither_the_embedder_nor_spacy(tmp_path, embedder, make_settings):
    """On a local cluster the lease holder embeds and parses nothing itself: a worker chooses MiniLM's runtime (the
    one `auto` takes on this CPU, or the pinned one) and the lease holder is pinned to it, and spaCy (the documents'
    subjects, the extractor's line, the readings of HiRAG's summary entities) runs on the workers; `core build` then
    never imports torch, onnxruntime or spaCy (on the 1M-token build they held 375 and 265 MiB there). The build
    records the runtime the workers ran and the spaCy extractor, as a build in one process does."""
    from core.pipeline.factory import open_index
    from core.store import Store

    root = Path(__file__).resolve().parents[2]
    home = tmp_path / "home"
    settings = make_settings(home)  # the database under test (SQLite or PostgreSQL); the vectors embedded on disk
    settings.storage.chroma_url = None
    env = dict(os.environ, STRATA_HOME=str(home), STRATA_DASK_WORKERS="2", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("STRATA_CHROMA_URL", None)
    if settings.storage.database_url:
        env["STRATA_DATABASE_URL"] = settings.storage.database_url
    else:
        env.pop("STRATA_DATABASE_URL", None)
    p = subprocess.run([sys.executable, "-c", _LOADED, "build", "--workspace", "w", "--quiet", *map(str, FILES)],
                       cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert "EXIT 0" in p.stderr, p.stderr[-3000:]
    assert "LOADED []" in p.stderr, p.stderr[-3000:]
    store = Store(settings.storage.db_url)
    ws = store.require_workspace("w")
    run = store.latest_run(ws.id, ("build",))
    assert run is not None and run.status == "done" and (run.params or {}).get("engine") == "local cluster, 2 workers"
    extract = next(r for r in store.stage_runs(run.id) if r.stage == "extract")
    assert "(spaCy " in extract.message, extract.message  # the workers' extractor, named without loading it here
    rec = open_index(settings, "w", "minilm").recorded()
    assert rec is not None and rec.runtime == embedder.load(), rec
    assert ws.backend == "offline"
