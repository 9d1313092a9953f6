"""core/explore/route.py: a Retrieval's path as a drawing for the canvas component: roles styled distinctly, a legend of the roles
present, sources hung off their best chunk by stored edges, document text escaped, the node cap with its note;
and core/history.py over the same small store."""

from __future__ import annotations

import json
import time

import pytest

from core.explore.route import (
    DEFAULT_ROLE,
    ROLES,
    legend_html,
    route_graph,
    route_payload,
    style_of,
)
from core.models import Community, Document, Edge, Node, QueryLog
from core.retrieval.base import ContextItem, PathEdge, PathStep, Retrieval, Source
from core.store import Store

EVIL = "<script>alert('x')</script>"
EVIL_TEXT = "<img src=x onerror=alert(1)> & <b>bold</b>"
REQUIRED_ROLES = ("entry", "cross", "key", "bridge", "community", "layer", "beam", "membership", "chunk", "result")


def _drawn(payload: dict, what: str = "nodes") -> list[dict]:
    return payload[what]


@pytest.fixture
def small(tmp_path):
    """A store with one document, two chunks, five entities (one titled with a script tag), a community."""
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("w")
    with store.session() as s:
        s.add(Document(id="d1", workspace_id=ws.id, content_hash="h", title="Doc <one>", filename="one.md",
                       mime="text/markdown", n_chars=20, text=EVIL_TEXT))
        for c in ("c1", "c2"):
            s.add(Node(id=c, workspace_id=ws.id, kind="chunk", title="Doc <one>", text=f"chunk {c} {EVIL_TEXT}",
                       document_id="d1"))
            s.add(Edge(workspace_id=ws.id, src=c, dst="d1", kind="derived_from"))
        for e in ("e1", "e2", "e3", "e4", "e5"):
            s.add(Node(id=e, workspace_id=ws.id, kind="entity", title=EVIL if e == "e1" else f"Entity {e}",
                       text=EVIL_TEXT, type="PERSON"))
        s.add(Edge(workspace_id=ws.id, src="c1", dst="e1", kind="mentions"))
        s.add(Edge(workspace_id=ws.id, src="c1", dst="e9", kind="mentions"))  # an entity not drawn
        s.add(Community(id="k1", workspace_id=ws.id, method="leiden", level=0, size=2, title="Harbour <works>",
                        summary=EVIL_TEXT))
        s.commit()
    return store, ws


def _retrieval() -> Retrieval:
    r = Retrieval("test", "q?")
    r.path_nodes = [PathStep("e1", "entity", "entry", EVIL), PathStep("e2", "entity", "cross"),
                    PathStep("e3", "entity", "key"), PathStep("e4", "entity", "bridge"),
                    PathStep("e5", "entity", "beam"), PathStep("k1", "community", "community"),
                    PathStep("c2", "chunk", "layer"), PathStep("e3", "entity", "membership"),
                    PathStep("e2", "entity", "entry"), PathStep("zz", "entity", "mystery")]
    r.path_edges = [PathEdge("e1", "k1", "in_community", "membership"), PathEdge("e3", "e4", "relationship", "bridge"),
                    PathEdge("e4", "e5", "relationship", "beam"), PathEdge("k1", "c2", "chnsw", "layer"),
                    PathEdge("e1", "e2", "relationship", "cross"), PathEdge("e1", "gone", "relationship", "bridge")]
    r.sources = [Source("d1", None, "Doc <one>", 1.0, ["c1", "c2"])]
    r.sections["local"] = [ContextItem("e1", "entity", EVIL, EVIL_TEXT, 1.0, documents=["d1"])]
    return r


def test_every_role_has_its_own_style_and_unknown_roles_a_neutral_one():
    assert set(REQUIRED_ROLES) <= set(ROLES)
    node_styles = {(s.shape, s.border, s.size) for s in ROLES.values()}
    assert len(node_styles) == len(ROLES)  # no two roles drawn alike
    assert len({s.border for s in ROLES.values()}) == len(ROLES)  # edge colours differ, too
    assert len({(s.border, s.dashes, s.edge_width) for s in ROLES.values()}) == len(ROLES)
    assert style_of("no-such-role") == DEFAULT_ROLE
    assert DEFAULT_ROLE.border not in {s.border for s in ROLES.values()}


