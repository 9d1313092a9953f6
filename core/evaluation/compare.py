"""Two evaluations of one question set side by side: per strategy measured by both, the change of each figure (B
minus A) with a paired bootstrap interval (the same resampled questions for both runs, so what the questions share
cancels out), and per question the wins and losses (B found more of its gold in the top max(k), or ranked its first
gold document higher, than A; or fewer / lower).

The two may come from two builds of one workspace or from two workspaces (the same questions evaluated on each):
their questions are paired by text (case, punctuation and spacing aside), not by position or gold document ids (a
document's id is its workspace's), so a set evaluated again in another order, or with a question dropped, still
pairs; `one_set` says when enough of them pair to call them one question set."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass

import numpy as np

from core.evaluation.job import normalized
from core.evaluation.metrics import RESAMPLES, SEED, per_question
from core.models import Evaluation, EvaluationResult


class NotComparable(ValueError):
    """The two evaluations share no question."""


@dataclass
class Change:
    a: float
    b: float
    delta: float
    low: float
    high: float
    n: int

    @property
    def significant(self) -> bool:
        """The paired interval excludes 0 (a change, or a lead, that resampling the questions does not undo)."""
        return self.n > 0 and (self.low > 0 or self.high < 0)

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


def matched(a: Evaluation, b: Evaluation) -> list[tuple[int, int]]:
    """(index in a, index in b) of the questions both asked, paired by text in a's order (a text asked twice pairs
    with its occurrences in b in order)."""
    if a.question_hash == b.question_hash:
        return [(i, i) for i in range(len(a.questions))]
    where: dict[str, deque[int]] = defaultdict(deque)
    for j, q in enumerate(b.questions):
        where[normalized(q["question"])].append(j)
    out = []
    for i, q in enumerate(a.questions):
        left = where.get(normalized(q["question"]))
        if left:
            out.append((i, left.popleft()))
    return out


def texts(ev: Evaluation) -> Counter[str]:
    """The evaluation's questions as the texts `matched` pairs them by."""
    return Counter(normalized(q["question"]) for q in ev.questions)


def same_set(a: Counter[str], b: Counter[str]) -> bool:
    """At least half the questions of the smaller of two sets (`texts`) pair with the other's: one question set
    (the same file evaluated on two builds or two workspaces, give or take a question dropped)."""
    n = sum((a & b).values())
    return n > 0 and 2 * n >= min(a.total(), b.total())


def one_set(a: Evaluation, b: Evaluation) -> bool:
    return same_set(texts(a), texts(b))


def _outcome(sa: tuple, sb: tuple) -> str:
    return "win" if sb > sa else "loss" if sb < sa else "tie"


def compare(a: Evaluation, rows_a: list[EvaluationResult], b: Evaluation, rows_b: list[EvaluationResult],
            resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """{"strategies": {name: {"recall@k": Change dict, ..., "mrr", "answer_in_context"}},
    "questions": {name: [{"question" (a's index), "id" (a's), "text", "outcome": "win"|"loss"|"tie", "a", "b"}]},
    "wins": {name: n}, "losses": {name: n}, "paired": n questions}; NotComparable when no question pairs."""
    pairs = matched(a, b)
    if not pairs:
        raise NotComparable("the two evaluations share no question")
    pa, pb = per_question(a, rows_a), per_question(b, rows_b)
    ks = [k for k in a.ks if k in b.ks]
    out: dict = {"strategies": {}, "questions": {}, "wins": {}, "losses": {}, "paired": len(pairs)}
    for name in [s for s in a.strategies if s in b.strategies]:
        common = [(i, j) for i, j in pairs if i in pa[name] and j in pb[name]]
        row: dict[str, dict | None] = {}
        for key in [f"recall@{k}" for k in ks] + ["rr"]:
            va = np.array([pa[name][i][key] for i, _ in common], dtype=float)
            vb = np.array([pb[name][j][key] for _, j in common], dtype=float)
            row["mrr" if key == "rr" else key] = paired(va, vb, resamples, seed).as_dict()
        both = [(i, j) for i, j in common if pa[name][i]["aic"] is not None and pb[name][j]["aic"] is not None]
        row["answer_in_context"] = paired(np.array([float(pa[name][i]["aic"]) for i, _ in both]),
                                          np.array([float(pb[name][j]["aic"]) for _, j in both]),
                                          resamples, seed).as_dict() if both else None
        out["strategies"][name] = row
        top = f"recall@{max(ks)}" if ks else "rr"
        per = []
        for i, j in common:
            sa, sb = (pa[name][i][top], pa[name][i]["rr"]), (pb[name][j][top], pb[name][j]["rr"])
            per.append({"question": i, "id": a.questions[i]["id"], "text": a.questions[i]["question"],
                        "outcome": _outcome(sa, sb), "a": {top: sa[0], "rr": sa[1]}, "b": {top: sb[0], "rr": sb[1]}})
        out["questions"][name] = per
        out["wins"][name] = sum(p["outcome"] == "win" for p in per)
        out["losses"][name] = sum(p["outcome"] == "loss" for p in per)
    return out


def significant_changes(out: dict) -> list[tuple[str, str, dict]]:
    """(strategy, figure, change) of every change of a `compare` whose paired interval excludes 0."""
    return [(name, key, c) for name, row in out["strategies"].items() for key, c in row.items()
            if c is not None and Change(**c).significant]
