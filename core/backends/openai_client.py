"""Talking to OpenAI-compatible servers (llama.cpp's `llama-server`, vLLM, LM Studio, Ollama's own /v1), over the
official `openai` client: the `Endpoints` (one client and `concurrency` slots per host, the failover policy of
core/backends/hosts.py) that the backend (core/backends/openai_backend.py) and the embedder
(core/backends/openai_embedder.py) call through, and the server check over GET /v1/models (`check`,
`require_ready`).

Transient failures (HTTP 408/409/429/5xx, timeouts, refused connections) move the call to another host or are
retried on the same one by the pool of core/backends/hosts.py, after a jittered, doubling pause of at least the
reply's Retry-After (or retry-after-ms); what still fails becomes a `BackendError` naming the host, the model and
the HTTP status. The client itself never retries (`max_retries=0`): its retries inside each of the pool's attempts
would multiply the attempts and pauses. A malformed reply is asked again by the pool.

The API key is BackendSettings.api_key (STRATA_OPENAI_API_KEY or OPENAI_API_KEY), which the stored settings of a
build never hold: a build's worker, started with the same environment, reads it from there. A local server needs
none; a placeholder is sent then.
"""

from __future__ import annotations

import json
import os

import openai
from pydantic import ValidationError

from core.backends.hosts import Dialect, EndpointStatus, HostPool, require_all, retry_after
from core.config import BackendSettings

LABEL = "OpenAI-compatible server"
NO_KEY = "sk-no-key-required"  # what a local server that checks no key is sent


def api_key(settings: BackendSettings) -> str:
    """The key from the settings, else from the environment (a worker's settings come without it), else none."""
    if settings.api_key is not None and settings.api_key.get_secret_value():
        return settings.api_key.get_secret_value()
    return os.environ.get("STRATA_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or NO_KEY


def error_text(exc: BaseException) -> str:
    """The server's own words for an HTTP error: body.error.message, body.error, body.message, or the message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body.get("message", body.get("detail")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("msg") or json.dumps(err)
        if err:
            return str(err)
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return str(getattr(exc, "message", "") or exc)


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {error_text(exc)}"
    if isinstance(exc, openai.APITimeoutError):
        return f"no reply within the {timeout_s:g} s timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection failed (is the server running, and does the base URL end in /v1?)"
    if isinstance(exc, (ValidationError, json.JSONDecodeError, openai.APIResponseValidationError)):
        return "the reply body is not a chat completion"
    return f"{type(exc).__name__}: {exc}"


def _retryable(exc: BaseException) -> bool | None:
    """True: try again (elsewhere); False: give up now; None: not a request failure (a bug: let it propagate)."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in (408, 409, 429)
    if isinstance(exc, openai.APIConnectionError):  # timeouts too
        return True
    if isinstance(exc, (ValidationError, json.JSONDecodeError, openai.APIResponseValidationError)):
        return True
    return None


def _fatal(exc: BaseException, host: str, model: str) -> str | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    if exc.status_code == 404:
        return (f"{LABEL} at {host} has no model {model!r} (HTTP 404: {error_text(exc)}); start the server with it "
                "(llama-server --alias, vllm serve) or set STRATA_CHAT_MODEL / STRATA_EMBED_MODEL to a model it "
                "lists at /v1/models")
    if exc.status_code in (401, 403):
        return (f"{LABEL} at {host} refused the API key (HTTP {exc.status_code}: {error_text(exc)}); set "
                "STRATA_OPENAI_API_KEY")
    return None


def _retry_after(exc: BaseException) -> float | None:
    return retry_after(exc.response.headers) if isinstance(exc, openai.APIStatusError) else None


OPENAI = Dialect(label=LABEL, describe=_describe, retryable=_retryable, fatal=_fatal, retry_after=_retry_after)


def make_client(settings: BackendSettings, url: str, timeout_s: float | None = None) -> openai.OpenAI:
    """A client that makes one try per call (max_retries=0): the host pool does the retrying."""
    return openai.OpenAI(base_url=url, api_key=api_key(settings), max_retries=0,
                         timeout=settings.timeout_s if timeout_s is None else timeout_s)


class Endpoints(HostPool[openai.OpenAI]):
    """The OpenAI-compatible hosts of a backend or embedder (`settings.endpoints("openai")`: STRATA_OPENAI_BASE_URL,
    or STRATA_HOSTS), each with its own client and `concurrency` slots."""

    def __init__(self, settings: BackendSettings):
        self.settings = settings
        super().__init__(settings.endpoints("openai"), lambda url: make_client(settings, url),
                         concurrency=settings.concurrency, retries=settings.retries, timeout_s=settings.timeout_s,
                         dialect=OPENAI, backoff_s=settings.backoff_s)


# -- server check -----------------------------------------------------------------------------------------------


def _same(a: str, b: str) -> bool:
    """Model names equal, reading an untagged name as `:latest` (as Ollama's /v1 lists them)."""
    def tagged(name: str) -> str:
        name = name.strip()
        return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"

    return tagged(a) == tagged(b)


def check(settings: BackendSettings, need_embed: bool = True, host: str | None = None,
          need_chat: bool = True) -> EndpointStatus:
    """Is the server (`host`, default the base URL) up (GET /v1/models), and does it list the chat (and embedding)
    model? Never raises."""
    host = (host or settings.openai_base_url).rstrip("/")
    wanted = list(dict.fromkeys(([settings.chat_model] if need_chat else [])
                                + ([settings.embed_model] if need_embed else [])))
    timeout = min(float(settings.timeout_s), 10.0)
    try:
        client = make_client(settings, host, timeout_s=timeout)
        try:
            models = sorted({m.id for m in client.models.list() if getattr(m, "id", None)})
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - a status report, whatever went wrong
        return EndpointStatus(reachable=False, host=host, missing=wanted, message=(
            f"The {LABEL} at {host} is not reachable: {_describe(exc, timeout)}. Start it (llama-server, vllm "
            "serve, LM Studio, ollama serve) or set STRATA_OPENAI_BASE_URL to a running server's /v1."))
    missing = [w for w in wanted if not any(_same(w, m) for m in models)]
    if missing:
        message = (f"The {LABEL} at {host} does not list {', '.join(missing)} (it serves: "
                   f"{', '.join(models) or 'nothing'}). Set STRATA_CHAT_MODEL / STRATA_EMBED_MODEL to a listed model "
                   "or start the server with that name.")
    else:
        message = f"The {LABEL} at {host} is ready with {', '.join(wanted)}."
    return EndpointStatus(reachable=True, host=host, models=models, missing=missing, message=message)


def require_ready(settings: BackendSettings, need_embed: bool = False, need_chat: bool = True) -> EndpointStatus:
    """`check` of every OpenAI-compatible host, raising BackendError with their messages when one is down or lacks
    a needed model; the first host's status otherwise."""
    return require_all([check(settings, need_embed, h, need_chat) for h in settings.endpoints("openai")])[0]
