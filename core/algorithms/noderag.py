"""NodeRAG graph maths (noderag.txt §2.3-2.4, Appendix C.2-C.3): pure functions over numpy, igraph and faiss.

* Important entities (§2.3 "Node importance based augmentation", Appendix C.2): the k-core of the decomposed
  heterograph (entities, relationships, statements) with NodeRAG's default k = round(ln|V| * sqrt(mean degree)),
  united with the entities whose betweenness (estimated from a few seeded pivot sources, Brandes 2008) exceeds
  mean * max(1, round(log10|V|)) (the published code's attribute_generation.py); both sets keep only entities
  mentioned more than once. Neither the paper nor the published code caps their number (the `cap` is optional).
* Semantic matching within community (Appendix C.3): K-means with ceil(sqrt(n)) clusters over the embeddings of
  statements, attributes and high-level elements; a high-level element is linked to every node of its cluster
  that lies in its community. As the published code (summary_generation.py) does, K-means runs only when the
  clusters would hold more than `Hcluster_size` (39) nodes on average; otherwise a high-level element is linked to
  every node of its community (`matching_labels`).
* HNSW semantic edges (§2.4): the base layer of a faiss HNSW graph over every embedded node; a pair already
  linked in the graph has that edge's weight raised instead of a second edge.
* The heterograph's edges (§2.1-2.4) as Strata stores them, and the Leiden community detection of §2.3
  ("Community detection based aggregation": Leiden on the graph after attribute augmentation).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import igraph as ig
import leidenalg
import numpy as np

from core.algorithms.pairs import code_pairs, pair_codes, sorted_unique
from core.algorithms.similarity import row_dots

# ---------------------------------------------------------------------------------------------- the heterograph's edges
# Every edge NodeRAG defines, as stored: (edge kind, source node kind, target node kind); each weighs 1 (§2.1 "the
# default weight of e is set to 1"), raised by 1 where an HNSW semantic edge falls on it (§2.4).
DECOMPOSITION_EDGES = (  # §2.2 E_{S,N,R}: semantic unit - entity, relationship - its source and target entities
    ("mentions", "statement", "entity"), ("subject", "relationship", "entity"), ("object", "relationship", "entity"))
ATTRIBUTE_EDGES = (("has_attribute", "entity", "attribute"),)  # §2.3 e(N, A)
HIGH_LEVEL_EDGES = (  # §2.3 semantic matching within community (H - S/A/H) and e(H, O)
    ("matches", "high_level", "statement"), ("matches", "high_level", "attribute"),
    ("matches", "high_level", "high_level"), ("has_overview", "high_level", "overview"))
TEXT_EDGES = (("derived_from", "statement", "chunk"),)  # §2.4 text insertion E_{T,S}
SEMANTIC_KINDS = ("chunk", "statement", "attribute", "high_level")  # §2.4 embedded V_{T,S,A,H}
SEMANTIC_EDGES = tuple(("semantic", a, b) for a in SEMANTIC_KINDS for b in SEMANTIC_KINDS)  # §2.4 HNSW base layer
HETEROGRAPH_EDGES = DECOMPOSITION_EDGES + ATTRIBUTE_EDGES + HIGH_LEVEL_EDGES + TEXT_EDGES + SEMANTIC_EDGES
# The graph Leiden partitions (§2.3: after attribute augmentation, before high-level elements and text insertion)
COMMUNITY_EDGES = DECOMPOSITION_EDGES + ATTRIBUTE_EDGES
COMMUNITY_KINDS = ("entity", "relationship", "statement", "attribute")  # N (layer 0), R, S, A


# ---------------------------------------------------------------------------------------------- important entities
def kcore_k(n_vertices: int, n_edges: int) -> int:
    """NodeRAG's default k = round(ln|V| * sqrt(average degree)), at least 1."""
    if n_vertices <= 1:
        return 1
    avg_degree = 2.0 * n_edges / n_vertices
    return max(1, round(math.log(n_vertices) * math.sqrt(avg_degree)))


@dataclass
class Importance:
    selected: list[int]  # vertex indices of the important entities, most important first (capped)
    k: int  # k of the k-core actually used (0: the graph has no edges, no core selection)
    in_core: set[int]  # entity vertices of the k-core with weight > 1
    by_betweenness: set[int]  # entity vertices above the betweenness threshold with weight > 1
    coreness: list[int]
    betweenness: np.ndarray


def sampled_betweenness(g: ig.Graph, samples: int, seed: int) -> np.ndarray:
    """Betweenness of every vertex counted over shortest paths from `samples` seeded pivot sources (all
    sources when the graph is not larger than that), rescaled by n / samples to estimate the full value."""
    n = g.vcount()
    if n == 0:
        return np.zeros(0)
    if samples <= 0 or samples >= n:
        return np.asarray(g.betweenness(directed=False), dtype=float)
    sources = np.sort(np.random.default_rng(seed).choice(n, size=samples, replace=False))
    bt = np.asarray(g.betweenness(directed=False, sources=sources.tolist()), dtype=float)
    return bt * (n / samples)


