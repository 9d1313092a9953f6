"""The one result every retrieval strategy returns, the strategy protocol, and the registry of strategies.

`sections` holds the strategy's own notion of detail (`local`), connection (`bridge`) and overview (`global`);
`sources` ranks the documents behind the context (what recall@k is computed on); `path` is what the strategy
visited on the graph, for drawing; `trace` has timings in ms and counts.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol, TypeVar

import numpy as np
from sqlmodel import select

from core.algorithms.similarity import dot, dots
from core.config import Settings
from core.graph.hetero import HeteroGraph
from core.graph.view import GraphView
from core.index.embedding import node_text_for_embedding
from core.index.vectors import Hit, VectorIndex
from core.ingest import count_tokens
from core.models import Document, Node, Workspace
from core.protocols import Embedder, RetrievalLLM
from core.retrieval.cache import BuildCache, CacheKey
from core.retrieval.lexicon import BM25, NameIndex
from core.store import Store
from core.text import norm_key

SECTIONS = ("local", "bridge", "global")
T = TypeVar("T")
R = TypeVar("R")

VIEW: CacheKey[GraphView] = CacheKey("view")
HETERO: CacheKey[HeteroGraph] = CacheKey("hetero")
VECTORS: CacheKey[tuple[list[str], np.ndarray, list[dict]]] = CacheKey("vectors")  # per kind: Resources.nearest
CHUNK_BM25: CacheKey[BM25] = CacheKey("chunk_bm25")
NAMES: CacheKey[NameIndex] = CacheKey("names")


@dataclass
class ContextItem:
    id: str
    kind: str
    title: str
    text: str
    score: float
    level: int | None = None
    documents: list[str] = field(default_factory=list)  # ids of the documents backing this item


@dataclass
class Source:
    document_id: str
    external_id: str | None
    title: str
    score: float
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class PathStep:
    id: str
    kind: str
    role: str  # entry, key, bridge, community, chunk ...
    label: str = ""


@dataclass
class PathEdge:
    src: str
    dst: str
    kind: str
    role: str


@dataclass
class Retrieval:
    strategy: str
    question: str
    sections: dict[str, list[ContextItem]] = field(default_factory=lambda: {s: [] for s in SECTIONS})
    sources: list[Source] = field(default_factory=list)
    path_nodes: list[PathStep] = field(default_factory=list)
    path_edges: list[PathEdge] = field(default_factory=list)
    trace: dict = field(default_factory=lambda: {"timings_ms": {}, "counts": {}})

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "question": self.question,
            "sections": {k: [asdict(i) for i in v] for k, v in self.sections.items()},
            "sources": [asdict(s) for s in self.sources],
            "path": {"nodes": [asdict(n) for n in self.path_nodes], "edges": [asdict(e) for e in self.path_edges]},
            "trace": self.trace,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Retrieval":
        return cls(
            strategy=d["strategy"],
            question=d["question"],
            sections={k: [ContextItem(**i) for i in v] for k, v in d["sections"].items()},
            sources=[Source(**s) for s in d["sources"]],
            path_nodes=[PathStep(**n) for n in d["path"]["nodes"]],
            path_edges=[PathEdge(**e) for e in d["path"]["edges"]],
            trace=d["trace"],
        )


class Timer:
    """Records named step timings (ms) into a trace dict."""

    def __init__(self, trace: dict):
        self.trace = trace
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.trace["timings_ms"][name] = round((now - self.t) * 1000, 2)
        self.t = now


class QueryVectors:
    """The vectors of the latest questions (at most `size`), each embedded once: three strategies and the best
    evidence ask for the same question's vector four times. A copy is returned, so no caller changes the kept one."""

    def __init__(self, size: int = 64):
        self.size, self._kept, self._lock = size, OrderedDict[str, np.ndarray](), threading.Lock()

    def get(self, question: str, embed: Callable[[], np.ndarray]) -> np.ndarray:
        with self._lock:
            v = self._kept.get(question)
            if v is not None:
                self._kept.move_to_end(question)
                return v.copy()
        v = embed()
        with self._lock:
            self._kept[question] = v
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return v.copy()

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


