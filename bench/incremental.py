"""Living workspaces benchmark: adding a share of a corpus to a built workspace against a full rebuild, and deleting
documents.

    python -m bench.incremental --name sample data/sample --add 0.33
    python -m bench.incremental --name generated --generate 1000000 --seed 7 --add 0.1 --delete 0.01

The corpus (a JSONL file, rows; a folder, files; or `--generate N` tokens of bench/gen_corpus.py) is split with a
seeded shuffle: the last `--add` share is held back. Three CLI runs in child processes, each in its own fresh
STRATA_HOME under bench/out/incremental-<name>/, with their wall time:

* `base`: `python -m core build` of the rest;
* `add`: `python -m core add` of the held-back share onto it (only the new documents are chunked, extracted and
  embedded; the later stages keep what did not change: reports by material hash, vectors by content hash);
* `rebuild`: `python -m core build` of the whole corpus in another home (what the add saves);
* `delete` (with `--delete F`): `python -m core delete` of a seeded share F of the documents from the added-to
  workspace.

Per-stage seconds come from the runs' StageRun rows. `--compare` also checks that the added-to workspace equals
the rebuild (tests/snapshots.py; loads every row, so slow on large corpora). Writes
bench/results/incremental-<name>.json; `python -m bench.report` renders it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import commit, machine

ROOT = Path(__file__).resolve().parent.parent
WS = "bench"


def _split(src: Path, add: float, seed: int, out: Path) -> tuple[list[Path], list[Path], int, int]:
    """(base paths, added paths, base documents, added documents) of `src` split in `out`."""
    rng = random.Random(seed)
    (out / "base").mkdir(parents=True)
    (out / "added").mkdir(parents=True)
    if src.is_dir():
        files = sorted(p for p in src.iterdir() if p.is_file())
        rng.shuffle(files)
        k = max(1, round(len(files) * add))
        for f in files[:-k]:
            shutil.copy(f, out / "base")
        for f in files[-k:]:
            shutil.copy(f, out / "added")
        return [out / "base"], [out / "added"], len(files) - k, k
    rows = [ln for ln in src.read_text().splitlines() if ln.strip()]
    rng.shuffle(rows)
    k = max(1, round(len(rows) * add))
    (out / "base" / src.name).write_text("\n".join(rows[:-k]) + "\n")
    (out / "added" / src.name).write_text("\n".join(rows[-k:]) + "\n")
    return [out / "base" / src.name], [out / "added" / src.name], len(rows) - k, k


def run_cli(home: Path, args: list[str]) -> float:
    env = dict(os.environ, STRATA_HOME=str(home), STRATA_SAMPLE="0", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t0, 2)


def _last_run(home: Path) -> dict:
    """Stage seconds and final counts of the newest run of the workspace in `home`."""
    from core.config import Settings
    from core.store import Store

    settings = Settings()
    settings.storage.home = home
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(WS)
    run = store.latest_run(ws.id)
    assert run is not None and run.id is not None and run.status == "done", run
    stages = {r.stage: round(r.seconds, 2) for r in store.stage_runs(run.id)}
    keep = ("chunks", "entities_new", "refolded", "reports", "entities_removed", "entities_refolded")
    counts = {k: v for r in store.stage_runs(run.id) for k, v in (r.counts or {}).items()
              if k in keep and isinstance(v, int)}
    return {"stages": stages, "counts": counts, "graph": store.counts(ws.id)}


def _delete_refs(home: Path, share: float, seed: int) -> list[str]:
    from core.config import Settings
    from core.store import Store

    settings = Settings()
    settings.storage.home = home
    store = Store(settings.storage.db_url)
    docs = sorted(d.id for d in store.documents(store.require_workspace(WS).id))
    return random.Random(seed).sample(docs, max(1, round(len(docs) * share)))


def homes_equal(a: Path, b: Path) -> bool:
    from core.config import Settings
    from core.store import Store
    from tests.snapshots import differences, full_snapshot

    snaps = []
    for home in (a, b):
        settings = Settings()
        settings.storage.home = home
        store = Store(settings.storage.db_url)
        ws = store.require_workspace(WS)
        snaps.append(full_snapshot(store, ws, settings, ws.embedder))
    diff = differences(*snaps)
    if diff:
        print(json.dumps({k: v[:2] for k, v in diff.items()}), file=sys.stderr)
    return not diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", default="generated")
    ap.add_argument("corpus", nargs="?", type=Path, help="a JSONL corpus or a folder of documents")
    ap.add_argument("--generate", type=int, help="generate a corpus of about this many tokens (bench.gen_corpus)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--add", type=float, default=0.1, help="share of the corpus added to the built workspace")
    ap.add_argument("--delete", type=float, default=0.0, help="share of the documents then deleted (0: none)")
    ap.add_argument("--compare", action="store_true", help="check the added-to workspace equals the rebuild")
    args = ap.parse_args()
    out = ROOT / "bench" / "out" / f"incremental-{args.name}"
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = args.corpus
        if args.generate:
            subprocess.run([sys.executable, "-m", "bench.gen_corpus", "--tokens", str(args.generate), "--seed",
                            str(args.seed), "--out", tmp], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            src = Path(tmp) / "corpus.jsonl"
        if src is None:
            ap.error("give a corpus or --generate N")
        base, added, n_base, n_added = _split(Path(src), args.add, args.seed, Path(tmp) / "split")
        res: dict = {"name": args.name, "command": "python -m bench.incremental " + " ".join(sys.argv[1:]),
                     "machine": machine(), "date": time.strftime("%Y-%m-%d"), "commit": commit(),
                     "documents_base": n_base,
                     "documents_added": n_added, "add_share": args.add}
        inc, full = out / "inc", out / "rebuild"
        res["base_s"] = run_cli(inc, ["build", "--workspace", WS, "--quiet", *map(str, base)])
        res["add_s"] = run_cli(inc, ["add", "--workspace", WS, "--quiet", *map(str, added)])
        res["add"] = _last_run(inc)
        res["rebuild_s"] = run_cli(full, ["build", "--workspace", WS, "--quiet", *map(str, base + added)])
        res["rebuild"] = _last_run(full)
        if args.compare:
            res["equal_to_rebuild"] = homes_equal(inc, full)
        if args.delete > 0:
            refs = _delete_refs(inc, args.delete, args.seed)
            res["documents_deleted"] = len(refs)
            res["delete_s"] = run_cli(inc, ["delete", "--workspace", WS, "--quiet", "--document", *refs])
            res["delete"] = _last_run(inc)
    path = ROOT / "bench" / "results" / f"incremental-{args.name}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"add {res['add_s']} s vs rebuild {res['rebuild_s']} s; wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
