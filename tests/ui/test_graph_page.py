"""The Graph page with AppTest (streamlit.testing.v1), on a copy of the built sample workspace (the session's
`sample_built`): the view switch, super-nodes (coloured by the hierarchy they fall under, sized by documents), opening
a community by the "Open community" box (the canvas click itself is checked in tests/e2e/test_graph_browser.py), the
breadcrumb back, the cap and its note, filters, search (the person before HiRAG's summaries of it; found: ringed and
centred, or its neighbourhood drawn), the details beside the canvas, the legend, one-hop expansion, "How are two
entities connected?" and the export box. What the canvas component draws (in both views) is read from its arguments
(`json_args`)."""

from __future__ import annotations

import html
import json
import re

import pytest
from sqlalchemy import text
from sqlmodel import col, select
from streamlit.testing.v1 import AppTest

from core.models import Community, Edge, Node
from core.store import Store
from core.text import truncate
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


def _canvases(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.json_args)["data"] for c in at.get("component_instance")]


def _canvas(at: AppTest) -> dict:
    """The page's graph (the path drawings of "How are two entities connected?" are 150 px high)."""
    main = [d for d in _canvases(at) if d["height"] > 150]
    assert len(main) == 1, "no graph canvas"
    return main[0]


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
    from core.explore.explorer import DEFAULT_METHODS

    drawn = {n["id"] for n in _canvas(page)["nodes"]}
    big = max((c for c in comms.values() if c.id in drawn and c.method in DEFAULT_METHODS),
              key=lambda c: len(members.get(c.id, ())))
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


def _entities(store: Store, ws_id: int) -> dict[str, tuple[str, int]]:
    with store.session() as s:
        return {i: (t, lv) for i, t, lv in s.exec(select(Node.id, Node.title, Node.layer).where(
            Node.workspace_id == ws_id, Node.kind == "entity"))}


def _related(store: Store, ws_id: int, eid: str) -> set[str]:
    """Entities at the other end of `eid`'s relationships (relationship nodes: subject and object edges)."""
    with store.session() as s:
        rels = set(s.exec(select(Edge.src).where(Edge.workspace_id == ws_id, Edge.dst == eid,
                                                 col(Edge.kind).in_(("subject", "object")))))
        ends = s.exec(select(Edge.dst).where(Edge.workspace_id == ws_id, col(Edge.src).in_(rels),
                                             col(Edge.kind).in_(("subject", "object")))).all()
    return set(ends) - {eid}


def _find(at: AppTest, query: str) -> AppTest:
    at.text_input(key="graph_query").input(query)
    return run(at)


def _column_of(at: AppTest, pred) -> tuple:
    """(the columns block, the index of the column) holding the first element matching `pred`."""
    def walk(node, path):
        if pred(node):
            return path
        for child in getattr(node, "children", {}).values():
            found = walk(child, path + [node])
            if found is not None:
                return found
        return None

    chain = walk(at.main, [])
    assert chain is not None
    for i, node in enumerate(chain):
        if getattr(node, "type", None) == "column":
            return chain[i - 1], list(chain[i - 1].children.values()).index(node)
    raise AssertionError("not in a column")


def test_search_puts_the_person_first_and_rings_it(page, graph_home):
    store, ws = graph_home
    ents = _entities(store, ws.id)
    person = next(i for i, (t, lv) in ents.items() if t == "Amara Okafor" and lv == 0)
    summaries = {i for i, (t, lv) in ents.items() if lv > 0 and "okafor" in t.lower()}
    assert summaries  # HiRAG's summary entities "Amara Okafor — …" are the heaviest names holding "Okafor"
    _find(page, "Okafor")
    assert page.session_state["graph_pick"] == person
    box = page.selectbox(key="graph_match")
    assert box.value == person and not set(box.options) & {ents[i][0] + " · summary" for i in summaries}
    assert not any("summary layer" in o for o in box.options)
    assert any(f"{len(summaries)} summary entities (HiRAG layer ≥ 1) also match" in c.value for c in page.caption)
    data = _canvas(page)
    assert data["focus"] == {"id": person, "centre": 1}  # ringed, and centred once
    assert person in {n["id"] for n in data["nodes"]}
    heading = next(m.value for m in page.markdown if m.value.startswith("#### "))
    assert heading == "#### Amara Okafor"
    # the HiRAG-layer filter asks for summaries: then they are found
    layers = next(m for m in page.multiselect if m.label == "HiRAG layers")
    layers.set_value(sorted({lv for _, lv in ents.values() if lv > 0}))
    run(page)
    _find(page, "Amara Okafor —")
    assert page.session_state["graph_pick"] in summaries
    assert _canvas(page)["focus"]["centre"] == 2


