"""The Ask page with AppTest (streamlit.testing.v1), on a copy of the session's built sample (`sample_built`):
one strategy in the wide three-panel layout, its best evidence first (quoted, highlighted, cited, saying no model
wrote it) and its evidence chain drawn small, the whole path one switch away; two strategies side by side, each
with its answer block, panels and sources; the picker offers the designs and the ablations behind a switch;
"Show on graph" opens the Graph page on the item's node; the history shows each answer, re-opens past results in
the order picked and exports them all as JSON."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from core.explore.strategies import ablations, designs, item_score
from core.history import export_json
from core.retrieval.base import get_strategy
from tests.ui.conftest import open_lazy
from ui.lazy import LAZY
from ui.text import md_escape

APP = Path(__file__).resolve().parents[2] / "app.py"
UNESCAPED = re.compile(r"(?<!\\)[*_`\[\]<>$]")  # document text in a Markdown label must be escaped
QUESTION = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"
QUESTION_2 = "Who chairs the foundation that paid for the Carrow Gold field trials?"


def _clear_caches() -> None:
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture(scope="module")
def ask_home(tmp_path_factory, sample_built):
    """STRATA_HOME holding a copy of the built sample, database and vectors (the shared one stays untouched)."""
    from tests.stores import copy_database, postgres

    home = tmp_path_factory.mktemp("strata_ask_ui")
    src_home = sample_built.settings.storage.home
    store = copy_database(sample_built.settings.storage.db_url, home)
    shutil.copytree(src_home / "vectors", home / "vectors")
    mp = pytest.MonkeyPatch()
    mp.setenv("STRATA_HOME", str(home))
    mp.setenv("STRATA_BACKEND", "offline")
    mp.setenv("HF_HUB_OFFLINE", "1")
    if postgres():  # the copy's database on the test server
        mp.setenv("STRATA_DATABASE_URL", store.url)
    if sample_built.settings.storage.chroma_url:  # on a Chroma server the app reads the sample's collections there
        mp.setenv("STRATA_CHROMA_URL", sample_built.settings.storage.chroma_url)  # (asking writes no vector)
    _clear_caches()
    yield store, store.require_workspace("sample")
    _clear_caches()
    mp.undo()


@pytest.fixture
def page(ask_home) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("views/ask.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Ask"]
    return at


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _block(at, key: str):
    found = [n for n in _walk(getattr(at, "main", at))
             if getattr(n, "type", None) != "expander" and getattr(n, "key", None) == key]
    assert found, f"no container keyed {key!r}"
    return found[0]


def _of_type(node, kind: str) -> list:
    return [n for n in _walk(node) if getattr(n, "type", None) == kind]


def _text_in(node) -> str:
    return " ".join(str(n.value) for n in _walk(node) if getattr(n, "type", None) in ("markdown", "text", "caption"))


def _ask(at: AppTest, question: str, strategies: list[str]) -> AppTest:
    at.text_area(key="question").input(question)
    at.multiselect(key="strategies").set_value(strategies)
    next(b for b in at.button if b.label == "Ask").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _heads(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("#### Answer")]


def _drawings(at: AppTest) -> list[list[dict]]:
    """The nodes of every drawing on the page (paths and graphs all draw in the canvas component)."""
    return [json.loads(c.proto.json_args)["data"]["nodes"] for c in at.get("component_instance")]


def _check_panel(panel, name: str) -> int:
    heading = next(m.value for m in _of_type(panel, "markdown"))
    assert heading.startswith(f"**{name.capitalize()}**"), heading
    n = int(re.search(r"\((\d+)\)$", heading).group(1))
    items = _of_type(panel, "expander")
    captions = [c.value for c in _of_type(panel, "caption")]
    kinds = {k: int(c) for line in captions if line.startswith("From ")
             for c, k in re.findall(r"(\d+) (\w+) nodes?", line)}
    assert sum(kinds.values()) == n
    assert len(items) == sum(min(c, 12) for c in kinds.values())  # up to 12 of each kind, the rest counted
    for k, c in kinds.items():
        assert (c > 12) == any(f"{c - 12} more {k} node" in line for line in captions if line.startswith("and "))
    for it in items:
        title, kind, score = it.label.rsplit(" · ", 2)
        assert title.strip() and not UNESCAPED.search(title), f"unescaped Markdown in {it.label!r}"
        named = re.fullmatch(r"[A-Za-z][\w ,'+()\-]*[a-z)] -?[\d.e+\-]+", score.replace("\\", ""))
        assert named, f"{it.label!r}: a score says what it is"
        assert re.search(r"node \S+ · \w+", _text_in(it)), f"{it.label!r} does not say which node it came from"
        assert [b for b in _of_type(it, "button") if b.label == "Show on graph"]
    if n:
        assert any(c.value.startswith("From ") for c in _of_type(panel, "caption"))
    return n


def _evidence(at, i=0) -> tuple[list[str], list[str]]:
    """The quotes and captions of answer block `i`'s evidence card."""
    card = _block(at, f"evidence_{i}")
    quotes = [m.value for m in _of_type(card, "markdown") if m.value.startswith("> ")]
    return quotes, [c.value for c in _of_type(card, "caption")]


