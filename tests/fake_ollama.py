"""A real HTTP server that speaks enough of the Ollama API for the official client: tags, chat, embed, show.

    with FakeOllama() as fake:
        fake.script["/api/chat"].append(Fail(500))      # the next chat request gets HTTP 500
        backend = OllamaBackend(BackendSettings(ollama_host=fake.url), cache=None)
        ...
        fake.requests  # [(path, json body), ...] in arrival order
        fake.fail_when = lambda prompt: "Ada" in prompt   # chat requests whose user prompt matches get HTTP 500

Unscripted requests get a normal reply. Chat replies are deterministic: with a JSON-schema `format` the content
is a valid object for the schema (extractions derived from the capitalised words of the prompt's delimited
text, so output depends on input; reports; HLG topics of a chunk's statements by pairs; rated points, rerank
scores and query terms by word overlap with the prompt's question; any other schema filled generically); without one a short answer citing [1]. Embeddings are hash-based unit vectors of `dim` components.

Fault injection, for a server of which a share of the calls fail:

    fake.faults = Faults(share=0.3, kinds=("500", "503", "malformed", "deep", "stall"), stall_s=2.0)
    ...
    fake.injected  # Counter: kind -> faults injected;  fake.chat_requests: chat requests received

Each request to one of `faults.paths` that has no scripted behaviour draws from `random.Random(faults.seed)`
(one generator per `Faults` object, drawn under a lock, so the sequence of draws is fixed; which request gets
which draw follows arrival order) whether it fails (probability `share`) and how (uniform over `kinds`): "500" an
HTTP 500; "503" an HTTP 503 "server overloaded" with `Retry-After: 0` or `1` (drawn too); "malformed" a 200 whose
content is not JSON; "deep" a 200 whose content is JSON nested 100,000 deep; "stall" `stall_s` of silence, then the
normal reply (a client's timeout below `stall_s` sees a stall). A request without a structured `format` (a plain
answer, which accepts any text) gets an empty content for "malformed" and "deep", so that no fault is taken for an
answer. Replies that are not faults are the fault-free ones, so a build that survives its faults equals one without.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

# -- behaviours ------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """A normal 200 reply; `content` overrides the chat message content, `body` the whole JSON body."""

    content: str | None = None
    body: dict[str, Any] | None = None


@dataclass
class Fail:
    """An HTTP error with Ollama's {"error": ...} body, and `headers` (e.g. {"Retry-After": "1"}) if given."""

    status: int = 500
    error: str = "internal server error"
    headers: dict[str, str] | None = None


@dataclass
class Malformed:
    """A 200 chat reply whose content is not JSON and cannot be repaired into it; `plain`, when set, is the content
    sent instead to a request without a structured format."""

    content: str = "Here are the entities: {entities: Ada, Babbage"
    plain: str | None = None


@dataclass
class Deep:
    """A 200 chat reply whose content is valid JSON nested `depth` deep ([[[...]]]), deeper than a parser goes;
    `plain` as for Malformed."""

    depth: int = 100_000
    plain: str | None = None

    @property
    def content(self) -> str:
        return "[" * self.depth + "]" * self.depth


FAULT_KINDS = ("500", "503", "malformed", "deep", "stall")
CHAT_PATHS = ("/api/chat", "/v1/chat/completions")


@dataclass
class Faults:
    """Injected faults (module docstring): a `share` of the requests to `paths` fail, each in one of `kinds`."""

    share: float
    seed: int = 0
    kinds: tuple[str, ...] = ("500", "503", "malformed", "stall")
    stall_s: float = 2.0
    paths: tuple[str, ...] = CHAT_PATHS

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"a share of requests is within 0..1, not {self.share}")
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds are some of {FAULT_KINDS}, not {tuple(self.kinds)}")

    def behaviour(self, kind: str, rng: random.Random) -> Any:
        """The scripted behaviour that plays fault `kind`."""
        if kind == "500":
            return Fail(500, "internal server error")
        if kind == "503":
            return Fail(503, "server overloaded, please try again", headers={"Retry-After": str(rng.randrange(2))})
        if kind == "malformed":
            return Malformed(content="I could not finish the JSON, sorry: {entities: Ada, Babbage", plain="")
        if kind == "deep":
            return Deep(plain="")
        return Sleep(self.stall_s, Reply())