def important_entities(g: ig.Graph, is_entity: np.ndarray, weight: np.ndarray, samples: int, seed: int,
                       cap: int | None, k: int | None = None) -> Importance:
    """Important entities of the undirected graph `g` (simple; vertices flagged by `is_entity`, `weight` = mentions).

    k-core: k defaults to `kcore_k`; when the k-core is empty the maximum core is used instead. Betweenness:
    above mean * max(1, round(log10|V|)). Both keep only entities with weight > 1. The union is ordered by (core
    number, betweenness, weight), highest first, and capped at `cap` (None: not capped)."""
    n = g.vcount()
    is_entity = np.asarray(is_entity, dtype=bool)
    weight = np.asarray(weight, dtype=float)
    if n == 0:
        return Importance([], 0, set(), set(), [], np.zeros(0))
    coreness = g.coreness()
    core = np.asarray(coreness)
    k = kcore_k(n, g.ecount()) if k is None else max(1, k)
    if core.max() < k:
        k = int(core.max())  # the k-core is empty: fall back to the maximum core
    eligible = is_entity & (weight > 1)
    in_core = set(np.flatnonzero(eligible & (core >= k)).tolist()) if k > 0 else set()
    bt = sampled_betweenness(g, samples, seed)
    scale = max(1, round(math.log10(n)))
    threshold = bt.mean() * scale
    by_bt = set(np.flatnonzero(eligible & (bt > threshold)).tolist())
    union = in_core | by_bt
    ranked = sorted(union, key=lambda v: (-core[v], -bt[v], -weight[v], v))
    return Importance(ranked if cap is None else ranked[: max(0, cap)], k, in_core, by_bt, list(coreness), bt)


# ---------------------------------------------------------------------------------------------- communities
def leiden_communities(g: ig.Graph, resolution: float, iterations: int, seed: int) -> tuple[list[list[int]], float]:
    """Flat Leiden communities of the undirected, unweighted graph `g` (§2.3; the published code runs leidenalg's
    `find_partition` with the modularity quality, i.e. RB configuration at resolution 1, and its default 2
    iterations): (communities as sorted vertex lists, largest first, ties by first vertex; modularity). Seeded."""
    if g.vcount() == 0:
        return [], 0.0
    part = leidenalg.find_partition(g, leidenalg.RBConfigurationVertexPartition, resolution_parameter=resolution,
                                    n_iterations=iterations, seed=seed)
    groups: dict[int, list[int]] = {}
    for v, c in enumerate(part.membership):
        groups.setdefault(c, []).append(v)
    comms = sorted(groups.values(), key=lambda m: (-len(m), m[0]))
    q = float(g.modularity(part.membership)) if g.ecount() else 0.0
    return comms, q


