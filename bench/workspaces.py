"""One corpus built three times: into workspaces 1 and 2 of one home, and into a workspace of a second home whose
database already holds another workspace (so its row id is 2 again, but its vectors and files are elsewhere). The
three must be equal, exactly (every node, edge, community with its report, vector bits: tests/snapshots.py, ids read
without their workspace part, core/ids.py).

    python -m bench.workspaces --name hotpotqa-240 ../shared/eval/hotpotqa/corpus.jsonl --docs 240

Writes bench/results/workspaces-<name>.json; `python -m bench.report` renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench.kills import copy_corpus
from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent


def _build(home: Path, name: str, corpus: Path) -> float:
    import subprocess

    env = dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "core", "build", "--workspace", name, "--quiet", str(corpus)], cwd=ROOT,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t0, 1)


def _snapshot(home: Path, name: str) -> tuple[dict, dict, int]:
    from core.config import Settings
    from core.store import Store
    from tests.snapshots import full_snapshot

    settings = Settings()
    settings.storage.home = home
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(name)
    assert ws.id is not None
    return full_snapshot(store, ws, settings, ws.embedder), store.counts(ws.id), ws.id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path, help="a JSONL corpus or a folder of documents")
    ap.add_argument("--name", default="workspaces")
    ap.add_argument("--docs", type=int, default=240)
    args = ap.parse_args()
    from tests.snapshots import differences

    out = ROOT / "bench" / "out" / f"workspaces-{args.name}"
    shutil.rmtree(out, ignore_errors=True)
    corpus = copy_corpus(args.corpus, args.docs, out / "corpus")
    small = copy_corpus(args.corpus, 3, out / "small")
    seconds = {"one": _build(out / "home", "one", corpus), "two": _build(out / "home", "two", corpus),
               "other home, small first": _build(out / "other", "small", small),
               "other home": _build(out / "other", "again", corpus)}
    (a, ca, ia), (b, cb, ib), (c, cc, ic) = (_snapshot(out / "home", "one"), _snapshot(out / "home", "two"),
                                             _snapshot(out / "other", "again"))
    same_home, other_home = differences(a, b), differences(a, c)
    for what, diff in (("two workspaces of one home", same_home), ("another home", other_home)):
        if diff:
            print(what, json.dumps({k: v[:2] for k, v in diff.items()}), file=sys.stderr)
    res = {"name": args.name, "command": "python -m bench.workspaces " + " ".join(sys.argv[1:]), "machine": machine(),
           "date": time.strftime("%Y-%m-%d"), "commit": commit(), "documents": args.docs,
           "runtime": os.environ.get("STRATA_MINILM_RUNTIME", "auto"), "seconds": seconds,
           "workspace_ids": {"one": ia, "two": ib, "other home": ic}, "counts": {"one": ca, "two": cb, "other": cc},
           "parts": {k: len(v) for k, v in a.items()},
           "equal_same_home": not same_home, "equal_other_home": not other_home}
    path = ROOT / "bench" / "results" / f"workspaces-{args.name}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"same home equal: {res['equal_same_home']}; other home equal: {res['equal_other_home']}; wrote {path}")


def report(r: dict) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    ids = r["workspace_ids"]
    return [f"## One corpus, three workspaces: `{r['name']}`", "",
            f"* command: `{r['command']}` (MiniLM runtime: {r['runtime']})", f"* machine: {r['machine']}",
            f"* date: {r['date']} {r.get('commit', '')}",
            f"* {r['documents']} documents built as workspaces {ids['one']} and {ids['two']} of one home and as "
            f"workspace {ids['other home']} of another home (beside a small one); builds "
            + ", ".join(f"{k} {v:.0f} s" for k, v in r["seconds"].items()),
            f"* compared exactly: {r['parts']['nodes']:,} nodes, {r['parts']['edges']:,} edges, "
            f"{r['parts']['communities']:,} communities with their reports, {r['parts']['vectors']:,} vectors (bits)",
            f"* equal in one home: {'yes' if r['equal_same_home'] else 'NO'}; equal across homes: "
            f"{'yes' if r['equal_other_home'] else 'NO'}", "",
            "| count | workspace one | workspace two | other home |", "|---|---:|---:|---:|",
            *[f"| {k} | {r['counts']['one'].get(k, 0):,} | {r['counts']['two'].get(k, 0):,} | "
              f"{r['counts']['other'].get(k, 0):,} |" for k in sorted(r["counts"]["one"])], ""]


if __name__ == "__main__":
    main()
