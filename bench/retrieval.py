"""Retrieval benchmark: recall@2/5/10 and p50/p95 latency of each strategy over an eval set.

    python -m bench.retrieval --set hotpotqa [--strategies hirag,naive]
    python -m bench.retrieval --set factbook --reference-only      # the dense and BM25 reference rows alone
    python -m bench.retrieval --set hotpotqa --bm25-only           # the bm25 row and BM25 reference, no graph built
    python -m bench.retrieval --set hotpotqa --ablate title_subject
    OLLAMA_HOST=http://127.0.0.1:11434 python -m bench.retrieval --set hotpotqa --backend ollama

A set is the folder ../shared/eval/<set> when it exists, else bench/data/<set> (the fourth set, written by
`python -m bench.fourth_set`). Builds its corpus.jsonl into bench/out/<set> when that workspace is missing (offline
backend; `--out <folder>` builds into <folder>/<set> instead), then runs `python -m core eval --json` and writes
bench/results/eval-<set>.json (or <--results>/eval-<set>.json): the rows of the strategies measured, the rows of the
others kept from the file's earlier runs ("measured" names this run's).

Reference rows (`reference_rows`), computed as ../shared/eval/README.md states its figures: every passage embedded
as `title + "\\n" + text` with the bundled all-MiniLM-L6-v2 and ranked by cosine to the embedded question (dense),
and Okapi BM25 (k1 1.5, b 0.75, core.retrieval.lexicon) over the same `title + "\\n" + text` (bm25); passage
recall@k averaged over the queries. They go into the results as "reference" and are reused while the set's files
are unchanged (keyed by their SHA-1).

`--bm25-only` measures the `bm25` strategy's row without building the graph (`bm25_row`): BM25 reads only the
chunks and their documents' titles, so the corpus is loaded and chunked as a build does (core's loader and
`add_documents`, then the build's own chunk stage) into a temporary home, and `core.eval.evaluate` runs the real
`bm25` strategy over it, as `python -m core eval --strategies bm25` does on a built workspace. It replaces the row
(and the "bm25 (<ablation>)" rows: no ablation changes chunks or BM25) and the computed BM25 reference row in
eval-<set>.json, keeping every other row, for a change of the tokenizer or of BM25 alone. Seconds, not minutes.

`--backend ollama` (or openai) builds with that model server and evaluates with it as `ask` does (its language
steps: GraphRAG's map, ArchRAG's filter, HLG's keywords and rerank, NodeRAG's question entities), in
bench/out/<set>-<backend>, writing to bench/results/<backend>/ (not read by bench/report.py: the offline figures are
the ones this machine measures).

`--ablate title_subject` also builds bench/out/<set>-no-title-subject with the setting `extract.title_subject`
off (ExtractSettings: the document title taken as the subject entity of its chunks) and adds its rows as
"<strategy> (no title subject)"; `--ablate title_prefix` builds with `embed.title_prefix` off (chunks and
statements embedded without their document's title: "no title in vectors"). core's CLI reads no environment
variable for that setting, so both the build
and the eval run through core's own `main()` in a child process whose `Settings.from_env` applies the override
(ABLATIONS maps an ablation to its dotted setting).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.build import ROOT, run_build
from bench.machine import machine

EVAL = ROOT.parent / "shared" / "eval"
DATA = ROOT / "bench" / "data"
KS = (2, 5, 10)
ABLATIONS = {  # the title-field rules, each off in its own build (issue 26: what comes from the graph, what from titles)
    "title_subject": ("extract.title_subject", False, "no title subject"),
    "title_prefix": ("embed.title_prefix", False, "no title in vectors"),
}
# Runs `python -m core ...` with dotted settings overridden: argv[1] is a JSON object {"section.field": value}.
OVERRIDE_BOOT = """
import json, sys
from core.config import Settings
overrides = json.loads(sys.argv.pop(1))
plain = Settings.from_env
def from_env(env=None):
    s = plain(env)
    for key, value in overrides.items():
        *path, last = key.split(".")
        obj = s
        for p in path:
            obj = getattr(obj, p)
        if not hasattr(obj, last):
            raise SystemExit(f"no setting {key}")
        setattr(obj, last, value)
    return Settings.model_validate(s.model_dump())
