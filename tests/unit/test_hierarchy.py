"""Hierarchy frames and community details (core/explore/hierarchy.py) on a small hand-made store: two Leiden levels,
an attributed hierarchy whose sizes do not add up, HiRAG summary layers with soft membership, provenance."""

from __future__ import annotations

import json

import pytest

from core.explore.community_detail import community_detail
from core.explore.hierarchy import (
    ENTITIES,
    MORE,
    ROOT,
    frame_signature,
    hierarchy_frame,
    hirag_frame,
)
from core.models import Community, Document, Edge, Node
from core.store import Store
from ui.hierarchy_chart import MORE as MORE_FILL
from ui.hierarchy_chart import PALETTE, SELECTION, hierarchy_chart
from ui.hierarchy_chart import ROOT as ROOT_FILL

TITLE_A = "Harbour <works> & *gates*"
LEIDEN = {  # id: (level, parent, members)
    "A": (0, None, "abcd"), "B": (0, None, "efgh"),
    "A1": (1, "A", "ab"), "A2": (1, "A", "cd"), "B1": (1, "B", "efgh"),
}
ATTRIBUTED = {"X": (0, None, "abcdefgh"), "Y1": (1, "X", "abcde"), "Y2": (1, "X", "defgh")}  # 5 + 5 > 8
MENTIONS = [("c1", "a"), ("c1", "b"), ("c2", "a"), ("c2", "c"), ("c3", "a"), ("c3", "e"), ("c4", "d"), ("c4", "f")]
CHUNK_DOC = {"c1": "d1", "c2": "d1", "c3": "d2", "c4": "d3"}
RELS = {"r1": ("a", "b"), "r2": ("a", "e"), "r3": ("c", "d"), "r4": ("b", "c")}
SUMMARIZES = [  # (member, summary, weight): S2 takes d as well (soft); S2 belongs to T (0.9) and T2 (0.4)
    *[(m, "S1", 1.0) for m in "abcd"], *[(m, "S2", 1.0) for m in "efghd"],
    ("S1", "T", 1.0), ("S2", "T", 0.9), ("S2", "T2", 0.4),
]


