"""What every model-server backend shares (Ollama's, core/backends/ollama_backend.py; any OpenAI-compatible
server's, core/backends/openai_backend.py): the tasks with their prompts (core/extract/prompts.py) and reply
cleaning (core/backends/replies.py), and the structured call: the reply is validated against the pydantic model,
repaired when it is almost JSON (code fences, prose around it, trailing commas, unclosed brackets), asked again when
it is not or is nested too deep to read (at a raised temperature, as the same prompt at temperature 0 gives the same
bad reply; the retries and failover are core/backends/hosts.py's), and put in the
`CallCache` once it validates, keyed by the backend's name, model, task, prompt, schema and options, never by
host. A subclass says how one chat request is sent (`_chat`) and which options decide the reply (`_options`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from core.backends.cache import CallCache
from core.backends.hosts import Host, HostPool
from core.backends.replies import (
    MalformedReply,
    clean_extraction,
    clean_points,
    clean_report,
    clean_summary,
    clean_terms,
    parse_reply,
    strip_controls,
)
from core.backends.summary_replies import clean_summary_entities
from core.backends.topic_replies import clean_chunk_topics
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
    topics_prompt,
)
from core.protocols import (
    ChunkTopics,
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
from core.secrets import redact_url

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", Report, Summary)
C = TypeVar("C")


@lru_cache(maxsize=None)
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema a structured call sends: the pydantic model's, with every property of every object required. A
    server constraining its reply by grammar (llama.cpp, Ollama) otherwise lets a model close the object at once: a
    base model answered an extraction with `{}` (issue 38). Lists may still be empty; OpenAI's strict mode asks the
    same. The reply is validated against the model itself, defaults and all."""
    return _all_required(model.model_json_schema())


def _written(reply: R) -> R:
    """A report or summary with a title and a summary, else a malformed reply: a small model answers with the
    schema's empty strings, or the prompt's words ("short and specific") and nothing else (issue 38); stored, it
    would be an empty report, so it is asked again and, failing that, becomes a failed unit."""
    if not " ".join(str(getattr(reply, "title", "")).split()) or not str(getattr(reply, "summary", "")).strip():
        raise MalformedReply(f"a {type(reply).__name__.lower()} without a title or a summary")
    return reply


def counted(schema: dict[str, Any], field: str, n: int) -> dict[str, Any]:
    """`schema` with its array `field` holding exactly `n` items (minItems = maxItems), so a server that constrains
    its reply by the schema's grammar gives the count the prompt asks for (a small model miscounts)."""
    props = dict(schema["properties"])
    props[field] = {**props[field], "minItems": n, "maxItems": n}
    return {**schema, "properties": props}


