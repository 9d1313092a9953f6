"""Living workspaces: adding documents to a built workspace, or deleting some, ends in the state a from-scratch build
of the same final document set gives (every node with its text and data, every edge with its weight and data, every
community with its report, every vector id with its content hash), also when the run is killed (kill -9 of a real
worker process) and started again.

No tolerance: the bundled embedder gives a text the same vector bit for bit whatever batch it is embedded in, on
every runtime (tests/unit/test_embedders.py), so the HNSW `semantic` edges, the KNN-augmented attributed
communities and every other construction over vectors come out the same too. `make test` runs this file on both of
MiniLM's fast runtimes.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from sqlmodel import select

from core.models import BuildRun, Edge, Node, StageRun
from core.pipeline.delete import delete_documents, find_documents, preview
from core.pipeline.factory import make_context
from core.pipeline.runner import create_run, run_build
from core.pipeline.runs import launch_worker, update_run
from core.store import Store
from core.worker import create_job
from core.workspace import ingest_paths
from tests.chroma_server import copy_vectors
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.snapshots import differences, full_snapshot
from tests.stores import copy_db

FILES = sorted(SAMPLE_DIR.iterdir())
DROP = [FILES[1], FILES[6], FILES[12]]  # deleted in the delete tests


def _folder(root: Path, files: list[Path]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, root)
    return root


def assert_same(store, ws, settings, ref, embedder_name: str) -> None:
    a = full_snapshot(store, store.require_workspace(ws.name), settings, embedder_name)
    b = full_snapshot(ref.store, ref.store.require_workspace(ref.ws.name), ref.settings, embedder_name)
    diff = differences(a, b)
    assert not diff, f"differs from a from-scratch build: {diff}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("inc_corpus")
    return {"first": _folder(root / "first", FILES[:10]), "later": _folder(root / "later", FILES[10:]),
            "kept": _folder(root / "kept", [f for f in FILES if f not in DROP])}


@pytest.fixture(scope="module")
def scratch15(tmp_path_factory, corpus, embedder):
    return build_workspace(tmp_path_factory.mktemp("scratch15"), [corpus["first"], corpus["later"]], embedder, "s")


@pytest.fixture(scope="module")
def scratch12(tmp_path_factory, corpus, embedder):
    return build_workspace(tmp_path_factory.mktemp("scratch12"), [corpus["kept"]], embedder, "s")


def _copy(built, home: Path):
    """A private copy of a built workspace: its home, and on PostgreSQL or a Chroma server its own database copy."""
    if built.store.is_sqlite:  # the copy reads the file
        with built.store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copytree(built.settings.storage.home, home)
    settings = built.settings.model_copy(deep=True)
    settings.storage.home = home
    settings.storage.chroma_url = copy_vectors(built.settings.storage.chroma_url, home)
    settings.storage.database_url = copy_db(built.settings.storage.database_url, home)
    store = Store(settings.storage.db_url)
    return settings, store, store.require_workspace(built.ws.name)


def _wait_for_progress(store, run_id: int, proc, timeout: float = 300) -> None:
    """Until the run has written its first progress row (a step with done > 0)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        with store.session() as s:
            if s.exec(select(StageRun).where(StageRun.run_id == run_id, StageRun.done > 0)).first():
                return
        assert proc.poll() is None, "the worker ended before any progress"
        time.sleep(0.05)
    raise AssertionError("no progress row")


