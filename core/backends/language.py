"""The configured language backend: the offline heuristics, or a model on Ollama or an OpenAI-compatible server
(with the call cache of the store, when one is given)."""

from __future__ import annotations

from core.backends.cache import CallCache
from core.backends.offline import OfflineBackend
from core.config import Settings
from core.protocols import LanguageBackend
from core.store import Store


def make_backend(settings: Settings, store: Store | None) -> LanguageBackend:
    if settings.backend.kind == "ollama":
        # imported here only: the ollama backend pulls in httpx and the ollama client, which an offline build and
        # the app's import of this module never need
        from core.backends.ollama_backend import OllamaBackend

        return OllamaBackend(settings.backend, CallCache(store) if store else None)
    if settings.backend.kind == "openai":  # likewise the openai client
        from core.backends.openai_backend import OpenAIBackend

        return OpenAIBackend(settings.backend, CallCache(store) if store else None)
    return OfflineBackend(settings.extract.max_entities_per_chunk, settings.extract.max_relationships_per_chunk,
                          settings.extract.offline_extractor)
