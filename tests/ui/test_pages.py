"""Page logic with AppTest (streamlit.testing.v1): every page of the app against a sample workspace built once,
in this process, under a temporary STRATA_HOME. No browser; the real-browser checks live in tests/e2e."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core.explore.build_counts import graph_counts
from core.models import Community
from tests.ui.conftest import open_lazy

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
SAMPLE_DIR = ROOT / "data" / "sample"
UNESCAPED = re.compile(r"(?<!\\)[*_`\[\]<>$]")  # document text in a Markdown label must be escaped
QUESTION = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


def _clear_streamlit_caches() -> None:
    # st.cache_resource / st.cache_data live for the whole process, across AppTest runs: settings and store
    # cached by another test (or another STRATA_HOME) must not leak in here.
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture(scope="session")
def ui_home(tmp_path_factory, embedder):
    """A STRATA_HOME holding the `sample` workspace, fully built in this process (offline backend).

    The environment is set before any page runs, so the app's cached settings point here; the app's bootstrap
    then finds `sample` present and starts no background worker."""
    from core.config import Settings
    from core.pipeline.factory import make_context
    from core.pipeline.runner import create_run, run_build
    from core.store import Store
    from core.workspace import ingest_paths

    home = tmp_path_factory.mktemp("strata_ui")
    mp = pytest.MonkeyPatch()
    mp.setenv("STRATA_HOME", str(home))
    mp.setenv("STRATA_BACKEND", "offline")
    mp.setenv("HF_HUB_OFFLINE", "1")
    _clear_streamlit_caches()
    settings = Settings.from_env()
    assert settings.storage.home == home
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("sample")
    rep = ingest_paths(store, ws, [SAMPLE_DIR], settings)
    assert rep.added and not rep.refusals, rep
    ctx = make_context(store, ws, settings, embedder=embedder)
    run = create_run(store, ws, settings)
    events = list(run_build(ctx, run.id))
    assert events[-1].status == "done", events[-1]
    _clear_streamlit_caches()
    yield home, store
    _clear_streamlit_caches()
    mp.undo()


@pytest.fixture
def store(ui_home):
    return ui_home[1]


@pytest.fixture
def app(ui_home) -> AppTest:
    """A fresh session of the app, run once (it opens on Workspaces & upload)."""
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _open(at: AppTest, page: str) -> AppTest:
    at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox, "the router (app.py) did not run"  # the shared sidebar is drawn on every page
    return at


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _block(at: AppTest, key: str):
    found = [n for n in _walk(at.main) if getattr(n, "type", None) != "expander" and getattr(n, "key", None) == key]
    assert found, f"no container keyed {key!r}"
    return found[0]


def _expanders(node) -> list:
    return [n for n in _walk(node) if getattr(n, "type", None) == "expander"]


def _text_in(node) -> str:
    return " ".join(str(n.value) for n in _walk(node) if getattr(n, "type", None) in ("markdown", "text", "caption"))


# -- Workspaces & upload -----------------------------------------------------------------------------------------
def test_workspaces_page_lists_sample_with_counts(app, store):
    assert [t.value for t in app.title] == ["Workspaces & upload"]
    table = app.dataframe[0].value
    rows = table.to_dict("records")
    assert [r["workspace"] for r in rows] == ["sample"]
    ws = store.require_workspace("sample")
    counts = store.counts(ws.id)
    g = graph_counts(store, ws.id)  # the Build page's verdict counts the same way
    row = rows[0]
    assert row["documents"] == counts["document"] == 15
    assert row["chunks"] == counts["chunk"] > 0
    assert row["entities"] == g.entities == counts["entity"] - g.summary_entities > 0  # after resolution, layer 0
    assert row["communities"] == g.communities == sum(m.total for k, m in g.methods.items() if k != "wcc") > 0
    assert row["status"] == "built" and row["backend"] == "offline"
    # the document list of the selected workspace, and the sidebar's build caption
    assert any(s.value == "Add documents to “sample”" for s in app.subheader)
    assert len(app.dataframe[1].value) == 15
    assert any("build 1" in c.value for c in app.sidebar.caption)
    # nothing chosen yet: the upload button waits for files
    add = next(b for b in app.button if b.label == "Add and build")
    assert add.disabled


def test_invalid_workspace_name_is_refused_and_creates_nothing(app, store, ui_home):
    home = ui_home[0]
    before_ws = [w.name for w in store.workspaces()]
    before_files = {p.relative_to(home) for p in home.rglob("*")}
    field = next(t for t in app.text_input if t.label == "Name")
    field.input("../bad")
    next(b for b in app.button if b.label == "Create").click()
    app.run()
    assert not app.exception
    assert any("invalid workspace name" in e.value for e in app.error), [e.value for e in app.error]
    assert [w.name for w in store.workspaces()] == before_ws
    after_files = {p.relative_to(home) for p in home.rglob("*")}
    assert not [p for p in after_files - before_files if not p.name.startswith("strata.db")]  # db journal only
    assert not (home / "bad").exists() and not (home.parent / "bad").exists() and not (ROOT / "bad").exists()
    # the table still lists sample alone, and the selected workspace did not change
    assert [r["workspace"] for r in app.dataframe[0].value.to_dict("records")] == ["sample"]
    assert app.session_state["workspace"] == "sample"


def test_upload_of_a_binary_file_is_refused_without_a_build(app, store):
    ws = store.require_workspace("sample")
    run_before = store.latest_run(ws.id).id
    app.file_uploader[0].set_value(("~~junk~~ [scan](x).txt", bytes(range(256)) * 8, "text/plain"))
    app.run()
    add = next(b for b in app.button if b.label == "Add and build")
    assert not add.disabled
    add.click()
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert any(i.value == "0 document(s) added, 1 refused" for i in app.info), [i.value for i in app.info]
    warnings = [w.value for w in app.warning]
    # the file name reaches Markdown escaped: shown as typed, not as italics
    assert any(r"\~\~junk\~\~ \[scan\]\(x\)\.txt" in w and "refused" in w and "binary" in w for w in warnings), warnings
    assert store.latest_run(ws.id).id == run_before  # nothing added, nothing built
    assert store.counts(ws.id)["document"] == 15


# -- Build ---------------------------------------------------------------------------------------------------------
def test_build_page_shows_all_stages_done_and_metrics(app, store):
    from core.pipeline.runner import stage_names

    _open(app, "views/build.py")
    assert [t.value for t in app.title] == ["Build"]
    ws = store.require_workspace("sample")
    assert any(s.value.startswith(f"**Build {ws.build_version} finished** in ") for s in app.success), \
        [s.value for s in app.success]
    stages = app.dataframe[0].value
    assert list(stages["stage"]) == stage_names()
    assert set(stages["status"]) == {"done"}
    n = len(stage_names())
    progress = app.get("progress")
    assert progress and progress[0].value == 100
    assert f"{n}/{n} stages done" in str(progress[0].proto.text)
    counts = store.counts(ws.id)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Documents"] == "15"
    for label, key in [("Chunks", "chunk"), ("Relationships", "relationship"), ("Statements", "statement"),
                       ("Edges", "edge")]:
        assert metrics[label] == f"{counts[key]:,}", label
        assert counts[key] > 0, key
    # entities: the extracted ones after resolution and HiRAG's summary entities, apart, adding up to every entity
    entities, summary = (int(metrics[k].replace(",", "")) for k in ("Entities after resolution", "Summary entities"))
    assert entities + summary == counts["entity"] and entities > 0
    facts = next(m.value for m in app.markdown if "entities after resolution" in m.value)
    assert f"{entities:,} entities after resolution" in facts, facts  # the verdict says the same number
    # HLG topics say what stands in for the paper's model-made topics (issue 26, §6.2)
    topics = next(m for m in app.metric if m.label == "HLG topics")
    assert "stands in" in topics.proto.help and "§6.2" in topics.proto.help
    # HiRAG §5.4: CS and its change rate per layer, as the layers stage recorded them, in the table and the chart
    import json

    from sqlmodel import select

    from core.models import StageRun

    with store.session() as s:
        run = s.exec(select(StageRun).where(StageRun.stage == "layers", StageRun.status == "done")
                     .order_by(StageRun.id.desc())).first()  # type: ignore[union-attr]
    rows = run.counts["layers"]
    table = next(d.value for d in app.dataframe if "cluster sparsity" in d.value.columns)
    assert list(table["layer"]) == [r["layer"] for r in rows]
    assert [None if v != v else v for v in table["cluster sparsity"]] == [r["cluster_sparsity"] for r in rows]
    assert [None if v != v else v for v in table["change rate"]] == [r["change_rate"] for r in rows]
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    layer_chart = next(c for c in charts if "entities per layer" in c["layout"]["title"]["text"])
    traces = {t.get("name"): t for t in layer_chart["data"]}
    assert traces["cluster sparsity CS"]["y"] == [r["cluster_sparsity"] for r in rows]
    assert any(n.startswith("ε = ") for n in traces), list(traces)
    # idle workspace: Build is enabled, Stop is not
    buttons = {b.label: b for b in app.button}
    assert not buttons["Build / resume"].disabled
    assert buttons["Stop"].disabled


def test_building_with_ollama_and_no_server_says_why_and_starts_nothing(ui_home, store, monkeypatch):
    """The Build page's "ollama" choice with nothing listening at OLLAMA_HOST: a clear error, no new run."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{port}")
    _clear_streamlit_caches()  # the app's settings are read again, with that host
    try:
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.run()
        _open(at, "views/build.py")
        ws = store.require_workspace("sample")
        before = store.latest_run(ws.id).id
        next(r for r in at.radio if "ollama" in r.options).set_value("ollama")
        at.run()
        next(b for b in at.button if b.label == "Build / resume").click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        errors = [e.value.replace("\\", "") for e in at.error]  # (the server's words are shown escaped)
        assert errors and f"127.0.0.1:{port}" in errors[0], errors
        assert store.latest_run(ws.id).id == before, "no build was started"
    finally:
        monkeypatch.undo()
        _clear_streamlit_caches()


