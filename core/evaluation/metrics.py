"""An evaluation's figures per strategy: recall@k (the share of a question's gold entries found in the top k, as
`core.eval.recall_at`), MRR (1 / the rank of the first gold document found, 0 when none is), the answer-in-context
rate (over the questions that give an answer), latency p50 / p95 (ms), each with a 95 % bootstrap interval:
questions resampled with replacement, `resamples` times, from a seeded numpy generator (the same seed gives the same
interval), the interval the 2.5th and 97.5th percentiles of the statistic over the resamples."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.models import Evaluation, EvaluationResult

SEED = 0
RESAMPLES = 1000
BASELINES = {"naive": "dense", "bm25": "BM25"}  # the strategies bench/retrieval.py and `core eval` name so


@dataclass
class Figure:
    value: float
    low: float
    high: float
    n: int  # questions it is over

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def gold_ranks(ranked: list[str], gold: list[dict]) -> list[int]:
    """Per gold entry, the 1-based rank of its first document in `ranked`, 0 when absent."""
    pos: dict[str, int] = {}
    for i, d in enumerate(ranked, 1):
        pos.setdefault(d, i)
    return [min((pos[d] for d in g["docs"] if d in pos), default=0) for g in gold]


def recall(found: list[int], k: int) -> float:
    return sum(1 for r in found if 0 < r <= k) / len(found) if found else 0.0


def reciprocal_rank(found: list[int]) -> float:
    hits = [r for r in found if r > 0]
    return 1.0 / min(hits) if hits else 0.0


STATS = {"mean": lambda a, axis=None: np.mean(a, axis=axis),
         "p50": lambda a, axis=None: np.percentile(a, 50, axis=axis),
         "p95": lambda a, axis=None: np.percentile(a, 95, axis=axis)}


def bootstrap(values: np.ndarray, stat: str = "mean", resamples: int = RESAMPLES, seed: int = SEED,
              level: float = 0.95) -> tuple[float, float]:
    """The `level` percentile interval of statistic `stat` (STATS) over resamples of `values` with replacement."""
    n = len(values)
    if n == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    stats = STATS[stat](values[rng.integers(0, n, size=(resamples, n))], axis=1)
    a = (1 - level) / 2 * 100
    return float(np.percentile(stats, a)), float(np.percentile(stats, 100 - a))


def figure(values: list[float] | np.ndarray, stat: str = "mean", resamples: int = RESAMPLES, seed: int = SEED,
           digits: int = 4) -> Figure:
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return Figure(float("nan"), float("nan"), float("nan"), 0)
    lo, hi = bootstrap(v, stat, resamples, seed)
    return Figure(round(float(STATS[stat](v)), digits), round(lo, digits), round(hi, digits), len(v))


def per_question(ev: Evaluation, rows: list[EvaluationResult]) -> dict[str, dict[int, dict]]:
    """{strategy: {question index: {"recall@k": ..., "rr", "aic" (None without an answer), "ms", "found"}}}."""
    out: dict[str, dict[int, dict]] = {s: {} for s in ev.strategies}
    for r in rows:
        if r.strategy not in out or r.question >= len(ev.questions):
            continue
        found = r.found or gold_ranks(r.ranked, ev.questions[r.question]["gold"])
        row: dict = {f"recall@{k}": recall(found, k) for k in ev.ks}
        row |= {"rr": reciprocal_rank(found), "aic": r.answer_in_context, "ms": r.ms, "found": found}
        out[r.strategy][r.question] = row
    return out


def summarize(ev: Evaluation, rows: list[EvaluationResult], resamples: int = RESAMPLES,
              seed: int = SEED) -> dict[str, dict]:
    """{strategy: {"recall@k": Figure dict, ..., "mrr", "answer_in_context" (None without answers),
    "latency_ms_p50", "latency_ms_p95", "questions": n, "baseline": "dense"|"BM25"|None}}."""
    pq = per_question(ev, rows)
    out: dict[str, dict] = {}
    for name in ev.strategies:
        qs = [pq[name][i] for i in sorted(pq[name])]
        row: dict = {f"recall@{k}": figure([q[f"recall@{k}"] for q in qs], seed=seed, resamples=resamples).as_dict()
                     for k in ev.ks}
        row["mrr"] = figure([q["rr"] for q in qs], seed=seed, resamples=resamples).as_dict()
        aic = [float(q["aic"]) for q in qs if q["aic"] is not None]
        row["answer_in_context"] = figure(aic, seed=seed, resamples=resamples).as_dict() if aic else None
        ms = [q["ms"] for q in qs]
        row["latency_ms_p50"] = figure(ms, "p50", resamples, seed, 2).as_dict()
        row["latency_ms_p95"] = figure(ms, "p95", resamples, seed, 2).as_dict()
        row["questions"] = len(qs)
        row["baseline"] = BASELINES.get(name) if name in ev.baselines else None
        out[name] = row
    return out


def table_rows(summary: dict[str, dict], ks: list[int]) -> list[dict]:
    """One flat row per strategy for a table: value and interval bounds as columns."""
    rows = []
    for name, row in summary.items():
        flat: dict = {"strategy": name, "baseline": row.get("baseline") or "", "questions": row["questions"]}
        for key in [f"recall@{k}" for k in ks] + ["mrr", "answer_in_context", "latency_ms_p50", "latency_ms_p95"]:
            f = row.get(key)
            flat[key] = None if f is None else f["value"]
            flat[f"{key} low"] = None if f is None else f["low"]
            flat[f"{key} high"] = None if f is None else f["high"]
        rows.append(flat)
    return rows
