"""The Ollama embedder: `OllamaEmbedder` over Ollama's /api/embed (through the `Channel` of
core/backends/ollama_client.py, so the same retries and concurrency limit), and `embedder_name`, the embedder's
name as a valid part of a chromadb collection name.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from core.backends.ollama_client import Channel
from core.backends.replies import MalformedReply
from core.config import BackendSettings
from core.protocols import BackendError

EMBEDDER_NAME_MAX = 40  # leaves room for the "<kind>__" prefix within chromadb's 63-character collection names


def embedder_name(model: str) -> str:
    """'ollama-' + the model name reduced to [a-zA-Z0-9._-], at most EMBEDDER_NAME_MAX characters, starting and
    ending with a letter or digit (a valid part of a chromadb collection name)."""
    base = model.strip()
    if base.endswith(":latest"):
        base = base[: -len(":latest")]
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", base)
    slug = re.sub(r"\.{2,}", ".", slug)
    slug = re.sub(r"([_-])[_-]+", r"\1", slug).strip("._-")
    name = f"ollama-{slug or 'model'}"
    if len(name) > EMBEDDER_NAME_MAX:
        digest = hashlib.sha256(model.encode("utf-8")).hexdigest()[:8]
        name = f"{name[: EMBEDDER_NAME_MAX - 9].rstrip('._-')}-{digest}"
    return name


class OllamaEmbedder:
    """Embedder over Ollama's /api/embed: L2-normalised float32 rows.

    `dim` is 0 until the first reply tells it (a plain attribute, so a runtime Protocol check sends nothing);
    `discover_dim()` asks the server when a caller needs it before embedding anything.
    """

    def __init__(self, settings: BackendSettings, batch_size: int = 64):
        self.settings = settings
        self.model = settings.embed_model
        self.name = embedder_name(self.model)
        self.batch_size = max(1, int(batch_size))
        self.dim = 0
        self._channel = Channel(settings)

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

        def attempt(_i: int, _after_malformed: bool) -> np.ndarray:
            response = self._channel.client.embed(model=self.model, input=batch)
            try:
                vecs = np.asarray(response.embeddings, dtype=np.float32)
            except (ValueError, TypeError) as exc:
                raise MalformedReply(f"unreadable embeddings: {exc}") from None
            if vecs.ndim != 2 or vecs.shape[0] != len(batch) or vecs.shape[1] == 0:
                raise MalformedReply(f"expected {len(batch)} vectors, got an array of shape {vecs.shape}")
            if not np.isfinite(vecs).all():
                raise MalformedReply("embeddings hold NaN or infinite values")
            return vecs

        vecs = self._channel.run("embed", self.model, attempt)
        if not self.dim:
            self.dim = int(vecs.shape[1])
        elif vecs.shape[1] != self.dim:
            raise BackendError(
                f"Ollama at {self._channel.host}: model {self.model!r} returned {vecs.shape[1]}-dimensional vectors "
                f"after {self.dim}-dimensional ones"
            )
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (vecs / norms).astype(np.float32)
