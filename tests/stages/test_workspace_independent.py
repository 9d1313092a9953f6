"""A graph depends on its documents only, not on the workspace it is built in.

One corpus built into workspaces 1 and 2 of one home, and into a workspace of another home, gives the same nodes, edges,
communities and vectors, exactly (tests/snapshots.py reads every id without its workspace part). Before ids were made
from content alone (core/ids.py) the workspace's number salted every id, and the orders and ties that follow ids made
two workspaces of one corpus differ by dozens of entities and communities."""

from __future__ import annotations

from sqlmodel import select

from core.ids import local_id
from core.models import Node
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.snapshots import differences, full_snapshot


def test_one_corpus_in_two_workspaces_and_two_homes_is_one_graph(tmp_path, embedder, sample_built):
    first = build_workspace(tmp_path / "home", [SAMPLE_DIR], embedder, name="first")
    second = build_workspace(tmp_path / "home", [SAMPLE_DIR], embedder, name="second", settings=first.settings)
    assert first.ws.id != second.ws.id, "two workspaces of one database"
    snaps = [full_snapshot(b.store, b.ws, b.settings, embedder.name) for b in (first, second, sample_built)]
    assert len(snaps[0]["nodes"]) > 500 and len(snaps[0]["communities"]) > 20 and len(snaps[0]["vectors"]) > 500
    assert not differences(snaps[0], snaps[1]), "two workspaces of one home"
    assert not differences(snaps[1], snaps[2]), "two homes"
    # the stored ids still differ: a database holds both workspaces
    ids = [{n[0] for n in s["nodes"]} for s in snaps[:2]]
    assert ids[0] == ids[1]
    with first.store.session() as s:
        stored = s.exec(select(Node.id, Node.workspace_id)).all()
    by_ws: dict[int, set[str]] = {}
    for nid, wid in stored:
        by_ws.setdefault(wid, set()).add(nid)
    assert not by_ws[first.ws.id] & by_ws[second.ws.id]
    assert {local_id(i) for i in by_ws[first.ws.id]} == {local_id(i) for i in by_ws[second.ws.id]}