def _kill(store, run_id: int, proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with store.session() as s:
        assert s.get(BuildRun, run_id).status == "running", "a killed worker records nothing"
    update_run(store, run_id, status="failed", message="worker killed")  # what a supervisor records


# ------------------------------------------------------------------------------------------------------- add
def test_add_then_build_equals_a_build_from_scratch(tmp_path, corpus, scratch15, embedder):
    inc = build_workspace(tmp_path / "inc", [corpus["first"]], embedder, "s")
    ingest_paths(inc.store, inc.ws, [corpus["later"]], inc.settings)
    ctx = make_context(inc.store, inc.ws, inc.settings, embedder=embedder)
    run = create_run(inc.store, inc.ws, inc.settings)
    events = list(run_build(ctx, run.id))
    done = {e.stage: e for e in events if e.status == "done"}
    assert done["chunk"].counts["documents"] == 5, "only the new documents are chunked"
    assert done["extract"].counts["chunks"] < inc.store.counts(inc.ws.id)["chunk"], "only new chunks are extracted"
    assert done["resolve"].counts["refolded"] > 0, "entities met again out of order were folded again"
    assert_same(inc.store, inc.ws, inc.settings, scratch15, embedder.name)


def test_add_killed_by_kill_9_then_resumed_equals_a_build_from_scratch(tmp_path, corpus, scratch15, embedder):
    inc = build_workspace(tmp_path / "inc", [corpus["first"]], embedder, "s")
    ingest_paths(inc.store, inc.ws, [corpus["later"]], inc.settings)
    run = create_run(inc.store, inc.ws, inc.settings)
    proc = launch_worker(inc.settings, run.id)
    _wait_for_progress(inc.store, run.id, proc)
    _kill(inc.store, run.id, proc)
    ctx = make_context(inc.store, inc.ws, inc.settings, embedder=embedder)
    again = create_run(inc.store, inc.ws, inc.settings)
    assert [e for e in run_build(ctx, again.id) if e.status == "failed"] == []
    assert_same(inc.store, inc.ws, inc.settings, scratch15, embedder.name)


# ---------------------------------------------------------------------------------------------------- delete
def _doc_ids(store, ws) -> list[str]:
    docs, missing = find_documents(store, ws.id, [f.name for f in DROP])
    assert not missing and len(docs) == 3
    return [d.id for d in docs]


def test_delete_equals_a_build_from_scratch_of_the_rest(tmp_path, scratch15, scratch12, embedder):
    settings, store, ws = _copy(scratch15, tmp_path / "del")
    ids = _doc_ids(store, ws)
    seen = preview(store, ws.id, ids)
    assert seen["documents"] == 3 and seen["entities_only_theirs"] > 0 and seen["entities_shared"] > 0
    with store.session() as s:  # an entity named by a deleted and by a kept document
        chunk_doc = dict(s.exec(select(Node.id, Node.document_id).where(Node.kind == "chunk")).all())
        by_ent: dict[str, set] = {}
        for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.kind == "mentions")).all():
            if src in chunk_doc:
                by_ent.setdefault(dst, set()).add(chunk_doc[src])
    shared = sorted(e for e, docs in by_ent.items() if docs & set(ids) and docs - set(ids))[0]
    events = list(delete_documents(store, ws, settings, ids, embedder=embedder))
    assert events[-1].status == "done", events[-1]
    assert_same(store, ws, settings, scratch12, embedder.name)
    # the shared entity keeps exactly the kept documents' support
    with store.session() as s:
        node = s.get(Node, shared)
        chunks = {c for c, d in s.exec(select(Node.id, Node.document_id).where(Node.kind == "chunk")).all()}
        kept_mentions = [e for e in s.exec(select(Edge).where(Edge.kind == "mentions", Edge.dst == shared)).all()
                         if e.src in chunks]
    with scratch12.store.session() as s:
        ref = s.get(Node, shared)
    assert node is not None and ref is not None
    assert node.weight == len(kept_mentions) == ref.weight
    assert (node.title, node.text, node.data) == (ref.title, ref.text, ref.data)
    assert not store.documents_by_id(ws.id, ids)


def test_delete_killed_by_kill_9_then_resumed_equals_a_build_from_scratch(tmp_path, scratch15, scratch12, embedder):
    settings, store, ws = _copy(scratch15, tmp_path / "del")
    ids = _doc_ids(store, ws)
    run = create_job(store, ws, settings, "delete", {"documents": ids})
    proc = launch_worker(settings, run.id)
    _wait_for_progress(store, run.id, proc)
    _kill(store, run.id, proc)
    events = list(delete_documents(store, ws, settings, ids, embedder=embedder))  # the same delete, again
    assert events[-1].status == "done", events[-1]
    assert_same(store, ws, settings, scratch12, embedder.name)
