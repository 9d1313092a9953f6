"""The same graph on a cluster as in one process, at a size the stage tests do not reach.

    python -m bench.engine_same --tokens 100000 --seed 7

Builds one generated corpus (bench/gen_corpus.py) twice with the offline backend and the build's own embedder:
every unit in this process, then on a LocalCluster of 2 worker processes (core/pipeline/engine.py), and compares the
two workspaces row for row and vector for vector (tests/snapshots.py `full_snapshot`: nodes, edges, communities,
members, every vector's bits). tests/stages/test_engine.py does the same on four sample documents; a unit with state
of its own (the offline HiRAG summaries count word readings over the clusters before them) shows only where there
are many clusters. Results in bench/results/engine-same.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "engine-same"
RESULTS = ROOT / "bench" / "results" / "engine-same.json"


def build(home: Path, corpus: Path, engine) -> tuple[dict, float]:
    from core.backends.embedders import make_embedder
    from core.config import Settings
    from tests.conftest import build_workspace
    from tests.snapshots import full_snapshot

    settings = Settings()
    settings.storage.home = home
    embedder = make_embedder(settings.embed, settings.backend, home / "models")
    t0 = time.perf_counter()
    built = build_workspace(home, [corpus], embedder, name="same", settings=settings, engine=engine)
    took = time.perf_counter() - t0
    return full_snapshot(built.store, built.ws, built.settings, embedder.name), took


def main() -> None:
    from bench.gen_corpus import generate, write_corpus
    from core.pipeline.engine import local_engine
    from tests.snapshots import differences

    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    meta = write_corpus(generate(args.tokens, args.seed), OUT / "corpus", args.seed, args.tokens)
    corpus = OUT / "corpus" / "corpus.jsonl"
    alone, alone_s = build(OUT / "inline", corpus, None)
    engine = local_engine(2)
    try:
        spread, spread_s = build(OUT / "cluster", corpus, engine)
    finally:
        engine.close()
    diff = differences(alone, spread, show=5)
    result = {
        "command": f"python -m bench.engine_same --tokens {args.tokens} --seed {args.seed}",
        "machine": machine(), "commit": commit(), "date": time.strftime("%Y-%m-%d"), "corpus": meta,
        "rows": {k: len(v) for k, v in alone.items()},
        "in_process_s": round(alone_s, 1), "local_cluster_s": round(spread_s, 1),
        "same": not diff, "differences": {k: [v[0], v[1]] for k, v in diff.items()},
        "examples": {k: [[str(x)[:300] for x in v[2][:2]], [str(x)[:300] for x in v[3][:2]]] for k, v in diff.items()},
    }
    RESULTS.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("rows", "in_process_s", "local_cluster_s", "same", "differences")}))


if __name__ == "__main__":
    main()
