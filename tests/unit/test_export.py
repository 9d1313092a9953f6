"""Exports (core/export.py and `python -m core export`): GraphML and GEXF read back by networkx, node-link JSON by
json and networkx, the communities CSV by the csv module, a community's Markdown report, on the built sample
(whole graph and an induced subgraph) and on a hand-made graph full of hostile text."""

from __future__ import annotations

import csv
import io
import json

import networkx as nx
import pytest
from sqlmodel import select

from core.export import (
    EXPORT_FORMATS,
    ExportError,
    communities_csv,
    community_markdown,
    graph_export,
    md,
    traces_json,
)
from core.models import Community, Document, Edge, Node, QueryLog
from core.store import Store
from tests.unit.test_cli import cli, one_line_error

HOSTILE = 'Bad\x00name\x01 <script>alert("x")</script> & \'quoted\' ]]> \r\nline\ttab\x1b end 🚢'
XML_SAFE = 'Bad\ufffdname\ufffd <script>alert("x")</script> & \'quoted\' ]]> \r\nline\ttab\ufffd end 🚢'
FORMULA = '=HYPERLINK("http://x", "click")'


def read(fmt: str, data: bytes):
    if fmt == "graphml":
        return nx.read_graphml(io.BytesIO(data))
    if fmt == "gexf":
        return nx.read_gexf(io.BytesIO(data))
    return nx.node_link_graph(json.loads(data), edges="edges")


def edges_by_id(g) -> dict[str, tuple[str, str, dict]]:
    if g.is_multigraph():
        return {(d.get("id") or k): (u, v, d) for u, v, k, d in g.edges(keys=True, data=True)}
    return {d["id"]: (u, v, d) for u, v, d in g.edges(data=True)}


def expected(store, ws_id, ids: set[str] | None = None):
    """Node attributes and edges as the export should hold them, computed from the rows."""
    with store.session() as s:
        nodes = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws_id))}
        docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws_id))}
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws_id))}
        edges = list(s.exec(select(Edge).where(Edge.workspace_id == ws_id)))
    have = (set(nodes) | set(docs) | set(comms)) if ids is None else ids & (set(nodes) | set(docs) | set(comms))
    attrs = {}
    for i in have:
        if i in nodes:
            n = nodes[i]
            attrs[i] = {"kind": n.kind, "title": n.title, "type": n.type, "layer": n.layer, "weight": n.weight,
                        "document_id": n.document_id or "", "text": n.text, "data": n.data}
        elif i in docs:
            attrs[i] = {"kind": "document", "title": docs[i].title, "type": docs[i].mime}
        else:
            c = comms[i]
            attrs[i] = {"kind": "community", "title": c.title, "type": c.method, "layer": c.level,
                        "weight": float(c.size), "text": c.summary}
    out_edges = {f"e{e.id}": (e.src, e.dst, e.kind, e.weight) for e in edges if e.src in have and e.dst in have}
    out_edges.update({f"child_of:{c.id}": (c.id, c.parent_id, "child_of", 1.0) for c in comms.values()
                      if c.id in have and c.parent_id in have})
    return attrs, out_edges


def check(g, attrs, edges, fmt):
    assert g.number_of_nodes() == len(attrs) and g.number_of_edges() == len(edges)
    for i, want in attrs.items():
        got = g.nodes[i]
        for k, v in want.items():
            if k == "data":
                assert (json.loads(got["data"]) if fmt != "json" else got["data"]) == v if v else "data" not in got
            elif v in ("", None):
                assert k not in got, (i, k)
            else:
                assert got[k] == v, (i, k, got.get(k), v)
    got_edges = edges_by_id(g)
    assert set(got_edges) == set(edges)
    for eid, (src, dst, kind, w) in edges.items():
        u, v, d = got_edges[eid]
        assert (u, v, d["kind"], d["weight"]) == (src, dst, kind, w)


@pytest.mark.parametrize("fmt", ["graphml", "gexf", "json"])
def test_whole_sample_graph_reads_back_with_every_node_edge_and_attribute(sample_built, fmt):
    _, store, ws, _ = sample_built
    attrs, edges = expected(store, ws.id)
    counts = store.counts(ws.id)
    assert len(attrs) == sum(counts[k] for k in counts if k != "edge")
    assert len(edges) >= counts["edge"], "every stored edge has both ends in the export, plus child_of links"
    g = read(fmt, graph_export(store, ws.id, fmt))
    check(g, attrs, edges, fmt)
    assert g.is_directed()