Settings.from_env = from_env
from core.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def set_dir(name: str) -> Path:
    """../shared/eval/<name> when it exists, else bench/data/<name>."""
    for base in (EVAL, DATA):
        if (base / name / "corpus.jsonl").exists():
            return base / name
    raise SystemExit(f"no eval set {name!r} under {EVAL} or {DATA} (the fourth set: python -m bench.fourth_set)")


def _rel(path: Path) -> str:
    return os.path.relpath(path, ROOT)


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def recall_rows(ranked: list[list[int]], gold: list[list[int]]) -> dict[str, float]:
    """Mean passage recall@k of ranked passage ids against each query's gold ids."""
    out = {}
    for k in KS:
        vals = [len(set(r[:k]) & set(g)) / len(set(g)) for r, g in zip(ranked, gold) if g]
        out[f"recall@{k}"] = round(float(np.mean(vals)), 4) if vals else 0.0
    return out


def gold_ranks(ranked: list[list[int]], gold: list[list[int]]) -> list[list[int]]:
    """Per query, the 1-based rank of each gold id (in the order of the ids' strings, as core.eval.gold_ranks)
    among its ranked passage ids, 0 when absent: the per-query "found" of a reference row."""
    return [[r.index(g) + 1 if g in r else 0 for g in sorted(set(gs), key=str)] for r, gs in zip(ranked, gold)]


def dense_inputs(folder: Path) -> tuple[list[str], list[int], list[str], list[list[int]]]:
    """(passage texts as `title + "\n" + text`, passage ids, questions, gold ids per question) of the set in
    `folder`: what the dense reference row embeds and scores."""
    corpus = read_jsonl(folder / "corpus.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    return ([f"{p['title']}\n{p['text']}" for p in corpus], [int(p["id"]) for p in corpus],
            [q["question"] for q in queries], [[int(g) for g in q["gold_ids"]] for q in queries])


def dense_ranking(emb, texts: list[str], ids: list[int], questions: list[str]) -> tuple[list[list[int]], np.ndarray]:
    """Each question's top max(KS) passage ids by cosine, with `emb`; and the passages' vectors."""
    docs = emb.embed(texts)
    sims = emb.embed(questions) @ docs.T
    return [[ids[i] for i in np.argsort(-row, kind="stable")[: max(KS)]] for row in sims], docs


def reference_rows(folder: Path) -> dict[str, dict]:
    """{"dense": {recall@k, "found"}, "bm25": {recall@k, "found"}} of the set in `folder` (see the module
    docstring); "found" is each query's gold ranks in the top max(KS) (`gold_ranks`)."""
    from core.backends.embedders import MiniLMEmbedder

    texts, ids, questions, gold = dense_inputs(folder)
    dense, _ = dense_ranking(MiniLMEmbedder(), texts, ids, questions)
    return {"dense": {**recall_rows(dense, gold), "found": gold_ranks(dense, gold)}, "bm25": reference_bm25(folder)}