# -- Graph ---------------------------------------------------------------------------------------------------------
def _canvas_nodes(at: AppTest) -> list[dict]:
    (comp,) = at.get("component_instance")
    return json.loads(comp.proto.json_args)["data"]["nodes"]


def test_graph_page_draws_on_the_canvas_and_notes_the_cap(app, store):
    _open(app, "views/graph.py")
    assert [t.value for t in app.title] == ["Graph"]
    (comp,) = app.get("component_instance")
    assert not re.findall(r"https?://", comp.proto.json_args), "an external resource in the drawing"
    assert _canvas_nodes(app)

    ws = store.require_workspace("sample")
    counts = store.counts(ws.id)
    from core.explore.explorer import DEFAULT_METHODS

    with store.session() as sess:  # the page opens on the default methods' communities (WCC ones are never drawn)
        shown_comms = len(sess.exec(select(Community).where(
            Community.workspace_id == ws.id, Community.method.in_(DEFAULT_METHODS))).all())  # type: ignore[attr-defined]
    total = sum(counts.get(k, 0) for k in ("entity", "document")) + shown_comms  # the default kinds
    slider = next(s for s in app.slider if s.label == "Max nodes")
    assert total > slider.min  # the sample is bigger than the smallest cap
    slider.set_value(int(slider.min))
    app.run()
    assert not app.exception
    notes = [c.value for c in app.caption if c.value.startswith("Showing ")]
    assert len(notes) == 1, [c.value for c in app.caption]
    m = re.match(r"Showing ([\d,]+) of ([\d,]+) nodes of the selected kinds \(cap ([\d,]+)\)", notes[0])
    assert m, notes[0]
    shown, of, cap = (int(g.replace(",", "")) for g in m.groups())
    assert cap == slider.min and 0 < shown <= cap < of == total
    nodes = _canvas_nodes(app)
    assert len(nodes) == shown
    assert {n["kind"] for n in nodes} <= {"entity", "community", "document"}