# ---------------------------------------------------------------------------------------------- faiss helpers
@contextmanager
def faiss_threads(n: int):
    """Run faiss with `n` OpenMP threads (one thread keeps HNSW insertion and K-means deterministic)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


# ---------------------------------------------------------------------------------------------- semantic matching
def kmeans_clusters(n: int) -> int:
    """NodeRAG's cluster count for n nodes: ceil(sqrt(n)) (the published code's summary_generation.py)."""
    return max(1, math.ceil(math.sqrt(n)))


def matching_labels(vecs: np.ndarray, seed: int, hcluster_size: int) -> np.ndarray:
    """The clusters of semantic matching: K-means (`kmeans_labels`) when n / ceil(sqrt(n)) > `hcluster_size`,
    else one cluster for all rows, so a high-level element matches its whole community (the published code)."""
    n = len(vecs)
    if n == 0 or n / kmeans_clusters(n) <= hcluster_size:
        return np.zeros(n, dtype=np.int64)
    return kmeans_labels(vecs, seed)


def kmeans_labels(vecs: np.ndarray, seed: int, k: int | None = None) -> np.ndarray:
    """K-means cluster of every row with k = ceil(sqrt(n)) clusters (NodeRAG), seeded, faiss's default 25
    iterations (the published code sets none); faiss on one thread."""
    import faiss

    x = np.ascontiguousarray(vecs, dtype=np.float32)
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = min(kmeans_clusters(n), n) if k is None else max(1, min(k, n))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    with faiss_threads(1):
        km = faiss.Kmeans(x.shape[1], k, niter=25, seed=int(seed), min_points_per_centroid=1,
                          max_points_per_centroid=256, verbose=False)
        km.train(x)
        _, lab = km.index.search(x, 1)
    return lab.ravel().astype(np.int64)


def semantic_matches(labels: np.ndarray, community: np.ndarray, is_high: np.ndarray) -> list[tuple[int, int]]:
    """(h, j) pairs: high-level row h and every other row j of the same K-means cluster and the same community
    (community < 0 means none: never matched). A pair of two high-level rows appears once, as (lower, higher)."""
    labels = np.asarray(labels)
    community = np.asarray(community)
    is_high = np.asarray(is_high, dtype=bool)
    groups: dict[tuple[int, int], list[int]] = {}
    for i in np.flatnonzero(community >= 0).tolist():
        groups.setdefault((int(labels[i]), int(community[i])), []).append(i)
    pairs: list[tuple[int, int]] = []
    for members in groups.values():
        highs = [m for m in members if is_high[m]]
        for h in highs:
            for j in members:
                if j != h and (not is_high[j] or h < j):
                    pairs.append((h, j))
    return sorted(pairs)


# ---------------------------------------------------------------------------------------------- HNSW edges
def hnsw_base_pairs(vecs: np.ndarray, m: int, seed: int, ef: int | None = None) -> np.ndarray:
    """Undirected pairs (i < j, unique, sorted) of the base layer of an HNSW graph (faiss IndexHNSWFlat, inner
    product, M = m, efConstruction = ef, None: faiss's 40) over the rows of `vecs`, built on one thread with a
    seeded level generator."""
    import faiss

    x = np.ascontiguousarray(vecs, dtype=np.float32)
    n = len(x)
    if n < 2:
        return np.zeros((0, 2), dtype=np.int64)
    index = faiss.IndexHNSWFlat(x.shape[1], max(2, int(m)), faiss.METRIC_INNER_PRODUCT)
    # faiss's stub (faiss/__init__.pyi) leaves out HNSW's rng, neighbors and offsets and the RandomGenerator class,
    # all of which the SWIG module has: the HNSW struct is used untyped here
    h: Any = index.hnsw
    if ef is not None:
        h.efConstruction = max(1, int(ef))
    h.rng = faiss.RandomGenerator(int(seed))  # type: ignore[attr-defined]  # missing from the stub (see above)
    with faiss_threads(1):
        index.add(x)
    neighbors = faiss.vector_to_array(h.neighbors)
    offsets = faiss.vector_to_array(h.offsets).astype(np.int64)
    cum = faiss.vector_to_array(h.cum_nneighbor_per_level)
    del index  # its vectors and graph: the neighbour lists are copied out
    return base_layer_pairs(neighbors, offsets[:n], int(cum[1]), n)


_PAIR_ROWS = 1 << 14  # nodes whose neighbour slots are read at a time (bounds the temporary arrays)


def base_layer_pairs(neighbors: np.ndarray, offsets: np.ndarray, base: int, n: int) -> np.ndarray:
    """The undirected pairs (i < j, unique, sorted) of an HNSW base layer: node i's neighbours are
    neighbors[offsets[i] : offsets[i] + base], -1 for an empty slot. Read `_PAIR_ROWS` nodes at a time, each pair kept
    as one int64 code (core/algorithms/pairs.py), instead of every slot as a pair of int64 at once: 40,000 nodes of
    100 slots, 113 MiB of temporary arrays instead of 263 (tracemalloc); the 1M-token build's HNSW worker peaked at
    906 MiB instead of 1,277."""
    codes = []
    for lo in range(0, n, _PAIR_ROWS):
        hi = min(n, lo + _PAIR_ROWS)
        nb = neighbors[offsets[lo:hi, None] + np.arange(base, dtype=np.int64)[None, :]].astype(np.int64)
        src = np.broadcast_to(np.arange(lo, hi, dtype=np.int64)[:, None], nb.shape)
        keep = (nb >= 0) & (nb != src)
        codes.append(pair_codes(src[keep], nb[keep], n))
    return code_pairs(sorted_unique(np.concatenate(codes)) if codes else np.zeros(0, dtype=np.int64), n)


def split_linked(pairs: np.ndarray, linked: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask over `pairs` (i < j): True where the undirected pair is already in `linked` (any order)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    linked = np.asarray(linked, dtype=np.int64).reshape(-1, 2)
    if len(pairs) == 0 or len(linked) == 0:
        return np.zeros(len(pairs), dtype=bool)
    lo, hi = np.minimum(linked[:, 0], linked[:, 1]), np.maximum(linked[:, 0], linked[:, 1])
    return np.isin(pairs[:, 0] * n + pairs[:, 1], lo * n + hi)


def pair_scores(vecs: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Inner product (cosine for unit rows) of every pair."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if len(pairs) == 0:
        return np.zeros(0, dtype=np.float32)
    out = np.empty(len(pairs), dtype=np.float32)
    step = 100_000
    for off in range(0, len(pairs), step):
        p = pairs[off : off + step]
        out[off : off + step] = row_dots(vecs[p[:, 0]], vecs[p[:, 1]])
    return out
