"""Evaluation engine benchmark (issue 25): the time and memory of evaluating a set's questions over every strategy,
as the Evaluate page's "evaluate" job does it.

    python -m bench.evaluate --set hotpotqa [--strategies hirag,naive] [--no-check]

Builds the set's corpus.jsonl into bench/out/<set> when that workspace is missing (bench.retrieval.built_home), then
runs `python -m core evaluate --workspace <set> --questions <set folder>/queries.jsonl --json` in a child process:
the questions read by core.evaluation.questions.read_questions, every strategy by default (dense `naive` and BM25
`bm25` among them), the job's two steps ("measure", "figures") run in that process through the runner, as the CLI
runs them. Measured:

* wall time of the child process (interpreter start and imports, the job, the JSON export on stdout);
* each step's seconds as its StageRun row records them (the runner's own clock);
* per strategy, the evaluation's own figures: recall@2/5/10 and MRR with their 95 % bootstrap intervals, latency
  p50 / p95 (each question timed alone, after one untimed loading call per strategy) and the summed ms of its
  questions (its share of the measure step);
* peak RSS of the evaluating process: the kernel's ru_maxrss of that one child (os.wait4), and the largest RSS of
  it and its descendants polled every 0.1 s with psutil (bench.build.Sampler, whose timeline also gives the RSS by
  questions measured: memory growth); the figure kept is the larger;
* the rows stored (the evaluation's EvaluationResult rows), their JSON payload, and how much the SQLite files
  (strata.db and its WAL) grew.

The check (on unless --no-check) then runs `python -m core eval --json` on the same workspace
(bench.retrieval.run_eval) and compares recall@k per strategy: the two must be equal, as
tests/stages/test_evaluation.py asserts on a small set; any difference is listed in the results. Writes
bench/results/evaluate-<set>.json; `python -m bench.report` renders it into docs/BENCHMARKS.md (`report`).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.build import ROOT, Sampler
from bench.machine import commit, machine
from bench.retrieval import KS, built_home, run_eval, set_dir

MIB = 2**20


def rel(path: Path) -> str:
    return os.path.relpath(path, ROOT)


def sqlite_bytes(home: Path) -> int:
    """The size of the home's database with its write-ahead log."""
    return sum(p.stat().st_size for p in (home / "strata.db", home / "strata.db-wal") if p.exists())


def evaluate_cmd(workspace: str, questions: Path, strategies: str) -> list[str]:
    args = [sys.executable, "-m", "core", "evaluate", "--workspace", workspace, "--questions", str(questions), "--json"]
    return args + (["--strategies", strategies] if strategies else [])


def run_evaluate(workspace: str, home: Path, questions: Path, strategies: str) -> dict:
    """`python -m core evaluate ... --json` in a child process: its export, wall time, peak RSS and RSS timeline."""
    env = dict(os.environ, STRATA_HOME=str(home), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               ANONYMIZED_TELEMETRY="False")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(evaluate_cmd(workspace, questions, strategies), cwd=ROOT, env=env, stdout=out,
                                stderr=err, text=True)
        with Sampler(proc.pid, f"sqlite:///{home / 'strata.db'}", workspace, timeline=True) as sampler:
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (ru_maxrss in KiB on Linux)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"core evaluate failed ({proc.returncode}): {stderr[-3000:]}")
    return {"export": json.loads(stdout), "wall_s": wall, "ru_maxrss_mib": usage.ru_maxrss / 1024,
            "polled_peak_mib": sampler.peak / MIB, "timeline": sampler.timeline or [],
            "peak_mib_by_step": {k: round(v / MIB) for k, v in sampler.peak_of.items()},
            "left_out": [ln for ln in stderr.splitlines() if ": left out: " in ln]}


def rss_by_questions(timeline: list[tuple[float, str, int, int]], total: int, every: int = 20) -> dict[str, float]:
    """The largest RSS (MiB) sampled while the measure step had `n` questions done, for n = 0, every, 2 every, …,
    total (the samples of the nearest count at or below n when none has exactly n)."""
    by: dict[int, int] = {}
    for _, stage, done, rss in timeline:
        if stage == "measure":
            by[done] = max(by.get(done, 0), rss)
    out: dict[str, float] = {}
    for n in [*range(0, total, every), total]:
        below = [d for d in by if d <= n]
        if below:
            out[str(n)] = round(by[max(below)] / MIB, 1)
    return out


