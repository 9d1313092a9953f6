"""The command line's `python -m core evaluate`: an evaluation (core/evaluation) of a built workspace over a
questions file (jsonl, csv or a JSON list, gold by id, title or file name) or a probe set made from the workspace,
run in this process as the "evaluate" job through the runner (its progress on stderr), kept with the workspace's
evaluations (the Evaluate page lists it), and printed as a table of figures with their 95 % bootstrap intervals, then one line per figure: who leads, and
whether the lead over the runner-up and over dense is significant (core/evaluation/leads.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core import access
from core.config import Settings
from core.store import Store


def add_parsers(sub) -> None:
    e = sub.add_parser("evaluate", help="evaluate strategies over a questions file or probes; kept, with intervals")
    e.add_argument("--workspace", required=True)
    e.add_argument("--questions", type=Path, default=None, help="jsonl, csv or JSON list (default: a probe set)")
    e.add_argument("--probes", type=int, default=10, help="without --questions: this many multi- and single-hop")
    e.add_argument("--seed", type=int, default=0, help="the probe set's seed")
    e.add_argument("--strategies", default="", help="comma-separated (default: all; dense and BM25 always added)")
    e.add_argument("--json", action="store_true", help="the evaluation exported as JSON")
    e.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    from core.evaluation import job, probes, questions, records
    from core.evaluation.export import export_json
    from core.evaluation.leads import leads, reading
    from core.evaluation.metrics import table_rows
    from core.pipeline.factory import make_context
    from core.pipeline.runner import run_job

    ws = store.require_workspace(args.workspace)
    if ws.build_version == 0:
        raise ValueError(f"workspace {ws.name!r} has not been built yet")
    assert ws.id is not None
    if args.questions is not None:
        qs = questions.read_questions(store, ws.id, args.questions.read_bytes(), args.questions.name)
        for r in qs.rejected:
            print(f"{args.questions.name}:{r.line}: {'kept, ' if r.kept else 'left out: '}{r.reason}", file=sys.stderr)
        chosen = qs.questions
    else:
        chosen = probes.probe_set(store, ws.id, args.probes, args.probes, args.seed)
    names = [s.strip() for s in args.strategies.split(",") if s.strip()] or None
    ev, run = job.start_evaluation(store, access.service_user(settings), ws, settings, chosen, names, launch=False)
    assert ev.id is not None and run.id is not None
    ctx = make_context(store, ws, job.evaluation_settings(settings, ws))
    last = None
    for last in run_job(ctx, run.id, job.evaluate_plan({"evaluation": ev.id})):
        print(f"[{last.stage or 'evaluate'}] {last.status} {last.done}/{last.total} {last.message}", file=sys.stderr)
    ev = records.get_evaluation(store, ws.id, ev.id) or ev
    if last is None or last.status != "done":
        return 1
    if args.json:
        print(export_json(ev, records.results(store, ev)))
        return 0
    print(f"evaluation {ev.id}: {len(ev.questions)} questions, set {ev.question_hash[:12]}")
    cols = [f"recall@{k}" for k in ev.ks] + ["mrr", "answer_in_context", "latency_ms_p50", "latency_ms_p95"]
    print("  ".join(f"{c:>22}" for c in ["strategy", *cols]))
    for row in table_rows(ev.meta["figures"], ev.ks):
        cells = ["-" if row[c] is None else f"{row[c]:.3g} [{row[c + ' low']:.3g},{row[c + ' high']:.3g}]"
                 for c in cols]
        name = row["strategy"] + (f" ({row['baseline']})" if row["baseline"] else "")
        print("  ".join(f"{c:>22}" for c in [name, *cells]))
    for lead in leads(ev, records.results(store, ev)).values():
        print(reading(lead))
    return 0