def test_route_merges_roles_adds_sources_and_draws_each_role_distinctly(small):
    store, ws = small
    rg = route_graph(_retrieval(), store, ws.id)
    by_id = {n.id: n for n in rg.nodes}
    assert by_id["e2"].roles == ["entry", "cross"]  # listed twice: drawn in the most telling role, both kept
    assert by_id["e3"].roles == ["key", "membership"]
    assert by_id["zz"].role == "mystery"  # unknown role: drawn with the neutral style
    assert "not found in the store" in by_id["zz"].tooltip
    # the source document hangs off its best chunk, which links to the drawn entity it mentions
    assert by_id["d1"].kind == "document" and by_id["d1"].role == "result"
    assert by_id["c1"].role == "chunk"
    pairs = {(e.src, e.dst, e.kind, e.role) for e in rg.edges}
    assert ("c1", "d1", "derived_from", "result") in pairs
    assert ("c1", "e1", "mentions", "chunk") in pairs
    assert not any(e.dst in ("gone", "e9") for e in rg.edges)  # edges to nodes not drawn are dropped
    assert rg.roles == [r for r in ROLES if r != "missed"] + ["mystery"]  # present ones, known ones in ROLES order

    page = route_payload(rg)
    nodes = {n["id"]: n for n in _drawn(page)}
    assert set(nodes) == set(by_id)
    style = {n["role"]: (n["shape"], n["color"]["border"], n["size"]) for n in nodes.values()}
    assert len(set(style.values())) == len(style)  # each role drawn differently
    assert nodes["e1"]["shape"] == ROLES["entry"].shape and nodes["k1"]["shape"] == ROLES["community"].shape
    assert nodes["zz"]["color"]["border"] == DEFAULT_ROLE.border
    assert nodes["k1"]["kind"] == "community"
    assert nodes["e1"]["color"]["background"] != nodes["k1"]["color"]["background"]  # colour by kind
    edges = _drawn(page, "edges")
    by_role = {e["role"]: e for e in edges}
    assert by_role["bridge"]["color"] != by_role["beam"]["color"]
    assert by_role["membership"]["dashes"] and by_role["bridge"]["dashes"] is False
    # the canvas component's payload: placed in the engine, nothing that would load from elsewhere
    assert all("x" in n and "y" in n for n in nodes.values())
    assert "http" not in json.dumps(page) and page["view"] and page["height"] == 420


def test_document_text_is_escaped_everywhere(small):
    store, ws = small
    rg = route_graph(_retrieval(), store, ws.id)
    page = route_payload(rg)
    text = json.dumps([n["title"] for n in page["nodes"]] + [e["title"] for e in page["edges"]]) + legend_html(rg)
    assert "<script>alert" not in text and EVIL not in text
    assert "<img src=x" not in text and "<b>bold</b>" not in text
    e1 = next(n for n in _drawn(page) if n["id"] == "e1")
    assert e1["label"] == EVIL  # the label is JSON text, drawn on the canvas, never parsed as HTML
    assert "&lt;script&gt;" in e1["title"] and "&lt;img src=x" in e1["title"]


def test_legend_lists_exactly_the_roles_present(small):
    store, ws = small
    r = _retrieval()
    r.path_nodes = [p for p in r.path_nodes if p.role in ("entry", "bridge")]
    r.path_edges = [PathEdge("e1", "e4", "relationship", "bridge")]
    r.sources = []
    rg = route_graph(r, store, ws.id)
    legend = legend_html(rg)
    assert rg.roles == ["entry", "bridge"]
    for role in ROLES:
        assert (f'data-role="{role}"' in legend) == (role in ("entry", "bridge")), role
    assert ROLES["entry"].meaning in legend and ROLES["bridge"].meaning in legend
    assert legend.count("<line") == 1  # an edge sample only for roles with drawn edges (bridge)
    assert "entity" in legend  # the kinds present
    full = legend_html(route_graph(_retrieval(), store, ws.id))
    for role in ("entry", "cross", "key", "bridge", "community", "layer", "beam", "chunk", "result", "mystery"):
        assert f'data-role="{role}"' in full, role


