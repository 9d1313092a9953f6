"""C-HNSW: ArchRAG's community-based HNSW index (archrag.txt §3.1.3, §3.2.1 Algorithm 2, Appendix A.2 Algorithm 3).

Layer 0 holds the entities, layer i the attributed communities of ArchRAG layer i; every node lives in exactly
one layer. Intra-layer links join each node to (at least) its M nearest neighbours in its layer (undirected);
an inter-layer link joins each node of layer i to its nearest node in layer i-1. Similarity is the inner product
of unit vectors (cosine); "nearest" means most similar.

Construction (Algorithm 3) is top-down: the nodes of a layer are inserted one by one (seeded order); each
insertion descends from the top layer with the query procedure to the nearest node c of the layer above, uses
c's inter-layer link as the entry point (a random inserted node when it has none), updates c's link when the new
node is nearer to c (lines 9-10), and links the new node to the M nearest of the SearchLayer result (run with
candidate list M, Algorithm 3 line 12, unless `ef_construction` asks a longer one). Because every node links
to earlier ones, each layer graph stays connected. After a layer is done, the final pass gives every node of the layer above its inter-layer link; we
set it to the exact nearest node below (faiss IndexFlatIP; the layer above is the small side), which is the
link the paper defines and at least as good as "some link".

Big layers (more than `exact_above` nodes, 2000 by default) do not use the greedy insertion: in pure Python it
costs about half a millisecond per node (1 s for 2000 nodes of 384 dimensions), and more per node as the layer
grows, so minutes for 100k entities. Their intra-layer links are the exact M nearest
neighbours from faiss (blocked IndexFlatIP search, or the kNN the attributed stage already computed for Algorithm
1's KNN augmentation of that very node set), which are the links the insertion approximates. An exact kNN graph
can fall apart into pieces, so each piece other than the largest is then joined to the largest one by a link
from its first node to that node's nearest neighbour in the largest piece (same connectivity the insertion
guarantees).

Query (Algorithm 2): from the top-layer entry node (chosen with the seed at build time, so answers are
repeatable), SearchLayer in each layer above the target, descent through the inter-layer link of the best node
found, then SearchLayer with candidate list `ef` >= k in the target layer. Algorithm 2 walks the upper layers
with a candidate list of 1; on layers of far-apart clusters that greedy walk stops in the wrong cluster (a node
queried with its own vector was not found, tests/unit/test_chnsw.py), so the upper layers are searched with the
same `ef` (they are the small layers, so this costs little). `search_layers` is ArchRAG's hierarchical search:
the top k of every layer, each layer entered through the inter-layer link of the best node of the layer above. The index is stored as the bytes of one uncompressed `.npz` (ids, float32
vectors, CSR adjacency, inter-layer links), so loading is a few array reads.
"""

from __future__ import annotations

import heapq
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.algorithms.pairs import unique_pairs
from core.algorithms.similarity import dot, dots

CHNSW_FILE = "chnsw.npz"  # where a workspace built before the index moved to the database kept it (vector directory)
CHNSW_ARTIFACT = "chnsw"  # the index's name among the workspace's artifacts (the `attributed` stage writes it)
EF_SEARCH = 64  # default SearchLayer candidate list of queries (>= k)
EXACT_ABOVE = 2000  # layers with more nodes get exact-kNN intra-layer links instead of greedy insertion
KNN_BLOCK = 4096  # queries per faiss block


def unit_rows(vecs: np.ndarray) -> np.ndarray:
    v = np.ascontiguousarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.ascontiguousarray(v / np.maximum(norms, 1e-12), dtype=np.float32)


