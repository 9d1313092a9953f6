"""Offline build benchmark: wall time per stage and peak memory of the build process.

    python -m bench.build --name sample data/sample
    python -m bench.build --name hotpotqa ../shared/eval/hotpotqa/corpus.jsonl

Each run builds into a fresh STRATA_HOME (bench/out/<name>) with `python -m core build` in a child process,
reads the stage timings back with `python -m core stats --json`, and writes bench/results/build-<name>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.machine import machine

ROOT = Path(__file__).resolve().parent.parent


def run_build(name: str, paths: list[str], home: Path) -> dict:
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-m", "core", "build", "--quiet", "--workspace", name, *paths]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"build failed: {proc.stderr[-2000:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stats = json.loads(subprocess.run([sys.executable, "-m", "core", "stats", "--workspace", name, "--json"],
                                      cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout)
    return {
        "name": name,
        "command": " ".join(["python -m bench.build --name", name, *paths]),
        "machine": machine(),
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(peak_kb / 1024, 0),
        "stages_s": stats["stages"],
        "nodes": stats["nodes"],
        "communities": stats["communities"],
        "modularity": stats["modularity"],
        "layers": stats["layers"],
        "stop_reason": stats["stop_reason"],
        "date": time.strftime("%Y-%m-%d"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--keep", action="store_true", help="reuse bench/out/<name> (default: build afresh)")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    home = ROOT / "bench" / "out" / args.name
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    result = run_build(args.name, args.paths, home)
    out = ROOT / "bench" / "results" / f"build-{args.name}.json"
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
