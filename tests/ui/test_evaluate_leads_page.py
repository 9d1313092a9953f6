"""The Evaluate page says who won and whether it is real, opens a question on the best strategies, and compares
across workspaces (issue 39 §4), with AppTest on a private copy of the built sample holding stored evaluations
(results written as the job writes them, so no job runs here):

* Results stars the best strategy of each figure and says, per figure, whether its lead over the runner-up and over
  dense is significant;
* opening a question draws the 3 best strategies by recall at the largest k and dense, not all six; "Draw all" draws
  the rest;
* signed in as alice, Compare offers her evaluations of the same questions on the sample and on her own workspace,
  never bob's (whose evaluation asked the same questions), and a value naming bob's evaluation sent from the browser
  is ignored.
"""

from __future__ import annotations

import pytest
import streamlit as st
from sqlmodel import select
from streamlit.testing.v1 import AppTest

from core import access
from core.evaluation import records
from core.evaluation.metrics import gold_ranks, summarize
from core.models import Document, Evaluation, EvaluationResult
from core.store import Store
from tests.ui.conftest import APP, app_home, open_page, run, sample_copy
from tests.ui.test_hostile_values import _hostile_state, inject  # noqa: F401 - the fixture, used below
from ui.retrieval_view import strategy_label
from ui.text import md_escape

SECRET = "ZEPHYRQUARTZ"
HITS = {"naive": [0, 0, 1, 0, 0, 0], "bm25": [1, 0, 1, 0, 1, 0], "hirag": [1, 1, 1, 1, 1, 1],
        "graphrag-local": [1, 1, 2, 1, 0, 1], "noderag": [2, 1, 0, 1, 1, 0], "archrag": [0, 0, 0, 0, 0, 1]}


def _questions(store: Store, ws_id: int) -> list[dict]:
    with store.session() as s:
        docs = list(s.exec(select(Document.id, Document.title).where(Document.workspace_id == ws_id)
                           .order_by(Document.id).limit(6)))
    return [{"id": f"q{i}", "question": f"What does the document “{t}” say?", "answer": None, "generated": False,
             "gold": [{"key": t, "docs": [d]}]} for i, (d, t) in enumerate(docs)]


def _stored(store: Store, ws_id: int, name: str, qs: list[dict], hits: dict[str, list[int]], build: int) -> Evaluation:
    """A finished evaluation: strategy -> per question the rank of its gold document (0: not found)."""
    ev = Evaluation(workspace_id=ws_id, name=name, questions=qs, question_hash=records.question_hash(qs),
                    strategies=list(hits), baselines=["naive", "bm25"], ks=[1, 5], build_version=build,
                    status="done", backend="offline")
    with store.session() as s:
        s.add(ev)
        s.commit()
        s.refresh(ev)
        for n, ranks in hits.items():
            for i, r in enumerate(ranks):
                ranked = ["x"] * (r - 1) + qs[i]["gold"][0]["docs"] if r else ["x"]
                s.add(EvaluationResult(workspace_id=ws_id, evaluation_id=ev.id, question=i, strategy=n,
                                       ranked=ranked, found=gold_ranks(ranked, qs[i]["gold"]), ms=1.0))
        s.commit()
    records.set_fields(store, ev.id, meta={"figures": summarize(ev, records.results(store, ev))})
    return ev


@pytest.fixture(scope="module")
def leads_home(tmp_path_factory, sample_built):
    home, store = sample_copy(tmp_path_factory, sample_built, "strata_eval_leads")
    ws = store.require_workspace("sample")
    qs = _questions(store, ws.id)
    ev = _stored(store, ws.id, "six questions", qs, HITS, ws.build_version)
    mine, vault = store.create_workspace("mine"), store.create_workspace("vault")
    access.share(store, access.LOCAL, ws, "alice@example.org", "viewer")
    access.adopt(store, mine, "alice@example.org")
    access.adopt(store, vault, "bob@example.org")
    moved = {n: list(reversed(r)) for n, r in HITS.items()}  # the same questions, asked in another order
    theirs = _stored(store, mine.id, "alice's copy", list(reversed(qs)), moved, 3)
    bobs = _stored(store, vault.id, f"{SECRET} run", qs, HITS, 7)
    with app_home(home):
        yield store, ev, theirs, bobs


