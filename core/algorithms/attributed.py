"""ArchRAG's LLM-based hierarchical clustering (archrag.txt §3.1.2, Algorithm 1, Appendix A.1): the maths.

Each iteration works on an attributed graph (nodes with unit vectors z, undirected links E):
1. Aug: KNN augmentation (§3.1: links to similar nodes above "a threshold"; no values in the paper), the published
   code's rule (sam234990/ArchRAG src/utils.py `compute_distance`, `augmentation_plan`): the threshold wx is the
   `knn_percentile` (0.7) percentile of the existing links' cosines; each node gains at most m_du new links, m_du
   the mean degree of the non-isolated nodes (times `knn_degree_scale`, 1), chosen among its int(`knn_search_scale`
   (1.5) x m_du) nearest others (exact cosine kNN, faiss IndexFlatIP searched in blocks; the code searches an
   HNSW index) whose cosine exceeds wx and which it is not yet linked to, most similar first, nodes taken in order
   so a link added earlier counts as existing (`knn_links`); E' = E ∪ KNN links.
2. Weights: every link of E' gets the attribute similarity of its ends, max(cos(z_u, z_v), EPS). Algorithm 1
   line 6 prints 1 - cos, but the text says each pair of linked entities gets "a weight denoting their
   attribute similarity", and weighted Leiden maximises weighted modularity, which only groups similar nodes
   when the weight grows with similarity; EPS keeps every weight positive, as Leiden needs.
3. GCluster: weighted Leiden (leidenalg, RBConfiguration as in communities.py, the settings' resolution and
   seed, LEIDEN_ITERATIONS passes), size-capped as the published code clusters (src/attr_cluster.py
   `compute_leiden_max_size`, graspologic's `hierarchical_leiden`): a community of more than `max_cluster_size`
   (15) nodes is split by Leiden on its own subgraph, again until none is larger or Leiden keeps it whole; the
   final (leaf) clusters are the level's communities (`split_large`).
4. (the stage) a summary per community by the language backend, embedded: the next level's attributes.
5. The next graph: one node per community, two linked when any of their members are linked in E'.
Termination (the published code's `attr_cluster`): `max_levels` (4) levels are built, or a clustering gives fewer
than `min_clusters` (5) communities (that level is not kept; a graph of fewer nodes cannot give more), or it no
longer merges anything (every community a singleton; not kept either).

`Hierarchy` holds the state between iterations so the stage can summarise and embed (and report progress)
between `cluster()` and `advance(vectors)`; `run()` drives it with a plain function for the attributes.
The kNN of each clustered graph is kept (`knn_of`), since the C-HNSW layer over the same nodes reuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import igraph as ig
import leidenalg
import numpy as np

from core.algorithms.chnsw import KNN_BLOCK, knn_blocks, unit_rows
from core.algorithms.pairs import unique_pairs
from core.algorithms.similarity import row_dots
from core.config import ArchRAGSettings

EPS = 1e-3  # floor of a link weight (cosine can be <= 0 for relationship links)
# Leiden passes (leidenalg's default). communities.leiden_partition iterates until nothing changes (-1), which
# on a 100k-node graph took 17x longer (207 s against 12 s on the 2-core box, under load) for a partition
# with 0.6 % fewer communities; Algorithm 1 clusters a graph of that size on its first level.
LEIDEN_ITERATIONS = 2


def canonical_pairs(pairs: np.ndarray, n: int) -> np.ndarray:
    """Unique undirected pairs (a < b), sorted, self-loops dropped."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return unique_pairs(pairs[:, 0], pairs[:, 1], n)


def augmentation_plan(edges: np.ndarray, vecs: np.ndarray, cfg: ArchRAGSettings) -> tuple[float, int, int]:
    """(wx, m_du, candidates) of the published code's KNN augmentation for a graph (module doc): wx the
    `knn_percentile` percentile of the links' cosines (no threshold on a graph without links), m_du the mean degree
    of the non-isolated nodes (int(sqrt(n) / 2) without links, as the code) times `knn_degree_scale`, and the
    int(`knn_search_scale` x m_du) nearest others searched per node."""
    n = len(vecs)
    edges = canonical_pairs(edges, max(n, 1))
    if len(edges):
        cos = row_dots(vecs[edges[:, 0]], vecs[edges[:, 1]])
        wx = float(np.percentile(cos, 100 * cfg.knn_percentile))
        deg = np.bincount(edges.ravel(), minlength=n)
        m_du = int(deg.sum() / max(int((deg > 0).sum()), 1))
    else:
        wx, m_du = -np.inf, int(np.sqrt(n) / 2)
    m_du = int(m_du * cfg.knn_degree_scale)
    return wx, m_du, int(cfg.knn_search_scale * m_du)


