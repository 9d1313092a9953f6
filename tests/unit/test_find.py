"""core/explore/find.py: the Graph page's search ranks the exact name of a real entity first, then names starting with
it, then other names holding it, near spellings last; HiRAG summary entities ("X — y", layer >= 1) only when the
layers asked for include theirs, and counted when hidden; LIKE's wildcards in a name are plain characters; nothing
of another workspace is found. On a small hand-built graph, then on the built sample (issue 39: "Benson" opened
"Benson — january" while the people ranked 18th-21st)."""

from __future__ import annotations

import pytest
from sqlmodel import select

from core.explore.details import search_nodes
from core.explore.find import best_entity, search_names, similarity, tier_of
from core.models import Community, Document, Node
from core.store import Store

ENTITIES = [  # id, title, layer, weight: the summaries are the heaviest, as HiRAG's summaries of a name are
    ("kb", "Kris Benson", 0, 5), ("ab", "Anna Benson", 0, 4), ("b", "Benson", 0, 1), ("bh", "Bensonhurst", 0, 2),
    ("s1", "Benson — january", 1, 30), ("s2", "Anna Benson — baseball", 1, 20), ("s3", "Benson — wives", 2, 25),
    ("pc", "50% Club", 0, 1), ("px", "500 Club", 0, 9), ("ok", "Amara Okafor", 0, 3),
]


@pytest.fixture
def g(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("w")
    other = store.create_workspace("other")
    with store.session() as s:
        for i, t, lv, w in ENTITIES:
            s.add(Node(id=i, workspace_id=ws.id, kind="entity", title=t, text="", type="PERSON", layer=lv, weight=w))
        s.add(Node(id="x", workspace_id=other.id, kind="entity", title="Benson", text="", layer=0, weight=99))
        s.add(Community(id="c", workspace_id=ws.id, method="leiden", level=0, size=7, title="Benson, Anna Benson"))
        s.add(Community(id="w", workspace_id=ws.id, method="wcc", level=0, size=7, title="Benson component"))
        s.add(Document(id="d", workspace_id=ws.id, content_hash="d", title="Benson", filename="benson.md",
                       mime="text/markdown", n_chars=4, text="text"))
        s.commit()
    return store, ws.id


def ids(found) -> list[str]:
    return [m.id for m in found.matches]


def test_tiers_by_hand():
    assert tier_of("benson", "Benson") == 0
    assert tier_of("benson", "  BENSON ") == 0
    assert tier_of("benson", "Bensonhurst") == 1
    assert tier_of("benson", "Kris Benson") == 1  # a word starts with it
    assert tier_of("anna ben", "Anna Benson") == 1
    assert tier_of("enso", "Kris Benson") == 2
    assert tier_of("okafur", "Amara Okafor") is None
    assert similarity("okafur", "Amara Okafor") >= 0.8 > similarity("okafur", "Kris Benson")


def test_exact_then_prefix_then_words_then_fuzzy_and_summaries_hidden(g):
    store, ws = g
    found = search_names(store, ws, "Benson")
    # the exact name: the entity, then the document of that title; then the names with a word starting with it,
    # entities first (the most mentioned first), then the community
    assert ids(found) == ["b", "d", "kb", "ab", "bh", "c"]
    assert found.hidden == 3  # s1, s2, s3: summary entities, not searched without their layer
    assert "x" not in ids(found) and "w" not in ids(found)  # another workspace's entity; a WCC component
    # the HiRAG-layer filter asks for them: then only those layers are searched
    assert ids(search_names(store, ws, "Benson", layers=(1,))) == ["d", "s1", "s2", "c"]
    assert ids(search_names(store, ws, "benson", layers=(0, 1, 2)))[:2] == ["b", "d"]
    assert search_names(store, ws, "Benson", layers=(0, 1, 2)).hidden == 0
    # a typo: no name holds it, a near spelling is found
    assert ids(search_names(store, ws, "Okafur")) == ["ok"] and search_names(store, ws, "Okafur").matches[0].tier == 3
    assert ids(search_names(store, ws, "  ")) == []


def test_wildcards_are_characters_and_the_helpers_agree(g):
    store, ws = g
    assert ids(search_names(store, ws, "50%")) == ["pc"]  # not "500 Club", heavier, which "50%" would match in LIKE
    assert ids(search_names(store, ws, "_0")) == []
    assert [r[0] for r in search_nodes(store, ws, "Benson")] == ids(search_names(store, ws, "Benson"))
    assert best_entity(store, ws, "anna benson").id == "ab"
    assert best_entity(store, ws + 1, "Anna Benson") is None  # the other workspace has no Anna Benson


def test_on_the_sample_the_person_comes_before_its_summaries(sample_built):
    _settings, store, ws, _emb = sample_built
    with store.session() as s:
        rows = s.exec(select(Node.id, Node.title, Node.layer).where(Node.workspace_id == ws.id,
                                                                    Node.kind == "entity")).all()
    person = next(i for i, t, lv in rows if t == "Amara Okafor" and lv == 0)
    summaries = [i for i, t, lv in rows if lv > 0 and "okafor" in t.lower()]
    assert summaries, "the sample's HiRAG layers summarize Amara Okafor"
    for query in ("Amara Okafor", "amara okafor", "Okafor", "Amara Okafr"):
        found = search_names(store, ws.id, query)
        assert found.matches[0].id == person, (query, found.matches[:3])
        assert not set(ids(found)) & set(summaries)
    found = search_names(store, ws.id, "Okafor")
    assert found.hidden == len(summaries)
    layers = sorted({lv for _, _, lv in rows if lv > 0})
    assert set(summaries) <= set(ids(search_names(store, ws.id, "Okafor", layers=tuple(layers), limit=100)))
