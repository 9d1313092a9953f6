"""The Graph page with AppTest (streamlit.testing.v1), on a copy of the built sample workspace (the session's
`sample_built`): the view switch, super-nodes, opening a community by the "Open community" box (the canvas click
itself is checked in tests/e2e/test_graph_browser.py), the breadcrumb back, the cap and its note, filters,
search with node details, one-hop expansion and the export box. What the canvas component draws (in both views) is
read from its arguments (`json_args`)."""

from __future__ import annotations

import json
import re

import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.models import Community, Edge, Node
from core.store import Store
from tests.stores import copy_database
from tests.ui.conftest import app_home, open_page, run


@pytest.fixture(scope="module")
def graph_home(tmp_path_factory, sample_built):
    home = tmp_path_factory.mktemp("strata_graph_ui")
    store = copy_database(sample_built.settings.storage.db_url, home)
    with app_home(home):
        yield store, store.require_workspace("sample")


@pytest.fixture
def page(graph_home) -> AppTest:
    return open_page("views/graph.py", "Graph")


def _canvas(at: AppTest) -> dict:
    comps = at.get("component_instance")
    assert len(comps) == 1, "no graph canvas"
    return json.loads(comps[0].proto.json_args)["data"]


def _drawn_nodes(at: AppTest) -> list[dict]:
    """The nodes the Nodes view draws: the same canvas as the Communities view, never a page of its own."""
    assert not at.get("iframe")
    return _canvas(at)["nodes"]


def _communities(at: AppTest) -> AppTest:
    at.radio(key="graph_mode").set_value("Communities")
    return run(at)


def _rows(store: Store, ws_id: int):
    with store.session() as s:
        comms = list(s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method != "wcc")))
        members = {}
        for src, dst in s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id,
                                                                Edge.kind == "in_community")):
            members.setdefault(dst, set()).add(src)
    return {c.id: c for c in comms}, members


def _open(at: AppTest, cid: str) -> AppTest:
    box = at.selectbox(key="graph_open")
    box.set_value(cid)
    run(at)
    assert at.selectbox(key="graph_open").value is None  # the box empties again once the community is open
    return at


def test_small_workspace_opens_on_nodes_and_offers_communities(page, graph_home):
    store, ws = graph_home
    assert page.radio(key="graph_mode").value == "Nodes"  # the sample is small
    nodes = _drawn_nodes(page)
    assert nodes and {n["kind"] for n in nodes} <= {"entity", "community", "document"}
    assert all("x" in n for n in nodes), "placed in the engine: drawn at once, no stabilization in the browser"
    _communities(page)
    data = _canvas(page)
    comms, _ = _rows(store, ws.id)
    from core.explore.explorer import DEFAULT_METHODS

    # the top level of GraphRAG's Leiden and ArchRAG's attributed hierarchies, as super-nodes; HiRAG's own
    # communities are offered in the methods filter, not drawn first
    roots = {c.id for c in comms.values() if (not c.parent_id or c.parent_id not in comms)
             and c.method in DEFAULT_METHODS}
    assert {c.method for c in comms.values()} >= {"leiden", "hirag", "attributed"}
    assert next(m for m in page.multiselect if m.label == "Community methods").value == ["attributed", "leiden"]
    assert {n["id"] for n in data["nodes"]} == roots
    assert all(n["members"] == comms[n["id"]].size for n in data["nodes"])
    assert all(n["kind"] == "community" and "x" in n for n in data["nodes"])
    assert not re.search(r"https?://", json.dumps(data))
    notes = [c.value for c in page.caption if "super-nodes" in c.value]
    assert notes and notes[0].startswith(f"{len(roots):,} attributed and leiden communities at the top")
    assert {b.label for b in page.button if b.key == "graph_back"} == {"Back"}
    assert next(b for b in page.button if b.key == "graph_back").disabled


def test_open_community_draws_its_children_and_members_and_back_returns(page, graph_home):
    store, ws = graph_home
    _communities(page)
    comms, members = _rows(store, ws.id)
    leiden = [c for c in comms.values() if c.method == "leiden" and c.level == 0]
    target = max(leiden, key=lambda c: (len([k for k in comms.values() if k.parent_id == c.id]), c.size))
    kids = {k.id for k in comms.values() if k.parent_id == target.id}
    assert kids, "the sample's largest leiden community has children"
    _open(page, target.id)
    drawn = {n["id"]: n for n in _canvas(page)["nodes"]}
    assert set(drawn) == kids | members[target.id]  # exactly its children and its member entities
    assert {i for i, n in drawn.items() if n["kind"] == "community"} == kids
    edges = _canvas(page)["edges"]
    member_of = {(e["from"], e["to"]) for e in edges if e["kind"] == "in_community"}
    assert member_of == {(m, k) for k in kids for m in members[k] if m in drawn}
    assert any(c.value.startswith(f"{len(members[target.id]):,} member entities, {len(kids):,} child communities")
               for c in page.caption)
    crumbs = [b for b in page.button if (b.key or "").startswith("graph_crumb_")]
    assert [b.key for b in crumbs] == ["graph_crumb_0", "graph_crumb_1"] and crumbs[1].disabled
    back = next(b for b in page.button if b.key == "graph_back")
    assert not back.disabled
    back.click()
    run(page)
    assert target.id in {n["id"] for n in _canvas(page)["nodes"]}  # the overview again


