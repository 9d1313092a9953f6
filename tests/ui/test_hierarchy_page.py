"""The Hierarchy page with AppTest (streamlit.testing.v1), on a copy of the built sample workspace (the session's
`sample_built`). The copy also holds an attributed hierarchy when the build made none, one of its titles full of
Markdown and HTML, so every method is drawn and escaping is checked. AppTest cannot click a sector of the Vega-Lite
chart: the selectbox beside the chart is the same choice (the click itself is checked in tests/e2e)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import streamlit as st
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.models import Community, Document, Edge, Node
from core.store import Store, content_id
from tests.stores import copy_database, home_url, postgres
from ui.text import md_label

APP = Path(__file__).resolve().parents[2] / "app.py"
UNESCAPED = re.compile(r"(?<!\\)[*_`\[\]<>$]")
MARKUP_TITLE = "<b>Gates</b> *Harbour* [works](x) & $tolls$"


def _clear_caches() -> None:
    st.cache_resource.clear()
    st.cache_data.clear()


def _add_attributed(store: Store, ws_id: int) -> None:
    """An attributed hierarchy mirroring the Leiden one (as the attributed stage would write it), when absent."""
    with store.session() as s:
        if s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == "attributed")).first():
            return
        leiden = list(s.exec(select(Community).where(Community.workspace_id == ws_id, Community.method == "leiden")
                             .order_by(Community.level, Community.size.desc(), Community.id)))
        new_id = {c.id: content_id("attributed", c.id) for c in leiden}
        members = {c.id: list(s.exec(select(Edge.src).where(Edge.workspace_id == ws_id, Edge.dst == c.id,
                                                           Edge.kind == "in_community"))) for c in leiden}
        for i, c in enumerate(leiden):
            s.add(Community(id=new_id[c.id], workspace_id=ws_id, method="attributed", level=c.level,
                            parent_id=new_id.get(c.parent_id), size=c.size,
                            title=MARKUP_TITLE if i == 0 else f"Attributed {c.title}", summary=c.summary,
                            report=c.report, data={"layer": c.level + 1}))
            for m in members[c.id]:
                s.add(Edge(workspace_id=ws_id, src=m, dst=new_id[c.id], kind="in_community"))
        s.commit()


@pytest.fixture(scope="module")
def hier_home(tmp_path_factory, sample_built):
    """STRATA_HOME holding a copy of the built sample (the shared one stays untouched)."""
    home = tmp_path_factory.mktemp("strata_hier_ui")
    store = copy_database(sample_built.settings.storage.db_url, home)
    ws = store.require_workspace("sample")
    assert ws.build_version >= 1
    _add_attributed(store, ws.id)
    mp = pytest.MonkeyPatch()
    mp.setenv("STRATA_HOME", str(home))
    mp.setenv("STRATA_BACKEND", "offline")
    mp.setenv("HF_HUB_OFFLINE", "1")
    if postgres():
        mp.setenv("STRATA_DATABASE_URL", home_url(home))
    _clear_caches()
    yield store, ws
    _clear_caches()
    mp.undo()


@pytest.fixture
def page(hier_home) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("views/hierarchy.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Hierarchy"]
    return at


def _run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def vega(node) -> tuple[dict, list[dict]]:
    """A Vega-Lite chart element's spec and its data's rows (Streamlit sends the data beside the spec, as Arrow)."""
    import pyarrow as pa

    (data,) = node.proto.datasets
    return json.loads(node.proto.spec), pa.ipc.open_stream(data.data.data).read_all().to_pylist()


MARKS = {"sunburst": ("arc", {"theta", "theta2", "radius", "radius2"}), "treemap": ("rect", {"x", "x2", "y", "y2"}),
         "icicle": ("rect", {"x", "x2", "y", "y2"})}


def _chart(at: AppTest, view: str) -> list[dict]:
    """The page's one hierarchy chart, checked to be `view` (its marks and their position channels): its rows."""
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    spec, rows = vega(charts[0])
    shapes, labels = spec["layer"]
    mark, channels = MARKS[view]
    assert shapes["mark"]["type"] == mark and channels <= set(shapes["encoding"]), shapes
    assert labels["mark"]["type"] == "text" and spec["params"][0]["select"] == {"type": "point", "fields": ["id"]}
    return rows


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _detail(at: AppTest):
    found = [n for n in _walk(at.main) if getattr(n, "key", None) == "hier_detail"]
    assert found, "no community opened"
    return found[0]


def _texts(node, kind: str) -> list[str]:
    return [str(n.value) for n in _walk(node) if getattr(n, "type", None) == kind]


def _pick(at: AppTest) -> object:
    return next(s for s in at.selectbox if s.label.startswith("Open a"))