def knn_links(idx: np.ndarray, sims: np.ndarray, edges: np.ndarray, wx: float, m_du: int, n: int) -> np.ndarray:
    """The KNN augmentation links (module doc): node by node, up to m_du of its listed neighbours (`idx`, most
    similar first) with cosine above wx and no link yet, a link added for an earlier node counting as one."""
    have = {int(a) * n + int(b) for a, b in canonical_pairs(edges, max(n, 1))}
    out: list[tuple[int, int]] = []
    if m_du <= 0:
        return np.zeros((0, 2), dtype=np.int64)
    for u in range(len(idx)):
        added = 0
        for v, s in zip(idx[u].tolist(), sims[u].tolist()):
            if v < 0 or s <= wx:
                break  # the list is sorted by similarity: nothing further passes
            key = min(u, v) * n + max(u, v)
            if v == u or key in have:
                continue
            have.add(key)
            out.append((u, v))
            added += 1
            if added >= m_du:
                break
    return canonical_pairs(np.asarray(out, dtype=np.int64).reshape(-1, 2), max(n, 1))


def edge_weights(vecs: np.ndarray, pairs: np.ndarray, step: int = 200_000) -> np.ndarray:
    """max(cos(z_u, z_v), EPS) for every pair (vectors are unit rows)."""
    out = np.empty(len(pairs), dtype=np.float64)
    for s in range(0, len(pairs), step):
        p = pairs[s : s + step]
        out[s : s + len(p)] = row_dots(vecs[p[:, 0]], vecs[p[:, 1]])
    return np.maximum(out, EPS)


def leiden(n: int, pairs: np.ndarray, weights: np.ndarray, resolution: float, seed: int) -> np.ndarray:
    """One weighted Leiden run over n nodes (raw labels)."""
    if len(pairs) == 0:
        return np.arange(n, dtype=np.int64)
    g = ig.Graph(n=n, edges=pairs.tolist(), directed=False)
    part = leidenalg.find_partition(g, leidenalg.RBConfigurationVertexPartition, weights=weights.tolist(),
                                    resolution_parameter=resolution, seed=seed, n_iterations=LEIDEN_ITERATIONS)
    return np.asarray(part.membership, dtype=np.int64)


def split_large(membership: np.ndarray, pairs: np.ndarray, weights: np.ndarray, max_size: int, resolution: float,
                seed: int) -> np.ndarray:
    """The final clusters of a size-capped hierarchical Leiden (module doc, 3): every community of more than
    `max_size` nodes is clustered again by Leiden over the links inside it, recursively, until none is larger or
    Leiden keeps one whole (it is then a final cluster as it is). Raw labels."""
    out = np.array(membership, dtype=np.int64)
    label = int(out.max()) + 1 if len(out) else 0
    todo = [(membership, pairs, weights)]  # (labels of some nodes, the links among them, their weights)
    while todo:
        labels, p, w = todo.pop()
        inside = (labels[p[:, 0]] == labels[p[:, 1]]) & (labels[p[:, 0]] >= 0) if len(p) else np.zeros(0, bool)
        p, w = p[inside], w[inside]
        by = labels[p[:, 0]] if len(p) else np.zeros(0, dtype=np.int64)
        order = np.argsort(by, kind="stable")
        p, w, by = p[order], w[order], by[order]
        sizes = np.bincount(labels[labels >= 0]) if (labels >= 0).any() else np.zeros(0, dtype=np.int64)
        for c in np.flatnonzero(sizes > max_size).tolist():
            members = np.flatnonzero(labels == c)
            lo, hi = np.searchsorted(by, c, "left"), np.searchsorted(by, c, "right")
            local = np.full(len(labels), -1, dtype=np.int64)
            local[members] = np.arange(len(members))
            sub = leiden(len(members), local[p[lo:hi]], w[lo:hi], resolution, seed)
            if sub.max() == 0:
                continue  # Leiden keeps it whole: a final cluster
            nxt = np.full(len(labels), -1, dtype=np.int64)
            nxt[members] = sub + label
            out[members] = sub + label
            label += int(sub.max()) + 1
            todo.append((nxt, p[lo:hi], w[lo:hi]))
    return out


def cluster(n: int, pairs: np.ndarray, weights: np.ndarray, resolution: float, seed: int,
            max_size: int = 0) -> np.ndarray:
    """Weighted Leiden, size-capped at `max_size` when it is above 0 (`split_large`); community labels renumbered
    0.. largest first (ties: smallest member first)."""
    if len(pairs) == 0:
        return np.arange(n, dtype=np.int64)
    raw = leiden(n, pairs, weights, resolution, seed)
    if max_size > 0:
        raw = split_large(raw, pairs, weights, max_size, resolution, seed)
    raw = np.unique(raw, return_inverse=True)[1].astype(np.int64)
    sizes = np.bincount(raw)
    firsts = np.full(len(sizes), n, dtype=np.int64)
    np.minimum.at(firsts, raw, np.arange(n))
    order = np.lexsort((firsts, -sizes))  # new label -> old label
    relabel = np.empty(len(sizes), dtype=np.int64)
    relabel[order] = np.arange(len(sizes))
    return relabel[raw]


