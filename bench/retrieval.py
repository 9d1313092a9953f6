"""Retrieval benchmark: recall@2/5/10 and p50/p95 latency of each strategy over an eval set.

    python -m bench.retrieval --set hotpotqa [--strategies hirag,naive]

Builds ../shared/eval/<set>/corpus.jsonl into bench/out/<set> when that workspace is missing (offline backend),
then runs `python -m core eval --json` and writes bench/results/eval-<set>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from bench.build import ROOT, run_build
from bench.machine import machine

EVAL = ROOT.parent / "shared" / "eval"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", required=True, help="folder name under ../shared/eval")
    ap.add_argument("--strategies", default="")
    args = ap.parse_args()
    home = ROOT / "bench" / "out" / args.set
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if not (home / "strata.db").exists():
        build = run_build(args.set, [f"../shared/eval/{args.set}/corpus.jsonl"], home)
        (ROOT / "bench" / "results" / f"build-{args.set}.json").write_text(json.dumps(build, indent=2))
    cmd = [sys.executable, "-m", "core", "eval", "--workspace", args.set, "--queries",
           str(EVAL / args.set / "queries.jsonl"), "--k", "2,5,10", "--json"]
    if args.strategies:
        cmd += ["--strategies", args.strategies]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    result = {
        "set": args.set,
        "command": f"python -m bench.retrieval --set {args.set}" + (f" --strategies {args.strategies}"
                                                                   if args.strategies else ""),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "strategies": json.loads(proc.stdout),
    }
    (ROOT / "bench" / "results" / f"eval-{args.set}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
