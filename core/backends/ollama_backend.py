"""The Ollama language backend: extraction, community reports, summaries and answers, and the query-time tasks
some strategies use, each one chat call through the `Channel` of core/backends/ollama_client.py (one or several
Ollama hosts).

Structured calls send the pydantic model's JSON schema as `format`, so Ollama constrains the reply to it; the
reply is still validated, repaired and retried, and cached, as every model backend's is
(core/backends/model_backend.py). The embedder is core/backends/ollama_embedder.py.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import ollama

from core.backends.cache import CallCache
from core.backends.hosts import Host
from core.backends.model_backend import ModelBackend
from core.backends.ollama_client import Channel
from core.config import BackendSettings

CLIENT_TAKES_THINK = "think" in inspect.signature(ollama.Client.chat).parameters


class OllamaBackend(ModelBackend[ollama.Client]):
    """LanguageBackend over Ollama: extraction, community reports and answers; and the RetrievalLLM tasks some
    strategies use at query time (rated points, rerank, the question's entities and keywords)."""

    name = "ollama"

    def __init__(self, settings: BackendSettings, cache: CallCache | None = None):
        super().__init__(settings, cache)
        self._pool = self._channel = Channel(settings)
        self._think: bool | None = False if CLIENT_TAKES_THINK else None

    def _options(self) -> dict[str, Any]:
        return {"temperature": self.settings.temperature, "num_ctx": self.settings.num_ctx,
                "num_predict": self.settings.max_tokens}

    def _cache_request(self, prompt: str, schema: dict[str, Any] | None, options: dict[str, Any]) -> dict[str, Any]:
        return super()._cache_request(prompt, schema, options) | {"think": self._think}

    def _chat(self, host: Host[ollama.Client], prompt: str, schema: dict[str, Any] | None,
              options: dict[str, Any]) -> str:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "options": options,
            "stream": False,
        }
        if schema is not None:
            kwargs["format"] = schema
        if self._think is not None:
            kwargs["think"] = self._think
        started = time.perf_counter()
        try:
            response = host.client.chat(**kwargs)
        except ollama.ResponseError as exc:
            # A server that rejects the `think` field: drop it for good and ask again.
            if "think" in kwargs and exc.status_code == 400 and "think" in str(exc.error).lower():
                self._think = None
                del kwargs["think"]
                response = host.client.chat(**kwargs)
            else:
                raise
        self.note_usage(_usage(response), time.perf_counter() - started)
        return response.message.content or ""


def _usage(response: Any) -> dict[str, Any]:
    """Ollama's own token counts and times (nanoseconds) of reading the prompt and writing the reply."""
    out: dict[str, Any] = {"in": int(getattr(response, "prompt_eval_count", 0) or 0),
                           "out": int(getattr(response, "eval_count", 0) or 0)}
    if getattr(response, "prompt_eval_duration", None) and getattr(response, "eval_duration", None):
        out["in_s"] = response.prompt_eval_duration / 1e9
        out["out_s"] = response.eval_duration / 1e9
    return out
