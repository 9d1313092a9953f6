"""The language backend over any OpenAI-compatible server (llama.cpp's `llama-server`, vLLM, LM Studio, Ollama's
own /v1): the same tasks, prompts, reply cleaning, repair, retries and call cache as the Ollama backend
(core/backends/model_backend.py), each one POST /v1/chat/completions through the `Endpoints` of
core/backends/openai_client.py (one or several hosts).

Structured output: a structured call sends `response_format={"type": "json_schema", "json_schema": {"name",
"schema", "strict"}}` with the pydantic model's schema, so the server constrains the reply to it. A server that
rejects that (HTTP 400 about the format) is asked with `{"type": "json_object"}`, and one that rejects that too
with plain prompting; in both the schema is stated in a system message. The mode each host accepts is remembered,
so a host is asked once per downgrade. The reply is validated and repaired either way.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

import openai

from core.backends.cache import CallCache
from core.backends.hosts import Host
from core.backends.model_backend import ModelBackend
from core.backends.openai_client import Endpoints, error_text
from core.backends.replies import MalformedReply
from core.config import BackendSettings

log = logging.getLogger(__name__)

MODES = ("json_schema", "json_object", "plain")  # structured-output modes, most constrained first
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.S)  # a reasoning model's thoughts before its reply
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "format", "support")


def rejects_format(exc: openai.BadRequestError) -> bool:
    """Is this 400 the server refusing the structured-output request (not, say, a too-long prompt)?"""
    text = f"{error_text(exc)} {getattr(exc, 'param', '') or ''}".lower()
    return any(w in text for w in _FORMAT_WORDS)


class OpenAIBackend(ModelBackend[openai.OpenAI]):
    """LanguageBackend and RetrievalLLM over an OpenAI-compatible chat completions endpoint."""

    name = "openai"

    def __init__(self, settings: BackendSettings, cache: CallCache | None = None):
        super().__init__(settings, cache)
        self._pool = Endpoints(settings)
        self._modes = threading.Lock()

    def mode(self, host: Host[openai.OpenAI]) -> str:
        """The structured-output mode `host` accepts, as far as is known."""
        return host.notes.get("format", MODES[0])

    def _downgrade(self, host: Host[openai.OpenAI], tried: str) -> None:
        with self._modes:  # only forward: two calls refused at once move the host one step, not two
            nxt = MODES[MODES.index(tried) + 1]
            if MODES.index(self.mode(host)) < MODES.index(nxt):
                host.notes["format"] = nxt
                log.warning("%s at %s refused response_format %s; asking with %s from now on", self._pool.dialect.label,
                            host.url, tried, nxt)

    def _chat(self, host: Host[openai.OpenAI], prompt: str, schema: dict[str, Any] | None,
              options: dict[str, Any]) -> str:
        if schema is None:
            return self._complete(host, [{"role": "user", "content": prompt}], options, None)
        while True:
            mode = self.mode(host)
            messages = [{"role": "user", "content": prompt}]
            if mode != "json_schema":
                messages.insert(0, {"role": "system", "content": "Reply with one JSON object that follows this JSON "
                                    f"schema:\n{json.dumps(schema, ensure_ascii=False)}"})
            fmt: dict[str, Any] | None = None
            if mode == "json_schema":
                fmt = {"type": "json_schema",
                       "json_schema": {"name": str(schema.get("title") or "reply"), "schema": schema, "strict": True}}
            elif mode == "json_object":
                fmt = {"type": "json_object"}
            try:
                return self._complete(host, messages, options, fmt)
            except openai.BadRequestError as exc:
                if mode == MODES[-1] or not rejects_format(exc):
                    raise
                self._downgrade(host, mode)

    def _complete(self, host: Host[openai.OpenAI], messages: list[dict[str, str]], options: dict[str, Any],
                  fmt: dict[str, Any] | None) -> str:
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": options["temperature"]}
        if fmt is not None:
            kwargs["response_format"] = fmt
        response = host.client.chat.completions.create(**kwargs)
        choices = getattr(response, "choices", None)
        if not choices:
            raise MalformedReply("a reply without choices")
        return _THINK.sub("", choices[0].message.content or "", count=1)
