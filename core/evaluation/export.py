"""An evaluation exported: JSON (what it measured, its questions, its figures, every result row) and CSV (one row
per question and strategy: the gold found, the recall at each k, the reciprocal rank, answer-in-context, ms)."""

from __future__ import annotations

import csv
import io
import json

from core.evaluation.metrics import per_question, summarize
from core.models import Evaluation, EvaluationResult


def export_dict(ev: Evaluation, rows: list[EvaluationResult]) -> dict:
    figures = (ev.meta or {}).get("figures") or summarize(ev, rows)
    return {"evaluation": {"id": ev.id, "workspace_id": ev.workspace_id, "name": ev.name, "status": ev.status,
                           "question_hash": ev.question_hash, "strategies": ev.strategies,
                           "baselines": ev.baselines, "ks": ev.ks, "build_version": ev.build_version,
                           "backend": ev.backend, "embedder": ev.embedder, "partition": ev.partition,
                           "created_at": ev.created_at.isoformat()},
            "questions": ev.questions, "figures": figures,
            "results": [{"question": r.question, "id": ev.questions[r.question]["id"], "strategy": r.strategy,
                         "ranked": r.ranked, "found": r.found, "ms": r.ms, "answer_in_context": r.answer_in_context}
                        for r in rows if r.question < len(ev.questions)]}


def export_json(ev: Evaluation, rows: list[EvaluationResult]) -> str:
    return json.dumps(export_dict(ev, rows), ensure_ascii=False, indent=1)


def export_csv(ev: Evaluation, rows: list[EvaluationResult]) -> str:
    pq = per_question(ev, rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["question_id", "question", "generated", "strategy", "baseline", "gold", "found_ranks"]
               + [f"recall@{k}" for k in ev.ks] + ["rr", "answer_in_context", "ms"])
    for name in ev.strategies:
        for i in sorted(pq[name]):
            q, m = ev.questions[i], pq[name][i]
            w.writerow([q["id"], q["question"], q.get("generated", False), name,
                        name if name in ev.baselines else "", "|".join(g["key"] for g in q["gold"]),
                        "|".join(map(str, m["found"]))] + [round(m[f"recall@{k}"], 4) for k in ev.ks]
                       + [round(m["rr"], 4), "" if m["aic"] is None else m["aic"], round(m["ms"], 3)])
    return buf.getvalue()
