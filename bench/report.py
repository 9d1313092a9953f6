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
ORDER = ["sample", "hotpotqa", "generated"]  # builds of the issue first, in this order; any others after
TARGET_S, TARGET_MIB = 15 * 60, 4096
PLACEHOLDER = "not implemented yet"


def _build_section(b: dict) -> list[str]:
    out = [f"### {b['name']}", "", f"* command: `{b['command']}`", f"* machine: {b['machine']}",
           f"* date: {b['date']}"]
    if b.get("corpus"):
        c = b["corpus"]
        out.append(f"* corpus: {c['documents']:,} generated articles, {c['tokens']:,} tokens of the bundled tokenizer "
                   f"(seed {c['seed']}; generated in {c.get('generate_s', '?')} s)")
    out.append(f"* wall time: **{b['wall_s']} s**, peak RSS of the build process and its children: "
               f"**{b['peak_rss_mib']:.0f} MiB**")
    if b.get("setup_s") is not None:
        out.append(f"* outside the stages (interpreter start, embedding model load, reading and storing the files): "
                   f"{b['setup_s']} s")
    if b.get("corpus"):
        ok = b["wall_s"] <= TARGET_S and b["peak_rss_mib"] < TARGET_MIB
        out.append(f"* target (15 min, < 4 GB): **{'met' if ok else 'not met'}**")
    out.append("")
    cpu = b.get("stages_cpu_s") or {}
    msgs = b.get("stage_messages") or {}
    total = sum(b["stages_s"].values()) or 1.0
    if cpu:
        out += ["| stage | seconds | share | CPU seconds | note |", "|---|---:|---:|---:|---|"]
    else:
        out += ["| stage | seconds | share |", "|---|---:|---:|"]
    for k, v in b["stages_s"].items():
        row = f"| {k} | {v:.1f} | {100 * v / total:.0f} % |"
        if cpu:
            note = "placeholder (not built yet)" if PLACEHOLDER in (msgs.get(k) or "") else ""
            row += f" {cpu.get(k, 0.0):.1f} | {note} |"
        out.append(row)
    nodes = {k: sum(v.values()) for k, v in b["nodes"].items()}
    comms = {m: ", ".join(f"L{lv}: {n}" for lv, n in sorted(v.items(), key=lambda kv: int(kv[0])))
             for m, v in b["communities"].items()}
    out += ["", "Built: " + ", ".join(f"{n:,} {k}" for k, n in sorted(nodes.items())) + "."]
    if b.get("edges"):
        out.append("Edges: " + ", ".join(f"{n:,} {k}" for k, n in sorted(b["edges"].items())) + ".")
    out += ["Communities: " + "; ".join(f"{m} ({c})" for m, c in comms.items()) + ".",
            "Modularity per level: " + ", ".join(f"L{k}: {v}" for k, v in b["modularity"].items()) + "."]
    if b.get("layers"):
        out.append("HiRAG layers: " + "; ".join(
            f"layer {r['layer']}: {r['entities']:,} entities"
            + (f", {r['clusters']} clusters, CS {r['cluster_sparsity']}" if r.get("cluster_sparsity") is not None
               else "") for r in b["layers"]) + f"; stopped: {b.get('stop_reason')}.")
    out.append("")
    return out


def _where_time_goes(builds: list[dict]) -> list[str]:
    gen = next((b for b in builds if b["name"] == "generated"), None)
    out = ["### Where the time goes", ""]
    if gen is None:
        return out + ["(no generated build recorded yet: `python -m bench.build --name generated --generate 1000000 "
                      "--seed 7`)", ""]
    stages = sorted(gen["stages_s"].items(), key=lambda kv: -kv[1])
    total = sum(gen["stages_s"].values()) or 1.0
    top = ", ".join(f"{k} {v:.0f} s ({100 * v / total:.0f} %)" for k, v in stages[:4])
    out += [f"On the one-million-token corpus the largest stages are {top}.", ""]
    notes = (ROOT / "bench" / "NOTES.md")
    if notes.exists():
        out += [notes.read_text().strip(), ""]
    return out


def main() -> None:
    res = ROOT / "bench" / "results"
    builds = [json.loads(p.read_text()) for p in sorted(res.glob("build-*.json"))]
    builds.sort(key=lambda b: (ORDER.index(b["name"]) if b["name"] in ORDER else len(ORDER), b["name"]))
    evals = [json.loads(p.read_text()) for p in sorted(res.glob("eval-*.json"))]
    out = ["# Benchmarks", "",
           "Figures are written by `python -m bench.report` from `bench/results/*.json`; each section names the "
           "command that produced it and the machine. They are measurements, not tests. `make bench` "
           "(`python -m bench.run_all`) reruns all of them.", ""]
    out += ["## Offline build: time per stage and peak memory", "",
            "Seconds are wall time per stage as the build records it; CPU seconds (user + system, all threads, "
            "sampled) tell a stage's own work apart from waiting for a core when other processes share the "
            "machine. The generated corpus comes from `python -m bench.gen_corpus` (seeded): encyclopedia-like "
            "articles about fictional people, organisations, places, works and events that share entities across "
            "documents.", ""]
    for b in builds:
        out += _build_section(b)
    out += _where_time_goes(builds)
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
