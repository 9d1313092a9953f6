"""core/explore/connect.py and neighbours.py on the built sample (a private copy of the session's `sample_built`):
"How are X and Y connected?" gives shortest paths whose every step is in the store (a relationship between the two
entities, or a passage of the document mentioning the entity), as short as a breadth-first search over the same
graph built here from plain SQL finds, and the documents that mention both; a community's documents are counted as
SQL counts them; an entity's neighbourhood is the entities at the other end of its relationships (not only its
direct edges), with its communities and documents. Everything reads within the workspace: the same ids asked in
another workspace find nothing."""

from __future__ import annotations

from collections import deque

import pytest
from sqlalchemy import text

from core.explore.connect import community_documents, connect, entity_documents, path_graph
from core.explore.explore_index import compute_index
from core.explore.find import best_entity
from core.explore.neighbours import around
from tests.stores import copy_database


@pytest.fixture(scope="module")
def sample(tmp_path_factory, sample_built):
    store = copy_database(sample_built.settings.storage.db_url, tmp_path_factory.mktemp("strata_connect"))
    ws = store.require_workspace("sample")
    other = store.create_workspace("other")  # empty: the sample's ids asked here find nothing
    ix = compute_index(store, ws.id)
    return store, ws.id, other.id, ix, entity_documents(store, ws.id, ix)


def _q(store, sql: str, **params) -> list:
    with store.session() as s:
        return list(s.connection().execute(text(sql), params))


def _by_sql(store, ws: int):
    """The path graph built independently: relationships between layer-0 entities, and document—entity mentions."""
    real = {i for (i,) in _q(store, "SELECT id FROM node WHERE workspace_id=:ws AND kind='entity' AND layer=0", ws=ws)}
    rel = {frozenset((a, b)) for a, b in _q(
        store, "SELECT s.dst, o.dst FROM edge s JOIN edge o ON o.src = s.src AND o.workspace_id = s.workspace_id "
               "WHERE s.workspace_id=:ws AND s.kind='subject' AND o.kind='object'", ws=ws)
        if a in real and b in real and a != b}
    passages: dict[tuple[str, str], int] = {}
    for ent, doc in _q(store, "SELECT e.dst, n.document_id FROM edge e JOIN node n ON n.id = e.src WHERE "
                              "e.workspace_id=:ws AND e.kind='mentions' AND n.kind='chunk'", ws=ws):
        passages[(ent, doc)] = passages.get((ent, doc), 0) + 1
    adj: dict[str, set[str]] = {}
    for pair in rel:
        a, b = tuple(pair)
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    for ent, doc in passages:
        if ent in real:
            adj.setdefault(ent, set()).add("doc:" + doc)
            adj.setdefault("doc:" + doc, set()).add(ent)
    return rel, passages, adj


def _distance(adj: dict[str, set[str]], a: str, b: str) -> int | None:
    seen, todo = {a: 0}, deque([a])
    while todo:
        x = todo.popleft()
        if x == b:
            return seen[x]
        for y in adj.get(x, ()):
            if y not in seen:
                seen[y] = seen[x] + 1
                todo.append(y)
    return None


