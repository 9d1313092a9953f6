"""The held-out set (bench/heldout_set.py, mendeleev's element data): on a tiny hand-made input of four elements and
their isotopes, every gold passage holds the fact it is gold for, a bridge question names neither its element nor
its answer and its first hop does not hold the answer, and comparisons answer with the larger value."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bench.heldout_set import PACKAGE, build, load, norm, package_db, write

GENERATED = Path(__file__).resolve().parents[2] / "bench" / "data" / "elements"


def element(z: int, name: str, symbol: str, period: int, group: int, who: str, year: int, origin: str,
            density: float, melting: float) -> dict:
    return {"atomic_number": z, "name": name, "symbol": symbol, "description": f"A chemical element, number {z}.",
            "sources": "Found in minerals.", "uses": "Used in alloys.", "discoverers": who,
            "discovery_location": "Europe", "discovery_year": year, "name_origin": origin, "atomic_weight": 2.0 * z,
            "density": density, "period": period, "group_id": group, "block": "s", "abundance_crust": None,
            "top_3_producers": None, "melting_point": melting, "boiling_point": None}


def isotope(z: int, a: int, abundance: float | None = None, half: float | None = None, unit: str | None = None) -> dict:
    return {"atomic_number": z, "mass_number": a, "mass": float(a), "abundance": abundance,
            "is_radioactive": half is not None, "half_life": half, "half_life_unit": unit, "spin": None,
            "parity": None, "discovery_year": None}


ELEMENTS = [element(3, "Lithium", "Li", 2, 1, "Johann Arfwedson", 1817, "Greek: lithos (stone).", 0.534, 453.65),
            element(4, "Beryllium", "Be", 2, 2, "Nicholas Louis Vauquelin", 1798, "Greek: beryllos.", 1.85, 1560.0),
            element(11, "Sodium", "Na", 3, 1, "Humphry Davy", 1807, "English: soda.", 0.968, 370.944),
            element(43, "Technetium", "Tc", 5, 7, "Carlo Perrier, Emilio Segre", 1937, "Greek: technetos.", 11.0,
                    2430.0)]
ISOTOPES = [isotope(3, 6, 7.59), isotope(3, 7, 92.41), isotope(3, 8, half=839.9, unit="msec"),
            isotope(3, 9, half=178.3, unit="msec"), isotope(4, 9, 100.0), isotope(4, 10, half=1.51, unit="Myear"),
            isotope(4, 7, half=53.22, unit="day"), isotope(11, 23, 100.0), isotope(11, 22, half=2.6, unit="year"),
            isotope(11, 24, half=15.0, unit="hour"), isotope(43, 97, half=4.21, unit="Myear"),
            isotope(43, 98, half=4.2, unit="Myear"), isotope(43, 99, half=0.211, unit="Myear")]


def test_gold_by_construction():
    corpus, queries = build([dict(e) for e in ELEMENTS], [dict(i) for i in ISOTOPES])
    assert [p["id"] for p in corpus] == list(range(len(corpus)))
    assert {q["type"] for q in queries} == {"bridge", "comparison"}
    for q in queries:
        gold = q["gold_ids"]
        assert len(set(gold)) == 2 and q["gold_titles"] == [corpus[i]["title"] for i in gold]
        assert sorted(i for i, _ in q["supporting_facts"]) == sorted(gold)
        for i, fact in q["supporting_facts"]:
            assert fact in corpus[i]["text"], (q["id"], fact)
        first, second = (corpus[i] for i in gold)
        if q["type"] == "bridge":
            assert q["answer"] in second["text"] and q["answer"] not in first["text"]
            assert norm(first["title"]) not in norm(q["question"]) and q["answer"] not in q["question"]
        else:
            assert q["answer"] in q["question"]
    by_id = {q["id"]: q for q in queries}
    assert by_id["el-cmp-melting-Be-Li"]["answer"] == "Beryllium" if "el-cmp-melting-Be-Li" in by_id else \
        by_id["el-cmp-melting-Li-Be"]["answer"] == "Beryllium"
    cmp_year = [q for q in queries if q["id"].startswith("el-cmp-year-") and "Lithium" in q["question"]
                and "Beryllium" in q["question"]]
    assert [q["answer"] for q in cmp_year] == ["Beryllium"]  # 1798 before 1817
    tc = corpus[[q for q in queries if q["id"].startswith("el-cmp-halflife-Tc")][0]["gold_ids"][0]]
    assert tc["title"].startswith("Technetium-")
    longest = [p for p in corpus if "the longest-lived isotope of technetium" in p["text"]]
    assert [p["title"] for p in longest] == ["Technetium-97"]  # no stable isotope: 4.21 Myr beats 4.2
    assert not any("longest-lived isotope of lithium" in p["text"] for p in corpus)  # it has stable isotopes
    assert [p["title"] for p in corpus if "most abundant isotope of lithium" in p["text"]] == ["Lithium-7"]


def test_a_clue_shared_by_two_elements_is_not_asked():
    twins = [dict(e) for e in ELEMENTS]
    twins[1].update(discoverers="Johann Arfwedson", discovery_year=1817)  # Beryllium now shares Lithium's discovery
    _, queries = build(twins, [dict(i) for i in ISOTOPES])
    assert not any("Johann Arfwedson" in q["question"] for q in queries)
    assert any("lithos" in q["question"] or "beryllos" in q["question"] for q in queries)  # the name clue instead


def test_generated_files_are_current_and_in_the_eval_format(tmp_path):
    """bench/data/elements is what the module writes from the installed mendeleev (skipped without it)."""
    if importlib.util.find_spec("mendeleev") is None:
        pytest.skip(f"mendeleev not installed (make bench installs {PACKAGE})")
    write(*build(*load(package_db())), tmp_path)
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert (tmp_path / name).read_text() == (GENERATED / name).read_text(), name
    corpus = [json.loads(line) for line in (GENERATED / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (GENERATED / "queries.jsonl").read_text().splitlines()]
    assert 1000 <= len(corpus) <= 2500 and 150 <= len(queries) <= 250
    assert all(0 <= g < len(corpus) for q in queries for g in q["gold_ids"])