def _all_required(node: Any) -> Any:
    if isinstance(node, list):
        return [_all_required(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (v if k == "properties" else _all_required(v)) for k, v in node.items()}
    if isinstance(node.get("properties"), dict):  # an object schema: its properties' schemas, all required
        out["properties"] = {name: _all_required(v) for name, v in node["properties"].items()}
        out["required"] = list(node["properties"])
    return out


class ModelBackend(Generic[C]):
    """LanguageBackend over model servers: extraction, community reports, summaries, HLG topics and answers; and the
    RetrievalLLM tasks some strategies use at query time (rated points, rerank, the question's entities and
    keywords). Subclasses set `name`, `_pool` (the hosts), `_options` and `_chat`."""

    name = "model"
    _pool: HostPool[C]

    def __init__(self, settings: BackendSettings, cache: CallCache | None = None):
        self.settings = settings
        self.model = settings.chat_model
        self.cache = cache
        self._spent = threading.local()  # the token counts and seconds of this thread's last reply (note_usage)

    @property
    def host(self) -> str:
        return self._pool.host

    @property
    def hosts(self) -> list[str]:
        return [h.url for h in self._pool.hosts]

    # -- the tasks --------------------------------------------------------------------------------------------------
    def extract(self, text: str, entity_types: list[str], subject: str | None = None) -> Extraction:
        prompt = extraction_prompt(text, entity_types, subject)
        return clean_extraction(self._structured("extract", prompt, Extraction))

    def report(self, title_hint: str, material: list[str]) -> Report:
        return clean_report(self._structured("report", report_prompt(title_hint, material), Report, _written))

    def summarize(self, task: str, subject: str, material: list[str]) -> Summary:
        return clean_summary(self._structured(f"summarize-{task}", summary_prompt(task, subject, material), Summary,
                                              _written), subject)

    def summary_entities(self, members: list[tuple[str, str]], concepts: list[str]) -> SummaryEntities:
        names = [n for n, _ in members]
        return self._call("summary-entities", summary_entities_prompt(members, concepts), json_schema(SummaryEntities),
                          lambda content: clean_summary_entities(parse_reply(content, SummaryEntities), names),
                          lambda result: result.model_dump_json(), SummaryEntities.model_validate_json)

    def chunk_topics(self, statements: list[str], subject: str) -> ChunkTopics:
        """HLG's topics of one chunk's statements (core/backends/topic_replies.py cleans the reply)."""
        return self._call("topics", topics_prompt(statements, subject), json_schema(ChunkTopics),
                          lambda content: clean_chunk_topics(parse_reply(content, ChunkTopics), statements),
                          lambda result: result.model_dump_json(), ChunkTopics.model_validate_json)

    def answer(self, question: str, context: ContextBlock) -> str:
        def parse(content: str) -> str:
            text = (content or "").strip()
            if not text:
                raise MalformedReply("empty answer")
            return text

        return self._call("answer", answer_prompt(question, context), None, parse, str, str)

    def phrase(self, prompt: str) -> str:
        """A free-text reply to `prompt` (the wording of evaluation probes, core/evaluation/probes.py)."""
        def parse(content: str) -> str:
            text = (content or "").strip()
            if not text:
                raise MalformedReply("empty reply")
            return text

        return self._call("phrase", prompt, None, parse, str, str)

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

        return self._call("rerank", prompt, counted(json_schema(PassageScores), "scores", len(passages)), parse,
                          json.dumps, json.loads)

    def query_terms(self, question: str) -> QueryTerms:
        return clean_terms(self._structured("query-terms", query_terms_prompt(question), QueryTerms))

    # -- what a subclass says -----------------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        """The sampling options that decide the reply (part of the cache key); "temperature" among them."""
        return {"temperature": self.settings.temperature}

    def _chat(self, host: Host[C], prompt: str, schema: dict[str, Any] | None, options: dict[str, Any]) -> str:
        """One chat request to `host`: the reply's text (with `schema`, asked to follow it)."""
        raise NotImplementedError

    def _cache_request(self, prompt: str, schema: dict[str, Any] | None, options: dict[str, Any]) -> dict[str, Any]:
        """What the cache row records of the request."""
        return {"prompt": prompt, "format": (schema or {}).get("title"), "options": options}

    def note_usage(self, usage: dict[str, Any], seconds: float) -> None:
        """What the reply `_chat` is returning cost: its tokens ("in", "out", and the server's own "in_s", "out_s"
        when it timed them) and the request's seconds; recorded with the host in the call cache's row."""
        self._spent.usage = {**usage, "s": round(float(seconds), 4)}

    # -- plumbing -------------------------------------------------------------------------------------------------
    def _structured(self, task: str, prompt: str, model: type[M], check: Callable[[M], M] | None = None) -> M:
        """A reply of `model`'s schema; `check` raises MalformedReply for one that parses but says nothing."""
        return self._call(
            task,
            prompt,
            json_schema(model),
            lambda content: (check or (lambda x: x))(parse_reply(content, model)),
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
        if self.cache is None:
            return self._ask(task, prompt, schema, parse, dump, options, None)
        key = self.cache.key(self.name, self.model, task, prompt, schema, options)
        with self.cache.flight(key):  # the same call in flight on another thread: wait for its cached reply
            return self._ask(task, prompt, schema, parse, dump, options, key, load)

    def _ask(self, task: str, prompt: str, schema: dict[str, Any] | None, parse: Callable[[str], T],
             dump: Callable[[T], str], options: dict[str, Any], key: str | None,
             load: Callable[[str], T] | None = None) -> T:
        """The cached reply of `key`, else the model's (cached under `key`)."""
        if key is not None and self.cache is not None and load is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    return load(hit)
                except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
                    log.warning("ignoring an unreadable cached %s reply %s", task, key[:12])

        served: dict[str, Any] = {}  # the host that gave the kept reply, and what that reply cost

        def attempt(host: Host[C], i: int, after_malformed: bool) -> T:
            opts = dict(options)
            if after_malformed:  # the same prompt at the same temperature would give the same bad reply
                opts["temperature"] = max(float(opts["temperature"]), min(1.0, 0.3 * i))
            self._spent.usage = None
            content = self._chat(host, prompt, schema, opts)
            served.update(host=redact_url(host.url), usage=self._spent.usage)
            return parse(strip_controls(content))

        started = time.perf_counter()
        result = self._pool.run(task, self.model, attempt)
        ms = (time.perf_counter() - started) * 1000.0
        if key is not None:
            request = self._cache_request(prompt, schema, options) | served
            try:
                self.cache.put(key, self.name, self.model, task, request, dump(result), ms)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - a cache write failure must not lose a good reply
                log.exception("could not cache the %s reply", task)
        return result
