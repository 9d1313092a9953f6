"""One Gaussian-mixture clustering step of HiRAG's HiIndex (hirag.txt Eq. 8, "following RAPTOR"): reduce the
embeddings, choose the number of components by BIC, soft membership. `core.algorithms.layers` runs it twice per layer,
globally and then inside each global cluster (RAPTOR's global / local clustering).

Reduction: PCA (sklearn) to `reduce_dim` (RAPTOR's 10) dimensions, fitted on the rows being clustered, so a local
step reduces again inside its global cluster. RAPTOR and HiRAG's code use UMAP; PCA is used here because it needs no
new dependency (umap-learn brings numba/llvmlite and seconds of JIT compilation per process), is deterministic
with a seed at any thread count (UMAP is reproducible only single-threaded), and fits 14k x 384 rows in well under
a second; its linear projection keeps the global geometry the GMM then models.

GMM: covariance_type="diag" (RAPTOR leaves sklearn's "full"). Measured on seeded blobs after PCA to 10 dims, "full"
(10 + 55 + 1 = 66 parameters per component against 21 for diag) made BIC under-split (50 true clusters in 2,000
rows -> 21, 20 in 300 -> 12) and, with sklearn's absolute reg_covar of 1e-6, collapsed components onto pairs of
points on small layers (3 blobs in 60 rows -> 12); diag found 50 and 20/21, 3 of 3, and is 5-10x faster. PCA has
already decorrelated the dimensions, which is what makes the diagonal model a reasonable fit. reg_covar = 1e-3 x the
mean per-dimension variance of the reduced data, so the floor is scale-free. Fits are seeded and deterministic.

BIC search bound: k in 1..min(`max_components`, n // (dims + 1)). `max_components` = 50 is RAPTOR's per-search
bound (`get_optimal_clusters(max_clusters=50)`, also HiRAG's code); it bounds ONE search, not the total, since each
global cluster gets its own local search (up to 50 x 50 clusters per layer). n // (dims + 1): each component gets
on average at least dims + 1 rows, the smallest set RAPTOR clusters at all (it keeps a global cluster of <= dim + 1
rows whole). Without it BIC over-fits small layers: with 22 rows in 10 dims, 11 diagonal components of 2 rows each
(231 parameters for 22 rows) collapse onto their covariance floor and win on likelihood. Candidate
k: every k up to 12, then a geometric grid (x1.3), refined between the neighbours of the best coarse k, so a
search costs about 20 fits instead of 50; and the upward scan stops once _PATIENCE = 4 candidates in a row fail to
beat the best BIC (HiRAG's code also stops its scan early, when BIC changes by < 0.1 %). BIC over k is U-shaped on
clustered data, so this cuts the large-k fits, which are the costly ones, on every layer or global cluster whose
structure is coarse (measured: 20k x 384 rows in 12 blobs, 234 fits and 56 s CPU -> 76 fits and 18 s CPU, same
clusters). Rows beyond `_FIT_SAMPLE` are not used to fit (PCA and GMM are fitted on a seeded sample, BIC computed
on it) but every row is assigned; this bounds the cost of every step, global or local, on a 100k-entity layer.

Soft membership (RAPTOR, threshold 0.1): a row joins every component whose posterior is >= the threshold, and
always its most likely one, so clusters may overlap (Eq. 8: |S_x ∩ S_y| >= 0) and cover the rows (∪ S_x = L_{i-1}).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sklearn.mixture import GaussianMixture

_FIT_SAMPLE = 20000  # rows used to fit PCA and the GMMs (all rows are still assigned)
_DENSE_K = 12  # try every k up to this; above, a stepped grid refined around the best
_MAX_ITER = 200
_REG = 1e-3  # covariance floor, relative to the data's mean per-dimension variance
_PATIENCE = 4  # candidates in a row without a better BIC that end the upward scan


@dataclass
class SoftClusters:
    clusters: list[list[int]]  # member row indices per component (soft: a row may be in several), no empty one
    k: int  # components chosen by BIC
    bic: list[tuple[int, float]]  # (k, BIC) tried, ascending k


def reduce(x: np.ndarray, dims: int, sample: np.ndarray, seed: int) -> np.ndarray:
    """PCA to `dims` dimensions, fitted on the sample rows; unchanged when already small or too few rows."""
    d = x.shape[1]
    if d <= dims or len(sample) <= dims + 1:
        return x
    from sklearn.decomposition import PCA

    solver = "randomized" if d > 4 * dims else "full"
    pca = PCA(n_components=dims, svd_solver=solver, random_state=seed)
    pca.fit(x[sample])
    return pca.transform(x)


def candidates(k_max: int) -> list[int]:
    if k_max <= _DENSE_K:
        return list(range(1, k_max + 1))
    ks = list(range(1, _DENSE_K + 1))
    k = _DENSE_K
    while k < k_max:
        k = min(k_max, math.ceil(k * 1.3))
        ks.append(k)
    return ks


def _fit(z: np.ndarray, k: int, seed: int) -> GaussianMixture:
    from sklearn.mixture import GaussianMixture

    floor = float(z.var(axis=0).mean()) or 1.0
    gm = GaussianMixture(n_components=k, covariance_type="diag", random_state=seed, max_iter=_MAX_ITER,
                         reg_covar=_REG * floor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on tiny or degenerate layers
        gm.fit(z)
    return gm


def gmm_soft_clusters(x: np.ndarray, *, dims: int, max_components: int, threshold: float, seed: int
                      ) -> SoftClusters:
    """Reduce `x` (n x d, n >= 2, finite), GMM with k chosen by minimum BIC, soft membership at `threshold`."""
    n = x.shape[0]
    if n < 2 or np.ptp(x, axis=0).max() == 0:  # one row, or all rows identical: one cluster, nothing to fit
        return SoftClusters([list(range(n))] if n else [], 1 if n else 0, [(1, 0.0)] if n else [])
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, _FIT_SAMPLE, replace=False)) if n > _FIT_SAMPLE else np.arange(n)
    z = reduce(x, dims, sample, seed)
    zs = z[sample]
    k_max = max(1, min(max_components, len(sample) // (z.shape[1] + 1)))
    tried: dict[int, float] = {}
    models: dict[int, GaussianMixture] = {}

    def bic_of(k: int) -> float:
        if k not in tried:
            gm = _fit(zs, k, seed)
            tried[k] = float(gm.bic(zs))
            models[k] = gm
        return tried[k]

    ks = candidates(k_max)
    best, worse = ks[0], 0
    for k in ks:  # ascending; stop once BIC has not beaten the best for _PATIENCE candidates in a row
        if bic_of(k) < tried[best]:
            best, worse = k, 0
        elif k != best:
            worse += 1
            if worse >= _PATIENCE:
                break
    if best > _DENSE_K:  # refine between the neighbouring coarse candidates
        i = ks.index(best)
        lo, hi = ks[i - 1], ks[min(i + 1, len(ks) - 1)]
        step = max(1, (hi - lo) // 6)
        for k in range(lo + 1, hi, step):
            bic_of(k)
        best = min(tried, key=lambda k: (tried[k], k))
    gm = models[best]
    probs = gm.predict_proba(z)  # every row, not just the sample
    member = probs >= threshold
    member[np.arange(n), probs.argmax(axis=1)] = True  # every row belongs at least to its argmax
    clusters = [np.flatnonzero(member[:, j]).tolist() for j in range(member.shape[1])]
    return SoftClusters([c for c in clusters if c], best, sorted(tried.items()))