def test_a_found_node_off_the_drawing_opens_its_neighbourhood(page, graph_home):
    store, ws = graph_home
    _communities(page)
    assert {n["kind"] for n in _canvas(page)["nodes"]} == {"community"}
    _find(page, "Amara Okafor")
    person = page.session_state["graph_pick"]
    assert page.radio(key="graph_mode").value == "Nodes"
    assert any(i.value == "Neighbourhood of the selected node." for i in page.info)
    data = _canvas(page)
    drawn = {n["id"]: n for n in data["nodes"]}
    related = _related(store, ws.id, person)
    assert len(related) > 10 and related <= set(drawn)  # its real neighbours, through its relationships
    assert {n["kind"] for n in drawn.values()} <= {"entity", "community", "document"}
    assert data["focus"] == {"id": person, "centre": 1}
    rel_edges = {frozenset((e["from"], e["to"])) for e in data["edges"] if e["kind"] == "relationship"}
    assert {frozenset((person, r)) for r in related} <= rel_edges
    note = next(c.value for c in page.caption if c.value.startswith("Its neighbourhood:"))
    assert f"{len(related)} related entities" in note


def test_details_sit_beside_the_canvas_and_expand_and_focus(page, graph_home):
    store, ws = graph_home
    _communities(page)
    before = _canvas(page)
    community = before["nodes"][0]["id"]
    page.selectbox(key="graph_drawn").set_value(community)
    run(page)
    assert page.session_state["graph_pick"] == community
    assert _canvas(page)["focus"] == {"id": community, "centre": 1}  # ringed and centred
    canvas_cols, canvas_at = _column_of(page, lambda n: getattr(n, "type", None) == "component_instance")
    details_cols, details_at = _column_of(page, lambda n: getattr(n, "key", None) == "graph_details")
    assert canvas_cols is details_cols and (canvas_at, details_at) == (0, 1)  # side by side, details on the right
    assert any(m.value.startswith("**Sources**") for m in page.markdown)
    next(b for b in page.button if b.key == "graph_expand").click()
    run(page)
    after = _canvas(page)["nodes"]
    assert len(after) > len(before["nodes"])
    assert any(c.value.endswith("nodes added by expanding neighbourhoods.") for c in page.caption)
    next(b for b in page.button if b.label == "Clear expansions").click()
    run(page)
    assert len(_canvas(page)["nodes"]) == len(before["nodes"])
    # "Draw its neighbourhood": the Nodes view around it (its members, parent and children)
    next(b for b in page.button if b.key == "graph_focus_btn").click()
    run(page)
    assert page.radio(key="graph_mode").value == "Nodes"
    assert community in {n["id"] for n in _drawn_nodes(page)}
    assert any(i.value == "Neighbourhood of the selected node." for i in page.info)


def test_the_legend_explains_shapes_colours_and_edges(page):
    legend = next(m.value for m in page.markdown if 'class="graph-legend"' in m.value)
    data = _canvas(page)
    assert "entity (person, place" in legend and "summary entity (HiRAG layer ≥ 1)" in legend
    assert "document" in legend and "community" in legend
    for kind in {e["kind"] for e in data["edges"]}:
        from core.explore.legend import EDGE_MEANINGS

        assert html.escape(EDGE_MEANINGS.get(kind, kind)) in legend, kind
    _communities(page)
    legend = next(m.value for m in page.markdown if 'class="graph-legend"' in m.value)
    assert "colour: the top community it falls under" in legend
    assert "size: a community by the documents its members appear in" in legend


