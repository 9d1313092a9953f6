"""How a build or job gets its working parts: the language backend, the embedder, the workspace's vector index, and
the `BuildContext` that carries them to the stages (core/build/context.py)."""

from __future__ import annotations

from core.backends.cache import CallCache
from core.backends.embedders import make_embedder
from core.backends.offline import OfflineBackend
from core.build.context import BuildContext
from core.config import Settings
from core.index.vectors import VectorIndex
from core.models import Workspace
from core.protocols import Embedder, LanguageBackend
from core.store import Store


def make_backend(settings: Settings, store: Store | None) -> LanguageBackend:
    if settings.backend.kind == "ollama":
        # imported here only: the ollama backend pulls in httpx and the ollama client, which an offline build and
        # the app's import of this module never need
        from core.backends.ollama_backend import OllamaBackend

        return OllamaBackend(settings.backend, CallCache(store) if store else None)
    return OfflineBackend(settings.extract.max_entities_per_chunk, settings.extract.max_relationships_per_chunk,
                          settings.extract.offline_extractor)


def open_index(settings: Settings, ws_name: str, embedder_name: str) -> VectorIndex:
    return VectorIndex(settings.storage.vector_dir(ws_name), embedder_name)


def make_context(store: Store, ws: Workspace, settings: Settings, embedder: Embedder | None = None) -> BuildContext:
    if settings.backend.kind == "ollama":
        from core.backends.ollama_client import require_ready  # the optional ollama client: see make_backend

        require_ready(settings.backend, need_embed=settings.embed.embedder == "ollama")
    emb = embedder or make_embedder(settings.embed, settings.backend, settings.storage.home / "models")
    return BuildContext(
        store=store,
        ws=ws,
        settings=settings,
        backend=make_backend(settings, store),
        embedder=emb,
        index=open_index(settings, ws.name, emb.name),
    )


def job_settings(settings: Settings, ws: Workspace) -> Settings:
    """`settings` with the workspace's own embedder (and backend when that embedder is Ollama's), for a job that
    embeds as the build did."""
    s = settings.model_copy(deep=True)
    s.embed.embedder = "ollama" if (ws.embedder or "").startswith("ollama") else "minilm"
    s.backend.kind = "ollama" if s.embed.embedder == "ollama" else "offline"
    return s
