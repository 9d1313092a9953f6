"""Margins over dense with paired bootstrap intervals (bench/report.py `margins`) from the per-query gold ranks that
`python -m core eval --json` (core.eval.gold_ranks) and bench.retrieval's reference rows now keep."""

from __future__ import annotations

import numpy as np

from bench.report import margins, per_query_recall
from bench.retrieval import gold_ranks as reference_ranks
from core.eval import gold_ranks, recall_at
from core.evaluation.compare import paired


def test_gold_ranks_give_the_recall_core_eval_reports():
    ranked = [{"7"}, {"3", "9"}, {"4"}, {"1"}, {"2"}, {"5"}]  # an entry is the ids of one (merged) document
    found = gold_ranks(ranked, {"9", "5", "8"})
    assert found == [6, 0, 2]  # sorted gold ids "5", "8", "9": rank 6, absent, rank 2
    for k in (1, 2, 5, 6):
        assert per_query_recall([found], k)[0] == recall_at(ranked, {"9", "5", "8"}, k)
    assert reference_ranks([[10, 4, 7]], [[7, 12]]) == [[0, 3]]  # ids sorted as strings: "12", "7"


def _set() -> dict:
    naive = [[1, 0], [6, 0], [0, 0], [2, 3], [1, 9]]  # R@5 per query: .5, 0, 0, 1, .5
    graph = [[1, 2], [1, 0], [0, 0], [2, 3], [1, 2]]  # 1, .5, 0, 1, 1
    dense = [[0, 0], [0, 0], [0, 0], [1, 2], [1, 2]]  # 0, 0, 0, 1, 1
    return {"set": "tiny", "strategies": {"naive": {"recall@5": .4, "found": naive},
                                          "graph": {"recall@5": .7, "found": graph},
                                          "old": {"recall@5": .5}},  # a row from before per-query ranks
            "reference": {"dense": {"recall@5": .4, "found": dense}}}


def test_margins_are_paired_bootstrap_differences_in_points():
    m = margins(_set())
    assert set(m) == {"naive", "graph"}  # a row without per-query ranks has no margin
    assert m["naive"]["naive"] is None  # not against itself
    over_naive, over_dense = m["graph"]["naive"], m["graph"]["dense"]
    assert over_naive is not None and over_dense is not None
    assert over_naive["delta"] == 30.0 and over_naive["n"] == 5  # (.5 + .5 + 0 + 0 + .5) / 5
    assert over_dense["delta"] == 30.0  # (1 + .5 + 0 + 0 + 0) / 5
    assert 0 <= over_naive["low"] <= 30.0 <= over_naive["high"] <= 50.0
    c = paired(np.array([.5, 0, 0, 1, .5]), np.array([1, .5, 0, 1, 1]))  # the one bootstrap, seeded
    assert (over_naive["low"], over_naive["high"]) == (round(c.low * 100, 1), round(c.high * 100, 1))
    assert margins(_set()) == m  # seeded: the same interval every time
    assert m["naive"]["dense"] is not None and m["naive"]["dense"]["delta"] == 0.0


def test_margins_need_the_same_queries():
    e = _set()
    e["reference"]["dense"]["found"] = e["reference"]["dense"]["found"][:3]  # another question file
    assert margins(e)["graph"]["dense"] is None
    del e["reference"]
    assert margins(e)["graph"]["dense"] is None and margins(e)["graph"]["naive"] is not None