def measure_start_mib(timeline: list[tuple[float, str, int, int]]) -> float | None:
    """The RSS (MiB) at the measure step's first sample, before any strategy's loading call."""
    return next((round(rss / MIB, 1) for _, stage, _, rss in timeline if stage == "measure"), None)


def loading_s(timeline: list[tuple[float, str, int, int]]) -> float | None:
    """Seconds from the measure step's first sample to its first sample with a question measured: every strategy's
    untimed loading call, and the first question."""
    start = next((t for t, stage, _, _ in timeline if stage == "measure"), None)
    first = next((t for t, stage, done, _ in timeline if stage == "measure" and done > 0), None)
    return None if start is None or first is None else round(first - start, 1)


def recall_differences(figures: dict[str, dict], eval_rows: dict[str, dict], ks=KS) -> list[dict]:
    """Every (strategy, k) whose recall@k differs between the evaluation's figures and `core eval`'s rows (both
    rounded to 4 places), and every strategy only one side has."""
    out = []
    for name in sorted(set(figures) | set(eval_rows)):
        if name not in figures or name not in eval_rows:
            out.append({"strategy": name, "only_in": "evaluate" if name in figures else "eval"})
            continue
        for k in ks:
            ours, theirs = figures[name][f"recall@{k}"]["value"], eval_rows[name][f"recall@{k}"]
            if round(ours, 4) != round(theirs, 4):
                out.append({"strategy": name, "k": k, "evaluate": ours, "eval": theirs})
    return out


def stored(home: Path, eval_id: int) -> dict:
    """The evaluation's rows in the database: its run's steps (seconds, message), result rows and their payload."""
    con = sqlite3.connect(f"file:{home / 'strata.db'}?mode=ro", uri=True)
    try:
        run_id, questions, meta = con.execute(
            "SELECT run_id, length(questions), length(meta) FROM evaluation WHERE id = ?", (eval_id,)).fetchone()
        rows, payload = con.execute(
            "SELECT count(*), coalesce(sum(length(ranked) + length(found) + length(strategy)), 0) "
            "FROM evaluationresult WHERE evaluation_id = ?", (eval_id,)).fetchone()
        steps = {stage: {"seconds": round(seconds, 1), "message": message} for stage, seconds, message in con.execute(
            "SELECT stage, seconds, message FROM stagerun WHERE run_id = ? ORDER BY ordinal", (run_id,))}
    finally:
        con.close()
    return {"run_id": run_id, "steps": steps, "result_rows": rows, "result_json_bytes": payload,
            "evaluation_json_bytes": questions + meta}


