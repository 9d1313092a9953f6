"""The controls no other AppTest drives, each acted on and its effect checked, on one private copy of the built
sample (the session's `sample_built`, database and vectors): on the Graph page the "Node kinds" filter, the
breadcrumb buttons, "…or pick a drawn node" and "Matches"; on the Hierarchy page "Read a source document"; on the
Ask page a source's "Show on graph"; on the Quality page the metrics' "Method", the entity-resolution "Find by
name", "Rank by" and "Leave ambiguous names…", every what-if setting (one variant run with all of them changed)
and "Compare with the current partition" picked by hand. What cannot be driven here: the uploader's per-file
Remove buttons (frontend-only state of st.file_uploader) and clicks in the canvas or a plotly chart (components
AppTest does not run); those are browser tests' business (tests/e2e)."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.explore.community_detail import community_detail
from core.explore.details import describe_node, search_nodes
from core.models import Community, EntityMerge, Node
from core.quality.data import METHODS as QUALITY_METHODS
from core.quality.variants import list_variants
from core.resolution import review as rv
from core.store import Store
from tests.ui.conftest import app_home, open_lazy, open_page, run, sample_copy, wait_for_job
from ui.text import md_label

QUESTION = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_built):
    """STRATA_HOME holding a copy of the built sample. When the build proposed no ambiguous merge candidate (one
    the bulk accept leaves for review by default), the copy marks its lowest-scored candidate ambiguous, as
    core/resolution/candidates.py would mark a short name matching several others."""
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_controls_ui")
    ws = store.require_workspace("sample")
    cands = rv.filter_rows(rv.merge_table(store, ws.id), "candidate")
    if cands and not any(r.evidence.get("ambiguous") and r.score >= 0.5 for r in cands):
        with store.session() as s:
            row = s.get(EntityMerge, min((r for r in cands if r.score >= 0.5), key=lambda r: r.score).id)
            row.evidence = dict(row.evidence) | {"ambiguous": True}
            s.add(row)
            s.commit()
    with app_home(home):
        yield store, ws


# -- helpers ---------------------------------------------------------------------------------------------------------
def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _blocks(at: AppTest, key: str) -> list:
    return [n for n in _walk(at.main) if getattr(n, "type", None) != "expander" and getattr(n, "key", None) == key]


def _texts(node, kind: str) -> list[str]:
    return [str(n.value) for n in _walk(node) if getattr(n, "type", None) == kind]


def _button(at: AppTest, key: str):
    found = [b for b in at.button if b.key == key]
    assert found, f"no button keyed {key!r}"
    return found[0]


def _canvas(at: AppTest) -> list[dict]:
    (comp,) = at.get("component_instance")
    return json.loads(comp.proto.json_args)["data"]["nodes"]


def _ids(at: AppTest) -> set[str]:
    return {n["id"] for n in _canvas(at)}


def _heading(at: AppTest) -> str:
    (box,) = _blocks(at, "graph_details")
    return next(m for m in _texts(box, "markdown") if m.startswith("#### "))


def _expected_heading(store: Store, ws_id: int, nid: str) -> str:
    det = describe_node(store, ws_id, nid)
    return f"#### {md_label(det.title or det.id, 120)}"


# -- Graph -------------------------------------------------------------------------------------------------------------
def test_node_kinds_choose_what_the_nodes_view_draws(home):
    at = open_page("views/graph.py", "Graph")
    assert at.radio(key="graph_mode").value == "Nodes"
    before = {n["kind"] for n in _canvas(at)}
    assert before and "chunk" not in before
    kinds = next(m for m in at.multiselect if m.label == "Node kinds")
    kinds.set_value(["document", "chunk"])
    run(at)
    drawn = {n["kind"] for n in _canvas(at)}
    assert "chunk" in drawn and drawn <= {"document", "chunk"}
    next(m for m in at.multiselect if m.label == "Node kinds").set_value(["entity"])
    run(at)
    assert {n["kind"] for n in _canvas(at)} == {"entity"}


def _open(at: AppTest, cid: str) -> None:
    at.selectbox(key="graph_open").set_value(cid)
    run(at)


def test_breadcrumb_buttons_go_back_to_their_level(home):
    store, ws = home
    at = open_page("views/graph.py", "Graph")
    at.radio(key="graph_mode").set_value("Communities")
    run(at)
    overview = _ids(at)
    with store.session() as s:
        comms = {c.id: c for c in s.exec(select(Community).where(Community.workspace_id == ws.id))}
    kids_of: dict[str, list[str]] = {}
    for c in comms.values():
        if c.parent_id:
            kids_of.setdefault(c.parent_id, []).append(c.id)
    target = max((c for c in overview if kids_of.get(c)), key=lambda c: (len(kids_of[c]), comms[c].size))
    _open(at, target)
    inside = _ids(at)
    kid = next(k for k in kids_of[target] if k in inside)
    _open(at, kid)
    assert _ids(at) != inside
    crumbs = [b for b in at.button if (b.key or "").startswith("graph_crumb_")]
    assert [b.key for b in crumbs] == ["graph_crumb_0", "graph_crumb_1", "graph_crumb_2"]
    assert [b.disabled for b in crumbs] == [False, False, True]
    assert crumbs[1].label == "› " + md_label(comms[target].title, 40)
    crumbs[1].click()  # back to the target's level: its children and members again
    run(at)
    assert _ids(at) == inside
    assert [b.key for b in at.button if (b.key or "").startswith("graph_crumb_")] == ["graph_crumb_0",
                                                                                     "graph_crumb_1"]
    _button(at, "graph_crumb_0").click()  # "Overview"
    run(at)
    assert _ids(at) == overview
    assert _button(at, "graph_back").disabled


def test_pick_a_drawn_node_shows_its_details(home):
    store, ws = home
    at = open_page("views/graph.py", "Graph")
    assert at.selectbox(key="graph_drawn").value is None and not _blocks(at, "graph_details")
    drawn = _canvas(at)
    picks = [next(n["id"] for n in drawn if n["kind"] == kind) for kind in ("entity", "document")]
    for nid in picks:
        at.selectbox(key="graph_drawn").set_value(nid)
        run(at)
        assert at.session_state["graph_pick"] == nid
        assert _heading(at) == _expected_heading(store, ws.id, nid)
    assert _expected_heading(store, ws.id, picks[0]) != _expected_heading(store, ws.id, picks[1])


def test_matches_pick_another_search_result(home):
    store, ws = home
    with store.session() as s:
        titles = list(s.exec(select(Node.title).where(Node.workspace_id == ws.id, Node.kind == "entity")
                             .order_by(Node.weight.desc())))  # type: ignore[union-attr]
    query, matches = "", []
    for word in (w for t in titles for w in re.findall(r"[A-Za-z]{4,}", t)):
        matches = search_nodes(store, ws.id, word)
        if len({title for _, _, title in matches}) >= 2:
            query = word
            break
    assert query, "no name in the sample shares a word with another"
    other = next(m for m in matches if m[2] != matches[0][2])
    at = open_page("views/graph.py", "Graph")
    at.text_input(key="graph_query").input(query)
    run(at)
    assert at.session_state["graph_pick"] == matches[0][0]  # the first match is shown at once
    box = at.selectbox(key="graph_match")
    assert len(box.options) == len(matches) >= 2
    box.set_value(other[0])
    run(at)
    assert at.session_state["graph_pick"] == other[0]
    assert _heading(at) == _expected_heading(store, ws.id, other[0])
    assert _heading(at) != _expected_heading(store, ws.id, matches[0][0])


# -- Hierarchy ---------------------------------------------------------------------------------------------------------
def test_read_a_source_document_shows_that_documents_text(home):
    store, ws = home
    with store.session() as s:
        leiden = list(s.exec(select(Community.id).where(Community.workspace_id == ws.id, Community.method == "leiden")
                             .order_by(Community.size.desc())))  # type: ignore[union-attr]
    cid, det = next((c, d) for c in leiden for d in [community_detail(store, ws.id, c)] if len(d.documents) >= 2)
    at = open_page("views/hierarchy.py", "Hierarchy")
    assert at.radio(key="hier_method").value == "leiden"
    next(s for s in at.selectbox if s.label.startswith("Open a")).set_value(cid)
    run(at)
    reader = at.selectbox(key=f"hier_read_{cid}")
    first, second = det.documents[0].id, det.documents[1].id
    assert reader.value == first
    docs = store.documents_by_id(ws.id, [first, second])
    (box,) = _blocks(at, "hier_detail")
    assert [t.strip() for t in _texts(box, "text")] == [docs[first].text[:20000].strip()]
    reader.set_value(second)
    run(at)
    (box,) = _blocks(at, "hier_detail")
    assert [t.strip() for t in _texts(box, "text")] == [docs[second].text[:20000].strip()]
    assert docs[first].text != docs[second].text


# -- Ask ---------------------------------------------------------------------------------------------------------------
def test_show_a_source_document_on_the_graph(home):
    store, ws = home
    at = open_page("views/ask.py", "Ask", timeout=180)
    at.text_area(key="question").input(QUESTION)
    at.multiselect(key="strategies").set_value(["naive"])
    next(b for b in at.button if b.label == "Ask").click()
    run(at)
    open_lazy(at)  # a source's chunk and document are read when it is opened
    sources = [e for e in at.expander if re.match(r"\[\d+\] ", e.label)]
    assert sources
    k = min(2, len(sources))  # the second source when there is one: the button is the source's own
    shown = _texts(sources[k - 1], "text")  # its best chunk, then its document
    assert len(shown) == 2
    _button(at, f"godoc_0_{k}").click()
    run(at)
    assert [t.value for t in at.title] == ["Graph"]
    doc_id = at.session_state["graph_focus"]
    doc = store.documents_by_id(ws.id, [doc_id])[doc_id]
    assert shown[1].startswith(doc.text[:3000])  # the document whose tab held the button
    drawn = {n["id"]: n for n in _canvas(at)}
    assert drawn[doc_id]["kind"] == "document" and len(drawn) > 1  # its neighbourhood
    assert any(i.value == "Neighbourhood of the selected node." for i in at.info)


# -- Quality -----------------------------------------------------------------------------------------------------------
@pytest.fixture
def quality(home) -> AppTest:
    return open_page("views/quality.py", "Quality", timeout=300)


def test_method_switch_measures_that_methods_communities(quality, home):
    store, ws = home
    at = quality
    assert at.radio(key="q_method").value == "leiden"
    layers = "hirag_layers" if "hirag_layers" in QUALITY_METHODS else "hirag"
    with store.session() as s:
        attributed = list(s.exec(select(Community).where(Community.workspace_id == ws.id,
                                                         Community.method == "attributed")))
        summaries = list(s.exec(select(Node.id, Node.title).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                                  Node.layer > 0)))  # type: ignore[operator]
    assert attributed and summaries, "the sample builds attributed communities and HiRAG summary layers"
    for method, unit, named in (("attributed", "Level", [(c.id, c.title) for c in attributed]),
                                (layers, "Layer", summaries)):
        at.radio(key="q_method").set_value(method)
        run(at)
        level = at.selectbox(key=f"q_level_{method}")
        assert level.label == unit
        opens = [b.key for b in at.button if (b.key or "").startswith("q_open_")]
        assert opens and all(k.startswith(f"q_open_{method}_{level.value}_") for k in opens)
        worst = [m.value.split("**")[1].split(". ", 1)[1] for m in at.markdown
                 if re.match(r"\*\*\d+\. ", m.value) and " · badness " in m.value]
        assert len(worst) == len(opens)
        assert set(worst) <= {md_label(t or i, 100) for i, t in named}  # this method's communities, no other
        communities = next(x.value for x in at.metric if x.label == "Communities")
        if method == "attributed":
            assert communities == f"{sum(c.level == level.value for c in attributed):,}"


def test_every_other_method_is_measured_or_said_absent(quality, home):
    """The community methods the radio offers beyond those above (HiRAG's and NodeRAG's own communities, when the
    engine has them): each one's levels, or the plain "No … in this build" when the build stored none."""
    store, ws = home
    at = quality
    others = [m for m in QUALITY_METHODS if m not in ("leiden", "attributed", "hirag_layers")
              and not (m == "hirag" and "hirag_layers" not in QUALITY_METHODS)]
    for method in others:
        with store.session() as s:
            stored = s.exec(select(Community.id).where(Community.workspace_id == ws.id,
                                                       Community.method == method)).first() is not None
        at.radio(key="q_method").set_value(method)
        run(at)
        levels = [b for b in at.selectbox if b.key == f"q_level_{method}"]
        opens = [b.key for b in at.button if (b.key or "").startswith("q_open_")]
        if stored:
            assert levels and opens and all(k.startswith(f"q_open_{method}_") for k in opens)
        else:
            assert not levels and not opens
            assert any(i.value == f"No {QUALITY_METHODS[method].split(' ')[0]} communities in this build."
                       for i in at.info), [i.value for i in at.info]


