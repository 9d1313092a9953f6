"""Who won an evaluation and whether it is real (core/evaluation/leads.py), and Compare across builds and
workspaces (compare.matched, across.comparable): a lead that holds on most questions is significant, one resting on
a single question (or a tie) is not; the question view opens the 3 best by the main figure and dense; two
evaluations of the same questions pair by text whatever their order and gold ids, and only the workspaces the user
may read are offered."""

from __future__ import annotations

import pytest

from core import access
from core.evaluation import compare as C
from core.evaluation import leads as L
from core.evaluation import records
from core.evaluation.across import comparable
from core.evaluation.metrics import gold_ranks
from core.models import Evaluation, EvaluationResult
from core.store import Store

N = 20


def _questions(n: int = N, prefix: str = "D") -> list[dict]:
    return [{"id": f"q{i}", "question": f"Who is person number {i}?", "answer": None,
             "gold": [{"key": f"doc {i}", "docs": [f"{prefix}{i}"]}]} for i in range(n)]


def _rows(ev: Evaluation, hits: dict[str, list[int]], prefix: str = "D") -> list[EvaluationResult]:
    """hits: strategy -> per question the rank of its gold document (0: not found)."""
    rows = []
    for name, ranks in hits.items():
        for i, r in enumerate(ranks):
            ranked = ["X"] * (r - 1) + [f"{prefix}{i}"] if r else ["X"]
            rows.append(EvaluationResult(workspace_id=ev.workspace_id, evaluation_id=ev.id or 0, question=i,
                                         strategy=name, ranked=ranked, found=gold_ranks(ranked, ev.questions[i]["gold"]),
                                         ms=1.0))
    return rows


def _ev(hits: dict[str, list[int]], qs: list[dict] | None = None, ev_id: int = 1) -> Evaluation:
    qs = qs or _questions()
    return Evaluation(id=ev_id, workspace_id=1, questions=qs, question_hash=records.question_hash(qs),
                      strategies=list(hits), baselines=["naive"], ks=[1, 5])


def test_a_lead_on_most_questions_is_significant_over_the_runner_up_and_dense():
    hits = {"naive": [1] * 5 + [0] * 15, "hirag": [1] * 20, "graphrag-local": [1] * 10 + [0] * 10}
    ev = _ev(hits)
    won = L.leads(ev, _rows(ev, hits))
    lead = won["recall@1"]
    assert (lead.best, lead.runner_up, lead.value) == ("hirag", "graphrag-local", 1.0)
    assert lead.over_runner_up.delta == 0.5 and lead.over_runner_up.low > 0 and lead.over_runner_up.significant
    assert lead.over_dense.delta == 0.75 and lead.over_dense.significant
    line = L.reading(lead)
    assert "hirag leads (1.000)" in line and "not significant" not in line
    assert line.count(": significant") == 2 and not L.none_significant(won)


def test_a_lead_resting_on_one_question_or_a_tie_is_not_significant():
    hits = {"naive": [1] * 9 + [0] * 11, "hirag": [1] * 11 + [0] * 9, "graphrag-local": [1] * 10 + [0] * 10}
    ev = _ev(hits)
    won = L.leads(ev, _rows(ev, hits))
    lead = won["recall@1"]
    assert lead.best == "hirag" and lead.over_runner_up.delta == 0.05
    assert lead.over_runner_up.low <= 0 <= lead.over_runner_up.high and not lead.over_runner_up.significant
    assert not lead.over_dense.significant
    assert L.reading(lead).count("not significant") == 2
    tie = {"naive": [1] * 20, "hirag": [1] * 20}
    ev = _ev(tie)
    lead = L.leads(ev, _rows(ev, tie))["recall@5"]
    assert lead.best == "naive" and lead.over_dense is None  # dense itself leads (listed first in a tie)
    assert (lead.over_runner_up.delta, lead.over_runner_up.low, lead.over_runner_up.high) == (0.0, 0.0, 0.0)
    assert not lead.over_runner_up.significant
    assert L.reading(lead) == ("recall@5: naive leads (1.000); tied with hirag on every question: not significant; "
                               "dense itself leads.")
    assert L.none_significant({"recall@5": lead})


def test_the_same_evaluation_always_reads_the_same():
    hits = {"naive": [1, 0, 2, 0, 3] * 4, "hirag": [1, 1, 0, 2, 1] * 4}
    ev = _ev(hits)
    a, b = L.leads(ev, _rows(ev, hits)), L.leads(ev, _rows(ev, hits))
    assert a == b and set(a) == {"recall@1", "recall@5", "mrr"}  # no answers: no answer-in-context figure


