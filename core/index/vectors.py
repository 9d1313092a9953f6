"""Vector collections in chromadb on disk: one collection per node kind and embedder.

We always pass our own embeddings (chromadb's default embedding function would download a model).
Collection names are `<kind>__<embedder>`, so switching embedder never mixes dimensions.

chromadb (1.5) keeps a cosine collection's vector as its unit vector and its norm, and gives back their product:
some components come back one float32 step off, and writing what was read moves them again. `upsert` therefore
writes every vector at the fixed point of that round trip (`settle`), so a vector read back (an undo snapshot, a
promoted variant, a copied workspace) writes back bit for bit. tests/unit/test_vectors.py checks it against the
real store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


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


class VectorIndex:
    def __init__(self, path: Path, embedder_name: str):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        Path(path).mkdir(parents=True, exist_ok=True)
        self.embedder_name = embedder_name
        self.client = chromadb.PersistentClient(
            path=str(path), settings=ChromaSettings(anonymized_telemetry=False)
        )
        self._collections: dict[str, object] = {}

    def collection(self, kind: str):
        name = f"{kind}__{self.embedder_name}"
        if name not in self._collections:
            self._collections[name] = self.client.get_or_create_collection(
                name, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
        return self._collections[name]

    def upsert(self, kind: str, ids: list[str], vectors: np.ndarray, metas: list[dict] | None = None) -> None:
        if not ids:
            return
        col = self.collection(kind)
        step = 2000
        for i in range(0, len(ids), step):
            col.upsert(
                ids=ids[i : i + step],
                embeddings=settle(vectors[i : i + step]),
                metadatas=(metas[i : i + step] if metas else None),
            )

    def existing(self, kind: str) -> dict[str, str]:
        """id -> the content hash stored with it (meta "h"), for every vector of the collection."""
        col = self.collection(kind)
        out: dict[str, str] = {}
        total = col.count()
        step = 5000
        for off in range(0, total, step):
            got = col.get(limit=step, offset=off, include=["metadatas"])
            for i, m in zip(got["ids"], got["metadatas"]):
                out[i] = (m or {}).get("h", "")
        return out

    def delete(self, kind: str, ids: list[str]) -> None:
        if ids:
            self.collection(kind).delete(ids=ids)

    def count(self, kind: str) -> int:
        return self.collection(kind).count()

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
        return [Hit(i, 1.0 - float(d), m or {}) for i, d, m in zip(res["ids"][0], res["distances"][0], metas)]

    def vectors(self, kind: str, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        out: dict[str, np.ndarray] = {}
        col = self.collection(kind)
        for i in range(0, len(ids), 5000):
            got = col.get(ids=ids[i : i + 5000], include=["embeddings"])
            for gid, emb in zip(got["ids"], got["embeddings"]):
                out[gid] = np.asarray(emb, dtype=np.float32)
        return out

    def all_vectors(self, kind: str) -> tuple[list[str], np.ndarray]:
        col = self.collection(kind)
        ids: list[str] = []
        vecs: list[np.ndarray] = []
        total = col.count()
        for off in range(0, total, 5000):
            got = col.get(limit=5000, offset=off, include=["embeddings"])
            ids.extend(got["ids"])
            vecs.extend(np.asarray(e, dtype=np.float32) for e in got["embeddings"])
        return ids, (np.vstack(vecs) if vecs else np.zeros((0, 0), dtype=np.float32))


def reopen_vector_stores() -> None:
    """Make the next chromadb client of this process read its directory afresh (clients opened before keep working
    on what they had read); see `finished_since_seen`."""
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