@dataclass
class Sleep:
    """Wait `seconds` (longer than the client's timeout), then behave as `then`."""

    seconds: float
    then: Any = field(default_factory=Reply)


@dataclass
class Missing:
    """A 200 chat reply whose JSON content lacks required fields (entities without type/description, or a
    report without title); with `body=True`, a response body without `message` at all."""

    body: bool = False


# -- deterministic content ---------------------------------------------------------------------------------------

_BLOCK = re.compile(r"<<<BEGIN ([^>]*)>>>\n(.*?)\n<<<END \1>>>", re.S)
_NAME = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")
_STOP = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "This", "That", "And", "But", "Of"}


def delimited(prompt: str, prefix: str = "") -> list[str]:
    """The texts of the prompt's <<<BEGIN X>>> ... <<<END X>>> blocks whose label starts with `prefix`."""
    return [body for label, body in _BLOCK.findall(prompt) if label.startswith(prefix)]


def capitalised_names(text: str, limit: int = 8) -> list[str]:
    names: list[str] = []
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0] in _STOP:
            words = words[1:]
        name = " ".join(words)
        if name and name not in names:
            names.append(name)
        if len(names) >= limit:
            break
    return names


def fake_extraction(prompt: str) -> dict[str, Any]:
    text = "\n".join(delimited(prompt, "TEXT")) or prompt
    names = capitalised_names(text)
    entities = [
        {"name": n, "type": "PERSON" if len(n.split()) == 2 else "CONCEPT", "description": f"{n} is named in the text."}
        for n in names
    ]
    relationships = [
        {"source": a, "target": b, "predicate": "appears with", "description": f"{a} appears with {b}.", "weight": 5}
        for a, b in zip(names, names[1:])
    ]
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    statements = [s for s in sentences if any(n in s for n in names)][:5]
    return {"entities": entities, "relationships": relationships, "statements": statements}


def fake_report(prompt: str) -> dict[str, Any]:
    material = delimited(prompt, "MATERIAL")
    names = capitalised_names("\n".join(material), limit=5)
    title = " and ".join(names[:2]) or "Untitled community"
    return {
        "title": title,
        "summary": f"A community of {len(names)} named entities drawn from {len(material)} pieces of material.",
        "findings": [
            {"summary": f"{n} is central", "explanation": f"{n} is named in the material.", "importance": 7 - i}
            for i, n in enumerate(names[:3])
        ],
        "rating": 6,
        "keywords": names[:5],
    }


def fake_summary(prompt: str) -> dict[str, Any]:
    """A summary built from the prompt's material: its names as title and keywords, its first block as text."""
    material = delimited(prompt, "MATERIAL")
    names = capitalised_names(" ".join(material))
    return {"title": " ".join(names[:2]) or "Untitled", "summary": (material[0] if material else "")[:300],
            "keywords": names[:4]}


_PAIR = re.compile(r'^\((".*?(?<!\\)"), ', re.M)
_META = re.compile(r"^Meta attribute list: (\[.*\])$", re.M)


def fake_summary_entities(prompt: str) -> dict[str, Any]:
    """HiRAG's summary entities for the cluster in the prompt's ENTITIES block: one entity named after the first
    member, typed with the last meta attribute listed, related to every member."""
    block = "\n".join(delimited(prompt, "ENTITIES"))
    members = [json.loads(m) for m in _PAIR.findall(block)]
    metas = _META.findall(prompt)
    meta = json.loads(metas[-1]) if metas else []
    name = f"{members[0]} Circle" if members else "Empty Circle"
    return {"entities": [{"name": name, "type": meta[0] if meta else "normal_entity",
                          "description": f"A group of {len(members)} entities: {', '.join(members[:5])}."}],
            "relationships": [{"source": m, "target": name, "description": f"{m} belongs to {name}.", "weight": 7}
                              for m in members]}


_NUMBERED = re.compile(r"^\[(\d+)\] (.*)$", re.M)