def test_the_drawn_page_loads_its_default_strategys_first_question_in_the_background(page, ask_home):
    """Once drawn, the page loads what a first HiRAG question reads (the embedder, the graph view, the entity
    vectors) in a background thread into the cache every session shares (ui/resources.py `warm_up`), so the question
    typed meanwhile does not wait for them; and that question's answer is the one a cold load gives."""
    import threading
    import time

    from core.retrieval.base import VECTORS, VIEW
    from core.workspace import open_resources
    from ui import resources as R

    store, ws = ask_home
    key = R.ws_key(ws)
    warming = [t for t in threading.enumerate() if t.name == f"strata-warm-{key}"]
    deadline = time.monotonic() + 120
    while any(t.is_alive() for t in warming) and time.monotonic() < deadline:
        time.sleep(0.1)
    res = R.resources(ws.name, key)  # the cached one: the page has not asked anything
    assert res.cache.peek(VIEW) is not None and res.cache.peek(VECTORS, "entity") is not None
    _ask(page, QUESTION, ["hirag"])
    cold = open_resources(store, ws, R.settings(), R.workspace_embedder(ws))
    again = get_strategy("hirag").retrieve(cold, QUESTION)
    got = page.session_state["ask_results"][1][0][0]
    assert got.sources and [(s.document_id, s.score) for s in got.sources] == [
        (s.document_id, s.score) for s in again.sources]


