"""Community quality: the metrics of a partition (pure numpy / scipy.sparse maths) and of one level of a method.

Per community (groups may overlap: HiRAG's soft membership), with A the symmetric weighted adjacency of the graph
the method clustered (both directions stored, a self-loop twice on the diagonal, as igraph counts degrees),
d_i = Σ_j A_ij, 2m = Σ_ij A_ij, vol(S) = Σ_{i∈S} d_i, in(S) = Σ_{i,j∈S} A_ij, cut(S) = vol(S) - in(S):
* conductance(S) = cut(S) / min(vol(S), 2m - vol(S)): the share of its members' link weight that leaves it (when
  it holds at most half the graph's weight); NaN for an isolated community (vol 0), 0 for the whole graph;
* coherence(S) = mean over members of cos(z_i, c_S), c_S the centroid of the unit embeddings z_i. Since
  Σ_i z_i·c = |S| c·c, this is exactly |c_S| (the centroid's norm); NaN below two members with vectors.
  Coherence falls with size even for a random group (two random entities give about 0.77 with MiniLM, 700 give
  0.45), so flags and ranking use coherence above chance: with p = (s |c_S|^2 - 1) / (s - 1) the members' mean
  pairwise cosine (s members with vectors) and p0 the same over all the level's vertices (what a random group
  of any size has in expectation), lift = (p - p0) / (1 - p0): 0 = no more alike than random, 1 = identical;
  the coherence a random group of s would have is sqrt((1 + (s - 1) p0) / s).
Per level (hard labels: every vertex in one block; a vertex outside every community is a block of its own):
* modularity Q = Σ_c [in_c / 2m - (vol_c / 2m)^2] (weighted, resolution 1, the same value igraph gives);
* coverage = Σ_c in_c / 2m, the share of edge weight inside communities;
* Calinski–Harabasz = [B / (k - 1)] / [W / (n - k)] over the member embeddings (sklearn's definition),
  B = Σ_c n_c |μ_c - μ|^2, W = Σ_c Σ_{i∈c} |z_i - μ_c|^2; NaN unless 2 <= k < n;
* cluster sparsity CS (HiRAG Eq. 17, core/algorithms/layers.cluster_sparsity) of the level's groups;
* the share of singleton and of tiny (size <= QualitySettings.tiny_size) communities.
NMI (arithmetic normalisation, sklearn's default) and ARI (Hubert–Arabie) compare two labelings.

Badness ranking (worst first): the mean of a community's percentile rank within its level on three axes,
conductance (higher is worse; isolated = worst), coherence above chance (lower is worse; undefined, i.e. fewer
than two members with vectors, = neutral 0.5) and size (smaller is worse); 1.0 is worst on all three. The reasons
given in words use absolute thresholds (QualitySettings): "tiny" (size <= tiny_size), "weakly connected"
(conductance >= weak_conductance, or no links at all), "mixed themes" (lift < mixed_lift).

The graphs and levels of each method are read in core/quality/data.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from core.algorithms.layers import cluster_sparsity
from core.config import QualitySettings

# ------------------------------------------------------------------------------------------------------ maths


def adjacency(n: int, pairs, weights) -> sp.csr_matrix:
    """Symmetric n×n adjacency from undirected pairs (a, b) with weights; repeated pairs add up, a self-loop
    (a, a) lands twice on the diagonal (igraph's degree convention)."""
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    rows = np.concatenate([p[:, 0], p[:, 1]])
    cols = np.concatenate([p[:, 1], p[:, 0]])
    return sp.csr_matrix((np.concatenate([w, w]), (rows, cols)), shape=(n, n))


def complete_labels(labels) -> np.ndarray:
    """Labels 0..k-1 where every negative label (a vertex in no community) becomes a block of its own."""
    lab = np.asarray(labels, dtype=np.int64).copy()
    free = lab < 0
    lab[free] = (lab.max() + 1 if (~free).any() else 0) + np.arange(int(free.sum()))
    return np.unique(lab, return_inverse=True)[1].astype(np.int64) if len(lab) else lab


def indicator(groups: list, n: int) -> sp.csr_matrix:
    """n×k 0/1 membership matrix of possibly overlapping groups of vertex indices."""
    rows = np.concatenate([np.asarray(g, dtype=np.int64) for g in groups]) if groups else np.zeros(0, np.int64)
    cols = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    m = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(groups)))
    m.data[:] = 1.0  # a vertex listed twice in one group counts once
    return m