@dataclass
class Resources:
    """What a strategy reads: the store, the workspace, settings, the embedder, the vector index, and the structures
    derived from them (graph view, heterograph, BM25, names, each strategy's own), built once per Resources in one
    thread-safe cache (core/retrieval/cache.py): the app shares a Resources across sessions per build version."""

    store: Store
    ws: Workspace
    settings: Settings
    embedder: Embedder
    index: VectorIndex
    cache: BuildCache = field(default_factory=BuildCache, init=False, repr=False, compare=False)
    queries: QueryVectors = field(default_factory=lambda: QueryVectors(), init=False, repr=False, compare=False)

    @property
    def ws_id(self) -> int:
        """The workspace's id (the workspace is a stored row, so it has one)."""
        assert self.ws.id is not None
        return self.ws.id

    def cached(self, key: CacheKey[T], build: Callable[[], T], variant: Hashable = None,
               valid: Callable[[T], bool] | None = None) -> T:
        """The structure `key` (per `variant`) of this Resources, built by `build()` once (BuildCache.get)."""
        return self.cache.get(key, build, variant, valid)

    def with_settings(self, settings: Settings) -> Resources:
        """The same store, workspace, embedder and index with other settings, sharing the built structures (each
        cached structure reads no settings, or carries those it reads in its variant: core/retrieval/cache.py)."""
        out = replace(self, settings=settings)
        out.cache, out.queries = self.cache, self.queries
        return out

    def nearest(self, kind: str, q: np.ndarray, k: int, where: dict | None = None) -> list[Hit]:
        """The k stored vectors of `kind` most similar to the query vector `q` (cosine), found exactly: every vector
        of the kind scored (`similarity.dots`, read once per build into this cache), ties by id; `where` keeps those
        whose metadata has those values. The vector store's own HNSW search is approximate, and a process that loads
        the collection again could miss a different near neighbour: the factbook build gave two top-10 statement
        lists for one question in 2 of 14 processes (docs/BENCHMARKS.md). Exact search gives the same hits in every
        process and on every store."""
        ids, vecs, metas = self.cached(VECTORS, lambda: _sorted_entries(*self.index.all_entries(kind)), variant=kind)
        if k <= 0 or not ids:
            return []
        q = np.asarray(q, dtype=np.float32)
        sims = dots(vecs, q / max(float(np.linalg.norm(q)), 1e-12))
        if where:
            sims[[not all(m.get(a) == b for a, b in where.items()) for m in metas]] = -np.inf
        k = min(k, int(np.isfinite(sims).sum()))
        if k <= 0:
            return []
        cut = np.partition(sims, len(sims) - k)[len(sims) - k]  # the k-th best score: every tie with it competes
        cand = np.flatnonzero(sims >= cut)
        top = cand[np.lexsort((cand, -sims[cand]))][:k]  # rows are in id order, so ties go by id
        return [Hit(ids[i], float(sims[i]), metas[i]) for i in top.tolist()]

    @property
    def view(self) -> GraphView:
        return self.cached(VIEW, lambda: GraphView.load(self.store, self.ws_id, self.index))

    @property
    def hetero(self) -> HeteroGraph:
        """Every node and edge as one sparse matrix (core/graph/hetero.py), for PPR and beam search."""
        return self.cached(HETERO, lambda: HeteroGraph.load(self.store, self.ws_id))

    @property
    def chunk_bm25(self) -> BM25:
        """BM25 over chunks, each with its document's title, as the chunks are embedded."""
        return self.cached(CHUNK_BM25, self._load_chunk_bm25)

    def _load_chunk_bm25(self) -> BM25:
        with self.store.session() as s:
            titles: dict[str | None, str] = dict(s.exec(select(Document.id, Document.title).where(Document.workspace_id == self.ws.id)).all())
            rows = s.exec(select(Node.id, Node.title, Node.text, Node.document_id).where(
                Node.workspace_id == self.ws.id, Node.kind == "chunk").order_by(Node.id)).all()
        return BM25.build([r[0] for r in rows],
                          [node_text_for_embedding("chunk", t, x, titles.get(d, "")) for _, t, x, d in rows])

    @property
    def names(self) -> NameIndex:
        """Exact-match names: extracted entities (layer 0) by their normalized key, overview nodes by title."""
        return self.cached(NAMES, self._load_names)

    def _load_names(self) -> NameIndex:
        out: dict[str, list[str]] = {}
        with self.store.session() as s:
            for nid, key, title in s.exec(select(Node.id, Node.key, Node.title).where(
                    Node.workspace_id == self.ws.id, Node.kind == "entity", Node.layer == 0)):
                k = key or norm_key(title)
                if k:
                    out.setdefault(k, []).append(nid)
            for nid, title in s.exec(select(Node.id, Node.title).where(Node.workspace_id == self.ws.id,
                                                                       Node.kind == "overview")):
                k = norm_key(title)
                if k:
                    out.setdefault(k, []).append(nid)
        return NameIndex(out)

    def embed_query(self, question: str) -> np.ndarray:
        """The question's vector, embedded once for the strategies asked side by side and the best evidence."""
        return self.queries.get(question, lambda: np.asarray(self.embedder.embed([question])[0], dtype=np.float32))


def llm_calls(fn: Callable[[T], R], items: list[T], workers: int) -> list[R]:
    """`fn` over `items` in a thread pool of `workers` (the backend's own semaphore bounds what reaches the server),
    results in the items' order. For the per-report / per-part model calls of map and filter steps."""
    if len(items) <= 1 or workers <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))


class Strategy(Protocol):
    name: str
    label: str
    description: str  # what local / bridge / global mean for this strategy

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval: ...


_REGISTRY: dict[str, type[Strategy]] = {}
S = TypeVar("S", bound=type[Strategy])


