"""A build's verdict (core/explore/verdict.py), its counts (core/explore/build_counts.py) and build numbers
(core/pipeline/runs.py), on a small hand-made store: what the graph holds, worded once; what is unusual, spelled out;
"build N" from the workspace's build_version, never a row id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import create_engine, delete, inspect, text

from core.explore.build_counts import graph_counts
from core.explore.verdict import build_verdict, duration
from core.models import BuildRun, Community, Document, EntityMerge, FailedUnit, Node, StageRun, add_new_columns, utcnow
from core.pipeline.runner import finish_build
from core.pipeline.runs import build_numbers, get_run, run_name, run_names, update_run
from core.store import Store

LAYERS = {"layers": [
    {"layer": 0, "entities": 12, "clusters": 3, "cluster_sparsity": 0.9, "change_rate": None, "stop_reason": None},
    {"layer": 1, "entities": 4, "clusters": 1, "cluster_sparsity": 0.0, "change_rate": 1.0, "stop_reason": None},
    {"layer": 2, "entities": 1, "clusters": None, "cluster_sparsity": None, "change_rate": None,
     "stop_reason": "layer 2 has 1 entity: too few to cluster (< 3)"}],
    "stop_reason": "layer 2 has 1 entity: too few to cluster (< 3)", "epsilon": 0.05}
SETTINGS = {"community": {"max_cluster_size": 4}, "archrag": {"max_cluster_size": 0}}


def _store(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("v")
    w = ws.id
    with store.session() as s:
        for d in range(3):
            s.add(Document(id=f"d{d}", workspace_id=w, content_hash=f"d{d}", title=f"Doc {d}", filename=f"{d}.txt",
                           mime="text/plain", n_chars=5, text="text"))
        for i in range(4):
            s.add(Node(id=f"c{i}", workspace_id=w, kind="chunk", text="chunk", document_id=f"d{i % 3}"))
        for i in range(12):
            s.add(Node(id=f"e{i}", workspace_id=w, kind="entity", title=f"E{i}", layer=0))
        for i in range(5):  # summary entities: 4 on layer 1, 1 on layer 2
            s.add(Node(id=f"s{i}", workspace_id=w, kind="entity", title=f"S{i}", layer=1 if i < 4 else 2))
        for i in range(7):
            s.add(Node(id=f"r{i}", workspace_id=w, kind="relationship", title=f"R{i}"))
        s.add(Node(id="t0", workspace_id=w, kind="topic", title="a topic"))
        # hirag: one coarse community split in two; H2 (6 members, cap 4) is a leaf nothing splits
        for cid, level, parent, size in (("H", 0, None, 12), ("H1", 1, "H", 6), ("H2", 1, "H", 6),
                                         ("H11", 2, "H1", 3), ("H12", 2, "H1", 3)):
            s.add(Community(id=cid, workspace_id=w, method="hirag", level=level, parent_id=parent, size=size))
        for i in range(10):  # leiden: 10 communities, 6 of them single members
            s.add(Community(id=f"L{i}", workspace_id=w, method="leiden", level=0, size=1 if i < 6 else 3))
        s.add(Community(id="W0", workspace_id=w, method="wcc", level=0, size=12))
        s.add(EntityMerge(workspace_id=w, kept_id="e0", merged_id="e1", status="candidate"))
        s.commit()
    return store, store.require_workspace("v")


def _run(store, ws, status="done", version=None, kind="build", seconds=121, **counts) -> BuildRun:
    start = utcnow() - timedelta(seconds=seconds)
    with store.session() as s:
        run = BuildRun(workspace_id=ws.id, status=status, kind=kind, backend="offline", settings=SETTINGS,
                       created_at=start, finished_at=None if status == "running" else utcnow(), version=version,
                       stage="extract", message="boom" if status == "failed" else "")
        s.add(run)
        s.flush()
        for i, (stage, c) in enumerate(counts.items()):
            s.add(StageRun(run_id=run.id, workspace_id=ws.id, stage=stage, ordinal=i, status="done", seconds=1.0,
                           counts=c))
        s.commit()
        s.refresh(run)
        return run


def test_counts_are_one_source_and_add_up(tmp_path):
    store, ws = _store(tmp_path)
    gc = graph_counts(store, ws.id, {"hirag": 4})
    counts = store.counts(ws.id)
    assert (gc.documents, gc.chunks, gc.relationships, gc.topics) == (3, 4, 7, 1)
    assert (gc.entities, gc.summary_entities) == (12, 5)
    assert gc.all_entities == counts["entity"], "entities after resolution + summary entities = every entity"
    assert gc.communities == 15, "hirag 5 + leiden 10; the connected components (wcc) are not communities"
    hirag = gc.methods["hirag"]
    assert (hirag.per_level, hirag.levels, hirag.total) == ({0: 1, 1: 2, 2: 2}, 3, 5)
    assert (hirag.over_cap, hirag.largest_over_cap) == (1, 6), "H2 is a leaf over the cap; H and H1 are split"
    assert gc.methods["leiden"].singletons == 6 and gc.methods["leiden"].over_cap == 0, "no cap given: none checked"


def test_a_finished_build_says_what_it_holds_and_what_is_unusual(tmp_path):
    store, ws = _store(tmp_path)
    finish_build(store, ws.id, "offline", "", "minilm", None)  # the workspace is at build 1
    run = _run(store, store.require_workspace("v"), version=1, layers=LAYERS, merge={"auto_merged": 2},
               embed={"embedder_note": "fell back to hashing"}, communities={"tiny_components": 1})
    with store.session() as s:
        s.add(FailedUnit(workspace_id=ws.id, run_id=run.id, stage="reports", unit="H2", label="a report"))
        s.commit()
    v = build_verdict(store, store.require_workspace("v"), run)
    assert v.number == 1 and v.tone == "warning"
    assert v.headline == "Build 1 finished in 2 min 1 s with the offline backend · 1 failed unit"
    assert v.stress == "Build 1 finished"
    assert v.facts[:3] == [
        "3 documents in 4 chunks.",
        "12 entities after resolution (2 pairs merged automatically, 1 candidate pair to review on the Quality "
        "page), 7 relationships, 0 statements.",
        "5 HiRAG summary entities above them (17 entities of every layer)."]
    assert "HiRAG: 5 communities on 3 levels, over 2 summary layers." in v.facts
    assert "Hierarchical Leiden (GraphRAG): 10 communities on 1 level." in v.facts
    assert v.facts[-1] == "HLG topics: 1."
    notes = "\n".join(v.notes)
    assert "1 failed unit: their model calls still failed" in notes
    assert "Embedder: fell back to hashing" in notes
    assert "HiRAG: layer 1 (4 entities) collapsed into a single cluster." in notes
    assert "HiRAG: 1 community bigger than the cap of 4 members (largest 6)" in notes
    assert "Hierarchical Leiden (GraphRAG): 6 of its 10 communities (60%) hold a single member." in notes
    assert "stopped early" not in notes, "too few entities left is how a layering ends"
    assert "linked to no other" not in notes, "1 of 12 entities alone is under the share that is worth a note"
    assert "changed since" not in notes


def test_nothing_unusual_says_nothing_and_a_changed_graph_is_said(tmp_path):
    store, ws = _store(tmp_path)
    with store.session() as s:  # no communities: no singletons, no over-cap leaf (and no layers: no collapse)
        s.execute(delete(Community))
        s.commit()
    finish_build(store, ws.id, "offline", "", "minilm", None)
    run = _run(store, ws, version=1, seconds=41)
    store.bump_version(ws.id)  # a merge decision since: build 2
    v = build_verdict(store, store.require_workspace("v"), run)
    assert v.tone == "success" and v.headline.endswith("in 41 s with the offline backend · no failed units")
    assert v.notes == ["The graph has changed since this build (a promote or merge decisions): it is now build 2."]


def test_a_stopped_early_layering_and_a_failed_build_are_said(tmp_path):
    store, ws = _store(tmp_path)
    early = dict(LAYERS, stop_reason="layer 1: 2 of 3 clusters' summary entities failed")
    finish_build(store, ws.id, "offline", "", "minilm", None)
    done = _run(store, ws, version=1, layers=early)
    assert "HiRAG's layering stopped early: layer 1: 2 of 3 clusters' summary entities failed." in \
        build_verdict(store, ws, done).notes
    failed = _run(store, ws, status="failed")
    v = build_verdict(store, ws, failed)
    assert (v.tone, v.headline, v.stress, v.number) == ("error", "Build failed in stage extract: boom", "extract", None)


def test_build_numbers_follow_the_build_version_never_the_row_id(tmp_path):
    store, ws = _store(tmp_path)
    other = store.create_workspace("other")
    _run(store, other, version=1)  # another workspace's run takes a row id first
    first = _run(store, ws)  # an older release's row: no version stored, numbered by its rank
    job = _run(store, ws, kind="promote")
    finish_build(store, ws.id, "offline", "", "minilm", None)
    store.bump_version(ws.id)  # the promote made build 2
    second = _run(store, ws, status="running")
    finish_build(store, ws.id, "offline", "", "minilm", second.id)  # the runner stores the number it made
    with store.session() as s:
        assert s.get(BuildRun, second.id).version == 3
    failed = _run(store, ws, status="failed")
    update_run(store, second.id, status="done")
    numbers = build_numbers(store, ws.id)
    assert numbers == {first.id: 1, second.id: 3}, numbers
    assert first.id != 1, "the row id differs from the number"
    names = run_names(store, ws.id, {first.id, job.id, failed.id})
    assert names[first.id] == "build 1"
    assert names[job.id].startswith("Promote of ") and names[job.id].endswith(" UTC")
    assert names[failed.id].startswith("Build of ")
    assert run_name(get_run(store, second.id), numbers) == "build 3"
    assert run_names(store, other.id, {first.id}) == {}, "another workspace's run is not named"


def test_an_older_database_gains_the_version_column(tmp_path):
    path = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE buildrun (id INTEGER PRIMARY KEY, workspace_id INTEGER)"))
    add_new_columns(engine)
    assert "version" in {c["name"] for c in inspect(engine).get_columns("buildrun")}


@pytest.mark.parametrize("secs, said", [(0.4, "0 s"), (59, "59 s"), (121, "2 min 1 s"), (3900, "1 h 5 min")])
def test_duration_in_plain_words(secs, said):
    assert duration(secs) == said


def test_a_layer_that_is_one_cluster_is_told_as_a_collapse_not_as_an_early_stop():
    from core.algorithms.layers import LayerClustering, collapse_reason
    from core.explore.verdict import _layer_notes

    reason = collapse_reason(LayerClustering(layer=3, clusters=[[0, 1, 2, 3, 4]], n_components=1, bic=[],
                                             sparsity=0.0, change_rate=None, n=5))
    assert reason is not None
    notes = _layer_notes({"stop_reason": reason, "layers": [
        {"layer": 3, "entities": 5, "clusters": 1, "cluster_sparsity": 0.0}]})
    assert notes == ["HiRAG: layer 3 (5 entities) collapsed into a single cluster."]