def _inside(adj: sp.csr_matrix, lab: np.ndarray) -> tuple[float, float]:
    coo = adj.tocoo()
    return float(coo.data[lab[coo.row] == lab[coo.col]].sum()), float(coo.data.sum())


def modularity(adj: sp.csr_matrix, labels) -> float:
    """Weighted modularity (resolution 1) of a hard labeling; NaN on a graph without edges."""
    lab = complete_labels(labels)
    inside, m2 = _inside(adj, lab)
    if m2 <= 0:
        return math.nan
    deg = np.asarray(adj.sum(axis=1)).ravel()
    vol = np.bincount(lab, weights=deg, minlength=int(lab.max()) + 1 if len(lab) else 0)
    return inside / m2 - float(((vol / m2) ** 2).sum())


def coverage(adj: sp.csr_matrix, labels) -> float:
    """Share of the edge weight that lies inside communities; NaN on a graph without edges."""
    inside, m2 = _inside(adj, complete_labels(labels))
    return inside / m2 if m2 > 0 else math.nan


def conductance(adj: sp.csr_matrix, ind: sp.csr_matrix) -> np.ndarray:
    """Conductance of every column of the n×k membership matrix `ind` (overlapping groups allowed)."""
    deg = np.asarray(adj.sum(axis=1)).ravel()
    m2 = float(deg.sum())
    vol = np.asarray(ind.T @ deg).ravel()
    inner = np.asarray((adj @ ind).multiply(ind).sum(axis=0)).ravel()
    cut = np.maximum(vol - inner, 0.0)
    den = np.minimum(vol, m2 - vol)
    out = np.full(ind.shape[1], math.nan)
    ok = vol > 0
    out[ok] = np.where(den[ok] > 1e-12, cut[ok] / np.where(den[ok] > 1e-12, den[ok], 1.0), 0.0)
    return np.clip(out, 0.0, 1.0, where=ok, out=out)


def coherence(vecs: np.ndarray, has_vec: np.ndarray, ind: sp.csr_matrix) -> np.ndarray:
    """Mean cosine of each group's member embeddings (unit rows) to their centroid = the centroid's norm."""
    keep = sp.diags(np.asarray(has_vec, dtype=np.float64)) @ ind
    cnt = np.asarray(keep.sum(axis=0)).ravel()
    sums = np.asarray(keep.T @ np.asarray(vecs, dtype=np.float64))
    out = np.linalg.norm(sums, axis=1) / np.maximum(cnt, 1)
    out[cnt < 2] = math.nan
    return out


def calinski_harabasz(x: np.ndarray, labels) -> float:
    """Calinski–Harabasz index of a hard labeling of the rows of x (sklearn's definition); NaN unless 2 <= k < n."""
    x = np.asarray(x, dtype=np.float64)
    lab = complete_labels(labels)
    n = len(lab)
    k = int(lab.max()) + 1 if n else 0
    if k < 2 or k >= n:
        return math.nan
    h = sp.csr_matrix((np.ones(n), (lab, np.arange(n))), shape=(k, n))
    cnt = np.asarray(h.sum(axis=1)).ravel()
    means = np.asarray(h @ x) / cnt[:, None]
    mu = x.mean(axis=0)
    between = float((cnt * ((means - mu) ** 2).sum(axis=1)).sum())
    within = float(((x - means[lab]) ** 2).sum())
    return 1.0 if within == 0 else between * (n - k) / (within * (k - 1))


def _contingency(a, b) -> sp.csr_matrix:
    a, b = complete_labels(a), complete_labels(b)
    if len(a) != len(b):
        raise ValueError(f"labelings of different lengths ({len(a)} and {len(b)})")
    return sp.csr_matrix((np.ones(len(a)), (a, b)), shape=(int(a.max()) + 1 if len(a) else 0,
                                                            int(b.max()) + 1 if len(b) else 0))


def _entropy(counts: np.ndarray, n: float) -> float:
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum())


def nmi(a, b) -> float:
    """Normalised mutual information, MI / mean(H(a), H(b)) (sklearn's arithmetic default)."""
    c = _contingency(a, b).tocoo()
    n = float(len(np.asarray(a)))
    if n == 0 or (c.shape[0] == 1 and c.shape[1] == 1):
        return 1.0
    ra, cb = np.asarray(c.sum(axis=1)).ravel(), np.asarray(c.sum(axis=0)).ravel()
    nij = c.data
    mi = float((nij / n * np.log(n * nij / (ra[c.row] * cb[c.col]))).sum())
    if mi <= 0:
        return 0.0
    return mi / ((_entropy(ra, n) + _entropy(cb, n)) / 2)


