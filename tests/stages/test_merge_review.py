"""Entity-resolution review on the built sample (core/resolution/review.py over core/resolution/merge.py): accepting a
candidate merges it, marks the communities holding either entity stale, re-embeds the kept entity and bumps the
build version; undoing restores every node, edge and community row and both vectors exactly; a rejection survives a
re-run of the merge stage and can itself be undone.

Each test works on its own copy of one build of data/sample (built once for the module), so decisions never leak.
The build uses the capitalised-span heuristics (`extract.offline_extractor = "heuristic"`): the review machinery is
exercised on the candidates they leave (titled names such as "Professor Ingrid Solberg" or "Mayor of Port Halden",
two names absorbed by Port Halden); spaCy keeps a title out of a name, so the default build leaves fewer, and
`test_the_default_spacy_build_of_the_sample_has_the_ashby_fen_candidate` checks the one the browser test reviews."""

from __future__ import annotations

import shutil
from datetime import timedelta

import numpy as np
import pytest
from sqlmodel import select

from core.config import Settings
from core.models import LEASE_S, BuildRun, Community, Edge, EntityMerge, Node, Workspace, utcnow
from core.pipeline.factory import make_context, open_index
from core.pipeline.runner import create_run, run_build
from core.resolution import review as rv
from core.resolution.merge import MergeError, is_stale, list_merges, mark_stale
from core.store import Store, content_id
from tests.chroma_server import copy_vectors
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.stores import copy_db


@pytest.fixture(scope="module")
def master(tmp_path_factory, embedder):
    settings = Settings()
    settings.extract.offline_extractor = "heuristic"
    return build_workspace(tmp_path_factory.mktemp("review_master"), [SAMPLE_DIR], embedder, name="sample",
                           settings=settings)


def test_the_default_spacy_build_of_the_sample_has_the_ashby_fen_candidate(sample_built):
    """The default (spaCy) build: "Ashby Fen" is a candidate for "Ashby Fen Farm" (tests/e2e/test_merge_browser.py
    reviews it); a person's title is not part of their name, so no "Professor X" ~ "X" pair is left to merge."""
    settings, store, w, _ = sample_built
    assert settings.extract.offline_extractor == "spacy"
    rows = rv.merge_table(store, w.id)
    assert [r.titles for r in rows if r.titles[1] == "Ashby Fen"] == [["Ashby Fen Farm", "Ashby Fen"]]
    assert rv.status_counts(rows)["auto-merged"] == 0
    with store.session() as s:
        titles = set(s.exec(select(Node.title).where(Node.workspace_id == w.id, Node.kind == "entity")))
    assert {"Ingrid Solberg", "Daniel Osei", "Ruth Adair"} <= titles
    assert not {t for t in titles if t.startswith(("Professor ", "Judge ", "Mayor "))}


@pytest.fixture
def ws(master, tmp_path):
    """A private copy of the built sample: (settings, store, workspace, index, embedder)."""
    settings, store, ws, embedder = master
    if store.is_sqlite:  # the copy reads the file
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    home = tmp_path / "home"
    shutil.copytree(settings.storage.home, home)
    mine = settings.model_copy(deep=True)
    mine.storage.home = home
    mine.storage.chroma_url = copy_vectors(settings.storage.chroma_url, home)  # on a server: its own copy
    mine.storage.database_url = copy_db(settings.storage.database_url, home)  # on PostgreSQL: its own copy
    st = Store(mine.storage.db_url)
    index = open_index(mine, ws.name, embedder.name)
    assert index.count("entity") == open_index(settings, ws.name, embedder.name).count("entity") > 0
    return mine, st, st.require_workspace(ws.name), index, embedder


def snapshot(store, ws_id):
    """Every node, edge and community row of the workspace, every column."""
    def rows(table):
        with store.session() as s:
            return sorted(repr(sorted(r.model_dump().items()))
                          for r in s.exec(select(table).where(table.workspace_id == ws_id)))
    return rows(Node), rows(Edge), rows(Community)


def candidate(store, ws_id, kept: str, merged: str) -> EntityMerge:
    (row,) = [m for m in list_merges(store, ws_id) if m.evidence["titles"] == [kept, merged]]
    return row


def holders(store, ws_id, ids) -> set[str]:
    with store.session() as s:
        return set(s.exec(select(Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_community",
                                                 Edge.src.in_(ids))))


def stale_ids(store, ws_id) -> set[str]:
    with store.session() as s:
        return {c.id for c in s.exec(select(Community).where(Community.workspace_id == ws_id)) if is_stale(c)}


def version(store, ws_id) -> int:
    with store.session() as s:
        return s.get(Workspace, ws_id).build_version


