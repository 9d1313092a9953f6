"""The evaluation's figures (core/evaluation/metrics.py, compare.py): recall@k and reciprocal rank from gold ranks;
bootstrap intervals seeded (the same seed gives the same interval, another seed another), containing the point
estimate and narrowing with more questions; the paired change of a run against itself is zero."""

from __future__ import annotations

import numpy as np

from core.evaluation import compare as C
from core.evaluation import metrics as M
from core.models import Evaluation, EvaluationResult


def test_recall_and_reciprocal_rank_from_the_gold_ranks():
    gold = [{"key": "a", "docs": ["A"]}, {"key": "b", "docs": ["B", "B2"]}]
    found = M.gold_ranks(["X", "B2", "Y", "A", "B2"], gold)
    assert found == [4, 2]
    assert [M.recall(found, k) for k in (1, 2, 5)] == [0.0, 0.5, 1.0]
    assert M.reciprocal_rank(found) == 0.5 and M.reciprocal_rank([0, 0]) == 0.0


def test_bootstrap_intervals_are_seeded_contain_the_estimate_and_narrow_with_more_questions():
    rng = np.random.default_rng(1)
    small = rng.integers(0, 2, 30).astype(float)
    large = rng.integers(0, 2, 600).astype(float)
    a, b = M.figure(small, seed=7), M.figure(small, seed=7)
    assert (a.low, a.high) == (b.low, b.high)
    smooth = rng.random(30)  # continuous values: another seed moves the bounds
    assert M.figure(smooth, seed=7) == M.figure(smooth, seed=7) != M.figure(smooth, seed=8)
    assert a.low <= a.value <= a.high and a.value == round(small.mean(), 4) and a.n == 30
    wide = M.figure(large, seed=7)
    assert wide.low <= wide.value <= wide.high
    assert (wide.high - wide.low) < (a.high - a.low) / 2
    lat = rng.lognormal(3, 1, 200)
    p95 = M.figure(lat, "p95", seed=3, digits=6)
    assert p95.low <= p95.value <= p95.high and abs(p95.value - np.percentile(lat, 95)) < 1e-4


def _run(eval_id: int, ranked_by_q: list[list[str]]) -> tuple[Evaluation, list[EvaluationResult]]:
    qs = [{"id": str(i), "question": f"q{i}", "answer": None, "gold": [{"key": f"D{i}", "docs": [f"D{i}"]}]}
          for i in range(len(ranked_by_q))]
    ev = Evaluation(id=eval_id, workspace_id=1, questions=qs, question_hash="h", strategies=["s"], ks=[1, 2],
                    baselines=[])
    rows = [EvaluationResult(workspace_id=1, evaluation_id=eval_id, question=i, strategy="s", ranked=r,
                             found=M.gold_ranks(r, qs[i]["gold"]), ms=1.0 + i) for i, r in enumerate(ranked_by_q)]
    return ev, rows


def test_a_run_compared_with_itself_changes_nothing_and_with_another_shows_its_wins():
    ranked = [["D0"], ["X", "D1"], ["X"], ["D3"], ["X", "Y"]]
    ev, rows = _run(1, ranked)
    same = C.compare(ev, rows, ev, rows)
    for fig in same["strategies"]["s"].values():
        assert fig is None or (fig["delta"], fig["low"], fig["high"]) == (0.0, 0.0, 0.0)
    assert same["wins"] == {"s": 0} and same["losses"] == {"s": 0}
    better, rows_b = _run(2, [["D0"], ["D1"], ["X"], ["X", "D3"], ["D4"]])
    diff = C.compare(ev, rows, better, rows_b)
    assert diff["strategies"]["s"]["recall@1"]["delta"] == round((3 - 2) / 5, 4)
    assert diff["wins"] == {"s": 2} and diff["losses"] == {"s": 1}
    assert [q["outcome"] for q in diff["questions"]["s"]] == ["tie", "win", "tie", "loss", "win"]
    better.question_hash = "other"  # another question set: no question text in common
    better.questions = [dict(q, question=q["question"] + " elsewhere") for q in better.questions]
    try:
        C.compare(ev, rows, better, rows_b)
    except C.NotComparable:
        pass
    else:
        raise AssertionError("two question sets compared")