def ari(a, b) -> float:
    """Adjusted Rand index from the pair counts (as sklearn computes it)."""
    c = _contingency(a, b)
    n = float(len(np.asarray(a)))
    sq = float((c.data ** 2).sum())
    ra, cb = np.asarray(c.sum(axis=1)).ravel(), np.asarray(c.sum(axis=0)).ravel()
    tp, fp, fn = sq - n, float((cb ** 2).sum()) - sq, float((ra ** 2).sum()) - sq
    tn = n * n - tp - fp - fn - n
    if fn == 0 and fp == 0:
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def coherence_lift(coh: np.ndarray, counts: np.ndarray, p0: float) -> np.ndarray:
    """Coherence above chance (module doc) of groups with `counts` members with vectors; NaN below two."""
    coh, s = np.asarray(coh, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (s * coh ** 2 - 1) / (s - 1)
        out = (p - p0) / (1 - p0) if p0 < 1 else np.zeros_like(p)
    return np.where(s >= 2, out, math.nan)


def chance_coherence(counts: np.ndarray, p0: float) -> np.ndarray:
    """The coherence a random group of that many members has in expectation (from p0, the mean pairwise cosine)."""
    s = np.maximum(np.asarray(counts, dtype=np.float64), 1)
    return np.sqrt(np.clip((1 + (s - 1) * p0) / s, 0, None))


def mean_pairwise(vecs: np.ndarray) -> float:
    """Mean cosine over distinct pairs of unit rows, (N |mean|^2 - 1) / (N - 1)."""
    n = len(vecs)
    if n < 2:
        return math.nan
    mu = np.asarray(vecs, dtype=np.float64).mean(axis=0)
    return float((n * (mu @ mu) - 1) / (n - 1))


def size_shares(sizes, tiny: int) -> tuple[float, float]:
    """(share of singleton communities, share of communities with at most `tiny` members)."""
    s = np.asarray(sizes)
    if len(s) == 0:
        return math.nan, math.nan
    return float((s == 1).mean()), float((s <= tiny).mean())


def _pct(x: np.ndarray) -> np.ndarray:
    """Percentile rank in [0, 1] (ties share their average rank); 0.5 for a single value."""
    from scipy.stats import rankdata

    return (rankdata(x) - 1) / (len(x) - 1) if len(x) > 1 else np.full(len(x), 0.5)


def badness(cond: np.ndarray, lift: np.ndarray, sizes: np.ndarray, cfg: QualitySettings,
            coh: np.ndarray | None = None, chance: np.ndarray | None = None) -> tuple[np.ndarray, list[list[str]]]:
    """(score in [0, 1], reasons in words) of every community of a level from its conductance, coherence above
    chance and size (coherence and its chance value only word the reasons); see the module doc."""
    cond, lift, sizes = np.asarray(cond, float), np.asarray(lift, float), np.asarray(sizes, float)
    coh = np.full(len(sizes), math.nan) if coh is None else np.asarray(coh, float)
    chance = np.full(len(sizes), math.nan) if chance is None else np.asarray(chance, float)
    if len(sizes) == 0:
        return np.zeros(0), []
    r_cond = _pct(np.where(np.isnan(cond), np.inf, cond))
    r_lift = np.full(len(lift), 0.5)
    known = ~np.isnan(lift)
    r_lift[known] = _pct(-lift[known])  # ranked among the communities where it is defined
    score = (r_cond + r_lift + _pct(-sizes)) / 3
    reasons: list[list[str]] = []
    for c, lf, h, h0, s in zip(cond.tolist(), lift.tolist(), coh.tolist(), chance.tolist(), sizes.tolist()):
        why = []
        if lf == lf and lf < cfg.mixed_lift:
            why.append(f"mixed themes: coherence {h:.2f}, against {h0:.2f} for {int(s)} random entities"
                       if h == h and h0 == h0 else f"mixed themes: coherence above chance {lf:.2f}")
        if s <= cfg.tiny_size:
            why.append(f"tiny: {int(s)} member{'s' if s != 1 else ''}")
        if c != c:
            why.append("weakly connected: isolated, its members have no links at all")
        elif c >= cfg.weak_conductance:
            why.append(f"weakly connected: {c:.0%} of its members' link weight leaves it")
        reasons.append(why)
    return score, reasons


# ------------------------------------------------------------------------------------------------ one level


@dataclass
class LevelData:
    """One level of one method: the graph it clustered, the member embeddings and the level's communities."""

    method: str
    level: int
    ids: list[str]  # vertex ids (entities)
    adj: sp.csr_matrix  # symmetric weighted adjacency over `ids`
    vecs: np.ndarray  # unit embedding rows (zeros where has_vec is False)
    has_vec: np.ndarray
    comm_ids: list[str]  # community (or HiRAG summary entity) ids
    titles: list[str]
    groups: list[np.ndarray]  # vertex indices of each community (may overlap when soft)
    labels: np.ndarray  # hard labels of the level's view of the partition, -1 = in no community
    soft: bool = False  # groups overlap (HiRAG): cluster sparsity over the groups as stored
    note: str = ""


@dataclass
class LevelMetrics:
    method: str
    level: int
    figures: dict[str, float]
    table: dict[str, list]  # one row per community, worst first: id, title, size, conductance, coherence, ...
    note: str = ""
    seconds: float = 0.0
    hist: list[int] = field(default_factory=list)  # community sizes (for the histogram)


def level_metrics(ld: LevelData, cfg: QualitySettings, table: bool = True) -> LevelMetrics:
    """Every metric of one level; `table=False` skips the per-community ranking (comparisons only need figures)."""
    t0 = time.perf_counter()
    n, k = len(ld.ids), len(ld.groups)
    ind = indicator(ld.groups, n)
    sizes = np.array([len(g) for g in ld.groups], dtype=np.int64)
    cond = conductance(ld.adj, ind)
    coh = coherence(ld.vecs, ld.has_vec, ind)
    with_vec = np.asarray(ind.T @ np.asarray(ld.has_vec, dtype=np.float64)).ravel()
    p0 = mean_pairwise(ld.vecs[ld.has_vec])
    lift = coherence_lift(coh, with_vec, p0)
    chance = chance_coherence(with_vec, p0)
    single, tiny = size_shares(sizes, cfg.tiny_size)
    lab = np.asarray(ld.labels)
    clustered = lab >= 0
    if ld.soft:
        cs_groups = [g.tolist() for g in ld.groups]
    else:
        order = np.argsort(lab[clustered], kind="stable")
        members = np.flatnonzero(clustered)[order]
        cuts = np.flatnonzero(np.diff(lab[clustered][order])) + 1
        cs_groups = [g.tolist() for g in np.split(members, cuts)] if len(members) else []
    in_many = np.asarray(ind.sum(axis=1)).ravel() > 1
    figures = {
        "communities": float(k),
        "vertices": float(n),
        "unclustered": float((~clustered).sum()),
        "modularity": modularity(ld.adj, lab),
        "coverage": coverage(ld.adj, lab),
        "conductance_mean": _nanmean(cond),
        "conductance_median": float(np.nanmedian(cond)) if np.isfinite(cond).any() else math.nan,
        "coherence_mean": _nanmean(coh),
        "coherence_lift_mean": _nanmean(lift),
        "pairwise_cosine": p0,
        "calinski_harabasz": calinski_harabasz(ld.vecs[ld.has_vec], lab[ld.has_vec]),
        "cluster_sparsity": cluster_sparsity(cs_groups, n),
        "singleton_share": single,
        "tiny_share": tiny,
        "size_median": float(np.median(sizes)) if k else math.nan,
        "size_max": float(sizes.max()) if k else math.nan,
        "soft_share": float(in_many.sum() / max(int(clustered.sum()), 1)) if ld.soft else 0.0,
    }
    rows: dict[str, list] = {}
    if table and k:
        score, reasons = badness(cond, lift, sizes, cfg, coh, chance)
        order = np.lexsort((np.arange(k), sizes, -score))
        rows = {"id": [ld.comm_ids[i] for i in order], "title": [ld.titles[i] for i in order],
                "size": sizes[order].tolist(), "conductance": cond[order].tolist(),
                "coherence": coh[order].tolist(), "chance": chance[order].tolist(), "lift": lift[order].tolist(),
                "badness": score[order].tolist(),
                "reasons": [reasons[i] for i in order]}
    return LevelMetrics(ld.method, ld.level, figures, rows, ld.note, time.perf_counter() - t0, sizes.tolist())


def _nanmean(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else math.nan


def level_labels(n: int, levels: np.ndarray, members: list[np.ndarray], level: int) -> np.ndarray:
    """A nested hierarchy's view at `level`: each vertex takes its community at that level, or its deepest one
    above (communities.level_modularity's view); -1 where no community holds it. `levels[i]` is the level of
    community i, `members[i]` its vertex indices."""
    lab = np.full(n, -1, dtype=np.int64)
    for i in np.argsort(levels, kind="stable"):
        if levels[i] > level:
            break
        lab[members[i]] = i
    return lab