def reference_bm25(folder: Path) -> dict:
    """The BM25 reference row of the set in `folder`: BM25 of core.retrieval.lexicon over every passage's
    `title + "\n" + text`."""
    from core.retrieval.lexicon import BM25

    corpus = read_jsonl(folder / "corpus.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    ids = [int(p["id"]) for p in corpus]
    bm = BM25.build([str(i) for i in ids], [f"{p['title']}\n{p['text']}" for p in corpus])
    lexical = [[int(i) for i, _ in bm.top(q["question"], max(KS))] for q in queries]
    gold = [[int(g) for g in q["gold_ids"]] for q in queries]
    return {**recall_rows(lexical, gold), "found": gold_ranks(lexical, gold)}


def bm25_row(folder: Path, name: str) -> dict:
    """The `bm25` strategy's eval row on the set in `folder`, from its chunks alone (see the module docstring)."""
    import tempfile

    from core.config import Settings
    from core.eval import evaluate, load_queries
    from core.pipeline.context import BuildContext
    from core.pipeline.stages.chunk import chunk_stage
    from core.retrieval.base import Resources
    from core.store import Store
    from core.workspace import ingest_paths

    with tempfile.TemporaryDirectory(prefix="bench-bm25-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("STRATA_DATABASE_URL", "STRATA_CHROMA_URL")}
        settings = Settings.from_env(dict(env, STRATA_HOME=tmp))
        store = Store(settings.storage.db_url)
        ws = store.create_workspace(name)  # the first workspace of a fresh home, as a bench build's is: same ids
        rep = ingest_paths(store, ws, [folder / "corpus.jsonl"], settings)
        if rep.refusals:
            raise SystemExit(f"refused: {rep.refusals[:3]}")
        # the chunk stage reads only the store, the workspace and the settings; nothing is embedded or extracted
        ctx = BuildContext(store=store, ws=ws, settings=settings, backend=None, embedder=None,  # type: ignore[arg-type]
                           index=None)  # type: ignore[arg-type]
        for _ in chunk_stage(ctx):
            pass
        res = Resources(store=store, ws=ws, settings=settings, embedder=None, index=None)  # type: ignore[arg-type]
        row = evaluate(res, load_queries(folder / "queries.jsonl"), ["bm25"], list(KS))["bm25"]
        store.engine.dispose()
    return row


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha1()
    for name in ("corpus.jsonl", "queries.jsonl"):
        h.update((folder / name).read_bytes())
    return h.hexdigest()


def cached_reference(old: Path, folder: Path) -> dict:
    """The set's reference rows, recomputed only when its files changed since the results file `old` (or when it
    kept no per-query ranks)."""
    sha = _fingerprint(folder)
    if old.exists():
        ref = json.loads(old.read_text()).get("reference") or {}
        if ref.get("sha1") == sha and "found" in (ref.get("dense") or {}):
            return ref
    t0 = time.perf_counter()
    rows = reference_rows(folder)
    return {"sha1": sha, "seconds": round(time.perf_counter() - t0, 1), "embedder": "all-MiniLM-L6-v2 (bundled)",
            "passage_text": "title + \"\\n\" + text", **rows}


def dumps(result: dict) -> str:
    """`result` as indented JSON with each list of numbers on one line (a query's gold ranks, "found")."""
    return re.sub(r"\[[-\d.,\s]*\]", lambda m: json.dumps(json.loads(m.group(0))), json.dumps(result, indent=2))


def core_cmd(overrides: dict | None, *args: str) -> list[str]:
    """`python -m core <args>`, through OVERRIDE_BOOT when settings are overridden."""
    if overrides:
        return [sys.executable, "-c", OVERRIDE_BOOT, json.dumps(overrides), *args]
    return [sys.executable, "-m", "core", *args]


OUT = ROOT / "bench" / "out"


def built_home(name: str, folder: Path, results: Path, backend: str = "offline", out: Path = OUT) -> Path:
    """<out>/<name> (<out>/<name>-<backend> with a model server; `out` bench/out by default): the set in `folder`
    built there from its corpus.jsonl when missing, the build's figures written to <results>/build-<name>.json."""
    home = out / (name if backend == "offline" else f"{name}-{backend}")
    if not (home / "strata.db").exists():
        build = run_build(name, [_rel(folder / "corpus.jsonl")], home, backend=backend)
        results.mkdir(parents=True, exist_ok=True)
        (results / f"build-{name}.json").write_text(json.dumps(build, indent=2))
    return home


def run_eval(workspace: str, home: Path, queries: Path, strategies: str, overrides: dict | None = None,
             backend: str = "offline") -> dict:
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False")
    args = ["eval", "--workspace", workspace, "--queries", str(queries), "--k", ",".join(map(str, KS)), "--json",
            "--backend", backend]
    if strategies:
        args += ["--strategies", strategies]
    proc = subprocess.run(core_cmd(overrides, *args), cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout)


def ablation_build(workspace: str, corpus: Path, home: Path, overrides: dict, backend: str = "offline") -> None:
    """Build `corpus` into `home` with `overrides`; resumes a build that stopped."""
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False", STRATA_BACKEND=backend)
    args = ["build", "--quiet", "--workspace", workspace] + ([] if (home / "strata.db").exists() else [_rel(corpus)])
    proc = subprocess.run(core_cmd(overrides, *args), cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ablation build failed: {proc.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", required=True, help="folder name under ../shared/eval or bench/data")
    ap.add_argument("--strategies", default="")
    ap.add_argument("--reference-only", action="store_true", help="compute the dense and BM25 reference rows only")
    ap.add_argument("--bm25-only", action="store_true",
                    help="measure the bm25 row (and the BM25 reference) from the chunks alone, without a graph")
    ap.add_argument("--ablate", choices=sorted(ABLATIONS), action="append", default=[],
                    help="also build a workspace with this setting off and report its rows")
    ap.add_argument("--backend", choices=["offline", "ollama", "openai"], default="offline",
                    help="language backend of the build and of the strategies' language steps")
    ap.add_argument("--out", type=Path, default=OUT,
                    help="folder of the built workspaces (default bench/out): a fresh folder builds every set anew")
    ap.add_argument("--results", type=Path, default=None,
                    help="folder of the build-<set>.json and eval-<set>.json written (default bench/results, and bench/results/<backend> with a model server)")
    args = ap.parse_args()
    folder = set_dir(args.set)
    served = args.backend != "offline"
    if args.results is None:
        args.results = ROOT / "bench" / "results" / (args.backend if served else "")
    out = args.results / f"eval-{args.set}.json"
    command = f"python -m bench.retrieval --set {args.set}" + (
        f" --strategies {args.strategies}" if args.strategies else "") + "".join(
        f" --ablate {a}" for a in args.ablate) + (f" --backend {args.backend}" if served else "")
    suffix = f"-{args.backend}" if served else ""
    args.results.mkdir(parents=True, exist_ok=True)
    if args.bm25_only:
        prev = json.loads(out.read_text()) if out.exists() else {}
        row = bm25_row(folder, args.set)
        strategies = prev.get("strategies", {})
        before = strategies.get("bm25")
        for key in [k for k in strategies if k.startswith("bm25 (")] + ["bm25"]:
            strategies[key] = row
        reference = prev.get("reference") or cached_reference(out, folder)
        if reference.get("sha1") == _fingerprint(folder):
            reference["bm25"] = reference_bm25(folder)
        result = dict(prev, set=args.set, folder=_rel(folder), strategies=strategies, reference=reference,
                      bm25_only={"command": f"python -m bench.retrieval --set {args.set} --bm25-only",
                                 "machine": machine(), "date": time.strftime("%Y-%m-%d")})
        result.setdefault("command", command)
        result.setdefault("machine", machine())
        result.setdefault("date", time.strftime("%Y-%m-%d"))
        out.write_text(dumps(result))
        print(json.dumps({"before": before, "after": row, "reference bm25": reference["bm25"]}, indent=2))
        return
    reference = cached_reference(out, folder)
    if args.reference_only:
        prev = json.loads(out.read_text()) if out.exists() else {}
        result = {"set": args.set, "folder": _rel(folder), "command": prev.get("command", command),
                  "machine": prev.get("machine", machine()), "date": prev.get("date", time.strftime("%Y-%m-%d")),
                  "strategies": prev.get("strategies", {}), "reference": reference}
        out.write_text(dumps(result))
        print(json.dumps(reference, indent=2))
        return
    home = built_home(args.set, folder, args.results, args.backend, args.out)
    strategies = run_eval(args.set, home, folder / "queries.jsonl", args.strategies, backend=args.backend)
    for name in args.ablate:
        key, value, label = ABLATIONS[name]
        overrides = {key: value}
        ws = f"{args.set}-no-{name.replace('_', '-')}"
        ab_home = args.out / f"{ws}{suffix}"
        ablation_build(ws, folder / "corpus.jsonl", ab_home, overrides, args.backend)
        for strat, row in run_eval(ws, ab_home, folder / "queries.jsonl", args.strategies, overrides,
                                   args.backend).items():
            strategies[f"{strat} ({label})"] = row
    prev = json.loads(out.read_text()) if out.exists() else {}
    kept = {k: v for k, v in (prev.get("strategies") or {}).items() if k not in strategies}
    result = {
        "set": args.set,
        "folder": _rel(folder),
        "command": command + (f" --out {_rel(args.out)}" if args.out != OUT else ""),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "measured": sorted(strategies),  # this run's rows; the others are kept from the earlier runs
        "strategies": {**kept, **strategies},
        "reference": reference,
    }
    out.write_text(dumps(result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
