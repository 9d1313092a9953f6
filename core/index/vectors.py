"""Vector collections in chromadb: one collection per node kind and embedder, embedded on disk (one directory per
workspace) or on a Chroma server (STRATA_CHROMA_URL; core/index/chroma.py says where and how names are made).

We always pass our own embeddings (chromadb's default embedding function would download a model).
Collection names end in `<kind>__<embedder>`, so switching embedder never mixes dimensions. Every request stays
within the store's maximum batch size (`get_max_batch_size`, the server's own when there is one).

chromadb (1.5) keeps a cosine collection's vector as its unit vector and its norm, and gives back their product:
some components come back one float32 step off, and writing what was read moves them again. `upsert` therefore
writes every vector at the fixed point of that round trip (`settle`), so a vector read back (an undo snapshot, a
promoted variant, a copied workspace) writes back bit for bit. tests/unit/test_vectors.py checks it against the
real store, embedded and on a server (the HTTP client carries float32 values exactly).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.index import chroma
from core.index.writer import Writer, mismatch, without_writer
from core.secrets import private_tree


@dataclass
class Hit:
    id: str
    score: float  # cosine similarity
    meta: dict


def _round_trip(v: np.ndarray) -> np.ndarray:
    """What chromadb hands back for rows `v` of a cosine collection: v * (1 / |v|) * |v| in float32, the norm summed
    in order."""
    n = np.sqrt(np.cumsum(v * v, axis=1, dtype=np.float32)[:, -1]).astype(np.float32)
    inv = (np.float32(1) / np.where(n > 0, n, np.float32(1))).astype(np.float32)
    return ((v * inv[:, None]).astype(np.float32) * n[:, None]).astype(np.float32)


def settle(vectors: np.ndarray, rounds: int = 32) -> np.ndarray:
    """`vectors` as unit vectors (every embedder's output already is one; cosine search ignores the norm), moved by
    a few float32 steps at most to where the store's round trip leaves them unchanged."""
    v = np.array(vectors, dtype=np.float32, copy=True, ndmin=2)
    norm = np.linalg.norm(v.astype(np.float64), axis=1)
    off = (norm > 0) & (np.abs(norm - 1.0) > 1e-5)  # unit rows stay as they are, so settling is idempotent
    v[off] = (v[off] / norm[off, None]).astype(np.float32)
    todo = np.arange(len(v))
    for _ in range(rounds):
        w = _round_trip(v[todo])
        moved = np.any(w != v[todo], axis=1)
        if not moved.any():
            break
        v[todo[moved]] = w[moved]
        todo = todo[moved]
    return v


def _guarded(method):
    """On a server: a connection lost mid-way is reported as `VectorStoreUnavailable`, on one line."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self.server is None:
            return method(self, *args, **kwargs)
        try:
            return method(self, *args, **kwargs)
        except chroma.connection_errors() as exc:
            raise chroma.unavailable(self.server, exc) from None

    return call


class VectorIndex:
    """The vectors of one workspace and embedder: in the chromadb directory `path`, or, with `url`, on that Chroma
    server in collections named after `workspace`."""

    def __init__(self, path: Path | None, embedder_name: str, url: str | None = None, workspace: str | None = None,
                 auth: chroma.ServerAuth | None = None):
        self.embedder_name = embedder_name
        self.server = chroma.parse_url(url) if url else None
        if url:
            if not workspace:
                raise ValueError("a VectorIndex on a server needs its workspace's name")
            auth = auth or chroma.ServerAuth.of()  # the server's token and CA, else the environment's
            self.client = chroma.connect_server(url, auth.token, auth.ca)
        else:
            if path is None:
                raise ValueError("an embedded VectorIndex needs its directory")
            self.client = chroma.connect_embedded(Path(path))
        self.dir: Path | None = None if url else Path(path or "")  # embedded: each write closes its new files
        self.workspace = workspace
        self.writer: Writer | None = None  # who writes now (set by core/pipeline/factory.py): recorded, held to
        # a run's lease (core/pipeline/lease.py `Lease.holding`): every write happens inside it, so a worker that lost
        # its run writes no vector
        self.write_guard: Callable[[], AbstractContextManager] | None = None
        self._collections: dict[str, object] = {}
        self._checked: set[str] = set()  # kinds whose recorded writer was checked against `writer`
        self.batch = self._max_batch()

    @_guarded
    def _max_batch(self) -> int:
        n = int(self.client.get_max_batch_size())
        return n if n > 0 else 2000

    @_guarded
    def collection(self, kind: str):
        if self.server is None:
            name, meta = f"{kind}__{self.embedder_name}", {"hnsw:space": "cosine"}
        else:
            assert self.workspace is not None  # checked in __init__
            name = chroma.server_collection_name(self.workspace, kind, self.embedder_name)
            meta = {"hnsw:space": "cosine", chroma.WORKSPACE_META: self.workspace}
        if name not in self._collections:
            if self.writer is not None:
                meta |= self.writer.meta()
            self._collections[name] = self.client.get_or_create_collection(
                name, metadata=meta, embedding_function=None
            )
        return self._collections[name]

    @_guarded
    def recorded(self) -> Writer | None:
        """The writer the workspace's collections of this embedder record (the first one found), or None."""
        for c in self.client.list_collections():
            meta = c.metadata or {}
            mine = self.server is None or meta.get(chroma.WORKSPACE_META) == self.workspace
            if mine and c.name.endswith(f"__{self.embedder_name}"):
                rec = Writer.from_meta(meta)
                if rec is not None:
                    return rec
        return None

    def _held_to_writer(self, kind: str, col) -> None:
        """Refuse to write other vectors than the collection's recorded writer's; record `writer` on a collection
        from before writers were recorded."""
        if self.writer is None or kind in self._checked:
            return
        rec = Writer.from_meta(col.metadata)
        if rec is None:
            col.modify(metadata=without_writer(col.metadata) | self.writer.meta())
        elif rec != self.writer:
            raise mismatch(self.workspace or "this", rec, self.writer)
        self._checked.add(kind)

    @_guarded
    def upsert(self, kind: str, ids: list[str], vectors: np.ndarray, metas: list[dict] | None = None) -> None:
        if not ids:
            return
        col = self.collection(kind)
        self._held_to_writer(kind, col)
        step = min(2000, self.batch)
        for i in range(0, len(ids), step):
            with self._guard():
                col.upsert(
                    ids=ids[i : i + step],
                    embeddings=settle(vectors[i : i + step]),
                    metadatas=(metas[i : i + step] if metas else None),
                )
        self._private()

    def _private(self) -> None:
        """Close what chromadb has just written (a new collection's folder and files) to other users."""
        if self.dir is not None:
            private_tree(self.dir)

    def _guard(self) -> AbstractContextManager:
        return self.write_guard() if self.write_guard is not None else nullcontext()

    @_guarded
    def existing(self, kind: str) -> dict[str, str]:
        """id -> the content hash stored with it (meta "h"), for every vector of the collection."""
        col = self.collection(kind)
        out: dict[str, str] = {}
        total = col.count()
        step = min(5000, self.batch)
        for off in range(0, total, step):
            got = col.get(limit=step, offset=off, include=["metadatas"])
            for i, m in zip(got["ids"], got["metadatas"]):
                out[i] = (m or {}).get("h", "")
        return out

    @_guarded
    def delete(self, kind: str, ids: list[str]) -> None:
        step = min(5000, self.batch)
        for i in range(0, len(ids), step):
            with self._guard():
                self.collection(kind).delete(ids=ids[i : i + step])
        self._private()

    @_guarded
    def count(self, kind: str) -> int:
        return self.collection(kind).count()

    @_guarded
    def query(self, kind: str, vector: np.ndarray, k: int, where: dict | None = None) -> list[Hit]:
        col = self.collection(kind)
        n = col.count()
        if n == 0 or k <= 0:
            return []
        res = col.query(
            query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            n_results=min(k, n),
            where=where,
            include=["distances", "metadatas"],
        )
        metas = res["metadatas"][0] if res.get("metadatas") else [{}] * len(res["ids"][0])
        # the distance as the float32 the store computed (a server's JSON gives its shortest decimal), so both
        # stores report the same score to the bit
        return [Hit(i, 1.0 - float(np.float32(d)), m or {})
                for i, d, m in zip(res["ids"][0], res["distances"][0], metas)]

    @_guarded
    def vectors(self, kind: str, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        out: dict[str, np.ndarray] = {}
        col = self.collection(kind)
        step = min(5000, self.batch)
        for i in range(0, len(ids), step):
            got = col.get(ids=ids[i : i + step], include=["embeddings"])
            for gid, emb in zip(got["ids"], got["embeddings"]):
                out[gid] = np.asarray(emb, dtype=np.float32)
        return out

    @_guarded
    def all_vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        ids, vecs, _ = self.all_entries(kind, metas=False)
        return ids, vecs

    @_guarded
    def all_entries(self, kind: str, metas: bool = True) -> tuple[list[str], np.ndarray, list[dict]]:
        """Every (id, vector, metadata) of `kind`, read a batch at a time (metadata left empty without `metas`)."""
        col = self.collection(kind)
        ids: list[str] = []
        vecs: list[np.ndarray] = []
        out_metas: list[dict] = []
        total = col.count()
        step = min(5000, self.batch)
        for off in range(0, total, step):
            got = col.get(limit=step, offset=off, include=["embeddings", "metadatas"] if metas else ["embeddings"])
            ids.extend(got["ids"])
            vecs.extend(np.asarray(e, dtype=np.float32) for e in got["embeddings"])
            out_metas.extend((m or {}) for m in (got.get("metadatas") or [None] * len(got["ids"])))
        return ids, (np.vstack(vecs) if vecs else np.zeros((0, 0), dtype=np.float32)), out_metas


def reopen_vector_stores() -> None:
    """Make the next chromadb client of this process read its directory afresh (clients opened before keep working
    on what they had read); see `finished_since_seen`. A server's clients always see its latest writes; this only
    makes the next one reconnect."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
