"""The reduction before HiRAG's Gaussian mixtures: UMAP, as HiRAG's and RAPTOR's code reduce (hhy-huang/HiRAG
hirag/_cluster_utils.py `global_cluster_embeddings`: `umap.UMAP(n_neighbors=15, n_components=dim, metric="cosine")`,
`dim = min(reduction_dimension, len(embeddings) - 2)`), made to give the same coordinates on every x86-64 CPU by
construction, since the layers it clusters are part of the graph and the graph depends on the documents only.

What could depend on the CPU, and what is done about it:

* umap-learn and pynndescent run numba code compiled with `fastmath` for the HOST CPU by default, so an AVX-512
  machine vectorises (and reorders float sums) differently from an AVX2 one. Here numba is pinned before it is first
  imported: NUMBA_CPU_NAME=generic (plain x86-64: one instruction set for every machine, so one machine code and one
  order of operations), no extra CPU features, one thread (NUMBA_NUM_THREADS=1; UMAP with a `random_state` also runs
  its optimisation serially). `_pin_numba` refuses to go on when numba was imported before with other settings.
* The nearest neighbours, which UMAP would find with pynndescent (or with sklearn's BLAS distances under 4,096
  rows), are computed here exactly (`exact_knn`): each vector is rounded to integers of at most `_QMAX(d)` in
  magnitude, so every partial sum of a float32 dot product is an integer below 2^24, exactly representable: the
  product is the same whatever order or kernel BLAS uses. Ties are broken by row index, so the neighbour lists are
  unique. The cosine distance is then computed elementwise (IEEE, correctly rounded, the same everywhere).
* UMAP's `a`, `b` (fitted by scipy's curve_fit from min_dist 0.1 and spread 1.0, its defaults) are passed as the
  constants that fit gives, and the layout starts from UMAP's seeded random init instead of its spectral init (an
  eigensolver on BLAS, whose kernels depend on the CPU). The remaining steps are numba code (generic target) or
  elementwise numpy on a seeded generator.

What stays: numba calls the C library's exp/log/pow, which glibc picks by the CPU's FMA support (every AVX2 or AVX-512
CPU has FMA, so one variant). tests/unit/test_layer_reduce_isa.py runs the reduction in processes under other
NUMBA_CPU_NAME / NUMBA_CPU_FEATURES, ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE and NPY_DISABLE_CPU_FEATURES settings and
asserts the same bits. Nothing here reaches a network (no model or data is downloaded).

UMAP's numba functions are compiled on their first call in every process (about 5 s of CPU: each build worker, each
test process); `_cache_compiled` turns on numba's on-disk cache for those that do not ask for it, so a process loads
the machine code an earlier one compiled (numba keys each cached entry by the target, here the pinned generic CPU,
and by the source file's time stamp: the cache never holds code for another target or another umap-learn).
"""

from __future__ import annotations

import math
import os
import sys
import warnings

import numpy as np

NEIGHBOURS = 15  # UMAP's n_neighbors in HiRAG's code (`global_cluster_embeddings(..., n_neighbors=15)`)
_A, _B = 1.5769434602697652, 0.8950608778515733  # umap.umap_.find_ab_params(spread=1.0, min_dist=0.1)
_PINNED = {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "", "NUMBA_NUM_THREADS": "1"}
_BLOCK = 1 << 22  # similarity entries computed at once (16 MiB of float32)
_CACHED = False  # `_cache_compiled` ran in this process


def _pin_numba() -> None:
    """Numba compiled for one generic x86-64 target, one thread: set before numba is imported (it reads them once)."""
    if "numba" not in sys.modules:
        os.environ.update(_PINNED)
        return
    from numba.core import config

    name, features, threads = (getattr(config, a) for a in ("CPU_NAME", "CPU_FEATURES", "NUMBA_NUM_THREADS"))
    if str(name) != "generic" or (features or "") != "" or threads != 1:
        raise RuntimeError("numba was imported before core.algorithms.layer_reduce with other settings "
                           f"(NUMBA_CPU_NAME={name!r}); HiRAG's layers would depend on this CPU. "
                           "Import core.algorithms.layer_reduce first, or set " +
                           " ".join(f"{k}={v!r}" for k, v in _PINNED.items()))