# -- Ask -----------------------------------------------------------------------------------------------------------
def _ask(at: AppTest, question: str, strategy: str | None = None) -> AppTest:
    at.text_area(key="question").input(question)
    if strategy is not None:
        at.multiselect(key="strategies").set_value([strategy])
    next(b for b in at.button if b.label == "Ask").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_ask_hirag_shows_three_panels_and_sources(app):
    _open(app, "views/ask.py")
    assert app.multiselect(key="strategies").value == ["hirag"]
    _ask(app, QUESTION)
    answer_heads = [m.value for m in app.markdown if m.value.startswith("#### Answer")]
    assert len(answer_heads) == 1 and "HiRAG" in answer_heads[0]
    open_lazy(app)  # every item and source opened
    for name in ("local", "bridge", "global"):
        panel = _block(app, f"panel_{name}")
        heading = next(m.value for m in _walk(panel) if getattr(m, "type", None) == "markdown")
        assert heading.startswith(f"**{name.capitalize()}**"), heading
        items = _expanders(panel)
        assert items, f"{name} panel is empty"
        n = int(re.search(r"\((\d+)\)$", heading).group(1))  # "**Local** · Detail (20)"
        captions = [c.value for c in _walk(panel) if getattr(c, "type", None) == "caption"]
        kinds = {k: int(c) for line in captions if line.startswith("From ")
                 for c, k in re.findall(r"(\d+) (\w+) nodes?", line)}  # "From 20 entity nodes, 13 chunk nodes; ..."
        assert sum(kinds.values()) == n
        assert len(items) == sum(min(c, 12) for c in kinds.values())  # up to 12 of each kind
        for k, c in kinds.items():
            assert (c > 12) == any(f"{c - 12} more {k} node" in line for line in captions if line.startswith("and "))
        for it in items:
            title = it.label.rsplit(" · ", 2)[0]
            assert title.strip()
            assert not UNESCAPED.search(title), f"unescaped Markdown in {it.label!r}"
            assert _text_in(it).strip(), f"empty item {it.label!r} in the {name} panel"
    assert any(m.value == "#### Sources" for m in app.markdown)
    sources = [e for e in app.expander if re.match(r"\[\d+\] ", e.label)]
    assert sources
    assert any("Amara Okafor" in e.label or "Halden Barrier" in e.label for e in sources), [e.label for e in sources]
    assert any(r"amara\_okafor\_profile\.md" in _text_in(e) for e in sources)  # file names escaped, too


