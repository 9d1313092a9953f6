"""One Gaussian-mixture clustering of HiRAG's HiIndex (hirag.txt Eq. 8) as HiRAG's code runs it (hhy-huang/HiRAG
hirag/_cluster_utils.py `perform_clustering`, `GMM_cluster`, `get_optimal_clusters`, `fit_gaussian_mixture`):

1. Reduce the layer's embeddings with UMAP to `dims` dimensions (HiRAG's `reduction_dimension` 2; at most n - 2),
   cosine, 15 neighbours: `core.algorithms.layer_reduce.umap_reduce`, the same on every CPU by construction.
2. Choose the number of components by BIC: k = 1, 2, ... up to min(n, `max_components`) - 1 (HiRAG's and RAPTOR's
   `np.arange(1, min(len(embeddings), max_clusters))`, max_clusters 50), each a Gaussian mixture with sklearn's full
   covariance and its own reg_covar (1e-6), k-means++ init (`init_params='k-means++'`), one initialisation (RAPTOR's
   code; HiRAG's has `n_init=5`, five times the cost of every fit: measured on this machine, the scan over 300 rows
   took 114 s with 5 and 1.1 s with 1, over 3,000 rows 32 s and 13 s, the same k); the scan ends when BIC changes by less than 0.1 % from one k to the next (`rel_tol=1e-3`), and the k of the
   lowest BIC met is taken.
3. Soft membership (threshold 0.1, RAPTOR's and HiRAG's): a row joins every component whose posterior reaches the
   threshold and always its most likely one, so clusters may overlap (Eq. 8: |S_x ∩ S_y| >= 0) and cover the layer
   (∪ S_x = L_{i-1}; HiRAG's code, which keeps only posteriors above the threshold, could leave a row out).

Strata's own, not in the paper or HiRAG's code: the fits use at most `_FIT_SAMPLE` rows (a seeded sample; every row
is still assigned), which bounds the cost of a 100k-entity layer; the seed is the settings' `seed` (HiRAG's code
uses 224 and `random_state=0`). Earlier bounds are gone: PCA (HiRAG and RAPTOR reduce with UMAP), diagonal covariance
with a relative covariance floor (sklearn's full covariance as both codes leave it), k <= n // (dims + 1), the
stepped k grid and its patience (HiRAG's 0.1 % rule instead).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from core.algorithms.layer_reduce import umap_reduce

if TYPE_CHECKING:
    from sklearn.mixture import GaussianMixture

_FIT_SAMPLE = 20000  # rows used to fit the GMMs (all rows are still assigned); Strata's own cost bound
N_INIT = 1  # RAPTOR's code (sklearn's default); HiRAG's code has 5: 5x the cost of every fit (module doc)
REL_TOL = 1e-3  # HiRAG's code: get_optimal_clusters(rel_tol=1e-3), the BIC scan's early stop


@dataclass
class SoftClusters:
    clusters: list[list[int]]  # member row indices per component (soft: a row may be in several), no empty one
    k: int  # components chosen by BIC
    bic: list[tuple[int, float]]  # (k, BIC) tried, ascending k


def fit_gmm(z: np.ndarray, k: int, seed: int) -> GaussianMixture:
    """One Gaussian mixture of `k` components on `z`, as the BIC scan fits each k (module doc)."""
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(n_components=k, covariance_type="full", random_state=seed, n_init=N_INIT,
                         init_params="k-means++")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on tiny or degenerate layers
        gm.fit(z)
    return gm


def best_k(zs: np.ndarray, max_components: int, seed: int) -> tuple[int, dict[int, float], dict]:
    """HiRAG's BIC scan over k = 1 .. min(n, max_components) - 1 with its 0.1 % early stop; (best k, BIC by k, model
    by k)."""
    k_max = max(1, min(len(zs), max_components) - 1)
    tried: dict[int, float] = {}
    models: dict[int, GaussianMixture] = {}
    previous = float("inf")
    for k in range(1, k_max + 1):
        models[k] = fit_gmm(zs, k, seed)
        tried[k] = bic = float(models[k].bic(zs))
        if previous != float("inf") and abs(previous - bic) < REL_TOL * abs(previous):
            break
        previous = bic
    best = min(tried, key=lambda k: (tried[k], k))
    return best, tried, models


def gmm_soft_clusters(x: np.ndarray, *, dims: int, max_components: int, threshold: float, seed: int
                      ) -> SoftClusters:
    """Reduce `x` (n x d, n >= 2, finite), GMM with k chosen by BIC, soft membership at `threshold` (module doc)."""
    n = x.shape[0]
    if n < 3 or np.ptp(x, axis=0).max() == 0:  # too few rows to reduce, or all identical: one cluster
        return SoftClusters([list(range(n))] if n else [], 1 if n else 0, [(1, 0.0)] if n else [])
    z = umap_reduce(x, dims, seed)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, _FIT_SAMPLE, replace=False)) if n > _FIT_SAMPLE else np.arange(n)
    best, tried, models = best_k(z[sample], max_components, seed)
    probs = models[best].predict_proba(z)  # every row, not just the sample
    member = probs >= threshold
    member[np.arange(n), probs.argmax(axis=1)] = True  # every row belongs at least to its argmax
    clusters = [np.flatnonzero(member[:, j]).tolist() for j in range(member.shape[1])]
    return SoftClusters([c for c in clusters if c], best, sorted(tried.items()))
