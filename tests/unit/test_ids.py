"""Ids from content alone (core/ids.py), and the workspaces from before them that keep their salted ids."""

from __future__ import annotations

from sqlalchemy import text

from core.ids import IdScope, local_id, scope_of
from core.store import Store, content_id


def test_an_id_names_its_content_then_its_workspace():
    one, two = IdScope(1), IdScope(2)
    a, b = one.id("entity", "marie curie"), two.id("entity", "marie curie")
    assert a != b and local_id(a) == local_id(b) == content_id("entity", "marie curie")
    assert a.endswith("~1") and b.endswith("~2")
    # ids of one workspace sort as their content does, whatever the workspace's number
    names = [f"name {i}" for i in range(50)]
    for scope in (IdScope(3), IdScope(12), IdScope(100)):
        assert [local_id(i) for i in sorted(scope.id("entity", n) for n in names)] == sorted(
            content_id("entity", n) for n in names)


def test_a_salted_scope_makes_the_ids_it_always_made():
    old = IdScope(7, salted=True)
    assert old.id("entity", "x") == content_id("7", "entity", "x")
    assert local_id(old.id("entity", "x")) == old.id("entity", "x")


def test_a_workspace_from_an_older_database_keeps_salted_ids(tmp_path):
    db = tmp_path / "strata.db"
    store = Store(db)
    ws = store.create_workspace("old")
    assert not scope_of(ws).salted, "a new workspace makes content ids"
    with store.engine.connect() as conn:  # the database as the code before content-only ids left it
        conn.execute(text('ALTER TABLE workspace DROP COLUMN "salted_ids"'))
        conn.commit()
    store.close()
    again = Store(db)
    old = again.require_workspace("old")
    assert scope_of(old).salted and scope_of(old).id("x") == content_id(str(old.id), "x")
    new = again.create_workspace("new")
    assert not scope_of(new).salted and scope_of(new).id("x") == f"{content_id('x')}~{new.id}"
