"""What the embedders served by a model server share (Ollama's /api/embed, core/backends/ollama_embedder.py; an
OpenAI-compatible /v1/embeddings, core/backends/openai_embedder.py): batching, blank texts as "(empty)", the reply's
shape and values checked (a bad reply is asked again), the dimension learnt from the first reply and held to, and
L2-normalised float32 rows; and `embedder_name`, the embedder's name as a valid part of a chromadb collection name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Generic, TypeVar

import numpy as np

from core.backends.hosts import Host, HostPool
from core.backends.replies import MalformedReply
from core.config import BackendSettings
from core.protocols import BackendError

EMBEDDER_NAME_MAX = 40  # leaves room for the "<kind>__" prefix within chromadb's 63-character collection names

C = TypeVar("C")


def embedder_name(model: str, prefix: str = "ollama") -> str:
    """`prefix` + '-' + the model name reduced to [a-zA-Z0-9._-], at most EMBEDDER_NAME_MAX characters, starting
    and ending with a letter or digit (a valid part of a chromadb collection name)."""
    base = model.strip()
    if base.endswith(":latest"):
        base = base[: -len(":latest")]
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", base)
    slug = re.sub(r"\.{2,}", ".", slug)
    slug = re.sub(r"([_-])[_-]+", r"\1", slug).strip("._-")
    name = f"{prefix}-{slug or 'model'}"
    if len(name) > EMBEDDER_NAME_MAX:
        digest = hashlib.sha256(model.encode("utf-8")).hexdigest()[:8]
        name = f"{name[: EMBEDDER_NAME_MAX - 9].rstrip('._-')}-{digest}"
    return name


class ServedEmbedder(Generic[C]):
    """Embedder over a model server: L2-normalised float32 rows. A subclass sets `prefix` and `_pool` and says how
    one batch is sent (`_vectors`).

    `dim` is 0 until the first reply tells it (a plain attribute, so a runtime Protocol check sends nothing);
    `discover_dim()` asks the server when a caller needs it before embedding anything.
    """

    prefix = "served"
    _pool: HostPool[C]

    def __init__(self, settings: BackendSettings, batch_size: int = 64):
        self.settings = settings
        self.model = settings.embed_model
        self.name = embedder_name(self.model, self.prefix)
        self.batch_size = max(1, int(batch_size))
        self.dim = 0

    def _vectors(self, host: Host[C], batch: list[str]) -> Any:
        """One request: the batch's vectors in order (anything numpy reads as a 2-D array)."""
        raise NotImplementedError

    def discover_dim(self) -> int:
        if not self.dim:
            self.embed(["dimension probe"])
        return self.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._batch(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return np.vstack(parts)

    def _batch(self, texts: list[str]) -> np.ndarray:
        batch = [t if t.strip() else "(empty)" for t in texts]

        def attempt(host: Host[C], _i: int, _after_malformed: bool) -> np.ndarray:
            raw = self._vectors(host, batch)
            try:
                vecs = np.asarray(raw, dtype=np.float32)
            except (ValueError, TypeError) as exc:
                raise MalformedReply(f"unreadable embeddings: {exc}") from None
            if vecs.ndim != 2 or vecs.shape[0] != len(batch) or vecs.shape[1] == 0:
                raise MalformedReply(f"expected {len(batch)} vectors, got an array of shape {vecs.shape}")
            if not np.isfinite(vecs).all():
                raise MalformedReply("embeddings hold NaN or infinite values")
            return vecs

        vecs = self._pool.run("embed", self.model, attempt)
        if not self.dim:
            self.dim = int(vecs.shape[1])
        elif vecs.shape[1] != self.dim:
            raise BackendError(
                f"{self._pool.dialect.label} at {self._pool.host}: model {self.model!r} returned {vecs.shape[1]}-"
                f"dimensional vectors after {self.dim}-dimensional ones"
            )
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (vecs / norms).astype(np.float32)
