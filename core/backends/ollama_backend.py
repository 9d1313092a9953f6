"""The Ollama language backend and embedder, over the official `ollama` client.

Structured calls send the pydantic model's JSON schema as `format`, so Ollama constrains the reply to it; the
reply is still validated, repaired when it is almost JSON (code fences, prose around it, trailing commas,
unclosed brackets), and retried when it is not. Transient failures (HTTP 5xx, timeouts, refused connections)
are retried too; anything left becomes a `BackendError` naming the host and the model. Every language call
goes through the `CallCache` when one is given, and a `BoundedSemaphore(concurrency)` bounds the requests in
flight so a build may call from a thread pool.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

import httpx
import numpy as np
import ollama
from pydantic import BaseModel, ValidationError

from core.backends.base import (
    BackendError,
    ContextBlock,
    Extraction,
    PassageScores,
    QueryTerms,
    RatedPoint,
    RatedPoints,
    Report,
    Summary,
    SummaryEntities,
)
from core.backends.cache import CallCache
from core.backends.replies import (
    MalformedReply,
    clean_extraction,
    clean_points,
    clean_report,
    clean_summary,
    clean_terms,
    parse_reply,
)
from core.config import BackendSettings
from core.extract.prompts import (
    answer_prompt,
    extraction_prompt,
    query_terms_prompt,
    rate_points_prompt,
    report_prompt,
    rerank_prompt,
    summary_entities_prompt,
    summary_prompt,
)

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.25  # first pause after a transient failure; doubles per retry, capped at 4 s
EMBEDDER_NAME_MAX = 40  # leaves room for the "<kind>__" prefix within chromadb's 63-character collection names
CLIENT_TAKES_THINK = "think" in inspect.signature(ollama.Client.chat).parameters

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


@lru_cache(maxsize=None)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


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


class _Channel:
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


class OllamaBackend:
    """LanguageBackend over an Ollama server: extraction, community reports and answers; and the RetrievalLLM
    tasks some strategies use at query time (rated points, rerank, the question's entities and keywords)."""

    name = "ollama"

    def __init__(self, settings: BackendSettings, cache: CallCache | None = None):
        self.settings = settings
        self.model = settings.chat_model
        self.cache = cache
        self._channel = _Channel(settings)
        self._think: bool | None = False if CLIENT_TAKES_THINK else None

    @property
    def host(self) -> str:
        return self.settings.ollama_host

    # -- the tasks --------------------------------------------------------------------------------------------------
    def extract(self, text: str, entity_types: list[str], subject: str | None = None) -> Extraction:
        prompt = extraction_prompt(text, entity_types, subject)
        return clean_extraction(self._structured("extract", prompt, Extraction))

    def report(self, title_hint: str, material: list[str]) -> Report:
        return clean_report(self._structured("report", report_prompt(title_hint, material), Report))

    def summarize(self, task: str, subject: str, material: list[str]) -> Summary:
        return clean_summary(self._structured(f"summarize-{task}", summary_prompt(task, subject, material), Summary),
                             subject)

    def summary_entities(self, members: list[tuple[str, str]], concepts: list[str]) -> SummaryEntities:
        from core.backends.summary_replies import clean_summary_entities

        names = [n for n, _ in members]
        return self._call("summary-entities", summary_entities_prompt(members, concepts), _schema(SummaryEntities),
                          lambda content: clean_summary_entities(parse_reply(content, SummaryEntities), names),
                          lambda result: result.model_dump_json(), SummaryEntities.model_validate_json)

    def answer(self, question: str, context: ContextBlock) -> str:
        def parse(content: str) -> str:
            text = (content or "").strip()
            if not text:
                raise MalformedReply("empty answer")
            return text

        return self._call("answer", answer_prompt(question, context), None, parse, str, str)

    def rate_points(self, question: str, material: str) -> list[RatedPoint]:
        return clean_points(self._structured("rate-points", rate_points_prompt(question, material), RatedPoints))

    def rerank(self, question: str, passages: list[str]) -> list[float]:
        """0-10 per passage; a reply with the wrong number of scores is malformed (asked again, then refused)."""
        if not passages:
            return []
        prompt = rerank_prompt(question, passages)

        def parse(content: str) -> list[float]:
            scores = parse_reply(content, PassageScores).scores
            if len(scores) != len(passages):
                raise MalformedReply(f"expected {len(passages)} scores, got {len(scores)}")
            return [min(10.0, max(0.0, float(x))) if math.isfinite(x) else 0.0 for x in scores]

        return self._call("rerank", prompt, _schema(PassageScores), parse, json.dumps, json.loads)

    def query_terms(self, question: str) -> QueryTerms:
        return clean_terms(self._structured("query-terms", query_terms_prompt(question), QueryTerms))

    # -- plumbing -------------------------------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        return {"temperature": self.settings.temperature, "num_ctx": self.settings.num_ctx}

    def _structured(self, task: str, prompt: str, model: type[M]) -> M:
        return self._call(
            task,
            prompt,
            _schema(model),
            lambda content: parse_reply(content, model),
            lambda result: result.model_dump_json(),
            model.model_validate_json,
        )

    def _call(
        self,
        task: str,
        prompt: str,
        schema: dict[str, Any] | None,
        parse: Callable[[str], T],
        dump: Callable[[T], str],
        load: Callable[[str], T],
    ) -> T:
        options = self._options()
        key = None
        if self.cache is not None:
            key = self.cache.key(self.name, self.model, task, prompt, schema, options)
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    return load(hit)
                except ValueError:  # pydantic's ValidationError is a ValueError
                    log.warning("ignoring an unreadable cached %s reply %s", task, key[:12])

        def attempt(i: int, after_malformed: bool) -> T:
            opts = dict(options)
            if after_malformed:  # the same prompt at the same temperature would give the same bad reply
                opts["temperature"] = max(float(opts["temperature"]), min(1.0, 0.3 * i))
            return parse(self._chat(prompt, schema, opts))

        started = time.perf_counter()
        result = self._channel.run(task, self.model, attempt)
        ms = (time.perf_counter() - started) * 1000.0
        if key is not None:
            fmt = (schema or {}).get("title")
            request = {"prompt": prompt, "format": fmt, "options": options, "think": self._think}
            try:
                self.cache.put(key, self.name, self.model, task, request, dump(result), ms)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - a cache write failure must not lose a good reply
                log.exception("could not cache the %s reply", task)
        return result

    def _chat(self, prompt: str, schema: dict[str, Any] | None, options: dict[str, Any]) -> str:
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
        try:
            response = self._channel.client.chat(**kwargs)
        except ollama.ResponseError as exc:
            # A server that rejects the `think` field: drop it for good and ask again.
            if "think" in kwargs and exc.status_code == 400 and "think" in str(exc.error).lower():
                self._think = None
                del kwargs["think"]
                response = self._channel.client.chat(**kwargs)
            else:
                raise
        return response.message.content or ""


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


# -- embedder ---------------------------------------------------------------------------------------------------


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
        self._channel = _Channel(settings)

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