def test_the_overview_is_coloured_by_hierarchy_sized_by_documents_and_first_on_screen(page, graph_home):
    store, ws = graph_home
    _communities(page)
    assert page.radio(key="graph_color_by").value == "parent"
    nodes = _canvas(page)["nodes"]
    comms, _ = _rows(store, ws.id)
    assert all(n["label"] == truncate(comms[n["id"]].title, 40) for n in nodes)  # labelled by title
    assert len({n["color"]["background"] for n in nodes}) == len(nodes)  # roots: one colour each
    with store.session() as s:
        docs = dict(s.connection().execute(text(
            "SELECT m.dst, count(DISTINCT n.document_id) FROM edge m JOIN edge e ON e.dst = m.src AND "
            "e.kind = 'mentions' AND e.workspace_id = m.workspace_id JOIN node n ON n.id = e.src AND "
            "n.kind = 'chunk' WHERE m.workspace_id=:ws AND m.kind = 'in_community' GROUP BY m.dst"), {"ws": ws.id}).all())
    by_docs = sorted(nodes, key=lambda n: docs.get(n["id"], 0))
    assert [n["size"] for n in by_docs] == sorted(n["size"] for n in nodes)  # more documents, bigger
    assert docs[by_docs[-1]["id"]] > docs[by_docs[0]["id"]]
    assert any(f"{docs[n['id']]:,} documents" in n["title"] for n in nodes)
    # first on screen: before the canvas only the title, the view and search row and the breadcrumb
    top = list(page.main.children.values())
    canvas_block = next(i for i, n in enumerate(top) if any(
        getattr(x, "type", None) == "component_instance" for x in _flat(n)))
    assert canvas_block <= 3 and all(getattr(n, "type", None) != "expandable" for n in top[:canvas_block])
    # opened: each child its own colour, and its members in it
    _open(page, max(nodes, key=lambda n: n["members"])["id"])
    opened = _canvas(page)["nodes"]
    kids = {n["id"]: n["color"]["background"] for n in opened if n["kind"] == "community"}
    assert len(set(kids.values())) == len(kids)
    _, members = _rows(store, ws.id)
    for n in opened:
        if n["kind"] == "entity" and n.get("level", 0) == 0:
            mine = [k for k in kids if n["id"] in members.get(k, ())]
            if mine:
                assert n["color"]["background"] in {kids[k] for k in mine}


def _flat(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _flat(child)


def test_how_two_entities_are_connected(page, graph_home):
    store, ws = graph_home
    page.text_input(key="connect_a").input("Amara Okafor")
    page.text_input(key="connect_b").input("Carrow Gold")
    run(page)
    ents = _entities(store, ws.id)
    assert ents[page.selectbox(key="connect_a_pick").value] == ("Amara Okafor", 0)
    assert ents[page.selectbox(key="connect_b_pick").value] == ("Carrow Gold", 0)
    said = next(m.value for m in page.markdown if " apart (a step:" in m.value)
    assert said.startswith("**Amara Okafor** and **Carrow Gold** are **2 steps** apart")
    paths = [m.value for m in page.markdown if re.match(r"\d\. \(\d steps?\) \*\*Amara Okafor\*\*", m.value)]
    small = [d for d in _canvases(page) if d["height"] == 150]
    assert 1 <= len(paths) == len(small) <= 4
    assert all(d["nodes"][0]["label"] == "Amara Okafor" and d["nodes"][-1]["label"] == "Carrow Gold" for d in small)
    assert all(p.endswith("**Carrow Gold**") for p in paths)
    shared = next(m.value for m in page.markdown if m.value.startswith("**Documents that mention both**"))
    with store.session() as s:
        both = s.connection().execute(text(
            "SELECT count(DISTINCT n.document_id) FROM edge e JOIN node n ON n.id = e.src JOIN node x ON x.id = e.dst "
            "WHERE e.workspace_id=:ws AND e.kind='mentions' AND n.kind='chunk' AND x.title='Amara Okafor' AND "
            "x.layer=0 AND n.document_id IN (SELECT n2.document_id FROM edge e2 JOIN node n2 ON n2.id = e2.src JOIN "
            "node y ON y.id = e2.dst WHERE e2.workspace_id=:ws AND e2.kind='mentions' AND n2.kind='chunk' AND "
            "y.title='Carrow Gold' AND y.layer=0)"), {"ws": ws.id}).scalar()
    assert shared == f"**Documents that mention both** ({both:,}):" and both > 0
    # "Connect from here" in a node's details fills the first name
    _find(page, "Port Halden")
    next(b for b in page.button if b.key == "graph_connect_from").click()
    run(page)
    assert page.text_input(key="connect_a").value == "Port Halden"


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
