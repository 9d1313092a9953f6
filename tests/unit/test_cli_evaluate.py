"""`python -m core evaluate` as a real process on the tiny workspace of test_cli: a questions file's unknown-gold
row said on stderr and left out, the job's progress, a table with the baselines marked, the run kept (a second
run's JSON export names the same question set), and the JSON export's recall equal to `core eval`'s."""

from __future__ import annotations

import json

from tests.unit.test_cli import built, cli, corpus  # noqa: F401  (fixtures)


def test_evaluate_prints_the_table_and_keeps_the_run(built, corpus, tmp_path):  # noqa: F811
    home, p = built
    assert p.returncode == 0, p.stderr
    qfile = tmp_path / "q.jsonl"
    rows = [json.loads(x) for x in (corpus / "queries.jsonl").read_text().splitlines()]
    qfile.write_text("".join(json.dumps(r) + "\n" for r in rows + [{"question": "Who?", "gold_ids": ["zz"]}]))
    out = cli(home, "evaluate", "--workspace", "tiny", "--questions", str(qfile), "--strategies", "hirag")
    assert out.returncode == 0, out.stderr
    assert "q.jsonl:3: left out: names no known document: 'zz'" in out.stderr
    assert "[measure] running 2/2" in out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("evaluation 1: 2 questions")
    assert [ln.split()[0] for ln in lines[2:5]] == ["hirag", "naive", "bm25"]
    assert lines[5].startswith("recall@2: ") and " leads (" in lines[5]  # then who won each figure, and if it is real
    assert "naive (dense)" in out.stdout and "bm25 (BM25)" in out.stdout
    js = cli(home, "evaluate", "--workspace", "tiny", "--questions", str(qfile), "--strategies", "hirag", "--json")
    assert js.returncode == 0, js.stderr
    doc = json.loads(js.stdout)
    assert doc["evaluation"]["id"] == 2 and doc["evaluation"]["question_hash"][:12] in lines[0]
    ev = cli(home, "eval", "--workspace", "tiny", "--queries", str(corpus / "queries.jsonl"), "--k", "2,5,10",
             "--strategies", "hirag,naive,bm25", "--json")
    theirs = json.loads(ev.stdout)
    for name in ("hirag", "naive", "bm25"):
        for k in (2, 5, 10):
            assert doc["figures"][name][f"recall@{k}"]["value"] == theirs[name][f"recall@{k}"], (name, k)
