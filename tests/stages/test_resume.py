"""A build killed at any point resumes from the first unfinished unit, with no lost and no duplicated rows.

The kill is simulated inside the worker: after a stage has reported progress, the stage is abandoned with an
exception the runner does not catch (like SIGKILL, nothing records the failure and the stage's uncommitted work is
lost). Once the killed worker's lease has expired, the next build resumes; after a chain of such kills, one in every stage after extraction, the workspace
must equal an uninterrupted build of the same corpus: same nodes, edges (with weights), communities and vectors.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import core.pipeline.runner as pipeline
from core.models import LEASE_S, BuildRun, utcnow
from core.pipeline.factory import make_context, open_index
from core.pipeline.runner import create_run, run_build, stage_names
from core.pipeline.runs import JobBusy
from core.store import Store
from core.workspace import ingest_paths
from tests.stages.test_pipeline import SAMPLE_DIR, snapshot

COLLECTIONS = ("chunk", "statement", "entity", "community", "attribute", "high_level", "topic")


class Killed(BaseException):
    """Not an Exception: the runner's failure handling never sees it, as with a killed process."""


def test_kill_in_every_stage_then_resume_equals_uninterrupted_build(tmp_path, sample_built, make_settings,
                                                                    monkeypatch):
    ref_settings, ref_store, ref_ws, embedder = sample_built
    settings = make_settings(tmp_path / "kill_home")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("sample")
    assert ws.id == ref_ws.id, "content ids include the workspace id; both databases start at 1"
    ingest_paths(store, ws, [SAMPLE_DIR], settings)
    real_stages = pipeline.stages

    killed_in = []
    targets = [n for n in stage_names() if stage_names().index(n) >= stage_names().index("resolve")]
    for target in targets:
        monkeypatch.setattr(pipeline, "stages", lambda t=target: _wrapped(real_stages(), t))
        ctx = make_context(store, ws, settings, embedder=embedder)
        run = create_run(store, ws, settings)
        with pytest.raises(Killed):
            for _ in run_build(ctx, run.id):
                pass
        killed_in.append(target)
        with store.session() as s:
            assert s.get(BuildRun, run.id).status == "running", "a killed worker records nothing"
        with pytest.raises(JobBusy):  # the killed worker's lease holds the workspace ...
            create_run(store, ws, settings)
        _expire_lease(store, run.id)  # ... until it expires: a killed worker renews nothing
    assert killed_in == targets

    monkeypatch.setattr(pipeline, "stages", real_stages)
    ctx = make_context(store, ws, settings, embedder=embedder)
    run = create_run(store, ws, settings)
    events = list(run_build(ctx, run.id))
    assert events[-1].status == "done"

    got, want = snapshot(store, ws.id), snapshot(ref_store, ref_ws.id)
    assert got["counts"] == want["counts"]
    assert got["nodes"] == want["nodes"]
    assert got["communities"] == want["communities"]
    assert got["edges"] == want["edges"]
    index = open_index(settings, ws.name, embedder.name)
    ref_index = open_index(ref_settings, ref_ws.name, embedder.name)
    for kind in COLLECTIONS:
        assert sorted(index.existing(kind).items()) == sorted(ref_index.existing(kind).items()), kind


def _expire_lease(store: Store, run_id: int) -> None:
    """The run's last heartbeat pushed back past the lease, as if its killed worker had been silent that long."""
    with store.session() as s:
        row = s.get(BuildRun, run_id)
        row.heartbeat = utcnow() - timedelta(seconds=LEASE_S + 1)
        s.add(row)
        s.commit()


def _wrapped(real, target: str):
    """The pipeline's stages with `target` abandoned right after its first progress report."""

    def wrap(fn):
        def run(ctx):
            for p in fn(ctx):
                yield p
                raise Killed(target)
        return run

    return [(n, label, wrap(fn) if n == target else fn) for n, label, fn in real]
