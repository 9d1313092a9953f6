"""What a level's figures (core/quality/metrics.py) mean: for each metric a reference (where "good" and "poor"
begin, and where each threshold comes from), a verdict per figure, and one plain line per method.

The thresholds and their sources:
* modularity: above 0.3 is the usual reading of clear community structure, and real networks with strong structure
  rarely exceed 0.7 (Newman & Girvan 2004, "Finding and evaluating community structure in networks", Phys. Rev. E
  69, 026113; Newman 2004, Phys. Rev. E 69, 066133). Below 0.3: little more structure than chance.
* coverage (share of the link weight inside communities; Brandes et al. 2008, "On modularity clustering"): no
  paper fixes a line; rule of thumb: at least half inside is good, under a quarter poor.
* mean conductance (share of a community's link weight that leaves it; lower is better): poor from the page's own
  "weakly connected" threshold (QualitySettings.weak_conductance, 0.5 by default: by definition half the members'
  link weight then goes outside); good at or below 0.25, a rule of thumb (three quarters of it stays inside).
* mean coherence: its scale depends on the embedder and on the community size, so the lines are computed from the
  level itself: poor at the coherence a random group of the level's median size has (coherence above chance 0,
  by definition: no more alike than random entities) — strictly, the flag starts at QualitySettings.mixed_lift —
  and good at coherence above chance 0.3 (a rule of thumb).
* Calinski–Harabasz: no absolute scale (Caliński & Harabasz 1974 compare it between partitions of one data set);
  the one line is 1, which random labels give in expectation (a pseudo-F ratio; by definition).
* cluster sparsity (HiRAG, Eq. 17): no good or poor value on its own; HiRAG reads its change between layers.
* singleton and tiny shares: rules of thumb: a singleton share up to 20 % is fine, from 50 % on most communities
  are single entities (the method found little to group); tiny shares up to 30 % fine, from 60 % poor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.config import QualitySettings
from core.quality.metrics import chance_coherence

GOOD, FAIR, POOR, NONE = "good", "fair", "poor", "n/a"


@dataclass(frozen=True)
class Reference:
    key: str  # a key of LevelMetrics.figures
    label: str
    higher_is_better: bool
    good: float | None  # where "good" begins (None: no such line)
    poor: float | None  # where "poor" begins
    source: str  # where the thresholds come from, in words

    def verdict(self, value: float | None) -> str:
        """GOOD, FAIR or POOR for `value`; NONE when it is not a number or the metric has no reference."""
        if value is None or not math.isfinite(value) or (self.good is None and self.poor is None):
            return NONE
        sign = 1.0 if self.higher_is_better else -1.0
        if self.good is not None and sign * (value - self.good) >= 0:
            return GOOD
        if self.poor is not None and sign * (value - self.poor) <= 0:
            return POOR
        return FAIR if self.good is not None else NONE  # only a poor line (Calinski–Harabasz): no "good" to reach


def coherence_at(lift: float, size: float, p0: float) -> float:
    """The coherence of a group of `size` members whose coherence above chance is `lift` (metrics.py's module doc:
    mean pairwise cosine p = p0 + lift (1 - p0), coherence sqrt((1 + (s - 1) p) / s))."""
    p = p0 + lift * (1 - p0)
    s = max(float(size), 1.0)
    return math.sqrt(max((1 + (s - 1) * p) / s, 0.0))


def references(figures: dict[str, float], cfg: QualitySettings) -> dict[str, Reference]:
    """The reference of every metric the Quality page shows (coherence's lines follow the level's own figures)."""
    out = [
        Reference("modularity", "Modularity", True, 0.3, 0.3,
                  "above 0.3: clear community structure (Newman & Girvan 2004; Newman 2004); real networks rarely "
                  "exceed 0.7"),
        Reference("coverage", "Coverage", True, 0.5, 0.25,
                  "rule of thumb: at least half the link weight inside communities is good, under a quarter poor"),
        Reference("conductance_mean", "Mean conductance", False, 0.25, cfg.weak_conductance,
                  f"poor from {cfg.weak_conductance:g}, the page's 'weakly connected' threshold (settings."
                  "quality.weak_conductance: that share of the members' link weight leaves); good up to 0.25, "
                  "a rule of thumb"),
        Reference("calinski_harabasz", "Calinski–Harabasz", True, None, 1.0,
                  "no absolute scale (Caliński & Harabasz 1974: compare partitions of one data set); random "
                  "labels give about 1 (by definition of the ratio)"),
        Reference("cluster_sparsity", "Cluster sparsity", True, None, None,
                  "no good or poor value on its own: HiRAG (Eq. 17) reads its change between layers"),
        Reference("singleton_share", "Singletons", False, 0.2, 0.5,
                  "rule of thumb: up to 20 % singletons is fine; from 50 % most communities are single entities"),
        Reference("tiny_share", "Tiny", False, 0.3, 0.6,
                  f"rule of thumb: up to 30 % tiny communities (at most {cfg.tiny_size} members) is fine, "
                  "from 60 % poor"),
    ]
    p0, size = figures.get("pairwise_cosine", math.nan), figures.get("size_median", math.nan)
    if math.isfinite(p0) and math.isfinite(size):
        chance = float(chance_coherence(np.array([max(size, 2.0)]), p0)[0])
        good = coherence_at(0.3, max(size, 2.0), p0)
        out.append(Reference("coherence_mean", "Mean coherence", True, good, chance,
                             f"poor at {chance:.2f}, what a random group of the median size ({size:g}) has (by "
                             f"definition: no more alike than random entities); good from {good:.2f}, coherence "
                             "above chance 0.3 (a rule of thumb). The 'mixed themes' flag starts at coherence "
                             f"above chance {cfg.mixed_lift:g} (settings.quality.mixed_lift)"))
    else:
        out.append(Reference("coherence_mean", "Mean coherence", True, None, None,
                             "no reference: too few members with vectors"))
    return {r.key: r for r in out}


def _pct(x: float) -> str:
    return f"{x:.0%}".replace("%", " %")


def reading(label: str, figures: dict[str, float], cfg: QualitySettings) -> str:
    """One plain line about a level: how well its communities are separated, how many are single entities, and
    whatever else is poor ("HiRAG communities: modularity 0.71, well separated; 12 % singletons, fine")."""
    refs = references(figures, cfg)
    if not figures.get("communities"):
        return f"{label}: no communities at this level."
    q = figures.get("modularity", math.nan)
    v = refs["modularity"].verdict(q)
    sep = ("no links to measure separation" if v == NONE else
           f"modularity {q:.2f}, " + ("very well separated" if q >= 0.7 else "well separated" if v == GOOD
                                      else "weakly separated: little more structure than chance"))
    s = figures.get("singleton_share", math.nan)
    sv = refs["singleton_share"].verdict(s)
    single = ("" if sv == NONE else f"{_pct(s)} singletons, " + {GOOD: "fine", FAIR: "many",
                                                                  POOR: "too many: most communities are one entity"}[sv])
    parts = [sep] + ([single] if single else [])
    c = figures.get("conductance_mean", math.nan)
    if refs["conductance_mean"].verdict(c) == POOR:
        parts.append(f"mean conductance {c:.2f}: most of a community's links leave it")
    h = figures.get("coherence_mean", math.nan)
    if refs["coherence_mean"].verdict(h) == POOR:
        parts.append(f"mean coherence {h:.2f}: members no more alike than random entities")
    return f"{label}: " + "; ".join(parts) + "."