def _members_of(store: Store, cid: str) -> set[str]:
    with store.session() as s:
        ids = list(s.exec(select(Edge.src).where(Edge.dst == cid, Edge.kind == "in_community")))
        return {n.title for n in s.exec(select(Node).where(Node.id.in_(ids)))}  # type: ignore[union-attr]


def _doc_ranking(store: Store, ws_id: int, cid: str) -> list[tuple[str, int]]:
    """(document title, chunk mentions of members) as a reader would count them, most first."""
    with store.session() as s:
        members = set(s.exec(select(Edge.src).where(Edge.dst == cid, Edge.kind == "in_community")))
        chunk_doc = {n.id: n.document_id for n in s.exec(select(Node).where(Node.workspace_id == ws_id,
                                                                          Node.kind == "chunk"))}
        per_doc = Counter(chunk_doc[e.src] for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id,
                                                                             Edge.kind == "mentions"))
                          if e.src in chunk_doc and e.dst in members)
        titles = {d.id: d.title for d in s.exec(select(Document).where(Document.workspace_id == ws_id))}
    return sorted(((titles[d], n) for d, n in per_doc.items()), key=lambda t: -t[1])


@pytest.mark.parametrize("method", ["leiden", "hirag", "attributed", "hirag_layers"])
def test_every_method_and_view_draws_its_hierarchy(page, hier_home, method):
    store, ws = hier_home
    page.radio(key="hier_method").set_value(method)
    _run(page)
    with store.session() as s:
        if method == "hirag_layers":
            expected = set(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                        Node.layer > 0)))
        else:
            expected = set(s.exec(select(Community.id).where(Community.workspace_id == ws.id,
                                                             Community.method == method)))
    assert expected, f"the sample has no {method} hierarchy"
    for view in ("sunburst", "treemap", "icicle"):
        page.radio(key="hier_view").set_value(view)
        _run(page)
        rows = _chart(page, view)
        ids, parents = [r["id"] for r in rows], [r["parent"] for r in rows]
        assert parents.count("") == 1 and ids[parents.index("")] == f"root:{method}"
        assert set(parents) - {""} <= set(ids)  # every parent is drawn
        assert {i for i in ids if not i.startswith(("root:", "more:", "entities:"))} == expected  # no cap here
        assert any(c.value.startswith(f"{len(expected):,} ") for c in page.caption), [c.value for c in page.caption]
    assert len(_pick(page).options) == len(expected)  # one entry per drawn community


def test_picking_a_leiden_community_shows_report_members_and_sources(page, hier_home):
    store, ws = hier_home
    with store.session() as s:
        top = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden",
                                             Community.level == 0).order_by(Community.size.desc())).first()
    pick = _pick(page)
    assert pick.value is None and not [n for n in _walk(page.main) if getattr(n, "key", None) == "hier_detail"]
    pick.set_value(top.id)
    _run(page)
    box = _detail(page)
    md = _texts(box, "markdown")
    assert md[0].startswith("### ") and md[0].replace("\\", "")[4:].startswith(top.title[:30])
    assert any(f"level 0 · {top.size} members" in c for c in _texts(box, "caption"))
    findings = [m for m in md if " · importance " in m]
    assert findings and len(findings) == len(top.report["findings"])
    imps = [float(m.rsplit("importance ", 1)[1]) for m in findings]
    assert imps == sorted(imps, reverse=True)
    # members: the entity table holds the community's members, and only them
    n_entities = int(next(m for m in md if m.startswith("**Entity** (")).split("(")[1].rstrip(")"))
    tables = [n.value for n in _walk(box) if getattr(n, "type", None) == "dataframe"]
    names = set(tables[0]["name"])
    assert names and names <= _members_of(store, top.id) and len(tables[0]) == min(n_entities, 200)
    # sources: documents ranked by how many member mentions their chunks hold
    docs = next(t for t in tables if "mentions" in t.columns)
    got = list(zip(docs["document"], docs["mentions"]))
    assert [n for _, n in got] == sorted((n for _, n in got), reverse=True)
    assert sorted(got, key=lambda t: (-t[1], t[0])) == sorted(_doc_ranking(store, ws.id, top.id)[: len(got)],
                                                              key=lambda t: (-t[1], t[0]))
    # the document holding the most mentions is open to read
    reader = next(s for s in page.selectbox if s.label == "Read a source document")
    doc = store.documents_by_id(ws.id, [reader.value])[reader.value]
    assert doc.title == docs["document"][0]
    assert [t.strip() for t in _texts(box, "text")] == [doc.text[:20000].strip()]
    # and its subgraph, drawn in the canvas component, nothing loaded from elsewhere
    (canvas,) = page.get("component_instance")
    assert json.loads(canvas.proto.json_args)["data"]["nodes"] and "http" not in canvas.proto.json_args