def _qmax(d: int) -> int:
    """The largest integer magnitude whose d-term dot products stay below 2^24 (exact in float32)."""
    return max(1, math.isqrt(((1 << 24) - 1) // max(1, d)))


def exact_knn(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest rows of each row by cosine distance (itself first, k <= n), computed so that the result does not
    depend on the BLAS kernel: rows rounded to integers (`_qmax`), exact float32 products, the cosine elementwise,
    ties to the lower row index.

    Each block of rows first keeps, by a float32 cosine, the columns within `_SLACK` of its k-th largest
    (`_candidates`): every one of the true k nearest is among them, since the float32 cosine is within a few units of
    2^-24 of the exact one. Only those are then ranked by the exact cosine, in float64 as before: the same neighbours and distances as
    ranking every column exactly (tests/unit/test_layers.py compares the two), a third of the work.
    Returns (indices n x k int64, distances n x k float32)."""
    n, d = x.shape
    x = np.asarray(x, dtype=np.float64)
    peak = np.abs(x).max(axis=1, keepdims=True)
    q = np.rint(x / np.where(peak == 0, 1.0, peak) * _qmax(d)).astype(np.float32)
    norms = np.sqrt((q.astype(np.float64) ** 2).sum(axis=1))  # integer sums: exact; sqrt is correctly rounded
    norms[norms == 0] = 1.0
    inv = (1.0 / norms).astype(np.float32)
    idx = np.empty((n, k), dtype=np.int64)
    dist = np.empty((n, k), dtype=np.float32)
    step = max(1, _BLOCK // n)
    for s in range(0, n, step):
        rows = np.arange(s, min(n, s + step))
        sims = q[rows] @ q.T  # integers below 2^24: exact in float32 whatever the kernel
        r, c = _candidates(sims, inv, rows, k)
        cos = sims[r, c].astype(np.float64) / (norms[rows[r]] * norms[c])  # elementwise: correctly rounded
        cos[c == rows[r]] = np.inf  # itself first
        order = np.lexsort((c, -cos, r))  # per row: by cosine, ties by index
        first = np.searchsorted(r[order], np.arange(len(rows)))  # each row's first candidate in that order
        take = order[first[:, None] + np.arange(k)[None, :]]
        idx[rows] = c[take]
        dd = np.maximum(0.0, 1.0 - cos[take])
        dd[:, 0] = 0.0
        dist[rows] = dd.astype(np.float32)
    return idx, dist


_SLACK = 1e-5  # float32 cosine: |error| < 4 * 2^-24 (two roundings of a product of values <= 1); kept with margin


def _candidates(sims: np.ndarray, inv: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(row in block, column) pairs, row-major, holding each row's k nearest by exact cosine (and itself): the columns
    whose float32 cosine is at least the row's k-th largest float32 cosine less `_SLACK`. At most k - 1 columns have an
    exact cosine above the k-th largest exact one, so the k-th largest float32 one is below it plus the error, and every
    column at or above it exactly is kept."""
    n = sims.shape[1]
    approx = sims * inv[rows, None]
    approx *= inv[None, :]
    approx[np.arange(len(rows)), rows] = np.inf
    keep = np.ones(approx.shape, dtype=bool) if k >= n else \
        approx >= np.partition(approx, n - k, axis=1)[:, n - k, None] - _SLACK
    r, c = np.nonzero(keep)
    return r, c


def _cache_compiled() -> None:
    """numba's on-disk cache for umap-learn's and pynndescent's compiled functions (module doc); once per process."""
    global _CACHED
    if _CACHED:
        return
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    for name, mod in list(sys.modules.items()):
        if mod is not None and name.split(".")[0] in ("umap", "pynndescent"):
            for v in list(vars(mod).values()):
                if isinstance(v, CPUDispatcher) and isinstance(getattr(v, "_cache", None), NullCache):
                    v.enable_caching()
    _CACHED = True


def umap_reduce(x: np.ndarray, dims: int, seed: int, neighbours: int = NEIGHBOURS) -> np.ndarray:
    """UMAP of `x` (n x d, n >= 3) to min(dims, n - 2) dimensions (HiRAG's code), cosine metric, `neighbours`
    nearest (at most n - 1), seeded; float64 coordinates, the same on every x86-64 CPU (module doc)."""
    n = x.shape[0]
    dims = max(1, min(dims, n - 2))
    k = max(2, min(neighbours, n - 1))
    _pin_numba()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n_jobs overridden by random_state; precomputed kNN without an index
        import umap  # type: ignore[import-untyped]

        _cache_compiled()
        idx, dist = exact_knn(x, k)
        reducer = umap.UMAP(n_neighbors=k, n_components=dims, metric="cosine", random_state=seed, init="random",
                            n_jobs=1, a=_A, b=_B, precomputed_knn=(idx, dist, None),
                            force_approximation_algorithm=True, transform_seed=seed, verbose=False)
        z = reducer.fit_transform(np.asarray(x, dtype=np.float32))
    return np.asarray(z, dtype=np.float64)