def knn_blocks(vecs: np.ndarray, k: int, block: int = KNN_BLOCK) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Exact k nearest neighbours of every row among the others (inner product), in query blocks:
    yields (first row, indices (b, k), similarities (b, k)); missing neighbours (n - 1 < k) are -1 / -inf."""
    import faiss

    n = len(vecs)
    kk = min(k, n - 1)
    if n == 0 or k <= 0:
        return
    index = faiss.IndexFlatIP(vecs.shape[1])
    index.add(vecs)
    for start in range(0, n, block):
        q = vecs[start : start + block]
        out_i = np.full((len(q), k), -1, dtype=np.int64)
        out_s = np.full((len(q), k), -np.inf, dtype=np.float32)
        if kk > 0:
            sims, idx = index.search(q, kk + 1)
            rows = np.arange(start, start + len(q))[:, None]
            drop = idx == rows
            no_self = ~drop.any(axis=1)  # ties with a duplicate vector can push self out of the list
            drop[no_self, -1] = True
            first = np.argmax(drop, axis=1)
            keep = ~drop
            keep[np.arange(len(q)), first] = False  # exactly one dropped per row
            out_i[:, :kk] = idx[keep].reshape(len(q), kk)
            out_s[:, :kk] = sims[keep].reshape(len(q), kk)
        yield start, out_i, out_s


def exact_knn(vecs: np.ndarray, k: int, block: int = KNN_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    n = len(vecs)
    idx = np.full((n, k), -1, dtype=np.int64)
    sims = np.full((n, k), -np.inf, dtype=np.float32)
    for start, i, s in knn_blocks(vecs, k, block):
        idx[start : start + len(i)], sims[start : start + len(s)] = i, s
    return idx, sims


def nearest_in(base: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the most similar row of `base` for every query row (exact)."""
    import faiss

    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    out = np.empty(len(queries), dtype=np.int64)
    for start in range(0, len(queries), KNN_BLOCK):
        _, idx = index.search(queries[start : start + KNN_BLOCK], 1)
        out[start : start + len(idx)] = idx[:, 0]
    return out


def search_layer(vecs: np.ndarray, neighbours: Callable[[int], list[int]], q: np.ndarray, entries: list[int],
                 ef: int, visited_out: set[int] | None = None) -> list[tuple[float, int]]:
    """Algorithm 2's SearchLayer with a candidate list of size `ef`: (similarity, node) best first. The nodes it
    evaluated (Algorithm 2's V) are added to `visited_out` when given: the result is the best `ef` of them."""
    visited = set(entries)
    sims = dots(vecs[entries], q).tolist()
    cand = [(-s, e) for s, e in zip(sims, entries)]  # expansion queue Q: most similar first
    heapq.heapify(cand)
    res = [(s, e) for s, e in zip(sims, entries)]  # dynamic nearest set R: least similar on top
    heapq.heapify(res)
    while len(res) > ef:
        heapq.heappop(res)
    while cand:
        neg, c = heapq.heappop(cand)
        if -neg < res[0][0] and len(res) >= ef:
            break  # the nearest candidate is farther than the farthest kept result
        fresh = [x for x in neighbours(c) if x not in visited]
        if not fresh:
            continue
        visited.update(fresh)
        for x, sx in zip(fresh, dots(vecs[fresh], q).tolist()):
            if len(res) < ef or sx > res[0][0]:
                heapq.heappush(cand, (-sx, x))
                heapq.heappush(res, (sx, x))
                if len(res) > ef:
                    heapq.heappop(res)
    if visited_out is not None:
        visited_out.update(visited)
    return sorted(res, key=lambda t: (-t[0], t[1]))