def _rows_shown(at: AppTest) -> list[int]:
    return [int(n.key.rsplit("_", 1)[1]) for n in _walk(at.main)
            if re.fullmatch(r"mr_row_\d+", str(getattr(n, "key", None) or ""))]


def _quality_tab(at: AppTest, name: str) -> AppTest:
    at.session_state["q_tab"] = name  # the page's lazy tabs draw only the open one
    return run(at)


def test_find_by_name_and_rank_by_choose_the_rows(quality, home):
    store, ws = home
    at = _quality_tab(quality, "Entity resolution")
    rows = rv.merge_table(store, ws.id)
    cands = rv.filter_rows(rows, "candidate")
    assert len(cands) >= 2
    assert _rows_shown(at) == [r.id for r in cands][:20]
    query, want = next((q, w) for r in cands for q in re.findall(r"[A-Za-z]{4,}", r.titles[1])
                       for w in [rv.filter_rows(rows, "candidate", q)] if 0 < len(w) < len(cands))
    at.text_input(key="mr_query").input(query)
    run(at)
    assert _rows_shown(at) == [r.id for r in want]
    assert any(c.value == f"{len(want):,} shown, ranked by combined score." for c in at.caption)
    at.text_input(key="mr_query").input("no entity is named like this")
    run(at)
    assert not _rows_shown(at) and any(c.value == "Nothing matches." for c in at.caption)
    at.text_input(key="mr_query").input("")
    run(at)
    assert _rows_shown(at) == [r.id for r in cands][:20]
    default = [r.id for r in cands]
    rank = next(k for k in rv.RANKS if [r.id for r in rv.filter_rows(rows, "candidate", "", k)] != default)
    at.selectbox(key="mr_rank").set_value(rank)
    run(at)
    assert _rows_shown(at) == [r.id for r in rv.filter_rows(rows, "candidate", "", rank)][:20] != default[:20]
    assert any(c.value.endswith(f" shown, ranked by {rank}.") for c in at.caption)