def test_the_sample_has_reviewable_candidates(ws):
    _, store, w, _, _ = ws
    rows = rv.merge_table(store, w.id)
    open_ = rv.filter_rows(rows, "candidate")
    assert len(open_) >= 5 and all(r.status == "candidate" for r in open_)
    assert [r.titles for r in open_ if r.titles[1] == "Ashby Fen"] == [["Ashby Fen Farm", "Ashby Fen"]]
    assert rv.status_counts(rows)["auto-merged"] == 4, "the four 'Professor X' ~ 'X' pairs merged by the build"
    assert [r.titles for r in rv.filter_rows(rows, "all", "harbour")] == [["New Harbour Hall", "Harbour Hall"]]
    by_neighbours = rv.filter_rows(rows, "candidate", rank="shared neighbours")
    jac = [r.evidence_values()["neighbours"] for r in by_neighbours]
    assert jac == sorted(jac, reverse=True)


def test_accept_then_undo_restores_every_row_and_both_vectors(ws):
    settings, store, w, index, embedder = ws
    row = candidate(store, w.id, "Ashby Fen Farm", "Ashby Fen")
    K, M = row.kept_id, row.merged_id
    before, v0 = snapshot(store, w.id), version(store, w.id)
    vec = index.vectors("entity", [K, M])
    expected_stale = holders(store, w.id, [K, M])
    assert expected_stale and not stale_ids(store, w.id)
    with store.session() as s:
        mentioning = set(s.exec(select(Edge.src).where(Edge.workspace_id == w.id, Edge.kind == "mentions",
                                                       Edge.dst.in_([K, M]))))

    kept_id, comms = rv.accept(store, w.id, row.id, index, embedder)
    assert kept_id == K and set(comms) == expected_stale
    assert version(store, w.id) == v0 + 1, "the app's cached views reload"
    with store.session() as s:
        assert s.get(Node, M) is None
        node = s.get(Node, K)
        now_mentioning = set(s.exec(select(Edge.src).where(Edge.workspace_id == w.id, Edge.kind == "mentions",
                                                           Edge.dst == K)))
    assert set(node.data["aliases"]) == {"Ashby Fen Farm", "Ashby Fen"} and node.title == "Ashby Fen Farm"
    assert now_mentioning == mentioning, "every chunk or statement naming either now names the kept entity"
    assert stale_ids(store, w.id) == expected_stale
    with store.session() as s:
        c = s.get(Community, sorted(expected_stale)[0])
    assert c.data["stale_reasons"][0]["merge"] == row.id and c.data["stale_reasons"][0]["action"] == "merge"
    assert rv.stale_reasons(store, w.id, c.id) == ["“Ashby Fen” merged into “Ashby Fen Farm”"]
    # the kept entity's vector follows its new text (as the embed stage would write it); the merged one is gone
    after = index.vectors("entity", [K, M])
    assert set(after) == {K} and not np.allclose(after[K], vec[K])
    text = f"{node.title}: {node.text[:1000]}"
    assert np.allclose(after[K], embedder.embed([text])[0], atol=1e-5)
    assert index.collection("entity").get(ids=[K], include=["metadatas"])["metadatas"][0]["h"] == content_id(text)
    with pytest.raises(MergeError):
        rv.decline(store, w.id, row.id)  # merged: undo it first

    assert rv.revert(store, w.id, row.id, index, embedder) == "undone"
    assert snapshot(store, w.id) == before, "every node, edge and community row as before (stale marks cleared)"
    assert version(store, w.id) == v0 + 2
    back = index.vectors("entity", [K, M])
    assert np.array_equal(back[K], vec[K]) and np.array_equal(back[M], vec[M])
    # an undone pair can be accepted again, and undone again
    rv.accept(store, w.id, row.id, index, embedder)
    rv.revert(store, w.id, row.id, index, embedder)
    assert snapshot(store, w.id) == before


