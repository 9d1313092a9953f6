"""Which model servers a build or question needs, and whether they are ready: one place for the CLI, the app and
the worker to ask, whatever the backend (offline, Ollama, OpenAI-compatible) and the embedder (MiniLM, Ollama's,
OpenAI-compatible) are. The clients are imported only when a server is needed.
"""

from __future__ import annotations

from core.backends.hosts import EndpointStatus
from core.config import BackendSettings, Settings

SERVED = ("ollama", "openai")  # the kinds of model server, as backend kinds and embedder choices


def embedder_kind(embedder_name: str) -> str:
    """The embedder choice ("minilm", "ollama", "openai") that made a workspace's vectors, from their embedder's
    name ("minilm", "ollama-<model>", "openai-<model>")."""
    for kind in SERVED:
        if (embedder_name or "").startswith(f"{kind}-"):
            return kind
    return "minilm"


def backend_kind(name: str) -> str:
    """A workspace's recorded backend name as a backend kind ("offline" for anything not served)."""
    return name if name in SERVED else "offline"


def check(backend: BackendSettings, kind: str, need_chat: bool = True, need_embed: bool = False,
          ) -> list[EndpointStatus]:
    """The status of every host of `kind` ("ollama" or "openai"); never raises."""
    if kind == "openai":
        from core.backends import openai_client as client
    else:
        from core.backends import ollama_client as client  # type: ignore[no-redef]
    return [client.check(backend, need_embed, h, need_chat) for h in backend.endpoints(kind)]


def require_servers(settings: Settings) -> None:
    """Raise BackendError, in one line naming the host, when a server the backend or the embedder needs is down
    or lacks its model; nothing offline."""
    from core.backends.hosts import require_all

    b = settings.backend
    for kind in SERVED:
        chat, embed = b.kind == kind, settings.embed.embedder == kind
        if chat or embed:
            require_all(check(b, kind, need_chat=chat, need_embed=embed))
