"""A model server's faults cost no call (issue 23): the retry schedule (exponential backoff with full jitter, capped,
at least the server's Retry-After), the real Ollama and OpenAI-compatible backends through fakes of which 30 % of
the chat replies fail in every way tests/fake_ollama.py's `Faults` can (HTTP 500, 503 "overloaded", not JSON, JSON
nested 100,000 deep, a stall past the timeout), an overloaded lone host waited on, the failover between two hosts,
and replies nested too deep to read as MalformedReply."""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from core.backends.hosts import BACKOFF_MAX_S, backoff_pause, retry_after
from core.backends.ollama_backend import OllamaBackend
from core.backends.openai_backend import OpenAIBackend
from core.backends.replies import MalformedReply, parse_reply, repair_json
from core.config import BackendSettings
from core.protocols import BackendError, ContextBlock, Extraction, Report
from tests.fake_ollama import FAULT_KINDS, Deep, Fail, FakeOllama, Faults, Malformed, fake_extraction
from tests.fake_openai import FakeOpenAI

pytestmark = pytest.mark.timeout(60)

TYPES = ["PERSON", "ORGANIZATION", "LOCATION", "CONCEPT"]
DEEP = "[" * 100_000 + "]" * 100_000


def backend(kind: str, *fakes, **kw):
    """The real backend of `kind` on `fakes`, with the default retries, a tiny base backoff and a short timeout."""
    urls = [f.base_url if kind == "openai" else f.url for f in fakes]
    base = {"kind": kind, "timeout_s": 0.5, "backoff_s": 0.01, "hosts": urls if len(urls) > 1 else [],
            ("openai_base_url" if kind == "openai" else "ollama_host"): urls[0]}
    cls = OpenAIBackend if kind == "openai" else OllamaBackend
    return cls(BackendSettings(**{**base, **kw}), cache=None)


def server(kind: str):
    return FakeOpenAI() if kind == "openai" else FakeOllama()


def chat_path(kind: str) -> str:
    return "/v1/chat/completions" if kind == "openai" else "/api/chat"


# -- the schedule --------------------------------------------------------------------------------------------------


def test_backoff_doubles_up_to_its_cap_with_full_jitter():
    rng = random.Random(7)
    base, cap = 0.1, 2.0
    means = []
    for retry in range(1, 9):
        ceiling = min(cap, base * 2 ** (retry - 1))
        pauses = [backoff_pause(retry, base, cap, rng) for _ in range(2000)]
        assert all(0.0 <= p <= ceiling for p in pauses)
        assert max(pauses) > 0.95 * ceiling and min(pauses) < 0.05 * ceiling  # full jitter: all of [0, ceiling]
        assert len(set(pauses)) == len(pauses)  # random, not a fixed schedule
        assert abs(sum(pauses) / len(pauses) - ceiling / 2) < 0.05 * ceiling
        means.append(sum(pauses) / len(pauses))
    assert means[0] < means[1] < means[2] < means[3] < means[4] < means[5]  # doubles until 0.1 * 2^5 > cap
    assert max(backoff_pause(40, 0.5, rng=rng) for _ in range(200)) <= BACKOFF_MAX_S
    assert backoff_pause(3, 0.0, cap, rng) == 0.0


def test_retry_after_reads_seconds_milliseconds_and_http_dates():
    now = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert retry_after({"Retry-After": "1"}) == 1.0
    assert retry_after({"retry-after": " 2.5 "}) == 2.5
    assert retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25  # as the openai client reads them
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)  # "Fri, 01 May 2026 12:00:30 GMT"
    assert retry_after({"Retry-After": date}, now=now.timestamp()) == pytest.approx(30.0)
    assert retry_after({"Retry-After": format_datetime(now - timedelta(seconds=5), usegmt=True)},
                       now=now.timestamp()) == 0.0
    assert retry_after({"Retry-After": "-3"}) == 0.0
    for headers in (None, {}, {"Retry-After": "soon"}, {"Retry-After": "nan"}, {"Content-Type": "text/plain"}):
        assert retry_after(headers) is None


# -- replies nested too deep ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [DEEP, '{"entities": ' + DEEP + "}", '{"entities": ' + "[" * 100_000,
                                     '```json\n{"entities": ' + DEEP + "}\n```",
                                     '{"a": ' * 50_000 + "1" + "}" * 50_000])
def test_a_reply_nested_too_deep_is_malformed_not_a_recursion_error(content):
    with pytest.raises(MalformedReply):
        parse_reply(content, Extraction)
    assert repair_json(content) is None


