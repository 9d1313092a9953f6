"""Builds through a model server that fails a share of its chat replies (issue 23: a server's faults cost no build).

    python -m bench.faults --share 0.3
    python -m bench.faults --share 0.1

For each corpus (`sample`: data/sample; `hotpotqa-200`: the first 200 documents of
../shared/eval/hotpotqa/corpus.jsonl; `generated-200`: 200 documents of bench/gen_corpus.py, seed 7) and each backend
(`ollama` through tests/fake_ollama.py's FakeOllama, `openai` through tests/fake_openai.py's FakeOpenAI, both local
HTTP servers with deterministic replies), in this process:

* a fault-free build (reused from bench/results/faults.json when it was measured at the same commit);
* a build whose server injects faults: `Faults(share, seed, kinds, stall_s)` (HTTP 500; 503 "overloaded" with a
  Retry-After of 0 or 1 s; a reply that is not JSON; `--stall` seconds of silence, longer than the request
  `--timeout`, so a stall is a timed-out attempt), with the default retries (BackendSettings.retries) and backoff;
* with `--low-retries N`, the sample also with N retries, where some calls fail all their attempts: those units
  are recorded as failed units and the build finishes; then the build once more with the faults off (the retry of
  the failed units), which must end with none and the fault-free graph.

Each build runs in a fresh STRATA_HOME under bench/out/faults/ with the bundled embedder. Per build: completed (the
run ended "done"), the exit status `core build` gives it (0, or 5 with failed units, or 1), chat requests, faults
injected by kind, retries (chat requests beyond the fault-free build's: each fault costs one), failed units, wall
seconds, and whether the graph (nodes by kind, edges by kind) equals the fault-free build's. Results are kept per
share in bench/results/faults.json; `python -m bench.report` renders them (`report`).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from pathlib import Path

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "faults"
RESULTS = ROOT / "bench" / "results" / "faults.json"
CORPORA = ("sample", "hotpotqa-200", "generated-200")
BACKENDS = ("ollama", "openai")


def corpus(name: str, where: Path) -> list[Path]:
    """The files of corpus `name` (written under `where` when it is a slice)."""
    if name == "sample":
        return [ROOT / "data" / "sample"]
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.jsonl"
    if name == "hotpotqa-200":
        rows = (ROOT.parent / "shared" / "eval" / "hotpotqa" / "corpus.jsonl").read_text().splitlines()[:200]
        path.write_text("\n".join(rows) + "\n")
    elif name == "generated-200":
        from bench.gen_corpus import generate

        path.write_text("\n".join(json.dumps(r) for r in generate(120_000, 7)[:200]) + "\n")
    else:
        raise SystemExit(f"unknown corpus {name!r}: one of {', '.join(CORPORA)}")
    return [path]


def _shape(store, ws_id: int) -> dict:
    from sqlalchemy import func
    from sqlmodel import select

    from core.models import Edge, Node

    with store.session() as s:
        nodes = dict(s.exec(select(Node.kind, func.count()).where(Node.workspace_id == ws_id).group_by(Node.kind)).all())
        edges = dict(s.exec(select(Edge.kind, func.count()).where(Edge.workspace_id == ws_id).group_by(Edge.kind)).all())
    return {"nodes": nodes, "edges": edges}


def build(home: Path, paths: list[Path], backend: str, fake, embedder, timeout_s: float, retries: int | None,
          again: bool = False) -> dict:
    """One build of `paths` in `home` through `fake` (a second one of the same workspace with `again`)."""
    from core.config import Settings
    from core.pipeline.factory import make_context
    from core.pipeline.failures import EXIT_FAILED_UNITS, failed_units
    from core.pipeline.runner import create_run, run_build
    from core.store import Store
    from core.workspace import ingest_paths

    s = Settings()
    s.storage.home = home
    s.backend.kind = backend  # type: ignore[assignment]
    s.backend.ollama_host, s.backend.openai_base_url = fake.url, f"{fake.url}/v1"
    s.backend.timeout_s = timeout_s
    if retries is not None:
        s.backend.retries = retries
    if not again:
        shutil.rmtree(home, ignore_errors=True)
    store = Store(s.storage.db_url)
    ws = store.create_workspace("bench")
    assert ws.id is not None
    if not again:
        ingest_paths(store, ws, paths, s)
    requests, injected = fake.chat_requests, sum(fake.injected.values())
    t0 = time.perf_counter()
    run = create_run(store, ws, s)
    assert run.id is not None
    last, error = None, ""
    try:
        for ev in run_build(make_context(store, ws, s, embedder=embedder), run.id):
            last = ev
    except Exception as exc:  # noqa: BLE001 - the run failed: recorded as not completed
        error = f"{type(exc).__name__}: {exc}"[:300]
    wall = time.perf_counter() - t0
    units = failed_units(store, ws.id, run.id)
    done = last is not None and last.status == "done"
    out = {"completed": done, "exit": 1 if not done else EXIT_FAILED_UNITS if units else 0,
           "message": error or (last.message if last else ""), "wall_s": round(wall, 1),
           "chat_requests": fake.chat_requests - requests, "injected": sum(fake.injected.values()) - injected,
           "failed_units": len(units),
           "failed": [{"stage": u.stage, "what": u.label, "reason": u.reason[:160]} for u in units[:5]]}
    out.update(_shape(store, ws.id))
    store.close()
    return out


def run_pair(name: str, backend: str, args, embedder, baseline: dict | None) -> dict:
    """The fault-free build (unless given) and the faulty one(s) of corpus `name` through `backend`."""
    from tests.fake_ollama import FakeOllama, Faults
    from tests.fake_openai import FakeOpenAI

    make = FakeOllama if backend == "ollama" else FakeOpenAI
    paths = corpus(name, OUT / "corpora")
    home = OUT / f"{name}-{backend}"
    row: dict = {"corpus": name, "backend": backend}
    if baseline is None:
        with make() as fake:
            baseline = build(home / "fault-free", paths, backend, fake, embedder, args.timeout, None)
        print(f"  {name}/{backend} fault-free: {baseline['wall_s']} s, {baseline['chat_requests']} chat requests",
              flush=True)
    row["fault_free"] = baseline
    kinds = tuple(args.kinds.split(","))
    runs = [("default", None)] + ([(f"{args.low_retries}", args.low_retries)]
                                  if args.low_retries is not None and name == "sample" else [])
    row["faulty"] = []
    for label, retries in runs:
        with make() as fake:
            fake.faults = Faults(share=args.share, seed=args.seed, kinds=kinds, stall_s=args.stall)
            got = build(home / f"faults-{label}", paths, backend, fake, embedder, args.timeout, retries)
            got["injected_by_kind"] = dict(sorted(fake.injected.items()))
            got["retries"] = got["chat_requests"] - baseline["chat_requests"]
            got["retries_setting"] = label
            got["same_graph"] = (got["nodes"], got["edges"]) == (baseline["nodes"], baseline["edges"])
            if got["failed_units"]:  # the retry of the failed units: the same workspace, the faults off
                fake.faults = None
                again = build(home / f"faults-{label}", paths, backend, fake, embedder, args.timeout, retries,
                              again=True)
                again["same_graph"] = (again["nodes"], again["edges"]) == (baseline["nodes"], baseline["edges"])
                got["retry_build"] = {k: again[k] for k in ("completed", "exit", "wall_s", "chat_requests",
                                                            "failed_units", "same_graph", "message")}
        for k in ("nodes", "edges"):
            got.pop(k)
        row["faulty"].append(got)
        print(f"  {name}/{backend} share {args.share} retries {label}: completed {got['completed']}, "
              f"{got['failed_units']} failed units, {got['injected']} faults, {got['retries']} retries, "
              f"{got['wall_s']} s", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--share", type=float, required=True, help="share of chat replies that fail (0-1)")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--kinds", default="500,503,malformed,stall")
    ap.add_argument("--stall", type=float, default=3.0, help="seconds a stalled reply stays silent")
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds before a request is given up")
    ap.add_argument("--corpora", default="sample,hotpotqa-200")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--low-retries", type=int, default=2, help="also build the sample with this many retries "
                                                               "(failed units expected); -1: not")
    args = ap.parse_args()
    if args.low_retries is not None and args.low_retries < 0:
        args.low_retries = None
    logging.basicConfig(level=logging.ERROR)  # the pool's warning per retry would flood the output
    from core.backends.embedders import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    here = commit()
    baselines = {k: v for k, v in results.get("baselines", {}).items() if v.get("commit") == here}
    t0 = time.perf_counter()
    rows = []
    for name in args.corpora.split(","):
        for backend in args.backends.split(","):
            key = f"{name}/{backend}"
            row = run_pair(name, backend, args, embedder, baselines.get(key, {}).get("build"))
            baselines[key] = {"commit": here, "build": row.pop("fault_free")}
            row["fault_free"] = {k: baselines[key]["build"][k] for k in ("completed", "wall_s", "chat_requests")}
            rows.append(row)
    results["baselines"] = baselines
    results.setdefault("shares", {})[f"{args.share:g}"] = {
        "command": "python -m bench.faults " + " ".join(sys.argv[1:]), "machine": machine(),
        "date": time.strftime("%Y-%m-%d"), "commit": here, "seed": args.seed, "kinds": args.kinds.split(","),
        "stall_s": args.stall, "timeout_s": args.timeout, "seconds": round(time.perf_counter() - t0), "runs": rows}
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


def report(r: dict) -> list[str]:
    """The section of docs/BENCHMARKS.md (bench/report.py)."""
    from core.config import BackendSettings

    retries = BackendSettings.model_fields["retries"].default
    out = ["## A model server that fails: builds through injected faults", "",
           "Each corpus built through a local server speaking the Ollama API (tests/fake_ollama.py) or the OpenAI API "
           "(tests/fake_openai.py) whose replies are deterministic, once without faults and once with a share of the "
           "chat replies failing: HTTP 500, 503 'overloaded' with a Retry-After of 0 or 1 s, a reply that is not "
           "JSON, or a stall longer than the request timeout. Retries are the chat requests beyond the fault-free "
           f"build's (each fault costs one). 'default' retries is BackendSettings.retries ({retries}: 13 attempts a "
           "call); with fewer, a call can fail all its attempts: that unit is recorded as a failed unit (issue 23), "
           "the build still finishes ('exit' is what `core build` returns: 5 with failed units), and the next build "
           "(the faults off) retries it. 'same graph': nodes by kind and edges by kind equal the fault-free "
           "build's. Wall seconds are noisy: the two cores were shared with other work while these ran.", ""]
    for share, s in sorted(r.get("shares", {}).items(), key=lambda kv: float(kv[0])):
        out += [f"### {float(share):.0%} of the chat replies fail", "",
                f"* command: `{s['command']}`", f"* machine: {s['machine']}",
                f"* date: {s['date']}, commit {s['commit']}; faults {', '.join(s['kinds'])} (seed {s['seed']}), "
                f"stall {s['stall_s']:g} s against a {s['timeout_s']:g} s request timeout; the command took "
                f"{s['seconds']} s (fault-free builds are measured once per commit, for the first share run)", "",
                "| corpus | backend | retries | completed | exit | chat requests (fault-free) | faults injected | "
                "retries made | failed units | wall s (fault-free) | same graph | then the retry build |",
                "|---|---|---|---|---:|---:|---|---:|---:|---:|---|---|"]
        for row in s["runs"]:
            ff = row["fault_free"]
            for f in row["faulty"]:
                kinds = ", ".join(f"{k} {n}" for k, n in f["injected_by_kind"].items())
                again = f.get("retry_build")
                then = (f"{again['failed_units']} failed units, same graph: {'yes' if again['same_graph'] else 'no'}, "
                        f"{again['wall_s']:.0f} s" if again else "")
                out.append(f"| {row['corpus']} | {row['backend']} | {f['retries_setting']} | "
                           f"{'yes' if f['completed'] else 'no'} | {f['exit']} | {f['chat_requests']:,} "
                           f"({ff['chat_requests']:,}) | {f['injected']:,}: {kinds} | {f['retries']:,} | "
                           f"{f['failed_units']} | {f['wall_s']:.0f} ({ff['wall_s']:.0f}) | "
                           f"{'yes' if f['same_graph'] else 'no'} | {then} |")
        failed = [(row, f) for row in s["runs"] for f in row["faulty"] if f["failed"]]
        for row, f in failed[:2]:
            u = f["failed"][0]
            out.append(f"\nA failed unit ({row['corpus']}, {row['backend']}, {f['retries_setting']} retries): "
                       f"{u['stage']}, {u['what']}: {u['reason']}")
        out.append("")
    return out


if __name__ == "__main__":
    main()