def test_one_strategy_answers_beside_three_panels_sources_and_its_path(page, ask_home):
    at = page
    ms = at.multiselect(key="strategies")
    assert ms.value == ["hirag"] and ms.proto.max_selections == 3
    assert {get_strategy(n).label for n in ("naive", "hirag")} <= set(ms.options)
    # the designs are offered, the ablations are not (until the research switch)
    assert list(ms.options) == [get_strategy(n).label for n in designs()]
    assert not {get_strategy(n).label for n in ablations()} & set(ms.options)
    # the mapping of every offered strategy is documented on the page
    mapping = next(m.value for m in at.markdown if m.value.startswith("- **"))
    lines = mapping.splitlines()
    assert len(lines) == len(designs())
    for name, line in zip(designs(), lines):
        assert line.startswith(f"- **{md_escape(get_strategy(name).label)}** (`{name}`): "), line
    hirag = next(x for x in lines if "(`hirag`)" in x)
    assert "*local*: descriptions of the n entities nearest" in hirag and "; *global*: reports" in hirag
    _ask(at, QUESTION, ["hirag"])
    assert _heads(at) == [f"#### Answer · {get_strategy('hirag').label}"]
    assert md_escape(get_strategy("hirag").description) in [c.value for c in at.caption]

    # the answer block first: the best evidence, quoted with the question's words in bold, cited by its document
    quotes, captions = _evidence(at)
    assert quotes and all("**" in q for q in quotes)
    assert all(re.match(r"\[\d+\] \S", c) for c in captions), captions
    texts = {d.title: " ".join(d.text.split()) for d in ask_home[0].documents(ask_home[1].id)}
    result = at.session_state["ask_results"][1][0][0]
    for e in result.trace["evidence"]:  # each quote is its document's sentence, and [n] is that document
        assert " ".join(e["sentence"].split()) in texts[e["title"]]
        assert result.sources[e["cite"] - 1].title == e["title"]
    assert "**University** of Carrow" in quotes[-1]  # the second hop: the engineer's university
    assert [e["hop"] for e in result.trace["evidence"]] == [1, 2] and result.trace["evidence"][1]["via"] == "Amara Okafor"
    assert any(c.value.startswith("No language model wrote this") for c in at.caption)
    # the answer block stands before the context panels
    order = [getattr(n, "key", None) for n in _walk(at.main)]
    assert order.index("evidence_0") < order.index("panel_local")

    # the evidence chain, drawn small: question entity -> ... -> answer entity, then the cited documents
    chain = _block(at, "chain_0")
    line = next(m.value for m in _of_type(chain, "markdown") if m.value.startswith("**Evidence chain**"))
    assert "Halden Barrier" in line and "Amara Okafor" in line and "University of Carrow" in line, line
    (drawn,) = _drawings(at)  # only the chain: the whole path waits for its switch
    assert 3 <= len(drawn) <= 8 and {n["role"] for n in drawn} >= {"question", "answer", "source"}
    at.toggle(key="whole_path_0").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    chain_drawn, drawn = _drawings(at)
    assert len(drawn) > len(chain_drawn) and {n["role"] for n in drawn} >= {"entry", "result"}

    # the panels' items and the sources are drawn closed, their contents only once opened
    assert not [e for e in at.expander if re.match(r"\[\d+\] ", e.label) and _text_in(e)]
    open_lazy(at)
    assert sum(_check_panel(_block(at, f"panel_{s}"), s) for s in ("local", "bridge", "global")) > 0
    sources = [e for e in at.expander if re.match(r"\[\d+\] ", e.label)]
    assert sources and any("Amara Okafor" in e.label or "Halden Barrier" in e.label for e in sources)
    assert not any(re.search(r" · [\d.]+$", e.label) for e in sources)  # no bare number beside a source
    assert all("ranked by its first chunk in the context" in _text_in(e) for e in sources)  # HiRAG: the order
    assert any(r"amara\_okafor\_profile\.md" in _text_in(e) for e in sources)  # file names escaped
    first = sources[0]
    assert [t.label for t in _of_type(first, "tab")] == ["Best chunk", "Document"]
    assert len([t for t in _of_type(first, "text") if t.value.strip()]) == 2  # its chunk and its document
    assert all("x" in n for n in drawn), "placed in the engine"
    legend = next(m.value for m in at.markdown if "route-legend" in m.value)
    assert 'data-role="entry"' in legend and 'data-role="result"' in legend
    assert any(c.value.startswith("Timings: ") and "retrieval" in c.value for c in at.caption)


def test_the_ablations_wait_behind_the_research_switch(page):
    at = page
    at.toggle(key="ask_ablations").set_value(True).run()
    options = at.multiselect(key="strategies").options
    assert list(options) == [get_strategy(n).label for n in designs() + ablations()]
    assert {"hirag-local", "hirag-simsources", "hlg-topic-pathbeam"} <= set(ablations())
    assert not {"hlg-statement-chunk", "naive", "bm25"} & set(ablations())
    at = _ask(at, QUESTION, ["hirag-local"])
    assert _heads(at) == [f"#### Answer · {get_strategy('hirag-local').label}"]
    at.toggle(key="ask_ablations").set_value(False).run()  # switched off: the ablation leaves the picker
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="strategies").value == []
    assert item_score("naive", "local", "chunk") == "cosine" and item_score("bm25", "local", "chunk") == "BM25"
    assert item_score("hlg-statement", "local", "statement") == "cosine"  # offline HLG has no reranker
    assert item_score("hlg-topic-hybrid", "local", "statement") == "dense + TF-IDF score"