def test_ask_with_an_empty_question_warns(app):
    _open(app, "views/ask.py")
    _ask(app, "   ")
    assert [w.value for w in app.warning] == ["Type a question first."]
    assert not [m for m in app.markdown if m.value.startswith("#### Answer")]
    assert not [m for m in app.markdown if m.value == "#### Sources"]


def test_ask_with_the_naive_strategy(app):
    from core.retrieval.base import get_strategy

    _open(app, "views/ask.py")
    _ask(app, QUESTION, strategy="naive")
    heads = [m.value for m in app.markdown if m.value.startswith("#### Answer")]
    assert heads == [f"#### Answer · {get_strategy('naive').label}"]
    assert app.session_state["ask_results"][1][0][0].strategy == "naive"
    for name in ("local", "bridge", "global"):
        _block(app, f"panel_{name}")  # all three panels drawn, possibly with "Nothing at this level"
    assert any(m.value == "#### Sources" for m in app.markdown)
    assert [e for e in app.expander if re.match(r"\[\d+\] ", e.label)]
    # and back to hirag in the same session
    _ask(app, QUESTION, strategy="hirag")
    assert app.session_state["ask_results"][1][0][0].strategy == "hirag"

def test_creating_a_workspace_selects_it_without_an_error(app, store):
    """Item 2 of issue 10: "Create" used to set the sidebar selectbox's state after it was drawn and crashed."""
    field = next(t for t in app.text_input if t.label == "Name")
    field.input("contracts-2024")
    next(b for b in app.button if b.label == "Create").click()
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert "contracts-2024" in [w.name for w in store.workspaces()]
    assert app.session_state["workspace"] == "contracts-2024"
    assert app.sidebar.selectbox[0].value == "contracts-2024"
    assert any(s.value == "Add documents to “contracts-2024”" for s in app.subheader)
    # the sidebar's picker switches between workspaces
    app.sidebar.selectbox[0].set_value("sample")
    app.run()
    assert any(s.value == "Add documents to “sample”" for s in app.subheader)
    app.sidebar.selectbox[0].set_value("contracts-2024")
    app.run()
    assert not app.exception and any(s.value == "Add documents to “contracts-2024”" for s in app.subheader)
    # and deleting it returns to another workspace, again without an error
    confirm = next(t for t in app.text_input if t.label.startswith("Type"))
    confirm.input("contracts-2024")
    app.run()
    next(b for b in app.button if b.label == "Delete workspace").click()
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert "contracts-2024" not in [w.name for w in store.workspaces()]
    assert app.session_state["workspace"] == "sample"