def test_leave_ambiguous_names_changes_what_a_bulk_accept_takes(quality, home):
    store, ws = home
    at = _quality_tab(quality, "Entity resolution")
    cands = rv.filter_rows(rv.merge_table(store, ws.id), "candidate")
    vague = [r for r in cands if r.evidence.get("ambiguous") and r.score >= 0.5]
    assert vague
    floor = max(0.5, math.floor(min(r.score for r in vague) * 100) / 100)
    at.slider(key="mr_bulk_score").set_value(floor)
    run(at)
    above = [r for r in cands if r.score >= floor]
    n_clear = sum(not r.evidence.get("ambiguous") for r in above)
    assert at.checkbox(key="mr_bulk_vague").value
    assert _button(at, "mr_bulk").label == f"Accept {n_clear} candidate(s)"
    at.checkbox(key="mr_bulk_vague").uncheck()
    run(at)
    assert _button(at, "mr_bulk").label == f"Accept {len(above)} candidate(s)"
    assert len(above) > n_clear


def _partitions(at: AppTest) -> list[str]:
    (box,) = _blocks(at, "wi_table")
    table = next(m for m in _texts(box, "markdown") if "<table" in m)
    return [html.unescape(c) for c in re.findall(r"<tr><td>(.*?)</td>", table)]


