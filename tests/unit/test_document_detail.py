"""Issue 39 §3: a document opened from the Workspaces page (core/explore/document_detail.py): its text, the entities
its passages mention (which it introduced, which only it mentions), the communities they fall in, what it
contributed; an id of another workspace opens nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from core.explore.document_detail import document_detail
from core.models import Community, Document, Edge, Node
from core.store import Store

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _graph(tmp_path):
    store = Store(tmp_path / "t.db")
    ws, other = store.create_workspace("w"), store.create_workspace("other")
    rows: list = []
    for i, (doc, text) in enumerate((("d1", "Anna Benson married Kris Benson."),
                                     ("d2", "Kris Benson pitched for the *Pittsburgh Pirates* <b>."))):
        rows.append(Document(id=doc, workspace_id=ws.id, content_hash=doc, title=f"Doc {doc}", filename=f"{doc}.txt",
                             mime="text/plain", n_chars=len(text), text=text, created_at=T0 + timedelta(minutes=i)))
    rows.append(Document(id="x1", workspace_id=other.id, content_hash="x1", title="Secret", filename="s.txt",
                         mime="text/plain", n_chars=6, text="secret", created_at=T0))
    for name in ("anna", "kris", "pirates"):
        rows.append(Node(id=name, workspace_id=ws.id, kind="entity", title=name.capitalize(), type="PERSON"))
    chunks = {"d1": ["c11", "c12"], "d2": ["c21"]}
    for doc, cs in chunks.items():
        for k, c in enumerate(cs):
            rows.append(Node(id=c, workspace_id=ws.id, kind="chunk", text=c, document_id=doc, ord=k))
    rows += [Node(id="s1", workspace_id=ws.id, kind="statement", document_id="d2", ord=0, text="s"),
             Node(id="r1", workspace_id=ws.id, kind="relationship", title="Kris — played for — Pirates")]
    edges = [("c11", "anna", "mentions"), ("c11", "kris", "mentions"), ("c12", "anna", "mentions"),
             ("c21", "kris", "mentions"), ("c21", "pirates", "mentions"), ("r1", "c21", "derived_from"),
             ("s1", "c21", "derived_from"), ("kris", "L1", "in_community"), ("pirates", "L1", "in_community"),
             ("anna", "L2", "in_community"), ("kris", "W1", "in_community")]
    rows += [Edge(workspace_id=ws.id, src=a, dst=b, kind=k) for a, b, k in edges]
    rows += [Community(id="L1", workspace_id=ws.id, method="leiden", level=0, size=2, title="Baseball"),
             Community(id="L2", workspace_id=ws.id, method="leiden", level=0, size=1, title="Anna"),
             Community(id="W1", workspace_id=ws.id, method="wcc", level=0, size=3, title="component")]
    with store.session() as s:
        s.add_all(rows)
        s.commit()
    return store, ws, other


def test_a_document_with_its_entities_communities_and_contribution(tmp_path):
    store, ws, _ = _graph(tmp_path)
    d = document_detail(store, ws.id, "d2")
    assert (d.title, d.text, d.chunks, d.statements, d.relationships) == (
        "Doc d2", "Kris Benson pitched for the *Pittsburgh Pirates* <b>.", 1, 1, 1)
    assert [(e.id, e.passages, e.documents, e.introduced) for e in d.entities] == [
        ("kris", 1, 2, False), ("pirates", 1, 1, True)], "Kris was named first by d1"
    assert [e.id for e in d.introduced] == ["pirates"] and [e.id for e in d.only_here] == ["pirates"]
    assert [(c.id, c.members_here) for c in d.communities] == [("L1", 2)], "wcc components are not communities"

    first = document_detail(store, ws.id, "d1")
    assert [(e.id, e.passages, e.introduced) for e in first.entities] == [("anna", 2, True), ("kris", 1, True)]
    assert [e.id for e in first.only_here] == ["anna"]
    assert [(c.id, c.members_here) for c in first.communities] == [("L2", 1), ("L1", 1)]


def test_an_id_of_another_workspace_or_none_opens_nothing(tmp_path):
    store, ws, other = _graph(tmp_path)
    assert document_detail(store, ws.id, "x1") is None
    assert document_detail(store, other.id, "d1") is None
    assert document_detail(store, ws.id, "nope") is None
    bare = document_detail(store, other.id, "x1")
    assert bare is not None and (bare.chunks, bare.entities, bare.communities) == (0, [], [])
