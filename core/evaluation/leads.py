"""Who won an evaluation, and whether the lead is real.

Per quality figure (recall@k, MRR, answer in context) the best strategy (the highest mean over its questions; a tie
goes to the higher MRR, then to the strategy listed first), and its lead over the runner-up and over the dense
baseline: the mean per-question difference over the questions both measured, with its paired 95 % bootstrap
interval (compare.paired: the same resampled questions for both strategies, seeded, so the same evaluation always
reads the same). A lead whose interval holds 0 is not significant: resampling the questions can undo it.

The question view opens the best few strategies by the main figure (recall at the evaluation's largest k, MRR
breaking ties) and dense, not every strategy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core.evaluation.compare import Change, paired
from core.evaluation.metrics import RESAMPLES, SEED, per_question
from core.models import Evaluation, EvaluationResult

DENSE = "naive"  # the dense baseline (metrics.BASELINES)
_KEY = {"mrr": "rr", "answer_in_context": "aic"}  # a figure's name -> its per-question value in per_question


@dataclass
class Lead:
    metric: str
    best: str
    value: float  # the best strategy's mean
    runner_up: str | None
    over_runner_up: Change | None  # best minus runner-up, paired (None without a runner-up)
    over_dense: Change | None  # best minus dense, paired (None when dense leads or was not measured)


def metrics_of(ev: Evaluation) -> list[str]:
    return [f"recall@{k}" for k in ev.ks] + ["mrr", "answer_in_context"]


def main_metric(ev: Evaluation) -> str:
    """The figure the evaluation is read by: recall at its largest k (the per-question table's top k)."""
    return f"recall@{max(ev.ks)}"


def _values(pq: dict[str, dict[int, dict]], name: str, metric: str) -> dict[int, float]:
    key = _KEY.get(metric, metric)
    return {i: float(m[key]) for i, m in pq[name].items() if m[key] is not None}


def _mean(v: dict[int, float]) -> float:
    return float(np.mean(list(v.values()))) if v else float("-inf")


def ranking(ev: Evaluation, pq: dict[str, dict[int, dict]], metric: str) -> list[str]:
    """The strategies that measured `metric` on some question, best first (ties: higher MRR, then listed first)."""
    names = [n for n in ev.strategies if n in pq and _values(pq, n, metric)]
    order = {n: i for i, n in enumerate(ev.strategies)}
    return sorted(names, key=lambda n: (-_mean(_values(pq, n, metric)), -_mean(_values(pq, n, "mrr")), order[n]))


def _lead(pq: dict, metric: str, best: str, other: str, resamples: int, seed: int) -> Change:
    vb, vo = _values(pq, best, metric), _values(pq, other, metric)
    both = sorted(set(vb) & set(vo))
    return paired(np.array([vo[i] for i in both]), np.array([vb[i] for i in both]), resamples, seed)


def leads(ev: Evaluation, rows: list[EvaluationResult], resamples: int = RESAMPLES, seed: int = SEED
          ) -> dict[str, Lead]:
    """{figure: Lead} for each quality figure some strategy measured."""
    pq = per_question(ev, rows)
    out: dict[str, Lead] = {}
    for metric in metrics_of(ev):
        order = ranking(ev, pq, metric)
        if not order:
            continue
        best = order[0]
        runner = order[1] if len(order) > 1 else None
        dense = DENSE if DENSE in order and best != DENSE else None
        out[metric] = Lead(metric, best, round(_mean(_values(pq, best, metric)), 4), runner,
                           _lead(pq, metric, best, runner, resamples, seed) if runner else None,
                           _lead(pq, metric, best, dense, resamples, seed) if dense else None)
    return out


def best_strategies(ev: Evaluation, rows: list[EvaluationResult], n: int = 3) -> list[str]:
    """The `n` best strategies by the main figure, then dense (when measured and not among them)."""
    pq = per_question(ev, rows)
    top = ranking(ev, pq, main_metric(ev))[:n]
    return top + ([DENSE] if DENSE in ev.strategies and DENSE not in top else [])


def _gap(c: Change) -> str:
    return f"{c.delta:+.3f} [{c.low:+.3f}, {c.high:+.3f}]"


def shown_metric(metric: str) -> str:
    return {"mrr": "MRR", "answer_in_context": "answer in context"}.get(metric, metric)


def reading(lead: Lead, label: Callable[[str], str] = str) -> str:
    """One plain line: who leads the figure, and whether its lead over the runner-up and over dense is real (a
    runner-up with the same value on every question is said to tie)."""
    text = f"{shown_metric(lead.metric)}: {label(lead.best)} leads ({lead.value:.3f})"
    parts = []
    for who, c in ((lead.runner_up, lead.over_runner_up), (DENSE, lead.over_dense)):
        if who is None or c is None or (who == DENSE and lead.runner_up == DENSE):
            continue
        name = "dense" if who == DENSE else label(who)
        if c.low == c.high == 0:
            parts.append(f"tied with {name} on every question: not significant")
        else:
            parts.append(f"over {name} by {_gap(c)}: " + ("significant" if c.significant else "not significant"))
    if lead.best == DENSE:
        parts.append("dense itself leads")
    return text + ("; " + "; ".join(parts) if parts else "") + "."


def none_significant(won: dict[str, Lead]) -> bool:
    """No figure's leader is significantly ahead of its runner-up: the evaluation does not tell the best apart."""
    return all(lead.over_runner_up is None or not lead.over_runner_up.significant for lead in won.values())