def test_the_cap_holds_and_the_note_says_what_was_left_out(page, graph_home):
    store, ws = graph_home
    _communities(page)
    comms, members = _rows(store, ws.id)
    big = max(comms.values(), key=lambda c: len(members.get(c.id, ())))
    kids = [k for k in comms.values() if k.parent_id == big.id]
    slider = next(s for s in page.slider if s.label == "Max nodes")
    slider.set_value(50)
    run(page)
    _open(page, big.id)
    nodes = _canvas(page)["nodes"]
    n_members = len(members[big.id])
    assert n_members > 50
    assert len(nodes) == 50  # never more than the cap
    shown_kids = min(len(kids), 12)  # a quarter of the cap (at least one) for the children
    assert sum(n["kind"] == "community" for n in nodes) == shown_kids
    note = next(c.value for c in page.caption if "member entities" in c.value)
    assert f"Showing {50 - shown_kids:,} of {n_members:,} members (most mentioned first)" in note
    assert "(cap 50)" in note


def test_filters_and_colours(page, graph_home):
    store, ws = graph_home
    _communities(page)
    colour = next(r for r in page.radio if r.label == "Colour communities by")
    colour.set_value("method")
    run(page)
    by_method = {n["color"]["background"] for n in _canvas(page)["nodes"]}
    assert len(by_method) == 2  # leiden and attributed
    levels = next(m for m in page.multiselect if m.label == "Community levels")
    levels.set_value([1])
    methods = next(m for m in page.multiselect if m.label == "Community methods")
    methods.set_value(["leiden"])
    run(page)
    comms, members = _rows(store, ws.id)
    assert {n["id"] for n in _canvas(page)["nodes"]} == {c.id for c in comms.values()
                                                         if c.method == "leiden" and c.level == 1}
    # minimum degree: an opened community keeps only its members linked to at least that many entities
    from core.explore.explore_index import compute_index

    ix = compute_index(store, ws.id)
    target = max((c for c in comms.values() if c.method == "leiden" and c.level == 1),
                 key=lambda c: len(members[c.id]))
    _open(page, target.id)
    deg = next(n for n in page.number_input if n.label == "Minimum degree")
    deg.set_value(3)
    run(page)
    want = {m for m in members[target.id] if ix.degree[ix.ent_index[m]] >= 3}
    got = {n["id"] for n in _canvas(page)["nodes"] if n["kind"] == "entity"}
    assert got == want and len(want) < len(members[target.id])
    # the Nodes view honours the HiRAG layer filter
    page.radio(key="graph_mode").set_value("Nodes")
    next(n for n in page.number_input if n.label == "Minimum degree").set_value(0)
    next(m for m in page.multiselect if m.label == "HiRAG layers").set_value([1])
    run(page)
    assert next(n for n in page.number_input if n.label == "Minimum degree").value == 0
    entities = [n for n in _drawn_nodes(page) if n["kind"] == "entity"]
    with store.session() as s:
        layer1 = set(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 1)))
    assert layer1 and {n["id"] for n in entities} == layer1


def test_search_details_expand_and_focus(page, graph_home):
    store, ws = graph_home
    _communities(page)
    before = len(_canvas(page)["nodes"])
    page.text_input(key="graph_query").input("Halden")
    run(page)
    details = [m.value for m in page.markdown if m.value.startswith("#### ")]
    assert details and "Halden" in details[0]
    assert any(m.value.startswith("**Communities**") for m in page.markdown)
    assert any(m.value.startswith("**Sources**") for m in page.markdown)
    next(b for b in page.button if b.key == "graph_expand").click()
    run(page)
    after = _canvas(page)["nodes"]
    assert len(after) > before
    assert any(c.value.endswith("nodes added by expanding neighbourhoods.") for c in page.caption)
    next(b for b in page.button if b.label == "Clear expansions").click()
    run(page)
    assert len(_canvas(page)["nodes"]) == before
    # "Draw its neighbourhood": the Nodes view around it
    pick = page.session_state["graph_pick"]
    next(b for b in page.button if b.key == "graph_focus_btn").click()
    run(page)
    assert page.radio(key="graph_mode").value == "Nodes"
    assert pick in {n["id"] for n in _drawn_nodes(page)}
    assert any(i.value == "Neighbourhood of the selected node." for i in page.info)


def test_physics_and_hierarchical_layout_toggles(page):
    before = _canvas(page)
    assert before["options"]["physics"]["enabled"] and "hierarchical" not in before["options"]["layout"]
    next(t for t in page.toggle if t.label == "Physics").set_value(False)
    run(page)
    assert not _canvas(page)["options"]["physics"]["enabled"]
    next(t for t in page.toggle if t.label == "Hierarchical layout").set_value(True)
    run(page)
    drawn = _canvas(page)
    assert drawn["options"]["layout"]["hierarchical"]["enabled"]
    levels = {n["kind"]: n["level"] for n in drawn["nodes"]}  # communities above entities above documents
    assert levels["community"] < levels["entity"] < levels["document"]


def test_export_box_offers_the_view_the_graph_and_the_communities(page):
    labels = [b.label for b in page.get("download_button")]
    assert labels == ["Download sample-view.graphml", "Download the communities (CSV)"]
    page.radio(key="graph_export_scope").set_value("Whole graph")
    page.selectbox(key="graph_export_fmt").set_value("gexf")
    run(page)
    assert [b.label for b in page.get("download_button")][0] == "Download sample-graph.gexf"
