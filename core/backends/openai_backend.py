"""The language backend over any OpenAI-compatible server (llama.cpp's `llama-server`, llama-cpp-python's
`python -m llama_cpp.server`, vLLM, LM Studio, Ollama's own /v1): the same tasks, prompts, reply cleaning, repair,
retries and call cache as the Ollama backend (core/backends/model_backend.py), each one POST /v1/chat/completions
through the `Endpoints` of core/backends/openai_client.py (one or several hosts).

Structured output: a structured call sends `response_format={"type": "json_schema", "json_schema": {"name",
"schema", "strict"}}` with the pydantic model's schema, so the server constrains the reply to it. A server that
refuses that format is asked at once with `{"type": "json_object", "schema": …}` (llama-cpp-python's form, which
constrains its reply to the schema by a grammar; others read it as plain JSON mode), and one that refuses that too
with plain prompting, the schema stated in a system message. A refusal is an HTTP 4xx, or a 5xx whose body says the
request is invalid (llama-cpp-python answers a `json_schema` format with HTTP 500 and a validation message), naming
the format: it is never retried as a transient fault. The mode each host accepts is remembered, so a host is asked
once per downgrade. The reply is validated and repaired either way.

Every call is bounded by `max_tokens` (BackendSettings.max_tokens, at most half the server's window once known). A
request the server refuses as longer than its context is cut to fit and sent again at once (core/backends/
context_fit.py): the window is read from the refusal when it says it, else from GET /props (llama-server), and
remembered per host, so later prompts are cut before they are sent. Each reply's token counts (`usage`, and
llama-server's `timings` when given) go into the call cache's row with its host and seconds, for the Build page's
tokens per second (core/backends/host_speed.py).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any

import httpx
import openai

from core.backends.cache import CallCache
from core.backends.context_fit import (
    CHARS_PER_TOKEN,
    Window,
    cut_prompt,
    prompt_chars,
    reply_budget,
    window_from_error,
    window_from_props,
)
from core.backends.hosts import Host
from core.backends.model_backend import ModelBackend
from core.backends.openai_client import Endpoints, api_key, error_text
from core.backends.replies import MalformedReply
from core.config import BackendSettings

log = logging.getLogger(__name__)

MODES = ("json_schema", "json_object", "plain")  # structured-output modes, most constrained first
FIT_TRIES = 4  # sends of one request while it is refused as too long for the server's context
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)  # a reasoning model's thoughts before its reply
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "format", "support")
_INVALID_WORDS = ("validation", "invalid", "input should be", "not supported", "unsupported", "unexpected",
                  "extra inputs", "not permitted", "literal_error", "unrecognized")


def rejects_format(exc: openai.APIStatusError) -> bool:
    """Is this the server refusing the structured-output request (not, say, a too-long prompt or an overloaded
    server)? A 4xx naming the format, or a 5xx whose body says the request naming it is invalid."""
    text = f"{error_text(exc)} {getattr(exc, 'param', '') or ''}".lower()
    if not any(w in text for w in _FORMAT_WORDS):
        return False
    status = exc.status_code
    if 400 <= status < 500:
        return status not in (401, 403, 404, 408, 409, 429)
    return status >= 500 and any(w in text for w in _INVALID_WORDS)


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


class OpenAIBackend(ModelBackend[openai.OpenAI]):
    """LanguageBackend and RetrievalLLM over an OpenAI-compatible chat completions endpoint."""

    name = "openai"

    def __init__(self, settings: BackendSettings, cache: CallCache | None = None):
        super().__init__(settings, cache)
        self._pool = Endpoints(settings)
        self._modes = threading.Lock()

    def _options(self) -> dict[str, Any]:
        return {"temperature": self.settings.temperature, "max_tokens": self.settings.max_tokens}

    def mode(self, host: Host[openai.OpenAI]) -> str:
        """The structured-output mode `host` accepts, as far as is known."""
        return host.notes.get("format", MODES[0])

    def _downgrade(self, host: Host[openai.OpenAI], tried: str, why: str) -> None:
        with self._modes:  # only forward: two calls refused at once move the host one step, not two
            nxt = MODES[MODES.index(tried) + 1]
            if MODES.index(self.mode(host)) < MODES.index(nxt):
                host.notes["format"] = nxt
                log.warning("%s at %s refused response_format %s (%s); asking with %s from now on",
                            self._pool.dialect.label, host.url, tried, why[:200], nxt)

    def _chat(self, host: Host[openai.OpenAI], prompt: str, schema: dict[str, Any] | None,
              options: dict[str, Any]) -> str:
        if schema is None:
            return self._complete(host, [{"role": "user", "content": prompt}], options, None)
        while True:
            mode = self.mode(host)
            messages = [{"role": "user", "content": prompt}]
            fmt: dict[str, Any] | None = None
            if mode == "json_schema":
                fmt = {"type": "json_schema",
                       "json_schema": {"name": str(schema.get("title") or "reply"), "schema": schema, "strict": True}}
            elif mode == "json_object":
                fmt = {"type": "json_object", "schema": schema}
            else:
                messages.insert(0, {"role": "system", "content": "Reply with one JSON object that follows this JSON "
                                    f"schema:\n{json.dumps(schema, ensure_ascii=False)}"})
            try:
                return self._complete(host, messages, options, fmt)
            except openai.APIStatusError as exc:
                if mode == MODES[-1] or not rejects_format(exc):
                    raise
                self._downgrade(host, mode, error_text(exc))

    def _complete(self, host: Host[openai.OpenAI], messages: list[dict[str, str]], options: dict[str, Any],
                  fmt: dict[str, Any] | None) -> str:
        limit: int | None = None  # characters the prompt may have, once known
        for attempt in range(FIT_TRIES):
            n_ctx = host.notes.get("n_ctx")
            if n_ctx:
                limit = min(limit or 10**9, prompt_chars(n_ctx, options["max_tokens"],
                                                         host.notes.get("chars_per_token", CHARS_PER_TOKEN)))
            sent = _fit(messages, limit)
            kwargs: dict[str, Any] = {"model": self.model, "messages": sent, "temperature": options["temperature"],
                                      "max_tokens": reply_budget(options["max_tokens"], n_ctx)}
            if fmt is not None:
                kwargs["response_format"] = fmt
            started = time.perf_counter()
            try:
                response = host.client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                window = window_from_error(exc.status_code, error_text(exc), exc.body)
                if window is None or attempt == FIT_TRIES - 1:
                    raise
                limit = self._learn(host, window, sent, limit)
                log.warning("%s at %s: the prompt (%d characters) is longer than its context (%s tokens); cut to %d "
                            "characters", self._pool.dialect.label, host.url, _chars(sent), host.notes.get("n_ctx"),
                            limit)
                continue
            choices = getattr(response, "choices", None)
            if not choices:
                raise MalformedReply("a reply without choices")
            self.note_usage(_usage(response), time.perf_counter() - started)
            return _THINK.sub("", choices[0].message.content or "", count=1)
        raise AssertionError("unreachable")  # the last try raises or returns

    def _learn(self, host: Host[openai.OpenAI], window: Window, sent: list[dict[str, str]],
               limit: int | None) -> int:
        """Remember what a too-long refusal said (the window; the characters per token of this prompt, when the
        server counted its tokens) and return the characters the prompt may have now."""
        chars, known = _chars(sent), host.notes.get("n_ctx")
        if window.prompt_tokens:
            host.notes["chars_per_token"] = max(1.0, chars / window.prompt_tokens)
        n_ctx = window.n_ctx or known or self._props_window(host)
        if not n_ctx:
            return int(chars * 0.5)  # the server does not say: halve it, and again if need be
        host.notes["n_ctx"] = n_ctx
        fit = prompt_chars(n_ctx, self.settings.max_tokens, host.notes.get("chars_per_token", CHARS_PER_TOKEN))
        if known == n_ctx and not window.prompt_tokens:  # cut to this window already: fewer characters a token
            fit = min(fit, int(chars * 0.8))
        return min(fit, limit or 10**9)

    def _props_window(self, host: Host[openai.OpenAI]) -> int | None:
        """llama-server's window from its GET /props (None from any other server, or when it does not answer)."""
        root = host.url.rstrip("/").removesuffix("/v1")
        try:
            reply = httpx.get(f"{root}/props", timeout=min(10.0, self.settings.timeout_s),
                              headers={"Authorization": f"Bearer {api_key(self.settings)}"})
            return window_from_props(reply.json()) if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None


def _fit(messages: list[dict[str, str]], limit: int | None) -> list[dict[str, str]]:
    """`messages` with the user's prompt cut so that all of them hold at most `limit` characters."""
    if limit is None or _chars(messages) <= limit:
        return messages
    others = sum(len(m["content"]) for m in messages[:-1])
    return [*messages[:-1], {**messages[-1], "content": cut_prompt(messages[-1]["content"], max(100, limit - others))}]


def _usage(response: Any) -> dict[str, Any]:
    """The reply's token counts (and llama-server's own prompt and generation times, when it gives them)."""
    usage = getattr(response, "usage", None)
    out: dict[str, Any] = {"in": int(getattr(usage, "prompt_tokens", 0) or 0),
                           "out": int(getattr(usage, "completion_tokens", 0) or 0)}
    timings = (getattr(response, "model_extra", None) or {}).get("timings")
    if isinstance(timings, dict) and timings.get("prompt_ms") is not None and timings.get("predicted_ms") is not None:
        out["in_s"] = float(timings["prompt_ms"]) / 1000.0
        out["out_s"] = float(timings["predicted_ms"]) / 1000.0
    return out