@pytest.mark.parametrize("fmt", ["graphml", "gexf", "json"])
def test_a_filtered_view_exports_the_induced_subgraph(sample_built, fmt):
    _, store, ws, _ = sample_built
    with store.session() as s:
        cid = s.exec(select(Community.id).where(Community.workspace_id == ws.id, Community.method == "leiden",
                                                Community.level == 1).order_by(Community.size.desc())).first()
        members = set(s.exec(select(Edge.src).where(Edge.dst == cid, Edge.kind == "in_community")))
        chunks = set(s.exec(select(Edge.src).where(Edge.workspace_id == ws.id, Edge.kind == "mentions",
                                                   Edge.dst.in_(members))))  # type: ignore[attr-defined]
        parent = s.get(Community, cid).parent_id
    ids = members | chunks | {cid, parent, "not-a-node"}
    attrs, edges = expected(store, ws.id, ids)
    assert len(attrs) == len(ids) - 1 and any(v[2] == "in_community" for v in edges.values())
    assert f"child_of:{cid}" in edges
    check(read(fmt, graph_export(store, ws.id, fmt, node_ids=ids)), attrs, edges, fmt)


@pytest.fixture
def hostile(tmp_path):
    """A tiny graph whose every text is hostile: control characters, markup, quotes, a lone surrogate."""
    store = Store(tmp_path / "h.db")
    ws = store.create_workspace("h")
    with store.session() as s:
        s.add(Document(id="d1", workspace_id=ws.id, content_hash="h", title=HOSTILE, filename="x<y>.txt",
                       mime="text/plain", n_chars=3, text=HOSTILE))
        s.add(Node(id="c1", workspace_id=ws.id, kind="chunk", title=HOSTILE, text=HOSTILE, document_id="d1", ord=0,
                   data={"note": HOSTILE}))
        s.add(Node(id="e1", workspace_id=ws.id, kind="entity", title=HOSTILE, type="PERSON", text="desc", weight=2.0,
                   data={"aliases": {HOSTILE: 2}}))
        s.add(Node(id="e2", workspace_id=ws.id, kind="entity", title=FORMULA, type="PERSON"))
        s.add(Community(id="k1", workspace_id=ws.id, method="leiden", level=0, size=2, title=HOSTILE,
                        summary=HOSTILE, report={"rating": 5.0, "keywords": [HOSTILE],
                                                 "findings": [{"summary": "# heading <b>x</b>", "importance": 3,
                                                               "explanation": HOSTILE}]}))
        s.add(Community(id="k2", workspace_id=ws.id, method="leiden", level=1, parent_id="k1", size=1, title=FORMULA))
        for src, dst, kind in (("c1", "d1", "derived_from"), ("c1", "e1", "mentions"), ("c1", "e1", "semantic"),
                               ("e1", "k1", "in_community"), ("e2", "k1", "in_community"), ("c1", "gone", "next")):
            s.add(Edge(workspace_id=ws.id, src=src, dst=dst, kind=kind, data={"why": HOSTILE}))
        s.commit()
    return store, ws


@pytest.mark.parametrize("fmt", ["graphml", "gexf", "json"])
def test_hostile_text_round_trips_safely(hostile, fmt):
    store, ws = hostile
    g = read(fmt, graph_export(store, ws.id, fmt))
    want = HOSTILE if fmt == "json" else XML_SAFE
    assert g.number_of_nodes() == 6 and g.number_of_edges() == 6, "the edge to a missing node is left out"
    assert g.is_multigraph(), "mentions and semantic between the same two nodes are two edges"
    assert g.nodes["c1"]["title"] == want and g.nodes["c1"]["text"] == want and g.nodes["k1"]["text"] == want
    data = g.nodes["c1"]["data"] if fmt == "json" else json.loads(g.nodes["c1"]["data"])
    assert data == {"note": HOSTILE}, "data travels as JSON text, whose escapes keep every character"
    assert g.nodes["e2"]["title"] == FORMULA and g.has_edge("k2", "k1")
    assert json.loads(g.nodes["d1"]["data"])["filename"] == "x<y>.txt" if fmt != "json" else \
        g.nodes["d1"]["data"]["filename"] == "x<y>.txt"
    assert g.nodes["e1"]["weight"] == 2.0 and g.nodes["k1"]["kind"] == "community"


