"""Shallow personalized PageRank on a sparse weighted adjacency (NodeRAG, noderag.txt §2.5 "Shallow PPR" and
Appendix C "Shallow PPR"), as NodeRAG's published code runs it (NodeRAG/utils/PPR.py `sparse_PPR.PPR`):

    p_0 = e,    p_{t+1} = alpha · Pᵀ p_t + (1 − alpha) · p_t,    t = 0 .. T−1        (update="published")

* P is the row-normalized transition matrix of the weighted adjacency A (P_ij = A_ij / Σ_k A_ik): edge weights
  are used, so a link stored twice or raised by an HNSW semantic edge (weight 2) is walked twice as often.
* e is the personalization vector: the given weights on the entry nodes, normalized to sum 1.
* alpha is the walk probability (the published config's `ppr_alpha: 0.5`, "damping factor"); 1 − alpha of the mass
  stays where it is (a lazy step back to the previous vector, not to e). After T steps p = (alpha·Pᵀ + (1 −
  alpha)·I)^T e: with alpha 0.5 and T 2 the entries keep 0.25, the 1-hop term weighs 0.5 and the 2-hop term 0.25.
* update="teleport" is the textbook form the paper's wording suggests ("the teleport probability that balances
  restarting at entry points and propagating through the graph"): p_{t+1} = alpha · e + (1 − alpha) · Pᵀ p_t,
  alpha the restart probability. With alpha 0.5 and T 2 the entries keep 0.5 and the 1-hop and 2-hop terms weigh
  0.25 each: not the same walk (Strata ran this form until issue 37; it is the ablation `noderag-teleport`).
* T is small ("shallow", default 2): the scores stay on the entry points' neighbourhood within T hops, which is
  the point of the early stop. Run long enough the teleport form converges to p = alpha (I − (1 − alpha) Pᵀ)⁻¹ e;
  the published (lazy) form to the walk's stationary distribution (the personalization only decides where it
  starts), which is why it must stay shallow.
* Dangling nodes (no links, a zero row of A): the published code gives such a row a uniform transition to every
  *other* node ("modified" transition matrix); `dangling="uniform"` does exactly that (the default).
  `dangling="personalization"` sends their mass back to e instead (the networkx / HippoRAG convention).
  Either way P is stochastic and the total mass stays 1.

Vectorized: one sparse mat-vec per iteration, P is never materialized (Pᵀp = Aᵀ (p ⊙ 1/rowsum)).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def personalization_vector(n: int, weights: dict[int, float]) -> np.ndarray:
    """The normalized personalization vector e over n vertices from {vertex: weight} (zero weights ignored)."""
    e = np.zeros(n, dtype=np.float64)
    for v, w in weights.items():
        if w > 0:
            e[int(v)] += float(w)
    total = e.sum()
    if total <= 0:
        raise ValueError("personalization needs at least one vertex with a positive weight")
    return e / total


UPDATES = ("published", "teleport")


def personalized_pagerank(adj: sp.spmatrix, e: np.ndarray, alpha: float = 0.5, iterations: int = 2,
                          dangling: str = "uniform", update: str = "published") -> np.ndarray:
    """PPR scores after `iterations` steps from p = e of p ← alpha·Pᵀp + (1 − alpha)·p (update "published", NodeRAG's
    code) or p ← alpha·e + (1 − alpha)·Pᵀp (update "teleport"); see the module doc.

    `adj`: square sparse (weighted, non-negative) adjacency, row i = out-links of vertex i; `e`: personalization
    (normalized here if it does not sum to 1)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if dangling not in ("uniform", "personalization"):
        raise ValueError(f"dangling must be 'uniform' or 'personalization', got {dangling!r}")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}")
    a = sp.csr_matrix(adj, dtype=np.float64)
    n = a.shape[0]
    if a.shape != (n, n) or len(e) != n:
        raise ValueError("adjacency must be square and match the personalization vector")
    e = np.asarray(e, dtype=np.float64)
    if e.sum() <= 0:
        raise ValueError("personalization needs a positive mass")
    e = e / e.sum()
    out = np.asarray(a.sum(axis=1)).ravel()
    is_dangling = out <= 0
    inv_out = np.zeros(n)
    inv_out[~is_dangling] = 1.0 / out[~is_dangling]
    at = a.T  # Pᵀp = Aᵀ(p / out); the transpose of a CSR matrix is a CSC view, no copy
    any_dangling = bool(is_dangling.any())
    p = e.copy()
    for _ in range(max(int(iterations), 0)):
        step = at @ (p * inv_out)
        if any_dangling:
            d = p[is_dangling]
            mass = float(d.sum())
            if dangling == "uniform" and n > 1:
                # each dangling vertex i sends p_i / (n − 1) to every vertex but itself
                step += mass / (n - 1)
                step[is_dangling] -= d / (n - 1)
            else:
                step += mass * e
        p = alpha * step + (1.0 - alpha) * p if update == "published" else alpha * e + (1.0 - alpha) * step
    return p


def top_by_kind(scores: np.ndarray, kinds: np.ndarray, kind_code: int, k: int, exclude: np.ndarray | None = None,
                min_score: float = 0.0) -> np.ndarray:
    """Vertices of one kind code with the k highest scores above `min_score` (ties by vertex), best first,
    leaving out the vertices where `exclude` is True."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    mask = (kinds == kind_code) & (scores > min_score)
    if exclude is not None:
        mask &= ~exclude
    idx = np.flatnonzero(mask)  # a shallow walk reaches few vertices: sorting them all is cheap and exact
    return idx[np.lexsort((idx, -scores[idx]))][:k]
