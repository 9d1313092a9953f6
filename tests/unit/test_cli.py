"""`python -m core` as a real process: build, ask --json, eval --json, stats --json, and the one-line refusals."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TINY_ROWS
from tests.stores import home_url, postgres

ROOT = Path(__file__).resolve().parents[2]


def cli(home: Path, *args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items()
         if k not in ("OLLAMA_HOST", "STRATA_BACKEND", "STRATA_EMBEDDER", "STRATA_CHAT_MODEL", "STRATA_EMBED_MODEL")}
    e.update(STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False",
             PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if postgres():  # the home's database on the test PostgreSQL server
        e["STRATA_DATABASE_URL"] = home_url(home)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny JSONL corpus with external ids, and a queries file whose gold ids are known."""
    d = tmp_path_factory.mktemp("cli_corpus")
    rows = [dict(r) for r in TINY_ROWS[:3]]  # d1..d3 of the shared tiny corpus
    (d / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    queries = [
        {"id": "q1", "question": rows[2]["text"], "gold_ids": ["d3"]},
        {"id": "q2", "question": rows[1]["text"], "gold_ids": ["d2"]},
    ]
    (d / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    return d


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpus):
    home = tmp_path_factory.mktemp("cli_home")
    p = cli(home, "build", "--workspace", "tiny", "--quiet", str(corpus / "corpus.jsonl"))
    return home, p


def test_build_prints_json_counts(built):
    home, p = built
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stdout
    out = json.loads(lines[0])
    assert out["workspace"] == "tiny" and isinstance(out["run"], int)
    c = out["counts"]
    assert c["document"] == 3
    assert c["chunk"] >= 3 and c["entity"] > 3 and c["relationship"] > 0 and c["statement"] >= 4
    assert c["edge"] > c["chunk"]
    assert "3 document(s) added" in p.stderr


def test_ask_json(built):
    home, _ = built
    p = cli(home, "ask", "--workspace", "tiny", "--json", "Who designed the Tidewater Bridge?")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"answer", "strategy", "sections", "sources", "path", "trace"} <= set(out)
    assert out["strategy"] == "hirag" and isinstance(out["answer"], str) and out["answer"]
    assert set(out["sections"]) == {"local", "bridge", "global"}
    assert out["sections"]["local"], "the question names entities of the corpus"
    for items in out["sections"].values():
        assert isinstance(items, list)
        for it in items:
            assert {"id", "kind", "title", "text", "score"} <= set(it)
            assert isinstance(it["score"], (int, float))
    assert out["sources"]
    for s in out["sources"]:
        assert {"document_id", "external_id", "title", "score"} <= set(s)
    assert out["sources"][0]["external_id"] in {"d1", "d2"}
    assert {"nodes", "edges"} == set(out["path"])
    assert {"timings_ms", "counts"} <= set(out["trace"])
    assert out["trace"]["timings_ms"] and sum(
        out["trace"]["counts"][k] for k in ("local_entities", "text_units")) == len(out["sections"]["local"])
    assert "Lena Marsh" in out["answer"]


def test_eval_json(built, corpus):
    home, _ = built
    p = cli(home, "eval", "--workspace", "tiny", "--queries", str(corpus / "queries.jsonl"), "--k", "2",
            "--strategies", "naive,hirag", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == {"naive", "hirag"}
    for row in out.values():
        assert set(row) == {"recall@2", "latency_ms_p50", "latency_ms_p95", "warmup_ms", "queries", "found"}
        assert row["queries"] == 2
        # per query, the rank of each gold id (0: not retrieved), from which bench/report.py pairs the margins
        assert len(row["found"]) == 2 and row["recall@2"] == round(
            sum(sum(0 < r <= 2 for r in f) / len(f) for f in row["found"]) / 2, 4)
        assert 0.0 <= row["recall@2"] <= 1.0
        assert 0 < row["latency_ms_p50"] <= row["latency_ms_p95"]
    assert out["naive"]["recall@2"] == 1.0, "each query is its gold document's own text"


def test_stats_json(built):
    home, _ = built
    p = cli(home, "stats", "--workspace", "tiny", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {"nodes", "communities", "layers", "stop_reason", "stages"} <= set(out)
    assert out["nodes"]["document"] == {"0": 3}
    assert out["nodes"]["entity"]["0"] > 0
    assert "leiden" in out["communities"]
    from core.pipeline.runner import stage_names

    assert list(out["stages"]) == stage_names()
    assert out["build_version"] == 1


def test_unknown_strategy(built):
    home, _ = built
    p = cli(home, "ask", "--workspace", "tiny", "--strategy", "bogus", "q?")
    assert p.returncode == 2
    assert "unknown strategy 'bogus'" in one_line_error(p)
    p = cli(home, "eval", "--workspace", "tiny", "--queries", "x.jsonl", "--strategies", "naive,bogus")
    assert p.returncode == 2
    assert "bogus" in one_line_error(p)


def test_missing_workspace(tmp_path):
    p = cli(tmp_path, "ask", "--workspace", "nope", "q?")
    assert p.returncode == 2
    assert "no workspace named 'nope'" in one_line_error(p)
    p = cli(tmp_path, "stats", "--workspace", "nope")
    assert p.returncode == 2
    assert "nope" in one_line_error(p)


@pytest.mark.parametrize("k", ["x", "0", "2,a", ""])
def test_bad_k(tmp_path, k):
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "q?", "gold_ids": ["a"]}\n')
    p = cli(tmp_path, "eval", "--workspace", "w", "--queries", str(q), "--k", k)
    assert p.returncode == 2
    assert "--k" in one_line_error(p)


def test_missing_queries_file(built, tmp_path):
    home, _ = built
    p = cli(home, "eval", "--workspace", "tiny", "--queries", str(tmp_path / "none.jsonl"))
    assert p.returncode == 2
    assert "none.jsonl" in one_line_error(p)


def test_unbuilt_workspace_and_empty_build(tmp_path):
    p = cli(tmp_path, "build", "--workspace", "empty", "--quiet")
    assert p.returncode == 2
    assert "no documents" in one_line_error(p)
    p = cli(tmp_path, "ask", "--workspace", "empty", "q?")
    assert p.returncode == 2
    assert "not been built" in one_line_error(p)


def test_build_with_unreachable_ollama(tmp_path, corpus):
    port = closed_port()
    p = cli(tmp_path, "build", "--workspace", "w", "--backend", "ollama", str(corpus / "corpus.jsonl"),
            env={"OLLAMA_HOST": f"127.0.0.1:{port}"}, timeout=120)
    assert p.returncode == 1
    line = one_line_error(p)
    assert f"127.0.0.1:{port}" in line
    assert p.stdout.strip() == ""


def test_bad_arguments_exit_2(tmp_path):
    p = cli(tmp_path, "build")
    assert p.returncode == 2
    assert "--workspace" in p.stderr
