"""The Ollama embedder: `OllamaEmbedder` over Ollama's /api/embed, through the `Channel` of
core/backends/ollama_client.py (the same hosts, retries and concurrency limit); the batching, checks and
normalisation are core/backends/served_embedder.py's.
"""

from __future__ import annotations

from typing import Any

import ollama

from core.backends.hosts import Host
from core.backends.ollama_client import Channel
from core.backends.served_embedder import EMBEDDER_NAME_MAX, ServedEmbedder, embedder_name
from core.config import BackendSettings

__all__ = ["EMBEDDER_NAME_MAX", "OllamaEmbedder", "embedder_name"]


class OllamaEmbedder(ServedEmbedder[ollama.Client]):
    """Embedder over Ollama's /api/embed: L2-normalised float32 rows, named "ollama-<model>"."""

    prefix = "ollama"

    def __init__(self, settings: BackendSettings, batch_size: int = 64):
        super().__init__(settings, batch_size)
        self._pool = self._channel = Channel(settings)

    def _vectors(self, host: Host[ollama.Client], batch: list[str]) -> Any:
        return host.client.embed(model=self.model, input=batch).embeddings