def fake_topics(prompt: str) -> dict[str, Any]:
    """HLG topics of the chunk in the prompt's STATEMENTS block: consecutive pairs of statements, each pair a topic
    titled by the names of its first statement."""
    numbered = [(int(n), text) for n, text in _NUMBERED.findall("\n".join(delimited(prompt, "STATEMENTS")))]
    topics = []
    for k in range(0, len(numbered), 2):
        pair = numbered[k : k + 2]
        names = capitalised_names(pair[0][1], limit=3)
        topics.append({"title": " and ".join(names[:2]) or f"Topic {k // 2 + 1}",
                       "summary": " ".join(text for _, text in pair)[:300],
                       "statements": [n for n, _ in pair], "keywords": names})
    return {"topics": topics}


_QUESTION = re.compile(r'^Question: (".*")$', re.M)
_WORD = re.compile(r"[a-z0-9]{4,}")


def question_of(prompt: str) -> str:
    m = _QUESTION.search(prompt)
    return json.loads(m.group(1)) if m else ""


def overlap(question: str, text: str) -> float:
    """Share of the question's words of 4+ letters that `text` contains (0-1)."""
    q = set(_WORD.findall(question.lower()))
    return len(q & set(_WORD.findall(text.lower()))) / len(q) if q else 0.0


def fake_points(prompt: str) -> dict[str, Any]:
    """Each sentence of the DATA block as a point, scored 100 x its word overlap with the question."""
    question = question_of(prompt)
    text = "\n".join(delimited(prompt, "DATA"))
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.split()) >= 3]
    return {"points": [{"description": s, "score": round(100 * overlap(question, s))} for s in sentences[:6]]}


def fake_scores(prompt: str) -> dict[str, Any]:
    question = question_of(prompt)
    return {"scores": [round(10 * overlap(question, p), 2) for p in delimited(prompt, "PASSAGE")]}


def fake_terms(prompt: str) -> dict[str, Any]:
    question = question_of(prompt)
    return {"entities": capitalised_names(question), "keywords": _WORD.findall(question.lower())[:10]}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.split("/")[-1], {})
    return schema


def fill_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A minimal instance of a JSON schema: every property present, lists empty."""
    root = root or schema
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        return fill_schema(schema["anyOf"][0], root)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: fill_schema(v, root) for k, v in schema.get("properties", {}).items()}
    return {"array": [], "string": "x", "number": 1.0, "integer": 1, "boolean": False, "null": None}.get(kind, None)


def schema_reply(schema: Any, prompt: str) -> str:
    if not isinstance(schema, dict):  # format "json"
        return json.dumps({"answer": "Fake answer [1]."})
    props = set(schema.get("properties", {}))
    if {"entities", "relationships", "statements"} <= props:
        return json.dumps(fake_extraction(prompt))
    if props == {"entities", "relationships"}:
        return json.dumps(fake_summary_entities(prompt))
    if {"title", "summary", "findings"} <= props:
        return json.dumps(fake_report(prompt))
    if {"title", "summary", "keywords"} <= props:
        return json.dumps(fake_summary(prompt))
    if props == {"topics"}:
        return json.dumps(fake_topics(prompt))
    if props == {"points"}:
        return json.dumps(fake_points(prompt))
    if props == {"scores"}:
        return json.dumps(fake_scores(prompt))
    if {"entities", "keywords"} <= props:
        return json.dumps(fake_terms(prompt))
    return json.dumps(fill_schema(schema))


def user_prompt(body: dict[str, Any]) -> str:
    """The user messages of a chat request, one text."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [] if m.get("role") == "user")


def chat_content(behaviour: Any, schema: Any, prompt: str) -> str:
    """A chat reply's text: the scripted one (Malformed; Missing: JSON lacking required fields; Reply(content=)),
    else the deterministic reply for the schema (`schema_reply`), else a plain answer citing [1]."""
    if isinstance(behaviour, (Malformed, Deep)):
        return behaviour.plain if behaviour.plain is not None and not schema else behaviour.content
    if isinstance(behaviour, Missing):
        if isinstance(schema, dict) and "title" in schema.get("properties", {}):
            return json.dumps({"summary": "no title here", "findings": []})
        return json.dumps({"entities": [{"name": "Ada Lovelace"}], "relationships": [], "statements": []})
    if isinstance(behaviour, Reply) and behaviour.content is not None:
        return behaviour.content
    if schema:
        return schema_reply(schema, prompt)
    names = capitalised_names("\n".join(delimited(prompt, "SOURCES")), limit=2)
    return f"According to the sources, this concerns {' and '.join(names) or 'the question'} [1]."