def test_two_strategies_side_by_side_with_panels_paths_and_history(page, ask_home):
    store, ws = ask_home
    at = _ask(page, QUESTION_2, ["naive", "hirag"])
    assert _heads(at) == [f"#### Answer · {get_strategy('naive').label}",
                          f"#### Answer · {get_strategy('hirag').label}"]
    open_lazy(at)
    for i in (0, 1):
        column = _block(at, f"details_{i}")  # below the answers, in the same column
        for s in ("local", "bridge", "global"):
            _check_panel(_block(column, f"panel_{i}_{s}"), s)
        assert [m for m in _of_type(column, "markdown") if m.value == "#### Sources"]
        assert [e for e in _of_type(column, "expander") if re.match(r"\[\d+\] ", e.label)]
        _evidence(at, i)  # each strategy opens with its own answer block
        _block(_block(at, f"answer_{i}"), f"chain_{i}")
    assert _check_panel(_block(at, "panel_1_local"), "local") > 0
    assert all(len(d) <= 8 for d in _drawings(at))  # the chains only, small
    at.toggle(key="whole_paths").set_value(True).run()
    drawings = [d for d in _drawings(at) if not {n["role"] for n in d} <= {"question", "bridge", "answer", "source"}]
    assert len(drawings) == 2  # one drawn path per strategy, on demand
    roles = [{n["role"] for n in d} for d in drawings]
    assert "entry" in roles[0] and {"entry", "community"} <= roles[1]
    assert all(n["kind"] == "chunk" or n["role"] == "result" for n in drawings[0])

    # history: both answers, newest first; the export holds them with their full results
    table = next(d.value for d in at.dataframe if "question" in d.value.columns)
    assert list(table["question"][:2]) == [QUESTION_2, QUESTION_2]
    assert list(table["strategy"][:2]) == ["hirag", "naive"]
    for shown, (r, _) in zip(table["answer"][:2], reversed(at.session_state["ask_results"][1])):
        assert shown.startswith("Best evidence: ") and len(shown) <= 140  # the answer, truncated
        assert shown.removeprefix("Best evidence: ")[:40] == r.trace["evidence"][0]["sentence"][:40]
    assert "asked by" not in table.columns  # no sign-in: nobody to name
    assert at.get("download_button") and at.get("download_button")[0].proto.label == "Download JSON"
    data = json.loads(export_json(store, ws.id))
    mine = [q for q in data["queries"] if q["question"] == QUESTION_2]
    assert [q["strategy"] for q in mine] == ["naive", "hirag"]
    for q in mine:
        assert q["answer"] and q["ms"] > 0 and q["created_at"]
        assert q["result"]["sources"] and q["result"]["path"]["nodes"]

    # re-open the naive result alone: the wide layout, from the stored result
    pick = at.multiselect(key="history_pick")
    entry = next(o for o in pick.options if "· naive ·" in o)  # "#<id> · naive · <question>"
    pick.set_value([int(entry.split(" · ")[0].lstrip("#"))])
    at.run()  # (a choice reruns the page, which enables the button)
    next(b for b in at.button if b.label == "Re-open").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _heads(at) == [f"#### Answer · {get_strategy('naive').label}"]
    _block(at, "panel_local")
    assert len(_drawings(at)) == 1  # its chain

    # re-open two, the older first: they come back in the order picked, not the table's
    hirag_id = int(next(o for o in pick.options if "· hirag ·" in o).split(" · ")[0].lstrip("#"))
    naive_id = int(entry.split(" · ")[0].lstrip("#"))
    for picked, expected in (([naive_id, hirag_id], ["naive", "hirag"]), ([hirag_id, naive_id], ["hirag", "naive"])):
        at.multiselect(key="history_pick").set_value(picked)
        at.run()
        next(b for b in at.button if b.label == "Re-open").click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert [r.strategy for r, _ in at.session_state["ask_results"][1]] == expected
        assert _heads(at) == [f"#### Answer · {get_strategy(n).label}" for n in expected]