def test_csv_has_one_row_per_community_and_defuses_formulas(sample_built, hostile):
    _, store, ws, _ = sample_built
    rows = list(csv.DictReader(io.StringIO(communities_csv(store, ws.id).decode("utf-8-sig"))))
    with store.session() as s:
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
    assert len(rows) == len(comms) and {r["id"] for r in rows} == set(comms)
    for r in rows:
        c = comms[r["id"]]
        assert (r["method"], int(r["level"]), int(r["size"]), r["parent_id"]) == (c.method, c.level, c.size,
                                                                                   c.parent_id or "")
        assert r["title"] == c.title and r["stale"] == "no"
        assert len(r["findings"].splitlines()) >= len(c.report.get("findings") or [])
    hstore, hws = hostile
    k1, k2 = csv.DictReader(io.StringIO(communities_csv(hstore, hws.id).decode("utf-8-sig"), newline=""))
    assert k1["title"] == k1["summary"] == HOSTILE.replace("\x00", "").replace("\x01", "").replace("\x1b", "")
    assert k2["title"] == "'" + FORMULA, "a spreadsheet shows the formula as text instead of running it"


def test_markdown_report_escapes_document_text(sample_built, hostile):
    _, store, ws, _ = sample_built
    with store.session() as s:
        c = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden")
                   .order_by(Community.size.desc())).first()
    text = community_markdown(store, ws.id, c.id)
    assert text.startswith(f"# {md(c.title)}\n")
    for f in c.report["findings"]:
        assert md(f["summary"]) in text
    hstore, hws = hostile
    text = community_markdown(hstore, hws.id, "k1")
    assert "<script>" not in text and "<b>" not in text and "\\<script\\>" in text
    assert "\n# heading" not in text and "**\\# heading \\<b\\>x\\</b\\>**" in text
    assert not {"\x00", "\x01", "\x1b", "\r", "\t"} & set(text) and md(HOSTILE) in text
    with pytest.raises(ExportError):
        community_markdown(hstore, hws.id, "nope")


def test_traces_json_holds_every_question(hostile):
    store, ws = hostile
    with store.session() as s:
        s.add(QueryLog(workspace_id=ws.id, question=HOSTILE, strategy="naive", answer="a"))
        s.commit()
    doc = json.loads(traces_json(store, ws.id))
    assert [q["question"] for q in doc["queries"]] == [HOSTILE]


def test_characters_xml_cannot_hold_are_replaced():
    from core.export import clean

    assert clean("a\x00b\x08c\ud800d\ufffee\tf\ng\rh") == "a\ufffdb\ufffdc\ufffdd\ufffde\tf\ng\rh"
    assert clean("plain 🚢") == "plain 🚢"


def test_unknown_format_is_refused(hostile):
    store, ws = hostile
    assert "csv" in EXPORT_FORMATS
    with pytest.raises(ExportError):
        graph_export(store, ws.id, "dot")


# -- the command line -----------------------------------------------------------------------------------------------
def test_cli_exports_and_refuses_clearly(sample_built, tmp_path):
    settings, store, ws, _ = sample_built
    home = settings.storage.home
    if store.is_sqlite:  # the CLI's own connection reads the file
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")
    out = tmp_path / "g.graphml"
    p = cli(home, "export", "--workspace", "sample", "--format", "graphml", str(out))
    assert p.returncode == 0, p.stderr
    g = nx.read_graphml(out)
    attrs, edges = expected(store, ws.id)
    assert g.number_of_nodes() == len(attrs) and g.number_of_edges() == len(edges)
    assert f"{len(attrs):,} nodes" in p.stderr
    with store.session() as s:
        cid = s.exec(select(Community.id).where(Community.workspace_id == ws.id)).first()
    p = cli(home, "export", "--workspace", "sample", "--community", cid, "--format", "md", str(tmp_path / "c.md"))
    assert p.returncode == 0 and (tmp_path / "c.md").read_text() == community_markdown(store, ws.id, cid)
    p = cli(home, "export", "--workspace", "sample", "--format", "csv", "-")
    assert p.returncode == 0 and p.stdout.lstrip("\ufeff").startswith("id,method,level")

    refusals = [
        (["--workspace", "nope", "--format", "graphml", str(tmp_path / "x")], "no workspace named 'nope'"),
        (["--workspace", "sample", "--format", "dot", str(tmp_path / "x")], "unknown format 'dot'"),
        (["--workspace", "sample", "--format", "md", "--community", "nope", str(tmp_path / "x")], "no community"),
        (["--workspace", "sample", "--format", "md", str(tmp_path / "x")], "needs --community"),
        (["--workspace", "sample", "--format", "csv", str(tmp_path / "no" / "dir" / "x.csv")], "cannot write"),
        (["--workspace", "sample", "--format", "csv", str(tmp_path)], "it is a folder"),
    ]
    for args, reason in refusals:
        p = cli(home, "export", *args)
        assert p.returncode == 2 and reason in one_line_error(p), (args, p.stderr)
    assert not (tmp_path / "x").exists() and sorted(f.name for f in tmp_path.iterdir()) == ["c.md", "g.graphml"]