def test_every_what_if_setting_reaches_the_variant_and_compare_follows_the_pick(quality, home):
    store, ws = home
    at = _quality_tab(quality, "What-if")
    n = {k: at.number_input(key=k).value for k in ("wi_max_size", "wi_levels", "wi_seed", "wi_knn_k", "wi_min_sim")}
    weights = at.checkbox(key="wi_weights").value
    assert not at.checkbox(key="wi_knn").value
    want = {"max_cluster_size": n["wi_max_size"] + 5, "max_levels": 2 if n["wi_levels"] != 2 else 3,
            "seed": n["wi_seed"] + 1, "use_weights": not weights, "knn": True,
            "knn_k": max(1, n["wi_knn_k"] - 4), "min_similarity": round(n["wi_min_sim"] + 0.1, 2)}
    at.text_input(key="wi_name").input("all settings")
    at.number_input(key="wi_max_size").set_value(want["max_cluster_size"])
    at.number_input(key="wi_levels").set_value(want["max_levels"])
    at.number_input(key="wi_seed").set_value(want["seed"])
    at.checkbox(key="wi_weights").set_value(want["use_weights"])
    at.checkbox(key="wi_knn").check()
    at.number_input(key="wi_knn_k").set_value(want["knn_k"])
    at.number_input(key="wi_min_sim").set_value(want["min_similarity"])
    next(b for b in at.button if b.label == "Run variant").click()
    run(at)
    assert wait_for_job(store, ws.name).status == "done"  # a what-if job of the background worker
    run(at)
    assert any(s.value.startswith("Variant **all settings** made") for s in at.success), [s.value for s in at.success]
    (v,) = [v for v in list_variants(store, ws) if v.name == "all settings"]
    got = {k: v.settings[k] for k in want}
    assert got == pytest.approx(want)
    assert v.metrics, "the variant was measured"
    # a second variant, then the comparison follows the variants picked by hand
    at.text_input(key="wi_name").input("second")
    at.checkbox(key="wi_knn").uncheck()
    next(b for b in at.button if b.label == "Run variant").click()
    run(at)
    assert wait_for_job(store, ws.name).status == "done"
    run(at)
    assert at.multiselect(key="wi_compare").value == ["second", "all settings"]
    assert set(_partitions(at)) == {"current", "second", "all settings"}
    at.multiselect(key="wi_compare").set_value(["all settings"])
    run(at)
    assert set(_partitions(at)) == {"current", "all settings"}
    (box,) = _blocks(at, "wi_compare_box")
    (chart,) = [json.loads(n.proto.spec) for n in _walk(box) if getattr(n, "type", None) == "plotly_chart"]
    assert {t["name"] for t in chart["data"]} == {"current", "all settings"}
    at.multiselect(key="wi_compare").set_value([])
    run(at)
    assert set(_partitions(at)) == {"current"}