@dataclass
class CHNSW:
    ids: np.ndarray  # (N,) str, layers stored one after another
    offsets: np.ndarray  # (L + 2,) layer i holds global nodes offsets[i] .. offsets[i+1]-1
    vecs: np.ndarray  # (N, d) float32 unit rows
    indptr: np.ndarray  # (N + 1,) CSR of intra-layer links (global indices)
    indices: np.ndarray
    inter: np.ndarray  # (N,) global index of the nearest node one layer down, -1 in layer 0
    entry: int  # global index of the top-layer entry node
    m: int
    meta: dict

    # -- shape ---------------------------------------------------------------------------------------------------
    @property
    def top(self) -> int:
        return len(self.offsets) - 2

    @property
    def layer_sizes(self) -> list[int]:
        return np.diff(self.offsets).astype(int).tolist()

    @property
    def n_intra_links(self) -> int:
        return int(len(self.indices) // 2)

    @property
    def n_inter_links(self) -> int:
        return int((self.inter >= 0).sum())

    def neighbours(self, g: int) -> list[int]:
        return self.indices[self.indptr[g] : self.indptr[g + 1]].tolist()

    def layer_of(self, g: int) -> int:
        return int(np.searchsorted(self.offsets, g, side="right") - 1)

    # -- build (Algorithm 3) ---------------------------------------------------------------------------------------
    @classmethod
    def build(cls, layers: list[tuple[list[str], np.ndarray]], m: int, seed: int = 42,
              knn: dict[int, np.ndarray] | None = None, exact_above: int = EXACT_ABOVE,
              ef_construction: int | None = None, meta: dict | None = None) -> "CHNSW":
        """`layers[i]` = (ids, vectors) of layer i (0 = entities). `knn[i]`, when given, holds the exact nearest
        neighbours (local indices, -1 padded, >= m columns) of layer i, reused for big layers."""
        layers = [(ids, v) for ids, v in layers]
        while len(layers) > 1 and len(layers[-1][0]) == 0:
            layers.pop()
        sizes = [len(ids) for ids, _ in layers]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        n = int(offsets[-1])
        dim = next((v.shape[1] for _, v in layers if len(v)), 0)
        vecs = unit_rows(np.vstack([v for _, v in layers if len(v)])) if n else np.zeros((0, dim), np.float32)
        all_ids = np.array([i for ids, _ in layers for i in ids], dtype=str)
        rng = np.random.default_rng(seed)
        adj: list[list[int]] = [[] for _ in range(n)]
        inter = np.full(n, -1, dtype=np.int64)
        top = len(layers) - 1
        entry = int(offsets[top] + rng.integers(sizes[top])) if n else -1
        ef_c = m if ef_construction is None else max(m, ef_construction)  # Algorithm 3 line 12: SearchLayer(.., M)

        def link(a: int, b: int) -> None:
            if a != b and b not in adj[a]:
                adj[a].append(b)
                adj[b].append(a)

        for layer in range(top, -1, -1):
            lo, hi = int(offsets[layer]), int(offsets[layer + 1])
            if hi - lo > exact_above:
                given = (knn or {}).get(layer)
                idx = given[:, :m] if given is not None and given.shape[1] >= m else exact_knn(vecs[lo:hi], m)[0]
                _link_exact(adj, idx, vecs[lo:hi], lo)
            elif hi > lo:
                inserted: list[int] = []
                for v in (lo + rng.permutation(hi - lo)).tolist():
                    q = vecs[v]
                    s = -1
                    if layer < top:
                        c = _descend(vecs, adj, inter, offsets, entry, q, layer + 1)
                        s = int(inter[c])
                        if s < 0 or dot(vecs[c], q) > dot(vecs[c], vecs[s]):
                            inter[c] = v  # Algorithm 3 lines 9-10 (refined by the final pass below)
                    if inserted:
                        if s < 0:  # line 11: no link to follow, start from a random inserted node
                            s = inserted[int(rng.integers(len(inserted)))]
                        for _, x in search_layer(vecs, adj.__getitem__, q, [s], ef_c)[:m]:
                            link(v, x)
                    inserted.append(v)
            if layer < top:  # final pass: every node one layer up links to its nearest node in this layer
                up_lo, up_hi = int(offsets[layer + 1]), int(offsets[layer + 2])
                inter[up_lo:up_hi] = lo + nearest_in(vecs[lo:hi], vecs[up_lo:up_hi])
        indptr, indices = _csr(adj)
        return cls(all_ids, offsets, vecs, indptr, indices, inter, entry, m,
                   dict(meta or {}) | {"seed": seed, "exact_above": exact_above, "ef_construction": ef_c})

    # -- query (Algorithm 2) ---------------------------------------------------------------------------------------
    def _search(self, layer: int, q: np.ndarray, entry: int, ef: int,
                visited_out: set[int] | None = None) -> list[tuple[float, int]]:
        return search_layer(self.vecs, self.neighbours, q, [entry], ef, visited_out)

    def query(self, q: np.ndarray, k: int, layer: int = 0, ef: int | None = None) -> list[tuple[str, float]]:
        """The k nearest nodes of `layer` to q: greedy descent from the top, then SearchLayer with `ef` >= k."""
        if len(self.ids) == 0 or k <= 0 or not 0 <= layer <= self.top:
            return []
        q = unit_rows(np.asarray(q, dtype=np.float32).reshape(1, -1))[0]
        ef = max(k, ef or EF_SEARCH)
        s = self.entry
        for i in range(self.top, layer, -1):
            c = self._search(i, q, s, ef)[0][1]
            s = int(self.inter[c])
        found = self._search(layer, q, s, ef)[:k]
        return [(str(self.ids[g]), float(sim)) for sim, g in found]

    def search_layers(self, q: np.ndarray, k: int, ef: int | None = None,
                      visited: list[set[int]] | None = None, upper: int | None = None) -> list[list[tuple[str, float]]]:
        """ArchRAG's hierarchical search: the top k of every layer (index = layer), top layer first searched.
        `visited`, when given, receives per layer the global indices SearchLayer evaluated there.
        `upper` given: each layer l is Algorithm 2's target in turn, "c ← SearchLayer(G_i, q, s, 1, i)" on every
        layer above it from the top entry (candidate list `upper`, the paper's 1), then "K ← SearchLayer(G_l, q,
        s, k, l)" (candidate list max(k, ef)). None: each layer is entered through the inter-layer link of the
        best node of the layer above's own search with list max(k, ef)."""
        out: list[list[tuple[str, float]]] = [[] for _ in range(self.top + 1)]
        if visited is not None:
            visited[:] = [set() for _ in range(self.top + 1)]
        if len(self.ids) == 0 or k <= 0:
            return out
        q = unit_rows(np.asarray(q, dtype=np.float32).reshape(1, -1))[0]
        if upper is not None:
            for target in range(self.top, -1, -1):
                s = self.entry
                for i in range(self.top, target, -1):  # Algorithm 2 lines 2-4
                    c = self._search(i, q, s, upper)[0][1]  # (`visited` keeps the target searches' V only)
                    s = int(self.inter[c])
                found = self._search(target, q, s, max(k, ef or EF_SEARCH),  # line 6
                                     None if visited is None else visited[target])
                out[target] = [(str(self.ids[g]), float(sim)) for sim, g in found[:k]]
            return out
        s = self.entry
        for i in range(self.top, -1, -1):
            found = self._search(i, q, s, max(k, ef or EF_SEARCH), None if visited is None else visited[i])
            out[i] = [(str(self.ids[g]), float(sim)) for sim, g in found[:k]]
            if i > 0:
                s = int(self.inter[found[0][1]])
        return out

    # -- persistence -----------------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The index as one uncompressed `.npz` (what the `attributed` stage stores as the workspace's artifact)."""
        buf = io.BytesIO()
        np.savez(buf, ids=self.ids, offsets=self.offsets, vecs=self.vecs, indptr=self.indptr,
                 indices=self.indices, inter=self.inter, entry=np.array([self.entry, self.m], dtype=np.int64),
                 meta=np.array(json.dumps(self.meta)))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "CHNSW":
        return cls.load(io.BytesIO(data))

    @classmethod
    def load(cls, path: Path | io.BytesIO) -> "CHNSW":
        with np.load(path if isinstance(path, io.BytesIO) else Path(path), allow_pickle=False) as z:
            entry, m = (int(x) for x in z["entry"])
            return cls(z["ids"], z["offsets"], z["vecs"], z["indptr"], z["indices"], z["inter"], entry, m,
                       json.loads(str(z["meta"])))


def _descend(vecs: np.ndarray, adj: list[list[int]], inter: np.ndarray, offsets: np.ndarray, entry: int,
             q: np.ndarray, layer: int) -> int:
    """Greedy descent (candidate list 1) from the top entry to the nearest node found in `layer`."""
    s = entry
    top = len(offsets) - 2
    for i in range(top, layer - 1, -1):
        c = search_layer(vecs, adj.__getitem__, q, [s], 1)[0][1]
        if i == layer:
            return c
        s = int(inter[c])
    return s


def _link_exact(adj: list[list[int]], idx: np.ndarray, vecs: np.ndarray, lo: int) -> None:
    """Undirected links from each node to its exact nearest neighbours, then join stray pieces to the largest."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(idx)
    rows = np.repeat(np.arange(n), idx.shape[1])
    cols = idx.reshape(-1)
    ok = cols >= 0
    a, b = rows[ok], cols[ok]
    pairs = unique_pairs(a, b, n)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    n_comp, label = connected_components(graph, directed=False)
    extra: list[tuple[int, int]] = []
    if n_comp > 1:
        main = int(np.bincount(label).argmax())
        main_nodes = np.flatnonzero(label == main)
        firsts = [int(np.flatnonzero(label == c)[0]) for c in range(n_comp) if c != main]
        near = main_nodes[nearest_in(vecs[main_nodes], vecs[firsts])]
        extra = list(zip(firsts, near.tolist()))
    for x, y in pairs.tolist() + extra:
        adj[lo + x].append(lo + y)
        adj[lo + y].append(lo + x)


def _csr(adj: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(a) for a in adj), dtype=np.int64, count=len(adj))
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = np.fromiter((x for a in adj for x in sorted(a)), dtype=np.int64, count=int(indptr[-1]))
    return indptr, indices