def test_the_winner_is_starred_and_each_lead_read_and_a_question_opens_on_the_best(leads_home, inject):  # noqa: F811
    _, ev, _, _ = leads_home
    at = open_page("views/evaluate.py", "Evaluate")
    assert at.session_state["ev_tab"] == "Results"
    table = next(d.value for d in at.dataframe if "recall@5" in d.value.columns)
    starred = {c: [s for s, v in zip(table["strategy"], table[c]) if str(v).startswith("★ ")] for c in
               ("recall@1", "recall@5", "mrr")}
    assert starred == {"recall@1": ["HiRAG (local + bridge + global)"], "recall@5": ["HiRAG (local + bridge + "
                                                                                    "global)"],
                       "mrr": ["HiRAG (local + bridge + global)"]}
    who = next(m.value for m in at.markdown if m.value.startswith("**Who won**"))
    lines = [x.replace("\\", "") for x in who.split("\n")[2:]]  # (the lines' Markdown escaped)
    assert len(lines) == 3 and all("HiRAG" in x for x in lines)
    # over GraphRAG local on 6 questions: not significant; over dense (1 of 6 found at rank 1): significant
    r1 = next(x for x in lines if x.startswith("- ★ :orange[not significant] · recall@1: HiRAG"))
    assert "over GraphRAG local search by +0.333 [+0.000, +0.667]: not significant" in r1
    assert "over dense by +0.833 [+0.500, +1.000]: significant." in r1

    at.selectbox(key=f"ev_open_q_{ev.id}").select(2)
    run(at)
    drawn = at.multiselect(key=f"ev_q_strats_{ev.id}").value
    assert drawn == ["hirag", "graphrag-local", "noderag", "naive"]  # 3 best by recall@5, MRR breaking ties; dense
    titles = {f"**{md_escape(strategy_label(n))}**": n for n in HITS}
    assert [titles[m.value] for m in at.markdown if m.value in titles] == drawn  # one path drawn for each
    ranks = next(d.value for d in at.dataframe if "gold in top 5" in d.value.columns)
    assert len(ranks) == 6  # every strategy's stored ranks, drawn or not
    box = at.multiselect(key=f"ev_q_strats_{ev.id}")  # a strategy never offered, sent from the browser: ignored
    inject[box.id] = _hostile_state("multiselect", box.id, "../../etc/passwd")
    run(at)
    assert at.multiselect(key=f"ev_q_strats_{ev.id}").value == []
    next(b for b in at.button if b.key == f"ev_q_all_{ev.id}").click()
    run(at)
    assert at.multiselect(key=f"ev_q_strats_{ev.id}").value == list(HITS)
    assert sorted(titles[m.value] for m in at.markdown if m.value in titles) == sorted(HITS)


def _alice() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.user = {"is_logged_in": True, "email": "alice@example.org", "email_verified": True, "sub": "alice-sub",
               "iss": "http://127.0.0.1/idp"}
    at.query_params["workspace"] = "sample"
    return at


def _sent(at: AppTest) -> str:
    from tests.ui.test_hostile_values import _text

    return _text(at._tree)


def test_compare_across_workspaces_offers_only_what_alice_may_read(leads_home, monkeypatch, inject):  # noqa: F811
    store, ev, theirs, bobs = leads_home
    monkeypatch.setenv("STRATA_AUTH", "oidc")
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    st.cache_resource.clear()  # the settings read again: sign-in on (the test above ran without)
    at = run(_alice())
    at.switch_page("views/evaluate.py")
    at.session_state["ev_tab_next"] = "Compare"
    run(at)
    b, a = at.selectbox(key="ev_cmp_b"), at.selectbox(key="ev_cmp_a")
    assert len(b.options) == 2 and len(a.options) == 1  # the sample's and alice's own; never bob's
    assert not any(SECRET in o for o in b.options + a.options) and SECRET not in _sent(at)
    assert a.options[0].startswith("mine · alice's copy · build 3 · 6 questions")
    for key in ("ev_cmp_a", "ev_cmp_b"):  # bob's evaluation named from the browser: ignored
        for value in (str(bobs.id), f"{SECRET} run", "99999"):
            widget = at.selectbox(key=key)
            inject[widget.id] = _hostile_state("selectbox", widget.id, value)
            run(at)
            assert SECRET not in _sent(at)
    at.selectbox(key="ev_cmp_b").select(ev.id)
    run(at)
    assert at.selectbox(key="ev_cmp_a").value == theirs.id
    said = " ".join(c.value for c in at.caption)
    assert "A: mine, build 3" in said and "B: sample, build" in said and "6 questions paired by text" in said
    table = next(d.value for d in at.dataframe if "recall@5" in d.value.columns)
    assert len(table) == len(HITS)
    assert all("(+0.000 [+0.000, +0.000])" in str(v) for v in table["recall@5"])  # paired by text: the same
    # ranks, question for question, though alice's copy asked them in another order
    assert any("Every question ties." in c.value for c in at.caption)
    assert any(m.value.startswith("**No figure changed significantly** between A and B on these 6 questions")
               for m in at.markdown)