def groups_of(membership: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(membership, kind="stable")
    bounds = np.flatnonzero(np.diff(membership[order])) + 1
    return np.split(order, bounds)


def community_links(membership: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Two communities are linked when any of their members are linked."""
    if len(pairs) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    return canonical_pairs(membership[pairs], int(membership.max()) + 1)


@dataclass
class Level:
    layer: int  # ArchRAG layer: 1 = the communities of entities
    membership: np.ndarray  # community index of each node of the clustered graph
    groups: list[np.ndarray]  # node indices of each community
    n_nodes: int
    n_links: int  # |E'|
    knn_added: int  # |E' \ E|


@dataclass(eq=False)
class Hierarchy:
    """Algorithm 1's loop state. Call augment() (iterate it), cluster(), then advance(vectors of its communities)."""

    edges: np.ndarray  # E of the current graph
    vecs: np.ndarray  # attributes of the current graph
    cfg: ArchRAGSettings
    keep_k: int = 0  # neighbours kept per node for reuse by the C-HNSW (the augmentation may search more)
    block: int = KNN_BLOCK
    layer: int = 1
    levels: list[Level] = field(default_factory=list)
    knn_of: list[np.ndarray] = field(default_factory=list)  # kNN indices of graph i (0 = entities)
    stop_reason: str = ""
    pairs: np.ndarray | None = None
    weights: np.ndarray | None = None
    knn_added: int = 0

    def __post_init__(self) -> None:
        self.vecs = unit_rows(self.vecs) if len(self.vecs) else np.zeros((0, 1), np.float32)
        self.edges = canonical_pairs(self.edges, max(len(self.vecs), 1))
        if len(self.vecs) < self.cfg.min_clusters:
            self.stop_reason = f"{len(self.vecs)} nodes (< min_clusters {self.cfg.min_clusters})"
        elif self.cfg.max_levels <= 0:
            self.stop_reason = "max_levels is 0"

    @property
    def done(self) -> bool:
        return bool(self.stop_reason)

    @property
    def n(self) -> int:
        return len(self.vecs)

    def augment(self) -> Iterator[tuple[int, int]]:
        """Aug and the weights (lines 3-6), the kNN searched in blocks; yields (rows done, rows)."""
        wx, m_du, search = augmentation_plan(self.edges, self.vecs, self.cfg)
        n, k = self.n, max(self.keep_k, search, 1)
        idx = np.full((n, k), -1, dtype=np.int64)
        sims = np.full((n, k), -np.inf, dtype=np.float32)
        for start, i, s in knn_blocks(self.vecs, k, self.block):
            idx[start : start + len(i)], sims[start : start + len(s)] = i, s
            yield start + len(i), n
        self.knn_of.append(idx[:, : max(self.keep_k, 1)])
        knn = knn_links(idx[:, :search], sims[:, :search], self.edges, wx, m_du, n)
        self.pairs = canonical_pairs(np.vstack([self.edges, knn]), n)
        self.knn_added = len(self.pairs) - len(self.edges)
        self.weights = edge_weights(self.vecs, self.pairs)

    def cluster(self) -> Level | None:
        """GCluster (line 8); None (and stop) when it merges nothing."""
        if self.pairs is None:
            for _ in self.augment():
                pass
        assert self.pairs is not None and self.weights is not None  # augment() has set both
        membership = cluster(self.n, self.pairs, self.weights, self.cfg.resolution, self.cfg.seed,
                             self.cfg.max_cluster_size)
        n_comm = int(membership.max()) + 1 if len(membership) else 0
        if n_comm >= self.n:
            self.stop_reason = f"clustering layer {self.layer} merged nothing (every community a singleton)"
            return None
        if n_comm < self.cfg.min_clusters:
            self.stop_reason = (f"clustering layer {self.layer} gave {n_comm} communities (< min_clusters "
                                f"{self.cfg.min_clusters}); not kept")
            return None
        level = Level(self.layer, membership, groups_of(membership), self.n, len(self.pairs), self.knn_added)
        self.levels.append(level)
        return level

    def advance(self, vecs: np.ndarray) -> None:
        """Line 12: the graph of communities, with their summary vectors as attributes; then the stop test."""
        level = self.levels[-1]
        assert len(vecs) == len(level.groups), "one vector per community"
        assert self.pairs is not None  # cluster() augmented this level
        self.edges = community_links(level.membership, self.pairs)
        self.vecs = unit_rows(vecs)
        self.pairs = self.weights = None
        self.knn_added = 0
        self.layer += 1
        if len(self.levels) >= self.cfg.max_levels:
            self.stop_reason = f"reached max_levels {self.cfg.max_levels}"
        elif self.n < self.cfg.min_clusters:
            self.stop_reason = (f"layer {level.layer} has {self.n} communities: too few to give min_clusters "
                                f"{self.cfg.min_clusters}")


def run(edges: np.ndarray, vecs: np.ndarray, cfg: ArchRAGSettings,
        attributes: Callable[[Level, np.ndarray], np.ndarray]) -> Hierarchy:
    """Algorithm 1 end to end; `attributes(level, node vectors)` gives the vectors of the level's communities."""
    h = Hierarchy(np.asarray(edges), np.asarray(vecs, dtype=np.float32), cfg)
    while not h.done:
        level = h.cluster()
        if level is None:
            break
        h.advance(attributes(level, h.vecs))
    return h