def embed_inputs(body: dict[str, Any]) -> list[str]:
    inputs = body.get("input", "")
    return [str(inputs)] if isinstance(inputs, str) else [str(t) for t in inputs]


def fake_vector(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    v = rng.standard_normal(dim)
    return [float(x) for x in v / np.linalg.norm(v)]


def _tagged(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


# -- the server ------------------------------------------------------------------------------------------------

_CREATED = "2025-01-01T00:00:00.000000Z"


class FakeOllama:
    def __init__(self, models: list[str] | None = None, dim: int = 16):
        self.models = list(models if models is not None else ["llama3.1:8b", "nomic-embed-text:latest"])
        self.dim = dim
        self.requests: list[tuple[str, Any]] = []
        self.script: defaultdict[str, deque] = defaultdict(deque)
        self.fail_when: Callable[[str], bool] | None = None  # a chat prompt -> fail it with HTTP 500
        self.inflight = 0
        self.max_inflight = 0
        self.faults: Faults | None = None  # injected faults (module docstring); None: none
        self.injected: Counter[str] = Counter()  # fault kind -> requests that got it
        self.chat_requests = 0  # chat requests received (/api/chat, /v1/chat/completions), scripted and faulty too
        self.chat_delay_s = 0.0  # every chat request is answered after this long (a server that takes its time)
        self._draws: tuple[Faults, random.Random] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def __enter__(self) -> "FakeOllama":
        fake = self

        class Handler(fake.handler_base()):  # type: ignore[misc,valid-type]
            owner = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def handler_base(self) -> type:
        """The request handler class the server's handler derives from (a fake of another API overrides it)."""
        return OllamaHandler

    # -- helpers for tests ----------------------------------------------------------------------------------------
    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def has_model(self, name: str) -> bool:
        return _tagged(name) in {_tagged(m) for m in self.models}

    def _next(self, path: str, body: Any = None) -> Any:
        """The request's behaviour: HTTP 500 when `fail_when` matches its chat prompt, else the next scripted one,
        else an injected fault, else a normal reply."""
        if self.fail_when is not None and isinstance(body, dict) and body.get("messages") and \
                self.fail_when(user_prompt(body)):
            return Fail(500, "scripted failure (fail_when)")
        with self._lock:
            queue = self.script.get(path)
            if queue:
                return queue.popleft()
            faults = self.faults
            if faults is None or path not in faults.paths:
                return Reply()
            if self._draws is None or self._draws[0] is not faults:
                self._draws = (faults, random.Random(faults.seed))
            rng = self._draws[1]
            if rng.random() >= faults.share:
                return Reply()
            kind = faults.kinds[rng.randrange(len(faults.kinds))]
            self.injected[kind] += 1
            return faults.behaviour(kind, rng)


class OllamaHandler(BaseHTTPRequestHandler):
    owner: FakeOllama
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections end after this

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _send(self, status: int, body: Any, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client gave up (timeout) and closed the connection
            self.close_connection = True

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _handle(self, method: str) -> None:
        owner = self.owner
        body = self._body() if method == "POST" else None
        path = self.path.split("?", 1)[0]
        with owner._lock:
            owner.requests.append((path, body))
            owner.chat_requests += path in CHAT_PATHS
            owner.inflight += 1
            owner.max_inflight = max(owner.max_inflight, owner.inflight)
        try:
            if path in CHAT_PATHS and owner.chat_delay_s:
                time.sleep(owner.chat_delay_s)
            self._route(method, path, body)
        finally:
            with owner._lock:
                owner.inflight -= 1

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    # -- routes ---------------------------------------------------------------------------------------------------
    def _route(self, method: str, path: str, body: Any) -> None:
        routes = {
            ("GET", "/"): self._root,
            ("HEAD", "/"): self._root,
            ("GET", "/api/tags"): self._tags,
            ("POST", "/api/chat"): self._chat,
            ("POST", "/api/embed"): self._embed,
            ("POST", "/api/show"): self._show,
            ("GET", "/api/version"): self._version,
        }
        handler = routes.get((method, path))
        if handler is None:
            self._send(404, {"error": f"{method} {path} not found"})
            return
        behaviour = self.owner._next(path, body) if path.startswith("/api/") else Reply()
        while isinstance(behaviour, Sleep):
            if self.owner._stop.wait(behaviour.seconds):
                return
            behaviour = behaviour.then
        if isinstance(behaviour, Fail):
            self._send(behaviour.status, {"error": behaviour.error}, headers=behaviour.headers)
            return
        handler(body if isinstance(body, dict) else {}, behaviour)

    def _root(self, body: dict, behaviour: Any) -> None:
        if self.command == "HEAD":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")

    def _version(self, body: dict, behaviour: Any) -> None:
        self._send(200, {"version": "0.0.0-fake"})

    def _tags(self, body: dict, behaviour: Any) -> None:
        if isinstance(behaviour, Reply) and behaviour.body is not None:
            self._send(200, behaviour.body)
            return
        models = []
        for name in self.owner.models:
            models.append(
                {
                    "name": name,
                    "model": name,
                    "modified_at": "2025-01-01T00:00:00.000000+00:00",
                    "size": 4920753328,
                    "digest": hashlib.sha256(name.encode()).hexdigest(),
                    "details": {
                        "parent_model": "",
                        "format": "gguf",
                        "family": "llama",
                        "families": ["llama"],
                        "parameter_size": "8.0B",
                        "quantization_level": "Q4_K_M",
                    },
                }
            )
        self._send(200, {"models": models})

    def _model_missing(self, model: str) -> bool:
        if self.owner.has_model(model):
            return False
        self._send(404, {"error": f'model "{model}" not found, try pulling it first'})
        return True

    def _begin(self, body: dict, behaviour: Any) -> str | None:
        """The request's model, or None when the reply is already sent (an unknown model, a scripted body)."""
        model = str(body.get("model", ""))
        if self._model_missing(model):
            return None
        if isinstance(behaviour, Reply) and behaviour.body is not None:
            self._send(200, behaviour.body)
            return None
        return model

    def _chat(self, body: dict, behaviour: Any) -> None:
        model = self._begin(body, behaviour)
        if model is None:
            return
        prompt = user_prompt(body)
        if isinstance(behaviour, Missing) and behaviour.body:
            self._send(200, {"model": model, "created_at": _CREATED, "done": True})
            return
        content = chat_content(behaviour, body.get("format"), prompt)
        final = {
            "model": model,
            "created_at": _CREATED,
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1_000_000,
            "load_duration": 100_000,
            "prompt_eval_count": len(prompt.split()),
            "prompt_eval_duration": 200_000,
            "eval_count": len(content.split()),
            "eval_duration": 700_000,
        }
        if body.get("stream", True) is False:
            self._send(200, final)
            return
        # streaming (the API's default): the content in one chunk, then the final summary, as NDJSON
        message = {"role": "assistant", "content": content}
        chunk = {"model": model, "created_at": _CREATED, "message": message, "done": False}
        final = {**final, "message": {"role": "assistant", "content": ""}}
        data = (json.dumps(chunk) + "\n" + json.dumps(final) + "\n").encode("utf-8")
        self._send(200, data, "application/x-ndjson")

    def _embed(self, body: dict, behaviour: Any) -> None:
        model = self._begin(body, behaviour)
        if model is None:
            return
        inputs = embed_inputs(body)
        self._send(
            200,
            {
                "model": model,
                "embeddings": [fake_vector(str(t), self.owner.dim) for t in inputs],
                "total_duration": 1_000_000,
                "load_duration": 100_000,
                "prompt_eval_count": sum(len(str(t).split()) for t in inputs),
            },
        )

    def _show(self, body: dict, behaviour: Any) -> None:
        model = str(body.get("model") or body.get("name") or "")
        if self._model_missing(model):
            return
        self._send(
            200,
            {
                "modelfile": f"FROM {model}\n",
                "parameters": "",
                "template": "{{ .Prompt }}",
                "details": {
                    "format": "gguf",
                    "family": "llama",
                    "parameter_size": "8.0B",
                    "quantization_level": "Q4_K_M",
                },
                "model_info": {"general.architecture": "llama"},
                "capabilities": ["completion"] if "embed" not in model else ["embedding"],
                "modified_at": "2025-01-01T00:00:00.000000+00:00",
            },
        )