def test_opening_a_child_and_going_up_to_its_parent(page, hier_home):
    store, ws = hier_home
    with store.session() as s:
        child = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden",
                                               Community.parent_id.is_not(None))).first()  # type: ignore[union-attr]
        parent = s.get(Community, child.parent_id)
    _pick(page).set_value(child.id)
    _run(page)
    up = [b for b in page.button if b.label.startswith("Up to ")]
    assert len(up) == 1
    up[0].click()
    _run(page)
    assert _pick(page).value == parent.id
    assert _texts(_detail(page), "markdown")[0].replace("\\", "")[4:].startswith(parent.title[:30])


def test_a_summary_entity_opens_with_its_members(page, hier_home):
    store, ws = hier_home
    page.radio(key="hier_method").set_value("hirag_layers")
    _run(page)
    with store.session() as s:
        summary = s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 1)
                         .order_by(Node.weight.desc())).first()  # type: ignore[union-attr]
        members = {n.title for n in s.exec(select(Node).join(Edge, Edge.src == Node.id).where(
            Edge.dst == summary.id, Edge.kind == "summarizes"))}
    _pick(page).set_value(summary.id)
    _run(page)
    box = _detail(page)
    assert any(f"layer 1 · {len(members)} members" in c for c in _texts(box, "caption"))
    table = next(n.value for n in _walk(box) if getattr(n, "type", None) == "dataframe")
    assert set(table["name"]) == members
    assert any("summary entities carry a description" in c for c in _texts(box, "caption"))


def test_document_text_is_escaped_in_the_detail_and_in_the_chart(page, hier_home):
    store, ws = hier_home
    with store.session() as s:
        marked = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.title == MARKUP_TITLE)).first()
    if marked is None:  # the build made its own attributed hierarchy: give one of its communities the title
        with store.session() as s:
            marked = s.exec(select(Community).where(Community.workspace_id == ws.id,
                                                    Community.method == "attributed")).first()
            marked.title = MARKUP_TITLE
            s.add(marked)
            s.commit()
        st.cache_data.clear()
    page.radio(key="hier_method").set_value(marked.method)
    _run(page)
    # the chart: the title only as a data value (Vega draws it as text, its tooltip escapes HTML), never as markup
    charts = page.get("vega_lite_chart")
    spec, rows = vega(charts[0])
    row = next(r for r in rows if r["id"] == marked.id)
    assert row["title"] == MARKUP_TITLE and row["about"].startswith(MARKUP_TITLE)
    assert not row["label"] or MARKUP_TITLE.startswith(row["label"].rstrip("…"))
    assert "Gates" not in charts[0].proto.spec and "&lt;" not in json.dumps(rows)
    assert {"field": "title", "type": "nominal"} in spec["layer"][0]["encoding"]["tooltip"]
    _pick(page).set_value(marked.id)
    _run(page)
    head = _texts(_detail(page), "markdown")[0]
    assert head == "### " + md_label(MARKUP_TITLE, 160)
    assert not UNESCAPED.search(head[4:]), head


def test_find_by_title_offers_matching_communities_first(page, hier_home):
    store, ws = hier_home
    with store.session() as s:
        deep = s.exec(select(Community).where(Community.workspace_id == ws.id, Community.method == "leiden")
                      .order_by(Community.level.desc(), Community.size)).first()  # type: ignore[union-attr]
        word = deep.title.split(",")[0].strip()
        matching = {c.id for c in s.exec(select(Community).where(Community.workspace_id == ws.id,
                                                                 Community.method == "leiden"))
                    if word.lower() in c.title.lower()}
    page.text_input(key="hier_find_leiden").input(word)
    _run(page)
    options = _pick(page).options
    assert 0 < len(matching) < len(options)  # the sample has others: the order below means something
    found = options[: len(matching)]
    assert all(word.lower() in o.split(" · ")[0].lower() for o in found), found
    _pick(page).set_value(deep.id)
    _run(page)
    assert _texts(_detail(page), "markdown")[0].replace("\\", "")[4:].startswith(deep.title[:30])
    page.text_input(key="hier_find_leiden").input("no title holds this text")
    _run(page)
    assert any(c.value == "No title contains that." for c in page.caption)


STAGE_COUNTS = {  # the counts each stage reports (the contract), used where the build's stage reported none yet
    "merge": {"candidates": 4, "auto_merged": 1},
    "attributed": {"levels": 2, "communities_per_level": {"0": 3, "1": 7}, "layer_sizes": [107, 10, 3],
                   "knn_edges": 321, "chnsw_nodes": 120},
    "augment": {"nodes": {"attribute": 5, "high_level": 9, "overview": 9}, "important_entities": 5,
                "semantic_edges": 44, "matches": 12},
    "lexical": {"topics": 17, "facts_linked": 80, "cross_document_facts": 6},
}