def test_the_cap_keeps_the_most_telling_roles_and_says_what_was_left_out(small):
    store, ws = small
    r = Retrieval("test", "q?")
    r.path_nodes = ([PathStep(f"b{i}", "entity", "beam") for i in range(40)]
                    + [PathStep(f"x{i}", "entity", "entry") for i in range(5)])
    r.path_edges = [PathEdge(f"b{i}", f"b{i + 1}", "relationship", "beam") for i in range(39)]
    rg = route_graph(r, store, ws.id, limit=20)
    assert len(rg.nodes) == 20 and rg.total_nodes == 45
    assert {f"x{i}" for i in range(5)} <= {n.id for n in rg.nodes}  # entry points before beam nodes
    assert rg.note.startswith("Showing 20 of 45 path nodes (cap 20)")
    assert "25 beam" in rg.note
    kept = {n.id for n in rg.nodes}
    assert all(e.src in kept and e.dst in kept for e in rg.edges)
    assert len(_drawn(route_payload(rg))) == 20
    assert route_graph(r, store, ws.id, limit=300).note == ""


def test_history_lists_newest_first_reopens_and_exports(small):
    from core.history import count_queries, export_json, list_queries, open_query

    store, ws = small
    other = store.create_workspace("other")
    r = _retrieval()
    with store.session() as s:
        for i, q in enumerate(["first?", "second?", "third?"]):
            r.question = q
            s.add(QueryLog(workspace_id=ws.id, question=q, strategy="test", answer=f"answer {i}",
                           result=r.to_dict(), ms=10.0 + i, asked_by="ana@example.org" if i == 2 else None))
            s.commit()
            time.sleep(0.01)
        s.add(QueryLog(workspace_id=other.id, question="elsewhere?", strategy="test", result={}))
        s.commit()
    entries = list_queries(store, ws.id, 2)
    assert [e.question for e in entries] == ["third?", "second?"]
    assert entries[0].n_sources == 1 and entries[0].ms == 12.0
    assert [e.asked_by for e in entries] == ["ana@example.org", None]
    assert count_queries(store, ws.id) == 3
    back, text = open_query(store, ws.id, entries[0].id)
    assert back.question == "third?" and text == "answer 2"
    assert back.to_dict() == {**r.to_dict(), "question": "third?"}
    assert open_query(store, other.id, entries[0].id) is None  # another workspace's id
    data = json.loads(export_json(store, ws.id))
    assert [q["question"] for q in data["queries"]] == ["first?", "second?", "third?"]
    first = data["queries"][0]
    assert {"question", "strategy", "answer", "result", "ms", "created_at"} <= set(first)
    assert Retrieval.from_dict(first["result"]).sources[0].document_id == "d1"
    assert first["created_at"].endswith("+00:00")
    assert [q["asked_by"] for q in data["queries"]] == [None, None, "ana@example.org"]


def test_gold_nodes_are_highlighted_and_a_gold_document_the_route_missed_is_drawn_apart(small):
    """The Evaluate page's question view: the gold document and its chunks drawn on the route get a gold halo
    (`gold` in the payload, the legend says it), and a gold document the route never reached is drawn with role
    "missed"; without gold nothing is marked."""
    store, ws = small
    with store.session() as s:
        s.add(Document(id="d2", workspace_id=ws.id, content_hash="h2", title="Missed <doc>", filename="two.md",
                       mime="text/markdown", n_chars=5, text="other"))
        s.commit()
    r = _retrieval()
    plain = route_payload(route_graph(r, store, ws.id))
    assert not any(n.get("gold") for n in plain["nodes"]) and "missed" not in {n["role"] for n in plain["nodes"]}
    rg = route_graph(r, store, ws.id, gold={"d1", "c1", "c2", "c9"}, gold_docs=["d1", "d2"])  # c9: not reached
    drawn = {n["id"]: n for n in route_payload(rg)["nodes"]}
    assert {i for i, n in drawn.items() if n.get("gold")} == {"d1", "c1", "c2", "d2"}
    assert drawn["d1"]["role"] == "result" and drawn["d2"]["role"] == "missed"
    assert drawn["d1"]["borderWidth"] > style_of("result").border_width
    assert drawn["d2"]["label"] == "Missed <doc>"  # a label travels as JSON text; the tooltip is escaped
    assert "<doc>" not in drawn["d2"]["title"]
    legend = legend_html(rg)
    assert 'data-role="gold"' in legend and 'data-role="missed"' in legend