def register(factory: S) -> S:
    _REGISTRY[factory.name] = factory
    return factory


def strategy_names() -> list[str]:
    _load_all()
    return list(_REGISTRY)


def get_strategy(name: str) -> Strategy:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(f"unknown strategy {name!r} (known: {', '.join(_REGISTRY)})")
    return _REGISTRY[name]()


STRATEGY_MODULES = ("naive", "hirag", "graphrag.local_search", "graphrag.global_search", "noderag", "archrag.strategy",
                    "hlg.strategy")


def _load_all() -> None:
    # one module per design; importing it registers its strategies, in this order
    import importlib

    for m in STRATEGY_MODULES:
        importlib.import_module(f"core.retrieval.{m}")


def item_tokens(item: ContextItem) -> int:
    """Tokens an item takes in the context: its title and text."""
    return count_tokens(f"{item.title}: {item.text}")


def fit_budget(items: list[ContextItem], budget: int) -> tuple[list[ContextItem], int]:
    """(the leading items whose tokens fit in `budget`, tokens they use); the first that does not fit ends it."""
    out: list[ContextItem] = []
    used = 0
    for it in items:
        n = item_tokens(it)
        if used + n > budget:
            break
        used += n
        out.append(it)
    return out, used


def per_kind(items: list[ContextItem], cap: int) -> tuple[list[tuple[int, ContextItem]], dict[str, int]]:
    """(position, item) of the first `cap` items of each kind, in section order, and how many of each kind are
    left out: a section mixing kinds (HiRAG's entities then text units, NodeRAG's chunks, statements and
    attributes) shows and answers from every kind instead of only the first `cap` items."""
    seen: dict[str, int] = {}
    kept = []
    for pos, it in enumerate(items):
        seen[it.kind] = seen.get(it.kind, 0) + 1
        if seen[it.kind] <= cap:
            kept.append((pos, it))
    return kept, {k: n - cap for k, n in seen.items() if n > cap}


def sources_from_chunks(view, chunk_scores: dict[str, float], limit: int) -> list[Source]:
    """Documents ranked by the summed score of their chunks that back the context (best chunk first)."""
    by_doc: dict[str, float] = {}
    chunks_of: dict[str, list[tuple[float, str]]] = {}
    for cid, sc in chunk_scores.items():
        doc = view.chunk_doc.get(cid)
        if doc is None:
            continue
        by_doc[doc] = by_doc.get(doc, 0.0) + sc
        chunks_of.setdefault(doc, []).append((sc, cid))
    ranked = sorted(by_doc.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    out = []
    for doc, sc in ranked:
        ext, title = view.documents.get(doc, (None, doc))
        out.append(Source(document_id=doc, external_id=ext, title=title, score=round(sc, 4),
                          chunk_ids=[c for _, c in sorted(chunks_of[doc], reverse=True)]))
    return out


def _sorted_entries(ids: list[str], vecs: np.ndarray, metas: list[dict]) -> tuple[list[str], np.ndarray, list[dict]]:
    """A kind's stored entries in id order (the order `Resources.nearest` breaks ties in)."""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    return [ids[i] for i in order], (vecs[order] if len(order) else vecs), [metas[i] for i in order]


def chunk_similarity(res: Resources, q: np.ndarray, chunks: list[str]) -> dict[str, float]:
    """Similarity of the query vector `q` to the stored vector of each of `chunks` that has one."""
    vecs = res.index.vectors("chunk", chunks) if chunks else {}
    qv = q.astype(np.float32)
    return {c: dot(v, qv) for c, v in vecs.items()}


def by_similarity(res: Resources, q: np.ndarray, chunks: list[str]) -> list[str]:
    """`chunks` (each once) ranked by their stored vector's similarity to the query vector `q`, best first; a
    chunk without a vector goes last, ties and those by id."""
    ids = list(dict.fromkeys(chunks))
    sims = chunk_similarity(res, q, ids)
    return sorted(ids, key=lambda c: (c not in sims, -sims.get(c, 0.0), c))


def sources_in_order(view, chunks: list[str], limit: int) -> list[Source]:
    """Documents in the order of their first chunk in `chunks` (a strategy's ranked text units); a document's score
    is 1 / (1 + that chunk's rank), its chunk_ids its chunks in their order."""
    first: dict[str, int] = {}
    chunks_of: dict[str, list[str]] = {}
    for rank, cid in enumerate(chunks):
        doc = view.chunk_doc.get(cid)
        if doc is None:
            continue
        first.setdefault(doc, rank)
        chunks_of.setdefault(doc, []).append(cid)
    out = []
    for doc, rank in list(first.items())[:limit]:
        ext, title = view.documents.get(doc, (None, doc))
        out.append(Source(document_id=doc, external_id=ext, title=title, score=round(1.0 / (1 + rank), 4),
                          chunk_ids=chunks_of[doc]))
    return out