def test_build_page_draws_every_stage_figure_and_the_hierarchy_so_far(page, hier_home):
    from core.models import StageRun

    store, ws = hier_home
    run = store.latest_run(ws.id)
    with store.session() as s:
        for sr in s.exec(select(StageRun).where(StageRun.run_id == run.id)):
            if sr.stage in STAGE_COUNTS and not sr.counts:
                sr.counts = STAGE_COUNTS[sr.stage]
                s.add(sr)
        s.commit()
    counts = {sr.stage: sr.counts for sr in store.stage_runs(run.id)}
    page.switch_page("views/build.py")
    _run(page)
    metrics = {m.label: m.value for m in page.metric}
    for label, stage, key in [("Merge candidates", "merge", "candidates"), ("Auto-merged", "merge", "auto_merged"),
                              ("HLG topics", "lexical", "topics"), ("Semantic edges", "augment", "semantic_edges"),
                              ("Important entities", "augment", "important_entities"),
                              ("KNN edges", "attributed", "knn_edges"), ("C-HNSW nodes", "attributed", "chnsw_nodes")]:
        assert metrics[label] == f"{counts[stage][key]:,}", label
    figures = {json.loads(c.proto.spec)["layout"].get("title", {}).get("text"): json.loads(c.proto.spec)
               for c in page.get("plotly_chart")}
    per_level = counts["attributed"]["communities_per_level"]
    bars = figures["Attributed communities per level (ArchRAG)"]["data"][0]
    assert bars["y"] == [per_level[k] for k in sorted(per_level, key=int)]
    assert figures["NodeRAG: nodes added by kind"]["data"][0]["x"] == list(counts["augment"]["nodes"])
    layers = figures["HiRAG: entities per layer, CS and its change rate"]["data"]
    assert [t["name"] for t in layers][:2] == ["entities", "cluster sparsity CS"]
    assert layers[1]["y"][0] == counts["layers"]["layers"][0]["cluster_sparsity"]
    # communities per level of both Leiden runs: GraphRAG's on the extracted graph, HiRAG's on its layered graph
    for title, c in (("Leiden (GraphRAG) communities per level", counts["communities"]),
                     ("HiRAG communities per level", counts["communities"]["hirag"])):
        per = c["communities_per_level"]
        assert figures[title]["data"][0]["y"] == [per[k] for k in sorted(per, key=int)], title
    mod = counts["communities"]["hirag"]["modularity"]
    assert figures["HiRAG: modularity per level"]["data"][0]["y"] == [mod[k] for k in sorted(mod, key=int)]
    # the hierarchy so far: a sunburst of the Leiden communities, or of another method's when picked
    box = next(n for n in _walk(page.main) if getattr(n, "key", None) == "hierarchy_so_far")
    assert any(c.startswith("Hierarchy so far: Leiden communities (GraphRAG), ") for c in _texts(box, "caption"))
    sun = [_sunburst(n) for n in _walk(box) if getattr(n, "type", None) == "vega_lite_chart"]
    with store.session() as s:
        leiden = set(s.exec(select(Community.id).where(Community.workspace_id == ws.id, Community.method == "leiden")))
        attributed = set(s.exec(select(Community.id).where(Community.workspace_id == ws.id,
                                                           Community.method == "attributed")))
    assert len(sun) == 1 and {i for i in sun[0] if not i.startswith("root:")} == leiden
    page.radio(key="build_hier_method").set_value("attributed")
    _run(page)
    box = next(n for n in _walk(page.main) if getattr(n, "key", None) == "hierarchy_so_far")
    sun = [_sunburst(n) for n in _walk(box) if getattr(n, "type", None) == "vega_lite_chart"]
    assert {i for i in sun[0] if not i.startswith("root:")} == attributed
    with store.session() as s:
        hirag = set(s.exec(select(Community.id).where(Community.workspace_id == ws.id, Community.method == "hirag")))
    page.radio(key="build_hier_method").set_value("hirag")
    _run(page)
    box = next(n for n in _walk(page.main) if getattr(n, "key", None) == "hierarchy_so_far")
    sun = [_sunburst(n) for n in _walk(box) if getattr(n, "type", None) == "vega_lite_chart"]
    assert hirag and {i for i in sun[0] if not i.startswith("root:")} == hirag


def _sunburst(node) -> list[str]:
    """The ids the Build page's "hierarchy so far" sunburst draws (arcs; nothing to select there)."""
    spec, rows = vega(node)
    assert spec["layer"][0]["mark"]["type"] == "arc" and "params" not in spec
    return [r["id"] for r in rows]
