"""A real HTTP server that speaks enough of the OpenAI API for the official `openai` client: /v1/models,
/v1/chat/completions (with a json_schema or json_object response_format, or none) and /v1/embeddings.

    with FakeOpenAI() as fake:
        fake.script["/v1/chat/completions"].append(Fail(500))   # the next chat request gets HTTP 500
        backend = OpenAIBackend(BackendSettings(kind="openai", openai_base_url=fake.base_url), cache=None)
        ...
        fake.requests  # [(path, json body), ...] in arrival order

The same deterministic replies as tests/fake_ollama.py (its helpers, its scripted behaviours Reply, Fail,
Malformed, Missing, Sleep): a structured reply follows the schema of the json_schema format, or of a json_object
format's `schema` (llama-cpp-python's form), or, in plain mode, the schema the request states in its system message; without one a short answer citing [1]. `formats`
lists the response_format types the server accepts (another one gets HTTP 400, as from a server without structured
output); `down` drops every connection unanswered. Error replies carry `retry-after-ms: 1` (a wait shorter than any
backoff), or the scripted Fail's own `headers` instead. Injected faults (`faults`, `injected`, `chat_requests`) are
FakeOllama's, on /v1/chat/completions, with OpenAI's error body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_ollama import (
    Deep,
    Fail,
    FakeOllama,
    Faults,
    Malformed,
    Missing,
    OllamaHandler,
    Reply,
    Sleep,
    chat_content,
    embed_inputs,
    fake_vector,
    user_prompt,
)

__all__ = ["Deep", "Fail", "FakeOpenAI", "Faults", "Malformed", "Missing", "Reply", "Sleep"]

CHAT = "/v1/chat/completions"
EMBED = "/v1/embeddings"
MODELS = "/v1/models"
_STATED = re.compile(r"JSON schema:\n(\{.*\})\s*$", re.S)


class FakeOpenAI(FakeOllama):
    def __init__(self, models: list[str] | None = None, dim: int = 16,
                 formats: tuple[str, ...] = ("json_schema", "json_object"), refusal: int = 400,
                 n_ctx: int | None = None, props: bool = False):
        super().__init__(models if models is not None else ["llama3.1:8b", "nomic-embed-text"], dim)
        self.formats = tuple(formats)
        self.refusal = refusal  # the status of a refused format: 400, or 500 with a validation message (llama-cpp-python)
        # a context window in tokens (a token: 4 characters of the messages): a request whose messages and
        # max_tokens exceed it is refused as llama-cpp-python does ("maximum context length is N tokens …"), or,
        # with `props`, as an older llama-server does (no number in the refusal; the window at GET /props)
        self.n_ctx = n_ctx
        self.props = props
        self.down = False  # True: every request's connection is dropped without a reply, as by a crashed server
        self.keys: list[str] = []  # the Authorization header of every request

    def handler_base(self) -> type:
        return OpenAIHandler

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def bodies(self, path: str = CHAT) -> list[dict]:
        return [body for p, body in self.requests if p == path]


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "param": None, "code": None}}


class OpenAIHandler(OllamaHandler):
    owner: FakeOpenAI

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, _error(status, message), headers=headers or {"retry-after-ms": "1"})

    def _route(self, method: str, path: str, body: Any) -> None:
        self.owner.keys.append(self.headers.get("Authorization", ""))
        if self.owner.down:
            self.close_connection = True
            return
        routes = {("GET", MODELS): self._models, ("POST", CHAT): self._completion, ("POST", EMBED): self._embeddings}
        if self.owner.props:
            routes[("GET", "/props")] = lambda body, behaviour: self._send(
                200, {"default_generation_settings": {"n_ctx": self.owner.n_ctx}})
        handler = routes.get((method, path))
        if handler is None:
            self._error(404, f"{method} {path} not found")
            return
        behaviour = self.owner._next(path, body)
        while isinstance(behaviour, Sleep):
            if self.owner._stop.wait(behaviour.seconds):
                return
            behaviour = behaviour.then
        if isinstance(behaviour, Fail):
            self._error(behaviour.status, behaviour.error, behaviour.headers)
            return
        handler(body if isinstance(body, dict) else {}, behaviour)

    def _models(self, body: dict, behaviour: Any) -> None:
        if isinstance(behaviour, Reply) and behaviour.body is not None:
            self._send(200, behaviour.body)
            return
        self._send(200, {"object": "list", "data": [
            {"id": m, "object": "model", "created": 1735689600, "owned_by": "fake"} for m in self.owner.models]})

    def _model_missing(self, model: str) -> bool:
        if self.owner.has_model(model):
            return False
        self._error(404, f"The model `{model}` does not exist.")
        return True

    def _completion(self, body: dict, behaviour: Any) -> None:
        model = self._begin(body, behaviour)
        if model is None:
            return
        fmt = body.get("response_format") or {}
        if fmt and fmt.get("type") not in self.owner.formats:
            if self.owner.refusal >= 500:  # llama-cpp-python 0.3.36's words for a format its request model refuses
                self._error(self.owner.refusal, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': "
                            f"{fmt.get('type')!r}, 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}")
            else:
                self._error(400, f"response_format type {fmt.get('type')!r} is not supported by this server")
            return
        if self._too_long(body):
            return
        if isinstance(behaviour, Missing) and behaviour.body:
            self._send(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": model})
            return
        prompt = user_prompt(body)
        system = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "system")
        stated = _STATED.search(system)
        schema = ((fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
                  or (json.loads(stated.group(1)) if stated else None))
        if schema is None and fmt.get("type") == "json_object":
            schema = "json"  # any JSON object
        content = chat_content(behaviour, schema, prompt)
        self._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1735689600, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                         "logprobs": None}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split()),
                      "total_tokens": len(prompt.split()) + len(content.split())},
        })

    def _too_long(self, body: dict) -> bool:
        """Refuse a request longer than the window, as llama-cpp-python or llama-server does (True: refused)."""
        n_ctx = self.owner.n_ctx
        used = sum(len(str(m.get("content", ""))) for m in body.get("messages") or []) // 4
        wanted = int(body.get("max_tokens") or 0)
        if n_ctx is None or used + wanted <= n_ctx:
            return False
        if self.owner.props:  # an older llama-server: the window only at /props
            self._send(400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                                       "increasing the context size or enable context shift",
                                       "type": "invalid_request_error"}})
        else:
            self._error(400, f"This model's maximum context length is {n_ctx} tokens. However, you requested "
                             f"{used + wanted} tokens ({used} in the messages, {wanted} in the completion). Please "
                             "reduce the length of the messages or completion.")
        return True

    def _embeddings(self, body: dict, behaviour: Any) -> None:
        model = self._begin(body, behaviour)
        if model is None:
            return
        inputs = embed_inputs(body)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, self.owner.dim)}
                for i, t in enumerate(inputs)]
        data.reverse()  # the embedder orders them by `index`, as a server may answer out of order
        self._send(200, {"object": "list", "data": data, "model": model,
                         "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0}})