def test_a_deep_field_the_schema_ignores_is_still_read():
    """Deeper than pydantic's JSON parser goes (200) but within json's: the repair path reads it."""
    good = {"entities": [], "relationships": [], "statements": ["Ada wrote it."]}
    ex = parse_reply(json.dumps(good)[:-1] + ', "junk": ' + "[" * 500 + "]" * 500 + "}", Extraction)
    assert ex.statements == ["Ada wrote it."]


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_deep_reply_is_asked_again_warmer(kind):
    with server(kind) as fake:
        path = chat_path(kind)
        fake.script[path].append(Deep())
        ex = backend(kind, fake).extract("Ada Lovelace met Charles Babbage.", TYPES)
        assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage"]
        bodies = [b for p, b in fake.requests if p == path]
        temps = [b["temperature"] if kind == "openai" else b["options"]["temperature"] for b in bodies]
        assert len(bodies) == 2 and temps[0] == 0.0 < temps[1]


# -- a server failing 30 % of its chat replies -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_sixty_calls_through_a_server_failing_30_percent_all_succeed(kind):
    """Every kind of fault, 30 % of the requests; the default retries (12), a 0.5 s timeout below the 1.5 s stalls.
    Each call gets the fault-free reply, and each fault cost one more request (the client never retries by itself,
    so attempts are not multiplied; a reply slowed past the timeout by a busy machine would cost one more too)."""
    texts = [f"Person{i} Quill met Other{i} Reed in City{i}." for i in range(60)]
    with server(kind) as fake:
        fake.faults = Faults(share=0.3, seed=11, kinds=FAULT_KINDS, stall_s=1.5)
        b = backend(kind, fake)
        got = [b.extract(t, TYPES) for t in texts[:55]]
        answers = [b.answer(f"Who met Other{i} Reed?", ContextBlock(sources=[f"Person{i} Quill met Other{i} Reed."]))
                   for i in range(5)]  # a plain answer: a fault's text is never taken for one
        injected, requests = dict(fake.injected), fake.chat_requests
        fake.faults = None
        want = [b.extract(t, TYPES) for t in texts[:55]]
        plain = [b.answer(f"Who met Other{i} Reed?", ContextBlock(sources=[f"Person{i} Quill met Other{i} Reed."]))
                 for i in range(5)]
    assert got == want and answers == plain
    assert [e.name for e in got[0].entities] == [e["name"] for e in fake_extraction(texts[0])["entities"]]
    assert set(injected) == set(FAULT_KINDS), injected
    assert 60 + sum(injected.values()) <= requests <= 60 + sum(injected.values()) + 3
    assert sum(injected.values()) >= 15  # about 30 % of ~85 requests


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_503_with_retry_after_1_makes_the_next_attempt_wait_a_second(kind):
    with server(kind) as fake:
        fake.script[chat_path(kind)].append(Fail(503, "server overloaded", headers={"Retry-After": "1"}))
        b = backend(kind, fake)
        started = time.monotonic()
        b.extract("Ada Lovelace met Charles Babbage.", TYPES)
        elapsed = time.monotonic() - started
        assert fake.chat_requests == 2
    assert 1.0 <= elapsed < 2.0  # the second attempt waited for the Retry-After, not just the tiny backoff


def test_the_attempts_are_the_pools_alone():
    """The openai client makes one try per attempt: its own retries would come on top of the pool's (a malformed
    reply, then three HTTP 500 were four requests with two retries)."""
    with FakeOpenAI() as fake:
        fake.script[chat_path("openai")].extend([Malformed()] + [Fail(500, "llama runner crashed")] * 4)
        with pytest.raises(BackendError, match="after 3 attempts: HTTP 500: llama runner crashed"):
            backend("openai", fake, retries=2).extract("Ada Lovelace met Charles Babbage.", TYPES)
        assert fake.chat_requests == 3


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_lone_overloaded_host_is_waited_on_not_failed(kind):
    """Ollama's 503 when its queue is full; ten in a row, more than the old 3 attempts, with the default retries."""
    with server(kind) as fake:
        busy = Fail(503, "server busy, please try again.  maximum pending requests exceeded")
        fake.script[chat_path(kind)].extend([busy] * 10)
        rep = backend(kind, fake, backoff_s=0.001).report("Marsh", ["Lena Marsh designed the Tidewater Bridge."])
        assert isinstance(rep, Report) and rep.title
        assert fake.chat_requests == 11


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_a_failing_host_is_passed_over_and_faulty_hosts_share_the_calls(kind):
    texts = [f"Person{i} Quill met Other{i} Reed." for i in range(10)]
    with server(kind) as a, server(kind) as b:
        a.faults = Faults(share=1.0, kinds=("500",))  # a fails every call: one request, then it is passed over
        shared = backend(kind, a, b, concurrency=1)
        got = [shared.extract(t, TYPES) for t in texts]
        assert a.chat_requests == 1 and b.chat_requests == len(texts)
        a.faults = Faults(share=0.3, seed=1, kinds=("500", "503", "malformed", "deep"))
        b.faults = Faults(share=0.3, seed=2, kinds=("500", "503", "malformed", "deep"))
        again = backend(kind, a, b, concurrency=1)
        assert [again.extract(t, TYPES) for t in texts] == got
        assert a.injected and b.injected