def strategy_rows(export: dict) -> dict[str, dict]:
    """Per strategy: its figures (recall@k, MRR, latency p50 / p95 with intervals) and the summed ms of its
    questions."""
    total_ms: dict[str, float] = {}
    for r in export["results"]:
        total_ms[r["strategy"]] = total_ms.get(r["strategy"], 0.0) + r["ms"]
    out = {}
    for name, f in export["figures"].items():
        row = {key: f[key] for key in [f"recall@{k}" for k in KS] + ["mrr", "latency_ms_p50", "latency_ms_p95"]}
        out[name] = row | {"questions": f["questions"], "baseline": f["baseline"],
                           "total_s": round(total_ms.get(name, 0.0) / 1000, 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="hotpotqa", help="folder name under ../shared/eval or bench/data")
    ap.add_argument("--strategies", default="", help="comma-separated (default: all; dense and BM25 always added)")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with `python -m core eval`")
    ap.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    if os.environ.get("STRATA_DATABASE_URL") or os.environ.get("STRATA_CHROMA_URL"):
        raise SystemExit("bench.evaluate measures the SQLite and embedded-chromadb home bench/out/<set>: unset "
                         "STRATA_DATABASE_URL and STRATA_CHROMA_URL")
    folder = set_dir(args.set)
    queries = folder / "queries.jsonl"
    home = built_home(args.set, folder, args.results)
    size0, load0 = sqlite_bytes(home), os.getloadavg()[0]
    run = run_evaluate(args.set, home, queries, args.strategies)
    export = run["export"]
    ev = export["evaluation"]
    db = stored(home, ev["id"])
    load1 = os.getloadavg()[0]
    timeline = run.pop("timeline")
    n = len(export["questions"])
    result = {
        "set": args.set,
        "folder": rel(folder),
        "command": f"python -m bench.evaluate --set {args.set}" + (
            f" --strategies {args.strategies}" if args.strategies else ""),
        "evaluate_command": " ".join(["python -m core evaluate --workspace", args.set, "--questions", rel(queries),
                                      "--json"] + (["--strategies", args.strategies] if args.strategies else [])),
        "machine": machine(),
        "load_average": [round(load0, 2), round(load1, 2)],  # 1-minute, before and after the evaluation
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit(),
        "evaluation_id": ev["id"],
        "build_version": ev["build_version"],
        "questions": n,
        "questions_left_out": run["left_out"],
        "strategies": strategy_rows(export),
        "wall_s": round(run["wall_s"], 1),
        "steps_s": {k: v["seconds"] for k, v in db["steps"].items()},
        "step_messages": {k: v["message"] for k, v in db["steps"].items()},
        "outside_steps_s": round(run["wall_s"] - sum(v["seconds"] for v in db["steps"].values()), 1),
        "loading_s": loading_s(timeline),
        "peak_rss_mib": round(max(run["ru_maxrss_mib"], run["polled_peak_mib"])),
        "ru_maxrss_mib": round(run["ru_maxrss_mib"]),
        "polled_peak_rss_mib": round(run["polled_peak_mib"]),
        "peak_rss_mib_by_step": run["peak_mib_by_step"],
        "rss_mib_at_measure_start": measure_start_mib(timeline),
        "rss_mib_by_questions": rss_by_questions(timeline, n),
        "result_rows": db["result_rows"],
        "result_json_bytes": db["result_json_bytes"],
        "evaluation_json_bytes": db["evaluation_json_bytes"],
        "database_growth_bytes": sqlite_bytes(home) - size0,
    }
    if not args.no_check:
        t0 = time.perf_counter()
        rows = run_eval(args.set, home, queries, args.strategies)
        result["check"] = {"command": " ".join(["python -m core eval --workspace", args.set, "--queries", rel(queries),
                                                "--k", ",".join(map(str, KS)), "--json"]),
                           "wall_s": round(time.perf_counter() - t0, 1),
                           "differences": recall_differences(export["figures"], rows),
                           "latency_ms_p50": {k: v["latency_ms_p50"] for k, v in rows.items()},
                           "latency_ms_p95": {k: v["latency_ms_p95"] for k, v in rows.items()}}
    stored_eval = args.results / f"eval-{args.set}.json"
    if stored_eval.exists():  # bench.retrieval's figures (the retrieval section), maybe of an earlier build
        prev = json.loads(stored_eval.read_text())
        rows = {k: v for k, v in prev["strategies"].items() if "(" not in k}  # not its ablation builds' rows
        result["stored_eval"] = {"file": rel(stored_eval), "date": prev.get("date", ""),
                                 "differences": recall_differences(export["figures"], rows)}
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"evaluate-{args.set}.json"
    out.write_text(json.dumps(result, indent=2))
    print("\n".join(report(result)))


def _interval(f: dict, fmt: str = ".3f") -> str:
    return f"{f['value']:{fmt}} [{f['low']:{fmt}}, {f['high']:{fmt}}]"


def report(r: dict) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    steps = r["steps_s"]
    out = [f"## Evaluation engine: {r['questions']} questions × {len(r['strategies'])} strategies on `{r['set']}`", "",
           "The \"evaluate\" job of issue 25 (core/evaluation) as `python -m core evaluate` runs it in one process: "
           "every question measured with every strategy and stored, then the figures with their 95 % bootstrap "
           "intervals (1,000 seeded resamples of the questions).", "",
           f"* command: `{r['command']}`, which runs `{r['evaluate_command']}` in a child process",
           f"* machine: {r['machine']}" + (
               f"; 1-minute load average {r['load_average'][0]} before the evaluation, {r['load_average'][1]} after "
               "(the machine is shared)" if r.get("load_average") else ""),
           f"* date: {r['date']}" + (f", commit {r['commit']}" if r.get("commit") else ""),
           f"* wall time: **{r['wall_s']:.1f} s** (the whole child process); step `measure` {steps.get('measure', 0):.1f} s "
           f"(of which {r['loading_s']} s before the first question was stored: every strategy's untimed loading call, "
           f"then the first question), step "
           f"`figures` {steps.get('figures', 0):.1f} s",
           f"* peak RSS of the evaluating process: **{r['peak_rss_mib']:,} MiB** (the larger of the kernel's "
           f"ru_maxrss of that child, {r['ru_maxrss_mib']:,} MiB, and psutil polling every 0.1 s, "
           f"{r['polled_peak_rss_mib']:,} MiB)",
           f"* RSS (MiB) at the measure step's start: {r['rss_mib_at_measure_start'] or 0:,.0f}; by questions measured "
           "(0: after the loading calls): " + ", ".join(f"{k}: {v:,.0f}" for k, v in r["rss_mib_by_questions"].items()),
           f"* stored: {r['result_rows']:,} EvaluationResult rows ({r['result_json_bytes'] / 1024:,.0f} KiB of ranked "
           f"documents and ranks) and the evaluation's row ({r['evaluation_json_bytes'] / 1024:,.0f} KiB of questions "
           f"and figures); the SQLite files grew by {r['database_growth_bytes'] / MIB:,.1f} MiB"]
    if r.get("questions_left_out"):
        out.append(f"* questions left out by read_questions: {len(r['questions_left_out'])}")
    check = r.get("check")
    if check:
        diffs = check["differences"]
        out.append(f"* check: `{check['command']}` on the same workspace ({check['wall_s']:.0f} s): recall@2/5/10 "
                   + ("**equal for every strategy**" if not diffs else
                      f"**{len(diffs)} differences**: " + "; ".join(
                          f"{d['strategy']} " + (f"only in {d['only_in']}" if "only_in" in d else
                                                 f"R@{d['k']} {d['evaluate']} against {d['eval']}") for d in diffs)))
    prev = r.get("stored_eval")
    if prev:
        names = sorted({d["strategy"] for d in prev["differences"]})
        out.append(f"* against `{prev['file']}` (the retrieval section, {prev['date']}): recall@k "
                   + (f"differs for {', '.join(names)}: that file was measured on an earlier build of the set, so "
                      "only the check above, on this very workspace, must be equal" if names else "equal"))
    out += ["", "| strategy | R@2 | R@5 | R@10 | MRR | p50 ms | p95 ms | seconds | "
            + ("`core eval` p50 / p95 ms |" if check else ""),
            "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if check else "")]
    for name, s in r["strategies"].items():
        label = f"{name} ({s['baseline']})" if s.get("baseline") else name
        row = (f"| {label} | " + " | ".join(_interval(s[f"recall@{k}"]) for k in KS) + f" | {_interval(s['mrr'])} | "
               f"{_interval(s['latency_ms_p50'], '.1f')} | {_interval(s['latency_ms_p95'], '.1f')} | "
               f"{s['total_s']:.1f} |")
        if check:
            p50, p95 = check["latency_ms_p50"].get(name), check["latency_ms_p95"].get(name)
            row += "" if p50 is None else f" {p50:.1f} / {p95:.1f} |"
        out.append(row)
    out += ["", "Each cell: the value and its 95 % bootstrap interval. Seconds: the strategy's questions summed (its "
            "share of the measure step, loading call excluded)." + (
                " The last column: the same strategy timed by `core eval`, which runs each strategy over all questions "
                "in turn, where the job runs every strategy on one question before the next." if check else ""), ""]
    return out


if __name__ == "__main__":
    main()