@pytest.fixture
def hs(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("h")
    w = ws.id
    with store.session() as s:
        for d in ("d1", "d2", "d3"):
            s.add(Document(id=d, workspace_id=w, content_hash=d, title=f"Doc {d}", filename=f"{d}.txt",
                           mime="text/plain", n_chars=20, text=f"text of {d}"))
        for c, d in CHUNK_DOC.items():
            s.add(Node(id=c, workspace_id=w, kind="chunk", text=f"chunk {c}", document_id=d))
            s.add(Edge(workspace_id=w, src=c, dst=d, kind="derived_from"))
        s.add(Node(id="st1", workspace_id=w, kind="statement", text="a statement", document_id="d3"))
        s.add(Edge(workspace_id=w, src="st1", dst="a", kind="mentions"))  # statements are not counted twice
        for i, e in enumerate("abcdefgh"):
            s.add(Node(id=e, workspace_id=w, kind="entity", title=f"Entity {e.upper()}", type="PERSON",
                       text=f"about {e}", weight=10.0 - i))
        for r, (a, b) in RELS.items():
            s.add(Node(id=r, workspace_id=w, kind="relationship", title=f"{a} — knows — {b}", type="knows",
                       weight=1.0))
            s.add(Edge(workspace_id=w, src=r, dst=a, kind="subject"))
            s.add(Edge(workspace_id=w, src=r, dst=b, kind="object"))
        for c, e in MENTIONS:
            s.add(Edge(workspace_id=w, src=c, dst=e, kind="mentions"))
        s.add(Node(id="at1", workspace_id=w, kind="attribute", title="Attribute of A", text="a is important"))
        s.add(Edge(workspace_id=w, src="a", dst="at1", kind="has_attribute"))
        s.add(Node(id="hl1", workspace_id=w, kind="high_level", title="High-level of A", text="overall"))
        s.add(Edge(workspace_id=w, src="hl1", dst="A", kind="derived_from"))
        s.add(Node(id="ov1", workspace_id=w, kind="overview", title="Overview of A", text="keywords"))
        s.add(Edge(workspace_id=w, src="hl1", dst="ov1", kind="has_overview"))
        for method, rows in (("leiden", LEIDEN), ("attributed", ATTRIBUTED)):
            for cid, (level, parent, members) in rows.items():
                report = {"title": cid, "summary": f"summary of {cid}", "rating": 7.5, "keywords": ["k1"],
                          "findings": [{"summary": "minor", "explanation": "m", "importance": 2},
                                       {"summary": "major", "explanation": "M", "importance": 9}]}
                s.add(Community(id=cid, workspace_id=w, method=method, level=level, parent_id=parent,
                                size=len(members), title=TITLE_A if cid == "A" else f"Community {cid}",
                                summary=f"summary of {cid}", report=report, data={"layer": level + 1}))
                for m in members:
                    s.add(Edge(workspace_id=w, src=m, dst=cid, kind="in_community"))
        for sid, layer in (("S1", 1), ("S2", 1), ("T", 2), ("T2", 2)):
            s.add(Node(id=sid, workspace_id=w, kind="entity", title=f"Summary {sid}", type="SUMMARY",
                       text=f"summary entity {sid}", layer=layer, weight=5.0))
        for m, sid, wt in SUMMARIZES:
            s.add(Edge(workspace_id=w, src=m, dst=sid, kind="summarizes", weight=wt))
        s.commit()
    return store, w


def _check_tree(frame):
    ids = [x.id for x in frame.sectors]
    assert len(ids) == len(set(ids))
    roots = [x for x in frame.sectors if x.parent == ""]
    assert len(roots) == 1 and roots[0].id == ROOT + frame.method
    known = set(ids)
    assert all(x.parent in known for x in frame.sectors if x.parent)
    for x in frame.sectors:  # a parent is never smaller than its drawn children (their shares never overflow it)
        below = sum(c.value for c in frame.sectors if c.parent == x.id)
        assert x.value >= below - 1e-9 and x.value > 0


def test_leiden_frame_one_sector_per_community_under_one_root(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "leiden")
    _check_tree(f)
    comm = {x.id: x for x in f.sectors if x.kind == "community"}
    assert set(comm) == set(LEIDEN)
    for cid, (level, parent, members) in LEIDEN.items():
        assert comm[cid].parent == (parent or ROOT + "leiden")
        assert comm[cid].level == level and comm[cid].size == len(members) and comm[cid].target == cid
    assert f.total == f.shown == 5 and f.per_level == {0: 2, 1: 3} and not f.note
    root = f.sectors[0]
    assert root.value == comm["A"].value + comm["B"].value == 8
    assert comm["A"].label == TITLE_A  # the raw title: escaping is the figure's job
    assert [x.id for x in f.choices()][:2] in (["A", "B"], ["B", "A"])  # coarse levels first


def test_values_stay_valid_when_children_outgrow_their_parent(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "attributed")
    _check_tree(f)
    x = next(s for s in f.sectors if s.id == "X")
    assert x.size == 8 and x.value == 10  # Y1 + Y2 = 5 + 5: the parent grows to hold them


def test_cap_groups_the_rest_as_n_more_and_keeps_areas(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "leiden", max_sectors=4)
    _check_tree(f)
    assert len(f.sectors) - 1 <= 4
    assert f.shown < f.total == 5 and f.note.startswith(f"Drawing {f.shown} of 5 communities (cap 4)")
    more = [s for s in f.sectors if s.kind == "more"]
    assert more, [s.id for s in f.sectors]
    for m in more:
        parent = m.parent.removeprefix(MORE)
        drawn = {s.id for s in f.sectors if s.parent == parent and s.kind == "community"}
        rest = [cid for cid, (_, p, _) in LEIDEN.items() if (p or ROOT + "leiden") == parent and cid not in drawn]
        assert m.size == sum(len(LEIDEN[c][2]) for c in rest) and m.label == f"{len(rest)} more"
        assert m.target == (None if parent.startswith(ROOT) else parent)
    # one child per parent at most (the first ring may take a quarter of the budget): A's first child only
    g = hierarchy_frame(store, w, "leiden", max_children=1)
    _check_tree(g)
    assert {s.id for s in g.sectors if s.kind == "community"} == {"A", "B", "A1", "B1"}
    assert {s.id: s.size for s in g.sectors if s.kind == "more"} == {MORE + "A": 2}
    h = hierarchy_frame(store, w, "leiden", max_sectors=4, max_children=1)  # a ring of one: B waits in "1 more"
    _check_tree(h)
    assert [s.id for s in h.sectors if s.kind == "community"] == ["A", "A1"]
    assert {s.id: s.size for s in h.sectors if s.kind == "more"} == {MORE + ROOT + "leiden": 4, MORE + "A": 2}


def test_a_community_whose_parent_is_not_stored_yet_hangs_from_the_root(hs):
    store, w = hs
    with store.session() as s:
        s.add(Community(id="Z", workspace_id=w, method="leiden", level=2, parent_id="not-written-yet", size=3))
        s.commit()
    f = hierarchy_frame(store, w, "leiden")
    _check_tree(f)
    assert next(x for x in f.sectors if x.id == "Z").parent == ROOT + "leiden"
    assert f.total == 6 and f.per_level[2] == 1


def test_hirag_frame_top_summaries_at_the_root_and_entity_counts_as_leaves(hs):
    store, w = hs
    f = hirag_frame(store, w)
    _check_tree(f)
    by = {x.id: x for x in f.sectors}
    assert {x.id for x in f.sectors if x.kind == "summary"} == {"S1", "S2", "T", "T2"}
    assert by["T"].parent == by["T2"].parent == ROOT + "hirag_layers"
    assert by["S1"].parent == "T" and by["S2"].parent == "T"  # S2's strongest summary is T (0.9 over 0.4)
    assert by[ENTITIES + "S1"].size == 4 and by[ENTITIES + "S2"].size == 5  # d is summarized twice (soft)
    assert by[ENTITIES + "S2"].target == "S2" and by[ENTITIES + "S2"].kind == "entities"
    assert by["T"].size == 9 and by["T"].value == 9
    assert f.per_level == {1: 2, 2: 2} and f.total == 4 and f.shown == 4
    assert hierarchy_frame(store, w, "hirag_layers").sectors == f.sectors


def test_empty_method_gives_an_empty_frame(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "wcc")
    assert f.sectors == [] and f.total == 0


def test_chart_carries_document_text_as_data_never_as_markup(hs):
    """Vega draws labels as text and its tooltip escapes HTML: the chart's data holds the raw title (no entity
    escaping to read back as "&lt;"), and the title reaches the spec nowhere but as a data value."""
    store, w = hs
    f = hierarchy_frame(store, w, "leiden")
    for view, mark in (("sunburst", "arc"), ("treemap", "rect"), ("icicle", "rect")):
        spec = hierarchy_chart(f, view).to_dict()
        (rows,) = spec["datasets"].values()
        assert spec["layer"][0]["mark"]["type"] == mark and spec["layer"][1]["mark"]["type"] == "text"
        assert [r["id"] for r in rows] == [x.id for x in f.sectors]  # every sector drawn, in the frame's order
        a = next(r for r in rows if r["id"] == "A")
        assert a["title"] == TITLE_A and a["where"] == "level 0" and a["members"] == "4"
        assert a["about"] == f"{TITLE_A} · level 0 · 4 members"  # the mark's aria-label
        assert "&lt;" not in json.dumps(rows)
        without_data = json.dumps({k: v for k, v in spec.items() if k != "datasets"})
        assert "works" not in without_data and "Harbour" not in without_data
        assert spec["layer"][1]["encoding"]["text"] == {"field": "label", "type": "nominal"} or \
            spec["layer"][1]["encoding"]["text"]["condition"]["field"] == "label"  # labels come from the data


def test_chart_colours_branches_apart_and_lighter_with_depth(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "leiden", max_sectors=4)  # A, B and their children, one "N more" at least
    (rows,) = hierarchy_chart(f, "icicle").to_dict()["datasets"].values()
    colour = {r["id"]: r["colour"] for r in rows}
    kinds = {x.id: x.kind for x in f.sectors}
    assert colour[ROOT + "leiden"] == ROOT_FILL
    assert colour["A"] != colour["B"] and colour["A"] in PALETTE and colour["B"] in PALETTE
    more = [i for i, k in kinds.items() if k == "more"]
    assert more and all(_lighter(MORE_FILL, colour[i]) for i in more)  # grey, lighter deeper
    assert len({colour[i][1:3] for i in more} | {colour[i][3:5] for i in more} | {colour[i][5:] for i in more}) == 1
    for x in f.sectors:
        if x.kind == "community" and x.parent in ("A", "B"):  # a child: its branch's hue, lighter
            assert _lighter(colour[x.parent], colour[x.id]) and colour[x.id] != colour[x.parent]


def _lighter(base: str, other: str) -> bool:
    """Whether `other` is `base` mixed with white (every channel at least as high, the hue kept)."""
    b, o = ([int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in (base, other))
    if not all(y >= x for x, y in zip(b, o)):
        return False
    return all(abs((255 - y) * (255 - b[0]) - (255 - x) * (255 - o[0])) <= 255 * 3 for x, y in zip(b, o))


def test_chart_selects_a_sector_by_its_id(hs):
    store, w = hs
    f = hierarchy_frame(store, w, "leiden")
    spec = hierarchy_chart(f, "sunburst").to_dict()
    (param,) = spec["params"]
    assert param["name"] == SELECTION and param["select"] == {"type": "point", "fields": ["id"]}
    assert "params" not in hierarchy_chart(f, "sunburst", select=False).to_dict()


def test_signature_changes_as_levels_are_written(hs):
    store, w = hs
    before = frame_signature(store, w, "leiden")
    assert before == frame_signature(store, w, "leiden") and hash(before)
    with store.session() as s:
        s.add(Community(id="A1a", workspace_id=w, method="leiden", level=2, parent_id="A1", size=1))
        s.commit()
    assert frame_signature(store, w, "leiden") != before
    born, *layers = frame_signature(store, w, "hirag_layers")
    assert tuple(layers) == ((1, 2, len("Summary S1") * 2), (2, 2, len("Summary T") * 2 + 1))
    created = store.require_workspace("h").created_at.replace(tzinfo=None)
    assert str(born).startswith(str(created)), "the workspace's creation: one made again under its name differs"


def test_community_detail_groups_members_by_kind_and_ranks_documents(hs):
    store, w = hs
    d = community_detail(store, w, "A")
    assert d.kind == "community" and d.method == "leiden" and d.level == 0 and d.size == 4
    assert d.title == TITLE_A and d.summary == "summary of A" and d.report["rating"] == 7.5
    assert [f["summary"] for f in d.report["findings"]] == ["minor", "major"]
    assert d.parent is None and [c[0] for c in d.children] == ["A1", "A2"]
    assert [m.id for m in d.members["entity"]] == ["a", "b", "c", "d"]  # heaviest first
    assert d.members["entity"][0].type == "PERSON" and d.counts["entity"] == 4
    assert {m.id for m in d.members["relationship (inside)"]} == {"r1", "r3", "r4"}  # r2 leaves A
    assert [m.id for m in d.members["attribute"]] == ["at1"]
    assert [m.id for m in d.members["high_level"]] == ["hl1"]
    assert [m.id for m in d.members["overview"]] == ["ov1"]
    # d1 holds 4 chunk mentions of 3 members; d2 and d3 one each (the statement's mention is not counted twice)
    assert [(x.id, x.mentions, x.members) for x in d.documents] == [("d1", 4, 3), ("d2", 1, 1), ("d3", 1, 1)]
    assert d.documents[0].title == "Doc d1" and d.documents[0].filename == "d1.txt" and d.n_documents == 3
    assert "Entity A" in {n["label"] for n in d.graph["nodes"]} and "http" not in json.dumps(d.graph)
    child = community_detail(store, w, "A2")
    assert child.parent == ("A", TITLE_A) and [m.id for m in child.members["entity"]] == ["c", "d"]
    assert [m.id for m in child.members["relationship (inside)"]] == ["r3"]
    assert [x.id for x in child.documents] == ["d1", "d3"]


def test_summary_entity_detail_reaches_every_layer_below(hs):
    store, w = hs
    d = community_detail(store, w, "T")
    assert d.kind == "summary" and d.method == "hirag_layers" and d.level == 2 and d.size == 8
    assert d.counts == {"entity": 8, "summary entity": 2, "relationship (inside)": 4, "attribute": 1}
    assert {c[0] for c in d.children} == {"S1", "S2"} and d.parent is None
    assert community_detail(store, w, "S2").parent == ("T", "Summary T")
    assert [x.id for x in d.documents][0] == "d1"


def test_detail_of_an_unknown_or_foreign_id_is_none(hs):
    store, w = hs
    other = store.create_workspace("other")
    assert community_detail(store, w, "nope") is None
    assert community_detail(store, other.id, "A") is None
    assert community_detail(store, w, "a") is None  # a layer-0 entity is not a summary


def test_detail_is_a_pure_read(hs):
    store, w = hs
    before = store.counts(w)
    community_detail(store, w, "A")
    community_detail(store, w, "T")
    assert store.counts(w) == before
    with store.session() as s:  # the temporary member table is gone again
        names = s.connection().exec_driver_sql("SELECT name FROM sqlite_temp_master").fetchall()
    assert not names
