"""Write docs/BENCHMARKS.md from bench/results/*.json (every figure with the command that produced it)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = {  # ../shared/eval/README.md, same files, same embedder (all-MiniLM-L6-v2)
    "2wikimultihopqa": {"dense": (0.552, 0.713, 0.768), "bm25": (0.546, 0.692, 0.770)},
    "hotpotqa": {"dense": (0.610, 0.795, 0.877), "bm25": (0.565, 0.782, 0.930)},
    "multihoprag_small": {"dense": (0.583, 0.817, 0.858), "bm25": (0.700, 0.887, 0.971)},
}


def main() -> None:
    res = ROOT / "bench" / "results"
    builds = [json.loads(p.read_text()) for p in sorted(res.glob("build-*.json"))]
    evals = [json.loads(p.read_text()) for p in sorted(res.glob("eval-*.json"))]
    out = ["# Benchmarks", "",
           "Figures are written by `python -m bench.report` from `bench/results/*.json`; each section names the "
           "command that produced it and the machine. They are measurements, not tests.", ""]
    out += ["## Offline build: time per stage and peak memory", ""]
    for b in builds:
        out += [f"### {b['name']}", "", f"* command: `{b['command']}`", f"* machine: {b['machine']}",
                f"* date: {b['date']}", f"* wall time: **{b['wall_s']} s**, peak RSS of the build process: "
                f"**{b['peak_rss_mib']:.0f} MiB**", ""]
        total = sum(b["stages_s"].values()) or 1.0
        out += ["| stage | seconds | share |", "|---|---:|---:|"]
        out += [f"| {k} | {v:.1f} | {100 * v / total:.0f} % |" for k, v in b["stages_s"].items()]
        nodes = {k: sum(v.values()) for k, v in b["nodes"].items()}
        comms = {m: ", ".join(f"L{lv}: {n}" for lv, n in sorted(v.items(), key=lambda kv: int(kv[0])))
                 for m, v in b["communities"].items()}
        out += ["", "Built: " + ", ".join(f"{n:,} {k}" for k, n in sorted(nodes.items())) + ".",
                "Communities: " + "; ".join(f"{m} ({c})" for m, c in comms.items()) + ".",
                "Modularity per level: " + ", ".join(f"L{k}: {v}" for k, v in b["modularity"].items()) + "."]
        if b.get("layers"):
            out.append("HiRAG layers: " + "; ".join(
                f"layer {r['layer']}: {r['entities']:,} entities"
                + (f", {r['clusters']} clusters, CS {r['cluster_sparsity']}" if r.get("cluster_sparsity") is not None
                   else "") for r in b["layers"]) + f"; stopped: {b.get('stop_reason')}.")
        out.append("")
    out += ["Where the time goes: embedding (the bundled MiniLM on the CPU: chunks and entity descriptions in `embed`, "
            "community reports in `index`) takes most of every build; extraction, Leiden and reports are seconds. "
            "Peak memory includes the embedding model (about 0.5 GiB with torch loaded).", ""]
    out += ["## Retrieval: recall@k of source documents and retrieval latency (offline backend)", ""]
    for e in evals:
        ref = REFERENCE.get(e["set"], {})
        out += [f"### {e['set']}", "", f"* command: `{e['command']}`", f"* machine: {e['machine']}",
                f"* date: {e['date']}", "",
                "| strategy | R@2 | R@5 | R@10 | p50 ms | p95 ms | queries |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, r in e["strategies"].items():
            out.append(f"| {name} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | "
                       f"{r['latency_ms_p50']:.1f} | {r['latency_ms_p95']:.1f} | {r['queries']} |")
        for name, (r2, r5, r10) in ref.items():
            out.append(f"| *reference {name}* (shared/eval/README.md) | {r2:.3f} | {r5:.3f} | {r10:.3f} | | | |")
        out.append("")
    (ROOT / "docs" / "BENCHMARKS.md").write_text("\n".join(out) + "\n")
    print(f"wrote docs/BENCHMARKS.md ({len(builds)} builds, {len(evals)} eval sets)")


if __name__ == "__main__":
    main()
