"""The embedder over an OpenAI-compatible POST /v1/embeddings (llama-server --embeddings, vLLM, LM Studio,
Ollama's /v1), through the `Endpoints` of core/backends/openai_client.py (the same hosts, retries and concurrency
limit); batching, checks and normalisation are core/backends/served_embedder.py's.
"""

from __future__ import annotations

from typing import Any

import openai

from core.backends.hosts import Host
from core.backends.openai_client import Endpoints
from core.backends.served_embedder import ServedEmbedder
from core.config import BackendSettings


class OpenAIEmbedder(ServedEmbedder[openai.OpenAI]):
    """Embedder over /v1/embeddings: L2-normalised float32 rows, named "openai-<model>"."""

    prefix = "openai"

    def __init__(self, settings: BackendSettings, batch_size: int = 64):
        super().__init__(settings, batch_size)
        self._pool = Endpoints(settings)

    def _vectors(self, host: Host[openai.OpenAI], batch: list[str]) -> Any:
        response = host.client.embeddings.create(model=self.model, input=batch, encoding_format="float")
        return [d.embedding for d in sorted(response.data or [], key=lambda d: d.index)]
