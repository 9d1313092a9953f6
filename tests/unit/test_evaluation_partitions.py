"""core/evaluation/partitions.py: the What-if tab's recall effect: per Leiden partition, the newest finished
evaluation of the newest question set measured while it was promoted, with its paired change against the current
partition's; a promote's snapshot found under the name it was measured as."""

from __future__ import annotations

from core.evaluation import records
from core.evaluation.metrics import summarize
from core.evaluation.partitions import measured_name, recall_effect
from core.models import Community, Evaluation, EvaluationResult
from core.store import Store

QS = [{"id": str(i), "question": f"q{i}?", "answer": None, "gold": [{"key": f"d{i}", "docs": [f"d{i}"]}]}
      for i in range(4)]


def _evaluation(store: Store, ws_id: int, partition: str, hits: dict[str, list[int]], qs=QS) -> Evaluation:
    """A finished evaluation of `qs` measured on `partition`: strategy -> the rank of each question's gold."""
    ev = Evaluation(workspace_id=ws_id, name=partition, questions=qs, question_hash=records.question_hash(qs),
                    strategies=list(hits), baselines=["naive"], ks=[2, 5, 10], partition=partition, status="done")
    with store.session() as s:
        s.add(ev)
        s.commit()
        s.refresh(ev)
        for name, ranks in hits.items():
            for i, r in enumerate(ranks):
                s.add(EvaluationResult(workspace_id=ws_id, evaluation_id=ev.id, question=i, strategy=name,
                                       ranked=[f"d{i}"] if r else [], found=[r]))
        s.commit()
    records.set_fields(store, ev.id, meta={"figures": summarize(ev, records.results(store, ev))})
    return ev


def test_each_partition_s_recall_and_its_change_against_the_current_one(tmp_path):
    store = Store(tmp_path / "strata.db")
    ws = store.create_workspace("w")
    assert recall_effect(store, ws) is None  # no evaluation yet: the tab says where to run one
    with store.session() as s:  # the promoted partition is the variant "res-2"
        s.add(Community(id="k1", workspace_id=ws.id, method="leiden", level=0, size=2, data={"variant": "res-2"}))
        s.commit()
    _evaluation(store, ws.id, "built", {"graphrag-local": [1, 0, 0, 3], "hirag": [1, 1, 9, 0], "naive": [1] * 4})
    _evaluation(store, ws.id, "res-2", {"graphrag-local": [1, 1, 1, 3], "hirag": [1, 1, 1, 1], "naive": [1] * 4})
    other = [q | {"question": q["question"] + "!"} for q in QS]  # an older set measured on another partition
    _evaluation(store, ws.id, "old", {"graphrag-local": [1, 1, 1, 1]}, other)
    newest = _evaluation(store, ws.id, "res-2", {"graphrag-local": [1, 1, 0, 0], "hirag": [1, 1, 1, 1],
                                                 "naive": [1] * 4})

    out = recall_effect(store, ws)
    assert out["current"] == "res-2" and out["k"] == 5 and out["evaluation"] == newest.name
    assert set(out["partitions"]) == {"built", "res-2"}  # "old" measured another question set
    cur = out["partitions"]["res-2"]
    assert cur["evaluation"] == newest.id  # the newest of that partition
    assert cur["strategies"]["graphrag-local"] == {"recall": 0.5, "change": None}
    assert "naive" not in cur["strategies"] and "hirag" in cur["strategies"]  # the best graph strategy, no baseline
    built = out["partitions"]["built"]["strategies"]["graphrag-local"]
    assert built["recall"] == 0.5 and built["change"]["delta"] == 0.0
    hirag = out["partitions"]["built"]["strategies"]["hirag"]
    assert hirag["recall"] == 0.5 and hirag["change"]["delta"] == -0.5
    assert hirag["change"]["low"] <= -0.5 <= hirag["change"]["high"]


def test_a_snapshot_is_found_under_the_name_its_partition_was_measured_as():
    assert measured_name("before-20261127-101500", {"snapshot": True, "was": "built"}) == "built"
    assert measured_name("before-20261127-101500", {"snapshot": True}) == "before-20261127-101500"
    assert measured_name("res-2", {"resolution": 2.0}) == "res-2"