def test_the_question_view_opens_the_three_best_by_the_main_figure_and_dense():
    hits = {"naive": [0] * 20, "bm25": [1] * 12 + [0] * 8, "hirag": [1] * 18 + [0] * 2,
            "graphrag-local": [3] * 18 + [0] * 2, "noderag": [1] * 16 + [0] * 4, "archrag": [0] * 20}
    ev = _ev(hits)
    assert L.main_metric(ev) == "recall@5"
    # recall@5: hirag = graphrag-local (0.9; hirag's higher MRR first) > noderag (0.8) > bm25 > naive = archrag
    assert L.best_strategies(ev, _rows(ev, hits)) == ["hirag", "graphrag-local", "noderag", "naive"]
    assert L.best_strategies(ev, _rows(ev, hits), n=1) == ["hirag", "naive"]


def test_two_evaluations_of_the_same_questions_pair_by_text_across_workspaces():
    hits_a = {"hirag": [1] * 20}
    a = _ev(hits_a)
    qs_b = list(reversed(_questions(prefix="E")))  # another workspace: its own document ids, another order
    b = Evaluation(id=2, workspace_id=2, questions=qs_b, question_hash=records.question_hash(qs_b),
                   strategies=["hirag"], baselines=[], ks=[1, 5])
    hits_b = {"hirag": [0] * 10 + [1] * 10}  # b's question j is a's question 19 - j: b misses a's 10..19
    rows_b = []
    for j, r in enumerate(hits_b["hirag"]):
        ranked = [qs_b[j]["gold"][0]["docs"][0]] if r else ["X"]
        rows_b.append(EvaluationResult(workspace_id=2, evaluation_id=2, question=j, strategy="hirag", ranked=ranked,
                                       found=gold_ranks(ranked, qs_b[j]["gold"]), ms=1.0))
    assert C.matched(a, b)[:2] == [(0, 19), (1, 18)] and C.one_set(a, b)
    out = C.compare(a, _rows(a, hits_a), b, rows_b)
    assert out["paired"] == 20 and out["strategies"]["hirag"]["recall@1"]["delta"] == -0.5
    assert [(n, k) for n, k, _ in C.significant_changes(out)] == [("hirag", "recall@1"), ("hirag", "recall@5"),
                                                                  ("hirag", "mrr")]
    assert out["losses"]["hirag"] == 10 and {p["id"] for p in out["questions"]["hirag"]
                                             if p["outcome"] == "loss"} == {f"q{i}" for i in range(10, 20)}
    few = Evaluation(id=3, workspace_id=2, questions=_questions(3) + [dict(q, question=q["question"] + " Not.")
                                                                      for q in _questions(20)[3:]],
                     question_hash="x", strategies=["hirag"], baselines=[], ks=[1])
    assert not C.one_set(a, few)  # 3 of 20 shared: not one question set
    none = Evaluation(id=4, workspace_id=2, questions=[dict(q, question="Where?") for q in _questions(1)],
                      question_hash="y", strategies=["hirag"], baselines=[], ks=[1])
    with pytest.raises(C.NotComparable):
        C.compare(a, [], none, [])


def _stored(store: Store, ws_id: int, name: str, qs: list[dict], status: str = "done") -> Evaluation:
    ev = Evaluation(workspace_id=ws_id, name=name, questions=qs, question_hash=records.question_hash(qs),
                    strategies=["hirag"], baselines=[], ks=[1], status=status)
    with store.session() as s:
        s.add(ev)
        s.commit()
        s.refresh(ev)
    return ev


def test_compare_offers_only_finished_evaluations_of_workspaces_the_user_may_read(tmp_path):
    store = Store(tmp_path / "strata.db")
    alice, bob = access.User("alice@example.org"), access.User("bob@example.org")
    mine, theirs, shared = (store.create_workspace(n) for n in ("mine", "theirs", "shared"))
    access.adopt(store, mine, alice.name)
    access.adopt(store, theirs, bob.name)
    access.adopt(store, shared, bob.name, everyone="viewer")
    qs = _questions(4)
    m1 = _stored(store, mine.id, "first", qs)
    m2 = _stored(store, mine.id, "second", qs)
    _stored(store, mine.id, "running", qs, status="running")
    t1 = _stored(store, theirs.id, "bob's", qs)
    s1 = _stored(store, shared.id, "shared", list(reversed(qs)))
    other = _stored(store, mine.id, "other questions", [dict(q, question=f"Why {i}?")
                                                         for i, q in enumerate(_questions(2))])
    found = comparable(store, alice, mine)
    assert set(found.evaluations) == {m1.id, m2.id, s1.id}  # not bob's, not the running one, not a lone set
    assert t1.id not in found.evaluations and other.id not in found.evaluations
    assert list(found.evaluations)[:2] == [m2.id, m1.id]  # this workspace's first, newest first
    assert set(found.partners[m2.id]) == {m1.id, s1.id}
    assert set(found.workspaces.values()) == {"mine", "shared"}
    assert found.label(s1, mine.id).startswith("shared · shared · build 0 · 4 questions")
    assert found.label(m1, mine.id).startswith("first · build 0 · 4 questions")
    assert t1.id in comparable(store, bob, theirs).evaluations
