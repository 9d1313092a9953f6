"""A build killed with `kill -9` at random moments, resumed each time, against an uninterrupted build of the same
documents: the two workspaces must be equal (every node, edge, community with its report, vector id with its
content hash: tests/snapshots.py).

    python -m bench.kills --name hotpotqa-240 ../shared/eval/hotpotqa/corpus.jsonl --docs 240 --kills 20

The first `--docs` rows of a JSONL corpus (or the files of a folder) go into two fresh homes under
bench/out/kills-<name>/. `whole`: one `python -m core build`. `killed`: `python -m core build` in a child process,
sent SIGKILL at a seeded random moment: a stage drawn uniformly among the build's stages (the draws taken in build
order, so the kills spread over the whole build) and a delay of up to 2 s after the run enters it; then started
again (`python -m core build --workspace bench`, which resumes at once: the dead process's run is known dead on this
host, core/liveness.py), `--kills` times; the last start runs to the end. Each kill records the stage its run was in.
Writes bench/results/kills-<name>.json; `python -m bench.report` renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.incremental import WS, homes_equal, run_cli
from bench.machine import commit, machine
from core.pipeline.runner import stage_names

ROOT = Path(__file__).resolve().parent.parent


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                ANONYMIZED_TELEMETRY="False")


def copy_corpus(src: Path, docs: int, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        for f in sorted(p for p in src.iterdir() if p.is_file())[:docs]:
            shutil.copy(f, out)
        return out
    rows = [ln for ln in src.read_text(encoding="utf-8").splitlines() if ln.strip()][:docs]
    path = out / src.name
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _store(home: Path):
    from core.config import Settings
    from core.store import Store

    settings = Settings()
    settings.storage.home = home
    home.mkdir(parents=True, exist_ok=True)
    return Store(settings.storage.db_url)


def _stage_now(store) -> str:
    """The stage the workspace's newest run is in (its StageRun rows, else the run's own), "" before any run."""
    ws = store.get_workspace(WS)
    run = store.latest_run(ws.id) if ws is not None and ws.id is not None else None
    if run is None or run.id is None:
        return ""
    running = [r.stage for r in store.stage_runs(run.id) if r.status == "running"]
    return running[-1] if running else run.stage


def _counts(home: Path) -> dict[str, int]:
    from core.config import Settings
    from core.store import Store

    settings = Settings()
    settings.storage.home = home
    store = Store(settings.storage.db_url)
    return store.counts(store.require_workspace(WS).id)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, help="a JSONL corpus or a folder of documents")
    ap.add_argument("--name", default="kills")
    ap.add_argument("--docs", type=int, default=240)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    out = ROOT / "bench" / "out" / f"kills-{args.name}"
    shutil.rmtree(out, ignore_errors=True)
    corpus = copy_corpus(args.corpus, args.docs, out / "corpus")
    whole, killed = out / "whole", out / "killed"
    whole_s = run_cli(whole, ["build", "--workspace", WS, "--quiet", str(corpus)])
    rng = random.Random(args.seed)
    names = stage_names()
    # the kills' moments: a stage each (in build order, so they spread over the whole build) and a delay after that
    # stage starts, up to two seconds
    targets = sorted((rng.randrange(len(names)), round(rng.uniform(0.0, 2.0), 2)) for _ in range(args.kills))
    kills: list[dict] = []
    first = True
    watch = _store(killed)  # its tables made here, before the first child process starts
    t_all = time.perf_counter()
    for target, delay in targets:
        cmd = [sys.executable, "-m", "core", "build", "--workspace", WS, "--quiet"] + ([str(corpus)] if first else [])
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(killed), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        while proc.poll() is None:
            now = _stage_now(watch)  # read once: the run moves on between two reads
            if now in names and names.index(now) >= target:
                break
            time.sleep(0.05)
        time.sleep(delay)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.returncode != 0:
                raise SystemExit(f"the build exited {proc.returncode} before its kill: {err[-2000:]}")
            break  # it finished before the kill came: nothing left to interrupt
        stage = _stage_now(watch) or "(before the run)"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills.append({"target": names[target], "after_stage_start_s": delay, "stage": stage})
        first = False
    resumed_s = run_cli(killed, ["build", "--workspace", WS, "--quiet"])
    res = {"name": args.name, "command": "python -m bench.kills " + " ".join(sys.argv[1:]), "machine": machine(),
           "date": time.strftime("%Y-%m-%d"), "commit": commit(), "documents": args.docs,
           "runtime": os.environ.get("STRATA_MINILM_RUNTIME", "auto"),
           "whole_s": whole_s, "killed_total_s": round(time.perf_counter() - t_all, 1), "last_resume_s": resumed_s,
           "kills": kills, "counts_whole": _counts(whole), "counts_killed": _counts(killed),
           "equal": homes_equal(whole, killed)}
    path = ROOT / "bench" / "results" / f"kills-{args.name}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"{len(kills)} kills; equal to the uninterrupted build: {res['equal']}; wrote {path.relative_to(ROOT)}")


def report(r: dict) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    stages: dict[str, int] = {}
    for k in r["kills"]:
        stages[k["stage"]] = stages.get(k["stage"], 0) + 1
    same = r["counts_whole"] == r["counts_killed"]
    return [f"## Killed and resumed: `{r['name']}`", "",
            f"* command: `{r['command']}` (MiniLM runtime: {r['runtime']})", f"* machine: {r['machine']}",
            f"* date: {r['date']} {r.get('commit', '')}",
            f"* {r['documents']} documents; uninterrupted build {r['whole_s']:.1f} s; {len(r['kills'])} `kill -9` at "
            f"random moments, each followed by `python -m core build` resuming at once "
            f"({r['killed_total_s']:.0f} s in all, the last resume {r['last_resume_s']:.1f} s)",
            "* kills per stage: " + ", ".join(f"{s} {n}" for s, n in sorted(stages.items(), key=lambda kv: -kv[1])),
            f"* counts equal: {'yes' if same else 'NO'}; whole workspace equal (nodes, edges, communities with "
            f"reports, vectors): {'yes' if r['equal'] else 'NO'}", "",
            "| count | uninterrupted | killed and resumed |", "|---|---:|---:|",
            *[f"| {k} | {r['counts_whole'].get(k, 0):,} | {r['counts_killed'].get(k, 0):,} |"
              for k in sorted(set(r["counts_whole"]) | set(r["counts_killed"]))], ""]


if __name__ == "__main__":
    main()
