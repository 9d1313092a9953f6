"""Questions brought to an evaluation (core/evaluation/questions.py), on a real store holding the four rows of
`tiny_jsonl` (external ids d1..d4, all from the file tiny.jsonl): gold resolved by external id, title, file name or
any of them, in jsonl, csv and JSON-list form; a row naming no known document, or unreadable, listed with its reason
and left out; a gold name that resolves to nothing beside others dropped and listed, the row kept; the set's hash
deterministic and moved by its gold; the example file reads back with every row kept."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from core.evaluation import questions as Q
from core.models import Document
from core.store import Store
from core.workspace import ingest_paths


@pytest.fixture
def docs(tmp_path, tiny_jsonl, make_settings):
    settings = make_settings(tmp_path / "home")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    rep = ingest_paths(store, ws, [tiny_jsonl], settings)
    assert len(rep.added) == 4
    with store.session() as s:
        by_ext = {d.external_id: d.id for d in s.exec(select(Document).where(Document.workspace_id == ws.id))}
    return store, ws, by_ext


def test_gold_resolves_by_id_title_file_and_unknown_rows_are_listed_with_their_reason(docs):
    store, ws, by_ext = docs
    text = "\n".join([
        json.dumps({"id": "a", "question": "Who designed the bridge?", "answer": "Lena Marsh",
                    "gold_ids": ["d1", "d2", "d1"], "gold_titles": ["Lena Marsh"]}),  # ids read, titles not
        json.dumps({"id": "b", "question": "Where is Arden Orchards?", "gold_titles": ["arden  ORCHARDS"]}),
        json.dumps({"id": "c", "question": "Who sings?", "gold_ids": ["d9"]}),  # no such document
        "{not json",
        json.dumps({"id": "e", "gold_ids": ["d1"]}),  # no question
        json.dumps({"id": "f", "question": "Who conducts?", "gold": ["Kelmouth Choir", "d77"]}),  # one unknown
        json.dumps({"id": "g", "question": "No gold at all?"}),
    ])
    qs = Q.read_questions(store, ws.id, text, "q.jsonl")
    assert [q["id"] for q in qs.questions] == ["a", "b", "f"]
    a, b, f = qs.questions
    assert a["gold"] == [{"key": "d1", "docs": [by_ext["d1"]]}, {"key": "d2", "docs": [by_ext["d2"]]}]
    assert a["answer"] == "Lena Marsh" and b["answer"] is None and not a["generated"]
    assert b["gold"] == [{"key": "arden  ORCHARDS", "docs": [by_ext["d3"]]}]
    assert f["gold"] == [{"key": "Kelmouth Choir", "docs": [by_ext["d4"]]}]
    reasons = {(r.line, r.kept): r.reason for r in qs.rejected}
    assert set(reasons) == {(3, False), (4, False), (5, False), (6, True), (7, False)}
    assert "'d9'" in reasons[(3, False)] and "no known document" in reasons[(3, False)]
    assert reasons[(4, False)].startswith("not a JSON line")
    assert reasons[(5, False)] == "no question"
    assert "'d77'" in reasons[(6, True)] and "kept" in reasons[(6, True)]
    assert reasons[(7, False)] == "no gold documents named"


def test_csv_with_one_gold_column_split_on_bars_and_the_file_name(docs):
    store, ws, by_ext = docs
    text = ("id,question,answer,gold\n"
            "1,Who built the railway?,,Tidewater Bridge|d2\n"
            "2,What is in tiny.jsonl?,,tiny.jsonl\n"
            "3,Nothing known?,,Atlantis|d0\n")
    qs = Q.read_questions(store, ws.id, text.encode(), "q.csv")
    assert [q["id"] for q in qs.questions] == ["1", "2"]
    assert [g["docs"] for g in qs.questions[0]["gold"]] == [[by_ext["d1"]], [by_ext["d2"]]]
    assert sorted(qs.questions[1]["gold"][0]["docs"]) == sorted(by_ext.values())  # every row of that file
    assert [(r.line, r.kept) for r in qs.rejected] == [(4, False)] and "'Atlantis'" in qs.rejected[0].reason


def test_the_hash_is_deterministic_and_moved_by_gold_and_the_example_reads_back(docs):
    store, ws, by_ext = docs
    rows = [json.dumps({"question": "Who designed the bridge?", "gold_ids": ["d1"]}),
            json.dumps({"question": "Who advised Lena Marsh?", "gold_ids": ["d2"]})]
    one = Q.read_questions(store, ws.id, "\n".join(rows))
    again = Q.read_questions(store, ws.id, "\n".join(rows) + "\n\n")
    other = Q.read_questions(store, ws.id, "\n".join(rows).replace('"d2"', '"d3"'))
    assert one.hash == again.hash == Q.question_hash(one.questions) and len(one.hash) == 64
    assert other.hash != one.hash
    for fmt, name in (("jsonl", "ex.jsonl"), ("csv", "ex.csv")):
        ex = Q.read_questions(store, ws.id, Q.example_file(store, ws.id, fmt), name)
        assert len(ex.questions) == 2 and not ex.rejected, (fmt, ex.rejected)
        assert ex.questions[0]["gold"][0]["docs"] == [by_ext["d1"]]


def test_an_evaluation_is_its_workspaces_and_goes_with_it(docs, tmp_path):
    from core.evaluation import records as R
    from core.models import Evaluation, EvaluationResult

    store, ws, by_ext = docs
    qs = Q.read_questions(store, ws.id, json.dumps({"question": "Who designed it?", "gold_ids": ["d1"]})).questions
    ev = R.create_evaluation(store, ws, qs, ["hirag"])
    assert (ev.strategies, ev.baselines, ev.ks) == (["hirag", "naive", "bm25"], ["naive", "bm25"], [2, 5, 10])
    assert ev.question_hash == Q.question_hash(qs) and ev.partition == "built" and ev.status == "queued"
    with store.session() as s:
        s.add(EvaluationResult(workspace_id=ws.id, evaluation_id=ev.id, question=0, strategy="hirag",
                               ranked=[by_ext["d1"]], found=[1], ms=1.0))
        s.commit()
    other = store.create_workspace("other")
    assert R.get_evaluation(store, other.id, ev.id) is None and R.list_evaluations(store, other.id) == []
    assert [e.id for e in R.list_evaluations(store, ws.id)] == [ev.id] and R.count_results(store, ev) == 1
    store.delete_workspace(ws)
    with store.session() as s:
        assert s.exec(select(Evaluation)).all() == [] and s.exec(select(EvaluationResult)).all() == []