def test_accept_many_and_undo_them_all_in_reverse(ws):
    _, store, w, index, embedder = ws
    before, v0 = snapshot(store, w.id), version(store, w.id)
    rows = [r for r in rv.filter_rows(rv.merge_table(store, w.id), "candidate") if r.score >= 0.85]
    assert len(rows) >= 4
    done, skipped = rv.accept_all(store, w.id, rows, index, embedder)
    assert done == len(rows) and skipped == [] and version(store, w.id) == v0 + 1, "one bump for the batch"
    assert {r.id for r in rv.filter_rows(rv.merge_table(store, w.id), "merged")} == {r.id for r in rows}
    with pytest.raises(MergeError):  # Port Halden absorbed two names: the later merge is undone first
        rv.revert(store, w.id, min(r.id for r in rows if r.titles[0] == "Port Halden"), index, embedder)
    for r in sorted(rows, key=lambda r: (-r.score, r.id), reverse=True):
        rv.revert(store, w.id, r.id, index, embedder)
    assert snapshot(store, w.id) == before and not stale_ids(store, w.id)
    # a merge made impossible by an earlier one in the same batch is skipped with its reason
    port = [r for r in rv.filter_rows(rv.merge_table(store, w.id), "undone") if r.titles[0] == "Port Halden"]
    with store.session() as s:  # a hand-made candidate whose merged entity the first merge removes
        s.add(EntityMerge(workspace_id=w.id, kept_id=port[1].merged_id, merged_id=port[0].merged_id, score=0.1,
                          evidence={"titles": [port[1].titles[1], port[0].titles[1]]}))
        s.commit()
    extra = rv.filter_rows(rv.merge_table(store, w.id), "candidate", "mayor")
    done, skipped = rv.accept_all(store, w.id, port[:1] + extra, index, embedder)
    assert done == 1 and len(skipped) == 1 and "no longer exists" in skipped[0][1]


def test_a_rejection_survives_a_rerun_of_the_merge_stage_and_can_be_undone(ws):
    settings, store, w, index, embedder = ws
    row = candidate(store, w.id, "New Harbour Hall", "Harbour Hall")  # the old hall was demolished: not the same
    rv.decline(store, w.id, row.id)
    stamp = rv.review_stamp(store, w.id)
    v0, before = version(store, w.id), snapshot(store, w.id)
    ctx = make_context(store, w, settings, embedder=embedder)
    assert list(run_build(ctx, create_run(store, w, settings).id, only=["merge"]))[-1].status == "done"
    pair = [m for m in list_merges(store, w.id) if {m.kept_id, m.merged_id} == {row.kept_id, row.merged_id}]
    assert [(m.id, m.status) for m in pair] == [(row.id, "rejected")], "not proposed again, not merged"
    assert snapshot(store, w.id) == before and version(store, w.id) == v0 + 1  # the run's own bump only
    rv.revert(store, w.id, row.id, index, embedder)
    assert rv.review_stamp(store, w.id) != stamp
    assert [m.status for m in list_merges(store, w.id) if m.id == row.id] == ["candidate"]
    assert list(run_build(ctx, create_run(store, w, settings).id, only=["merge"]))[-1].status == "done"
    assert len([m for m in list_merges(store, w.id) if {m.kept_id, m.merged_id} == {row.kept_id, row.merged_id}]) == 1
    with pytest.raises(MergeError):
        rv.revert(store, w.id, row.id, index, embedder)  # a candidate has no decision to undo


def test_a_run_holds_decisions_back_only_while_its_worker_is_alive(ws):
    settings, store, w, index, embedder = ws
    row = candidate(store, w.id, "New Harbour Hall", "Harbour Hall")
    run = create_run(store, w, settings)
    with store.session() as s:  # a worker claimed it and beats
        r = s.get(BuildRun, run.id)
        r.status, r.worker, r.heartbeat = "running", "host:1:x", utcnow()
        s.add(r)
        s.commit()
    assert rv.build_running(store, w.id)
    with pytest.raises(MergeError, match="running"):
        rv.decline(store, w.id, row.id)
    with store.session() as s:  # the worker was killed: its last heartbeat is older than the lease
        r = s.get(BuildRun, run.id)
        r.heartbeat = utcnow() - timedelta(seconds=LEASE_S + 5)
        s.add(r)
        s.commit()
    assert not rv.build_running(store, w.id), "a silent run is superseded by the next one; it holds nothing back"
    rv.decline(store, w.id, row.id)
    assert [m.status for m in list_merges(store, w.id) if m.id == row.id] == ["rejected"]


def test_an_undo_after_a_rebuild_marks_the_communities_built_since(ws):
    """Decision documented in merge.py: an undo cancels its merge's mark on the communities whose report predates
    the merge, and marks the ones whose report was written while the merge was in effect."""
    settings, store, w, index, embedder = ws
    row = candidate(store, w.id, "Ashby Fen Farm", "Ashby Fen")
    rv.accept(store, w.id, row.id, index, embedder)
    marked = stale_ids(store, w.id)
    ctx = make_context(store, w, settings, embedder=embedder)
    assert list(run_build(ctx, create_run(store, w, settings).id, only=["communities"]))[-1].status == "done"
    after_rebuild = holders(store, w.id, [row.kept_id])
    assert after_rebuild - marked, "the rebuild gave some community holding the kept entity a new id"
    kept_over = after_rebuild & marked
    assert kept_over <= stale_ids(store, w.id), "a kept community keeps its mark (its report predates the merge)"
    rv.revert(store, w.id, row.id, index, embedder)
    now = holders(store, w.id, [row.kept_id, row.merged_id])
    for cid in now:
        with store.session() as s:
            c = s.get(Community, cid)
        if cid in marked:
            assert not is_stale(c), "the undo cancelled the merge's own mark"
        else:
            assert is_stale(c) and [r["action"] for r in c.data["stale_reasons"]] == ["undo"]