def test_show_on_graph_opens_the_graph_page_on_that_node(page):
    at = _ask(page, QUESTION, ["hirag"])
    for section, kind in (("local", "entity"), ("global", "community")):
        if section != "local":  # back to the Ask page: the answer is still there
            at.switch_page("views/ask.py")
            at.run()
        at.session_state[f"{LAZY}panel_{section}_0"] = True  # its first item opened
        at.run()
        item = _of_type(_block(at, f"panel_{section}"), "expander")[0]
        node_id, shown_kind = re.search(r"node (\S+) · (\w+)", _text_in(item).replace("\\", "")).groups()
        assert shown_kind == kind
        next(b for b in _of_type(item, "button") if b.label == "Show on graph").click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.session_state["graph_focus"] == node_id
        assert [t.value for t in at.title] == ["Graph"]
        (canvas,) = at.get("component_instance")
        drawn = json.loads(canvas.proto.json_args)["data"]["nodes"]
        assert node_id in {n["id"] for n in drawn}
        assert len(drawn) > 1  # its neighbourhood (a community: its members)


def test_empty_question_or_no_strategy_warns(page):
    at = _ask(page, "   ", ["hirag"])
    assert [w.value for w in at.warning] == ["Type a question first."]
    assert not _heads(at)
    at = _ask(at, QUESTION, [])
    assert [w.value for w in at.warning] == ["Choose at least one strategy."]
    assert not _heads(at)


def test_signed_in_the_history_says_who_asked(ask_home, monkeypatch):
    """With sign-in on (a team's deployment), each question is recorded with who asked it: the history table gains an
    "asked by" column and the JSON export an `asked_by` field; without sign-in (the other tests) neither appears."""
    store, ws = ask_home
    monkeypatch.setenv("STRATA_AUTH", "oidc")
    monkeypatch.setenv("STRATA_ADMINS", "ana@example.org")  # sees every workspace, the sample copy included
    _clear_caches()  # the settings are read once per process
    try:
        at = AppTest.from_file(str(APP), default_timeout=180)
        at.user = {"is_logged_in": True, "email": "ana@example.org", "email_verified": True, "sub": "7"}
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        at.switch_page("views/ask.py")
        at.run()
        question = "Who led the Halden Barrier <b>survey</b>?"
        at = _ask(at, question, ["naive"])
        table = next(d.value for d in at.dataframe if "question" in d.value.columns)
        assert list(table.columns[:2]) == ["asked (UTC)", "asked by"]
        assert table["question"][0] == question and table["asked by"][0] == "ana@example.org"
        mine = [q for q in json.loads(export_json(store, ws.id))["queries"] if q["question"] == question]
        assert [q["asked_by"] for q in mine] == ["ana@example.org"]
    finally:
        _clear_caches()


def test_items_are_drawn_when_opened_and_close_for_new_results(page):
    """The context items and sources reach the page closed and draw their contents when opened; a new question's
    results open closed again (the same key then holds another item)."""
    at = _ask(page, QUESTION, ["hirag"])

    def sources():
        return [e for e in at.expander if re.match(r"\[\d+\] ", e.label)]

    assert sources() and not any(_text_in(e) for e in sources())
    open_lazy(at)
    assert all("ranked by" in _text_in(e) for e in sources())
    _ask(at, QUESTION_2, ["hirag"])
    assert sources() and not any(_text_in(e) for e in sources())