def test_paths_are_real_and_shortest_and_shared_documents_listed(sample):
    store, ws, _other, ix, ed = sample
    rel, passages, adj = _by_sql(store, ws)
    docs = {d for (d,) in _q(store, "SELECT id FROM document WHERE workspace_id=:ws", ws=ws)}
    pairs = [("Amara Okafor", "Carrow Gold"), ("Amara Okafor", "Port Halden"), ("Ingrid Solberg", "Meren Viaduct")]
    for x, y in pairs:
        a, b = best_entity(store, ws, x), best_entity(store, ws, y)
        assert a is not None and b is not None and a.title == x and b.title == y
        con = connect(store, ws, ed, a.id, b.id, k=4)
        assert con is not None and con.paths, (x, y)
        assert con.hops == _distance(adj, a.id, b.id)  # as short as a breadth-first search finds
        assert len(con.paths) <= 4 and [p.hops for p in con.paths] == sorted(p.hops for p in con.paths)
        assert all(p.hops <= con.hops + 1 for p in con.paths)
        assert len({tuple(p.ids) for p in con.paths}) == len(con.paths)
        for p in con.paths:
            assert p.ids[0] == a.id and p.ids[-1] == b.id and len(set(p.ids)) == len(p.ids)
            for step, kind in zip(p.steps, zip(p.kinds, p.kinds[1:])):
                if step.kind == "relationship":
                    assert kind == ("entity", "entity") and frozenset((step.src, step.dst)) in rel
                else:
                    ent, doc = (step.src, step.dst) if kind[0] == "entity" else (step.dst, step.src)
                    assert doc in docs and passages[(ent, doc)] == int(step.label.split()[0])
            drawn = path_graph(store, ws, p)  # drawn small: on a line, each step labelled
            assert [n.id for n in drawn.nodes] == p.ids and len({n.y for n in drawn.nodes}) == 1
            assert [e.label for e in drawn.edges] == [s.label for s in p.steps] and all(e.shown for e in drawn.edges)
        both = {d for (e, d) in passages if e == a.id} & {d for (e, d) in passages if e == b.id}
        assert {d for d, _t, _pa, _pb in con.shared} == both
        assert all((pa, pb) == (passages[(a.id, d)], passages[(b.id, d)]) for d, _t, pa, pb in con.shared)
    assert connect(store, ws, ed, "no such id", a.id) is None


def test_community_documents_count_as_sql_does(sample):
    store, ws, _other, ix, ed = sample
    got = community_documents(ed)
    want = dict(_q(store, "SELECT m.dst, count(DISTINCT n.document_id) FROM edge m JOIN edge e ON e.dst = m.src AND "
                          "e.workspace_id = m.workspace_id AND e.kind = 'mentions' JOIN node n ON n.id = e.src AND "
                          "n.kind = 'chunk' JOIN node x ON x.id = m.src AND x.kind = 'entity' WHERE m.workspace_id=:ws "
                          "AND m.kind='in_community' GROUP BY m.dst", ws=ws))
    assert {c: int(got[i]) for i, c in enumerate(ix.comm_ids)} == {c: want.get(c, 0) for c in ix.comm_ids}
    assert got.max() > 1


def test_an_entitys_neighbourhood_is_its_related_entities(sample):
    store, ws, _other, ix, ed = sample
    amara = best_entity(store, ws, "Amara Okafor")
    related = {o for (o,) in _q(store, "SELECT o.dst FROM edge e JOIN edge o ON o.src = e.src AND o.workspace_id = "
                                       "e.workspace_id AND o.kind IN ('subject', 'object') AND o.dst != e.dst WHERE "
                                       "e.workspace_id=:ws AND e.dst=:id AND e.kind IN ('subject', 'object')",
                                ws=ws, id=amara.id)}
    assert len(related) > 10
    hood = around(store, ws, amara.id, ("entity", "community", "document"), 500)
    assert hood.focus_kind == "entity" and hood.found["related entities"] == len(related)
    kinds = dict(_q(store, "SELECT id, kind FROM node WHERE workspace_id=:ws", ws=ws))
    assert related <= set(hood.ids)
    assert {kinds.get(i, "community or document") for i in hood.ids} <= {"entity", "community or document"}
    assert hood.found["communities"] > 0 and hood.found["documents"] > 0
    capped = around(store, ws, amara.id, ("entity", "community", "document"), 20)
    assert len(capped.ids) == 20 and capped.ids[:12] == hood.ids[:12]  # related entities first, the rest still drawn
    assert any(i not in related for i in capped.ids)


def test_another_workspace_finds_nothing_of_this_one(sample):
    store, ws, other, ix, ed = sample
    amara = best_entity(store, ws, "Amara Okafor")
    assert best_entity(store, other, "Amara Okafor") is None
    assert around(store, other, amara.id, ("entity", "community", "document"), 50).ids == []
    elsewhere = entity_documents(store, other, ix)  # the sample's index, read against the other workspace's rows
    assert elsewhere.passages.nnz == 0 and not community_documents(elsewhere).any()
    assert path_graph(store, other, connect(store, ws, ed, amara.id, best_entity(store, ws, "Carrow Gold").id)
                      .paths[0]).nodes == []
