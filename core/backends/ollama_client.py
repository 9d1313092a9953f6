"""Talking to an Ollama server, over the official `ollama` client: the `Channel` (one client, one concurrency
limit, the retry policy) that the backend (core/backends/ollama_backend.py) and the embedder
(core/backends/ollama_embedder.py) call through, and the server check (`check`, `require_ready`).

Transient failures (HTTP 5xx, timeouts, refused connections, an unreadable reply body) are retried, with a
doubling pause; a malformed reply is asked again at once; anything left becomes a `BackendError` naming the host
and the model. A `BoundedSemaphore(concurrency)` bounds the requests in flight so a build may call from a thread
pool.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
import ollama
from pydantic import ValidationError

from core.backends.replies import MalformedReply
from core.config import BackendSettings
from core.protocols import BackendError

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.25  # first pause after a transient failure; doubles per retry, capped at 4 s

T = TypeVar("T")


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


class Channel:
    """One client, one concurrency limit and the retry policy, shared by the calls of a backend or embedder."""

    def __init__(self, settings: BackendSettings):
        self.settings = settings
        self.host = settings.ollama_host
        self.client = ollama.Client(host=settings.ollama_host, timeout=settings.timeout_s)
        self.semaphore = threading.BoundedSemaphore(max(1, int(settings.concurrency)))

    def run(self, what: str, model: str, attempt: Callable[[int, bool], T]) -> T:
        """Call `attempt(i, after_malformed)` until it returns, at most retries + 1 times."""
        tries = max(0, int(self.settings.retries)) + 1
        problem = ""
        after_malformed = False
        for i in range(tries):
            if i and not after_malformed:
                time.sleep(min(4.0, RETRY_BACKOFF_S * 2 ** (i - 1)))
            try:
                with self.semaphore:
                    return attempt(i, after_malformed)
            except MalformedReply as exc:
                problem, after_malformed = f"malformed reply: {exc}", True
            except BackendError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below; unknown errors propagate
                retry = _retryable(exc)
                if retry is None:
                    raise
                if isinstance(exc, ollama.ResponseError) and exc.status_code == 404:
                    raise BackendError(
                        f"Ollama at {self.host} has no model {model!r} ({exc.error}); run `ollama pull {model}`"
                    ) from None
                if not retry:
                    reason = _describe(exc, self.settings.timeout_s)
                    raise BackendError(
                        f"Ollama at {self.host} refused to {what} with model {model!r}: {reason}"
                    ) from None
                problem, after_malformed = _describe(exc, self.settings.timeout_s), False
            log.warning("ollama %s (%s) attempt %d/%d failed: %s", what, model, i + 1, tries, problem)
        raise BackendError(
            f"Ollama at {self.host} failed to {what} with model {model!r} after {tries} attempt"
            f"{'s' if tries > 1 else ''}: {problem}"
        )


# -- server check ---------------------------------------------------------------------------------------------------


@dataclass
class OllamaStatus:
    reachable: bool
    host: str
    models: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.reachable and not self.missing


def _tagged(name: str) -> str:
    """`name` with its tag; Ollama reads an untagged name as `:latest`."""
    name = name.strip()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def check(settings: BackendSettings, need_embed: bool = True) -> OllamaStatus:
    """Is the server up, and does it hold the chat (and embedding) model? Never raises."""
    host = settings.ollama_host
    wanted = list(dict.fromkeys([settings.chat_model] + ([settings.embed_model] if need_embed else [])))
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


def require_ready(settings: BackendSettings, need_embed: bool = False) -> OllamaStatus:
    """`check`, raising BackendError with its message when the host is down or lacks a needed model."""
    status = check(settings, need_embed=need_embed)
    if not status.reachable or status.missing:
        raise BackendError(status.message)
    return status
