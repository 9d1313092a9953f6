"""Extraction throughput on k Dask workers against a model server that answers every chat call after a fixed delay.

    python -m bench.engine_scale --delay 0.25 --workers 1 2 4 8 --units 64

For each k: a LocalCluster of k worker processes of one thread (core/pipeline/engine.py `local_engine`), the Ollama
backend against tests/fake_ollama.py's FakeOllama (a local HTTP server; every chat reply waits `--delay` s), a fresh
home per k (so no call is answered from the call cache), the host's slots set to k. Each worker first extracts one
warm-up chunk (its backend made once); then `--units` chunks of the sample corpus are extracted through
`Engine.map(extract_one, …)` as the extract stage sends them, and timed. Throughput is units per second; the scaling
figure is throughput(k) / (k × throughput(1)), which the issue wants at 0.9 or more. The calls wait on the server,
not the CPU, so a 2-core machine can show it for k up to 8. Results in bench/results/engine-scale.json;
`python -m bench.report` renders them (`report`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "engine-scale"
RESULTS = ROOT / "bench" / "results" / "engine-scale.json"


def texts(n: int) -> list[str]:
    """`n` paragraphs of the sample corpus (cycled when there are fewer)."""
    paras = [p.strip() for f in sorted((ROOT / "data" / "sample").glob("*")) for p in f.read_text().split("\n\n")
             if len(p.strip()) > 200]
    return [paras[i % len(paras)] for i in range(n)]


def measure(k: int, units: int, delay: float) -> dict:
    from core.config import Settings
    from core.pipeline.engine import local_engine
    from core.pipeline.tasks import Parts, extract_one
    from core.store import Store
    from tests.fake_ollama import FakeOllama

    home = OUT / f"k{k}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    with FakeOllama() as fake:
        fake.chat_delay_s = delay
        s = Settings()
        s.storage.home = home
        s.backend.kind = "ollama"
        s.backend.ollama_host = fake.url
        s.backend.concurrency = k
        s.backend.retries = 0
        Store(s.storage.db_url)  # the tables made once, before the workers open the call cache's database
        parts, types = Parts(s), list(s.extract.entity_types)
        engine = local_engine(k)
        try:
            warm = list(engine.map(extract_one, [(f"Warm-up text number {i} about Ada Lovelace.", None)
                                                 for i in range(k)], parts, types, window=k))
            assert all(not hasattr(w, "reason") for w in warm), warm
            work = [(f"[{k}:{i}] {t}", None) for i, t in enumerate(texts(units))]
            calls0 = fake.chat_requests
            t0 = time.perf_counter()
            got = list(engine.map(extract_one, work, parts, types, window=2 * k))
            secs = time.perf_counter() - t0
        finally:
            engine.close()
        failed = sum(1 for g in got if hasattr(g, "reason"))
        return {"workers": k, "units": units, "seconds": round(secs, 3), "per_s": round(units / secs, 2),
                "calls": fake.chat_requests - calls0, "failed": failed, "max_in_flight": fake.max_inflight}


def report(res: dict) -> list[str]:
    rows = res["runs"]
    base = rows[0]["per_s"] / rows[0]["workers"]
    out = ["## Extraction on k Dask workers (issue 36)", "",
           f"* command: `{res['command']}`", f"* machine: {res['machine']}", f"* date: {res['date']}, commit "
           f"{res['commit']}", f"* a model server answering every chat call after {res['delay']} s "
           "(tests/fake_ollama.py); one thread per worker; the host's slots = k", "",
           "| workers k | units | seconds | units/s | scaling (units/s ÷ (k × units/s at k=1)) | calls | failed |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['workers']} | {r['units']} | {r['seconds']} | {r['per_s']} | "
                   f"{r['per_s'] / (r['workers'] * base):.2f} | {r['calls']} | {r['failed']} |")
    return out + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay", type=float, default=0.25)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--units", type=int, default=64)
    args = ap.parse_args()
    runs = []
    for k in args.workers:
        r = measure(k, args.units, args.delay)
        print(json.dumps(r), file=sys.stderr)
        runs.append(r)
    res = {"command": "python -m bench.engine_scale " + " ".join(sys.argv[1:]), "machine": machine(),
           "date": time.strftime("%Y-%m-%d"), "commit": commit(), "delay": args.delay, "runs": runs}
    RESULTS.write_text(json.dumps(res, indent=1))
    print("\n".join(report(res)))


if __name__ == "__main__":
    main()
