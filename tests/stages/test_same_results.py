"""The same question on the same build ranks the same sources in every process.

Two `python -m core eval` processes with different hash seeds (so sets and string-keyed dicts iterate in different
orders, and arrays land at different addresses) rank every document for every strategy; the rankings must be equal.
Each query's gold is every document of the workspace, so `found` is the rank of every document among the sources:
the whole source list, compared strategy by strategy. (The float32 memory-layout ties this guards against are tested
directly in tests/unit/test_similarity.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.eval import document_ids

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [
    "Who approved Carrow Gold, and after which field trials?",
    "How was the Northern Arc Railway financed?",
    "What did the Candlemas flood of 2004 do to the Halden barrier?",
    "Who conducts the Kelmouth Choir at the lantern festival?",
    "Which grants did the Meridian Trust give?",
]


def _eval(settings, qfile: Path, seed: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=str(seed), STRATA_HOME=str(settings.storage.home),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False")
    for var, value in (("STRATA_DATABASE_URL", settings.storage.database_url),
                       ("STRATA_CHROMA_URL", settings.storage.chroma_url)):
        if value:
            env[var] = str(value)
        else:
            env.pop(var, None)
    p = subprocess.run([sys.executable, "-m", "core", "eval", "--workspace", "sample", "--queries", str(qfile),
                        "--k", "5", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_two_processes_rank_every_source_the_same_for_every_strategy(sample_built, tmp_path):
    settings, store, ws, _ = sample_built
    every = sorted({x for ids in document_ids(store, ws.id).values() for x in ids})
    assert len(every) >= 15
    qfile = tmp_path / "queries.jsonl"
    qfile.write_text("".join(json.dumps({"id": i, "question": q, "gold_ids": every}) + "\n"
                             for i, q in enumerate(QUESTIONS)))
    first, second = _eval(settings, qfile, 1), _eval(settings, qfile, 2)
    assert len(first) >= 20 and set(first) == set(second), "every strategy ran in both processes"
    for name, row in first.items():
        assert any(r for q in row["found"] for r in q), f"{name} ranked some source"
        assert row["found"] == second[name]["found"], f"{name} ranked the sources differently in another process"
