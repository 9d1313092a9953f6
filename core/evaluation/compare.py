"""Two evaluations of one question set (the same question hash) side by side: per strategy measured by both, the
change of each figure (B minus A) with a paired bootstrap interval (the same resampled questions for both runs, so
what the questions share cancels out), and per question the wins and losses (B found more of its gold in the top
max(k), or ranked its first gold document higher, than A; or fewer / lower)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.evaluation.metrics import RESAMPLES, SEED, per_question
from core.models import Evaluation, EvaluationResult


class NotComparable(ValueError):
    """The two evaluations measured different question sets."""


@dataclass
class Change:
    a: float
    b: float
    delta: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "delta": self.delta, "low": self.low, "high": self.high, "n": self.n}


def paired(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> Change:
    """The mean of b - a over paired questions with its 95 % paired bootstrap interval."""
    d = b - a
    n = len(d)
    if n == 0:
        return Change(float("nan"), float("nan"), float("nan"), float("nan"), float("nan"), 0)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return Change(round(float(a.mean()), 4), round(float(b.mean()), 4), round(float(d.mean()), 4),
                  round(float(lo), 4), round(float(hi), 4), n)


def compare(a: Evaluation, rows_a: list[EvaluationResult], b: Evaluation, rows_b: list[EvaluationResult],
            resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """{"strategies": {name: {"recall@k": Change dict, ..., "mrr", "answer_in_context"}},
    "questions": {name: [{"question", "id", "outcome": "win"|"loss"|"tie", "a", "b"}]},
    "wins": {name: n}, "losses": {name: n}}; NotComparable unless both measured the same question set."""
    if a.question_hash != b.question_hash:
        raise NotComparable("the two evaluations measured different question sets")
    pa, pb = per_question(a, rows_a), per_question(b, rows_b)
    ks = [k for k in a.ks if k in b.ks]
    out: dict = {"strategies": {}, "questions": {}, "wins": {}, "losses": {}}
    for name in [s for s in a.strategies if s in b.strategies]:
        common = sorted(set(pa[name]) & set(pb[name]))
        row: dict[str, dict | None] = {}
        for key in [f"recall@{k}" for k in ks] + ["rr"]:
            va = np.array([pa[name][i][key] for i in common], dtype=float)
            vb = np.array([pb[name][i][key] for i in common], dtype=float)
            row["mrr" if key == "rr" else key] = paired(va, vb, resamples, seed).as_dict()
        both = [i for i in common if pa[name][i]["aic"] is not None and pb[name][i]["aic"] is not None]
        row["answer_in_context"] = paired(np.array([float(pa[name][i]["aic"]) for i in both]),
                                          np.array([float(pb[name][i]["aic"]) for i in both]),
                                          resamples, seed).as_dict() if both else None
        out["strategies"][name] = row
        top = f"recall@{max(ks)}" if ks else "rr"
        per = []
        for i in common:
            sa, sb = (pa[name][i][top], pa[name][i]["rr"]), (pb[name][i][top], pb[name][i]["rr"])
            outcome = "win" if sb > sa else "loss" if sb < sa else "tie"
            per.append({"question": i, "id": a.questions[i]["id"], "text": a.questions[i]["question"],
                        "outcome": outcome, "a": {top: sa[0], "rr": sa[1]}, "b": {top: sb[0], "rr": sb[1]}})
        out["questions"][name] = per
        out["wins"][name] = sum(p["outcome"] == "win" for p in per)
        out["losses"][name] = sum(p["outcome"] == "loss" for p in per)
    return out