def test_the_reports_stage_rewrites_stale_reports_and_clears_their_mark(ws):
    settings, store, w, index, embedder = ws
    row = candidate(store, w.id, "Ashby Fen Farm", "Ashby Fen")
    rv.accept(store, w.id, row.id, index, embedder)
    marked = stale_ids(store, w.id)
    assert marked
    with store.session() as s:
        before = {c.id: c.report for c in s.exec(select(Community).where(Community.id.in_(marked)))}
        noderag_before = set(s.exec(select(Community.id).where(Community.workspace_id == w.id,
                                                                Community.method == "noderag")))
        untouched = {c.id: c.report for c in s.exec(select(Community).where(
            Community.workspace_id == w.id, Community.method != "noderag",
            Community.id.not_in(marked)))}  # type: ignore[attr-defined]
    ctx = make_context(store, w, settings, embedder=embedder)
    # the reports stage rewrites the reports of leiden, hirag and attributed communities; the augment stage redoes
    # NodeRAG's communities (and their reports) over the merged graph
    assert list(run_build(ctx, create_run(store, w, settings).id, only=["reports", "augment"]))[-1].status == "done"
    assert stale_ids(store, w.id) == set()
    with store.session() as s:
        after = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == w.id))}
    kept = store.nodes_by_id(w.id, [row.kept_id])[row.kept_id]
    # the stale reports were rewritten from the merged members (the merged name is an alias of the kept entity now);
    # a marked community of a method without reports (its wcc component) only lost its mark
    from core.pipeline.report_material import REPORTED

    assert {after[c].method for c in marked if c in after} - set(REPORTED) <= {"wcc", "noderag"}
    assert "wcc" in {after[c].method for c in marked if c in after}
    assert all(after[c].summary and after[c].report for c in marked if c in after and after[c].method in REPORTED)
    assert all(not after[c].summary for c in marked if c in after and after[c].method == "wcc")
    # only NodeRAG's communities are detected again (a marked one may be replaced by its re-detected successor)
    assert {c for c in marked if c not in after} <= noderag_before
    assert any(c.method == "noderag" for c in after.values())
    assert any(after[c].report != before[c] for c in marked if c in after)
    assert "Ashby Fen" in kept.title and row.merged_id not in after
    assert all(after[c].report == r for c, r in untouched.items()), "reports of other communities are kept"


def test_mark_stale_marks_every_method_and_level_holding_an_entity(ws):
    _, store, w, _, _ = ws
    with store.session() as s:
        eid = s.exec(select(Node.id).where(Node.workspace_id == w.id, Node.kind == "entity", Node.layer == 0)
                     .order_by(Node.weight.desc())).first()  # type: ignore[attr-defined]
        methods = {(c.method, c.level) for c in s.exec(select(Community).where(
            Community.id.in_(holders(store, w.id, [eid]))))}  # type: ignore[attr-defined]
    assert {"wcc", "leiden", "attributed"} <= {m for m, _ in methods} and len(methods) >= 4
    cids = mark_stale(store, w.id, [eid])
    assert set(cids) == holders(store, w.id, [eid]) == stale_ids(store, w.id)
    assert rv.stale_reasons(store, w.id, cids[0]) == ["its members changed"]
    assert not is_stale(Community(id="x", workspace_id=w.id, method="leiden", level=0)) and is_stale({"stale": True})


def test_every_strategy_answers_after_merges_without_a_merged_away_entity(ws):
    from core.pipeline.factory import make_backend
    from core.retrieval.base import strategy_names
    from core.workspace import ask, open_resources

    settings, store, w, index, embedder = ws
    rows = rv.filter_rows(rv.merge_table(store, w.id), "candidate")
    assert rv.accept_all(store, w.id, rows, index, embedder)[0] == len(rows)
    gone = {r.merged_id for r in rows}
    res = open_resources(store, store.require_workspace(w.name), settings, embedder)
    backend = make_backend(settings, store)
    for name in strategy_names():
        for q in ("Who owns Ashby Fen Farm and what grows there?", "What became of the Harbour Hall?"):
            r, a = ask(res, backend, q, name)
            seen = {it.id for items in r.sections.values() for it in items} | {p.id for p in r.path_nodes}
            assert a.text and not seen & gone, (name, q, seen & gone)
            if name == "graphrag-global":  # sources only from communities whose report gave a point rated above 0
                assert bool(r.sources) == bool(r.trace["counts"]["points_kept"]), r.trace
            else:
                assert r.sources, (name, q)
