"""The derived structures a query reads, built once per `Resources` (i.e. per build of a workspace) under a lock.

The app keeps one `Resources` per (workspace, build version) in `st.cache_resource` (ui/resources.py), so every
browser session and every thread of the Streamlit server shares it; a new build version opens a new `Resources`,
and with it an empty cache. `BuildCache.get(key, build)` returns the value stored under `key`, calling `build()`
first when there is none: at most one thread builds a given key (the others wait on that key's lock and get the
same object), while builds of different keys run side by side. A `build` that raises stores nothing, so the next
caller tries again.

A key is a typed `CacheKey[T]` constant declared by the module that owns the structure, compared by identity (two
modules cannot collide on a name); `variant` tells apart builds of one key that depend on settings (the NodeRAG
walk per walk settings, the C-HNSW per index file). The keys in use:

  view        core/retrieval/base.py      GraphView: entities, communities, chunks and documents (core/graph/view.py)
  hetero      core/retrieval/base.py      HeteroGraph: every node and edge as one sparse matrix (core/graph/hetero.py)
  chunk_bm25  core/retrieval/base.py      BM25 over the chunks as they are embedded (naive / bm25)
  names       core/retrieval/base.py      NameIndex: entity names and overview titles (exact match)
  vectors     core/retrieval/base.py      every stored vector of a kind, in id order, variant = the kind (`nearest`)
  noderag.edges  core/retrieval/noderag.py   EdgeList: every stored edge with its HNSW boost
  noderag.walk   core/retrieval/noderag.py   Walk: the walked adjacency, variant = the walk settings
  archrag.chnsw  core/retrieval/archrag/search.py  ChnswCache: the C-HNSW index, variant = its file; rebuilt when
                                                  the file's mtime changes (`valid`)
  hlg.lexicon    core/retrieval/hlg/graph.py  Lexicon: HLG's statement / entity / chunk / topic matrices
  hlg.statement_tfidf, hlg.chunk_tfidf  core/retrieval/hlg/graph.py  TF-IDF rows for the diversity filter, in the
                                        Lexicon's own BuildCache (built on first use, not at load)

Everything cached must depend only on the store, the workspace, the embedder and the vector index, or carry the
settings it reads in its `variant`: `Resources.with_settings` shares the cache between settings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class CacheKey(Generic[T]):
    """The name of one cached structure of type T (compared by identity; `name` is for reading)."""

    name: str

    def __repr__(self) -> str:
        return f"CacheKey({self.name!r})"


class BuildCache:
    """Values built once per (key, variant), each under its own lock; thread-safe."""

    def __init__(self) -> None:
        self._values: dict[tuple[CacheKey[Any], Hashable], Any] = {}
        self._locks: dict[tuple[CacheKey[Any], Hashable], threading.Lock] = {}
        self._guard = threading.Lock()  # held only to find or make a key's lock

    def get(self, key: CacheKey[T], build: Callable[[], T], variant: Hashable = None,
            valid: Callable[[T], bool] | None = None) -> T:
        """The value of (key, variant), built by `build()` if there is none yet, or if `valid` says the stored one
        is stale (it then replaces it)."""
        slot = (key, variant)
        value = self._values.get(slot, _MISSING)
        if value is not _MISSING and (valid is None or valid(value)):
            return value
        with self._guard:
            lock = self._locks.setdefault(slot, threading.Lock())
        with lock:
            value = self._values.get(slot, _MISSING)
            if value is _MISSING or (valid is not None and not valid(value)):
                value = build()
                self._values[slot] = value
            return value

    def peek(self, key: CacheKey[T], variant: Hashable = None) -> T | None:
        """The value of (key, variant) if it has been built, else None (never builds)."""
        return self._values.get((key, variant))

    def __len__(self) -> int:
        return len(self._values)


_MISSING: Any = object()
