"""Talking to Ollama servers, over the official `ollama` client: the `Channel` (one client and `concurrency` slots
per host, the retry and failover policy of core/backends/hosts.py) that the backend (core/backends/ollama_backend.py)
and the embedder (core/backends/ollama_embedder.py) call through, and the server check (`check`, `require_ready`).

Transient failures (HTTP 5xx, among them Ollama's 503 "server busy" when its queue is full, 408, 429, timeouts,
refused connections, an unreadable reply body) move the call to another host, or are retried on the same one after
a jittered, doubling pause of at least the reply's Retry-After; a malformed reply is asked again at once; anything
left becomes a `BackendError` naming the host and the model (core/backends/hosts.py). The slots bound the requests
in flight so a build may call from a thread pool.
"""

from __future__ import annotations

import json

import httpx
import ollama
from pydantic import ValidationError

from core.backends.hosts import Dialect, EndpointStatus, HostPool, require_all, retry_after
from core.config import BackendSettings

# -- requests ---------------------------------------------------------------------------------------------------


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, ollama.ResponseError):
        return f"HTTP {exc.status_code}: {exc.error}"
    if isinstance(exc, httpx.TimeoutException):
        return f"no reply within the {timeout_s:g} s timeout ({type(exc).__name__})"
    if isinstance(exc, ConnectionError):
        return "connection failed (is `ollama serve` running?)"
    if isinstance(exc, ValidationError):
        return "the reply body is not an Ollama response"
    return f"{type(exc).__name__}: {exc}"


def _retryable(exc: BaseException) -> bool | None:
    """True: try again; False: give up now; None: not a request failure (a bug: let it propagate)."""
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code >= 500 or exc.status_code in (408, 429) or exc.status_code < 0
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return False
    if isinstance(exc, (httpx.TransportError, ConnectionError)):
        return True
    if isinstance(exc, (ValidationError, json.JSONDecodeError)):  # the client could not read the reply body
        return True
    return None


def _fatal(exc: BaseException, host: str, model: str) -> str | None:
    if isinstance(exc, ollama.ResponseError) and exc.status_code == 404:
        return f"Ollama at {host} has no model {model!r} ({exc.error}); run `ollama pull {model}`"
    return None


def _retry_after(exc: BaseException) -> float | None:
    """The Retry-After of an HTTP error: the client raises ResponseError from None, but keeps httpx's error (with
    the response and its headers) as the exception's context."""
    context = exc.__context__ if isinstance(exc, ollama.ResponseError) else None
    return retry_after(context.response.headers) if isinstance(context, httpx.HTTPStatusError) else None


OLLAMA = Dialect(label="Ollama", describe=_describe, retryable=_retryable, fatal=_fatal, retry_after=_retry_after)


class Channel(HostPool[ollama.Client]):
    """The Ollama hosts of a backend or embedder (`settings.endpoints("ollama")`: OLLAMA_HOST, or STRATA_HOSTS),
    each with its own client and `concurrency` slots, and the retry and failover policy of core/backends/hosts.py."""

    def __init__(self, settings: BackendSettings):
        self.settings = settings
        super().__init__(settings.endpoints("ollama"), lambda url: ollama.Client(host=url, timeout=settings.timeout_s),
                         concurrency=settings.concurrency, retries=settings.retries, timeout_s=settings.timeout_s,
                         dialect=OLLAMA, backoff_s=settings.backoff_s)


# -- server check ---------------------------------------------------------------------------------------------------


OllamaStatus = EndpointStatus  # the shape both servers' checks report


def _tagged(name: str) -> str:
    """`name` with its tag; Ollama reads an untagged name as `:latest`."""
    name = name.strip()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def check(settings: BackendSettings, need_embed: bool = True, host: str | None = None,
          need_chat: bool = True) -> OllamaStatus:
    """Is the server (`host`, default OLLAMA_HOST) up, and does it hold the chat (and embedding) model? Never
    raises."""
    host = host or settings.ollama_host
    wanted = list(dict.fromkeys(([settings.chat_model] if need_chat else [])
                                + ([settings.embed_model] if need_embed else [])))
    timeout = min(float(settings.timeout_s), 10.0)
    try:
        client = ollama.Client(host=host, timeout=timeout)
        try:
            listing = client.list()
        finally:
            client.close()
        models = sorted({m.model for m in listing.models if m.model})
    except Exception as exc:  # noqa: BLE001 - a status report, whatever went wrong
        return OllamaStatus(
            reachable=False,
            host=host,
            missing=wanted,
            message=(
                f"Ollama is not reachable at {host}: {_describe(exc, timeout)}. "
                "Start it with `ollama serve`, or set OLLAMA_HOST to a running server."
            ),
        )
    have = {_tagged(m) for m in models}
    missing = [w for w in wanted if _tagged(w) not in have]
    if missing:
        pulls = " and ".join(f"`ollama pull {m}`" for m in missing)
        message = f"Ollama at {host} is missing {', '.join(missing)}. Run {pulls}."
    else:
        message = f"Ollama at {host} is ready with {', '.join(wanted)}."
    return OllamaStatus(reachable=True, host=host, models=models, missing=missing, message=message)


def require_ready(settings: BackendSettings, need_embed: bool = False, need_chat: bool = True) -> OllamaStatus:
    """`check` of every Ollama host, raising BackendError with their messages when one is down or lacks a needed
    model; the first host's status otherwise."""
    return require_all([check(settings, need_embed, h, need_chat) for h in settings.endpoints("ollama")])[0]
