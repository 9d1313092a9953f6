"""What a real OpenAI-compatible server taught the backend (issue 38), against FakeOpenAI acting as llama-cpp-python
or llama-server: a refused request format is asked in the next format at once (also a 500 whose body says the request
is invalid), a prompt longer than the server's window is cut to fit (the window read from the refusal or from
/props), `max_tokens` bounds every call, and each reply's host and token counts reach the call cache's row and the
host's tokens per second (core/backends/host_speed.py)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import openai
import pytest
from sqlmodel import select

from core.backends.cache import CallCache
from core.backends.context_fit import CUT_MARK, cut_prompt, window_from_error, window_from_props
from core.backends.host_speed import host_speeds, speed
from core.backends.openai_backend import OpenAIBackend, rejects_format
from core.config import BackendSettings
from core.extract.prompts import extraction_prompt
from core.models import LLMCall, utcnow
from core.store import Store
from tests.fake_openai import CHAT, Fail, FakeOpenAI

pytestmark = pytest.mark.timeout(60)

TYPES = ["PERSON", "ORGANIZATION", "LOCATION"]
TEXT = "Ada Lovelace worked with Charles Babbage in London. She wrote the first published algorithm."
LONG = " ".join(f"Person{i} Name met Other{i} Person in Town{i}." for i in range(150))  # about 6,000 characters


def settings_for(fake: FakeOpenAI, **kw) -> BackendSettings:
    base = {"kind": "openai", "openai_base_url": fake.base_url, "timeout_s": 5.0, "retries": 12, "backoff_s": 2.0,
            "concurrency": 1}
    return BackendSettings(**{**base, **kw})


def formats(fake: FakeOpenAI) -> list[str | None]:
    return [(b.get("response_format") or {}).get("type") for b in fake.bodies()]


def status_error(status: int, message: str) -> openai.APIStatusError:
    response = httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions"))
    cls = {400: openai.BadRequestError, 422: openai.UnprocessableEntityError, 429: openai.RateLimitError}.get(
        status, openai.InternalServerError)
    return cls(message, response=response, body={"message": message, "type": "server_error"})


# -- a refused format ----------------------------------------------------------------------------------------------


def test_a_500_saying_the_format_is_invalid_is_asked_in_the_next_format_at_once(caplog):
    """llama-cpp-python answers a json_schema format with HTTP 500 and a validation message: not a fault to retry
    (12 retries with a 2 s backoff would take minutes), the next format at once, remembered."""
    with FakeOpenAI(formats=("json_object",), refusal=500) as fake:
        backend = OpenAIBackend(settings_for(fake), cache=None)
        ex = backend.extract(TEXT, TYPES)
        assert not [r for r in caplog.records if "trying again" in r.getMessage()], "no retry, no backoff pause"
        assert [e.name for e in ex.entities][:2] == ["Ada Lovelace", "Charles Babbage"]
        backend.report("T", ["Ada Lovelace met Charles Babbage."])
        assert formats(fake) == ["json_schema", "json_object", "json_object"]


@pytest.mark.parametrize(("status", "message", "refused"), [
    (500, "1 validation error for CreateChatCompletionRequest response_format.type Input should be 'text' or "
          "'json_object' [type=literal_error]", True),
    (400, "response_format json_schema is not supported", True),
    (422, "Unrecognized request argument: response_format.schema", True),
    (500, "CUDA out of memory while decoding the json_schema grammar", False),  # a fault, whatever it names
    (500, "internal error", False),
    (429, "too many requests for response_format json_schema", False),  # overloaded: retried
    (400, "This model's maximum context length is 2048 tokens", False),
])
def test_which_errors_are_a_refused_format(status, message, refused):
    assert rejects_format(status_error(status, message)) is refused


def test_an_overloaded_500_is_still_retried_in_the_same_format():
    with FakeOpenAI() as fake:
        fake.script[CHAT].append(Fail(500, "the server is busy"))
        OpenAIBackend(settings_for(fake, backoff_s=0.01), cache=None).extract(TEXT, TYPES)
        assert formats(fake) == ["json_schema", "json_schema"]


# -- the server's window -------------------------------------------------------------------------------------------


def test_window_from_the_refusals_of_each_server():
    w = window_from_error(400, "This model's maximum context length is 2048 tokens. However, you requested 2600 "
                               "tokens (2500 in the messages, 100 in the completion). Please reduce the length.")
    assert (w.n_ctx, w.prompt_tokens) == (2048, 2500)
    w = window_from_error(400, "the request exceeds the available context size, try increasing it",
                          {"error": {"type": "exceed_context_size_error", "n_ctx": 4096, "n_prompt_tokens": 5000}})
    assert (w.n_ctx, w.prompt_tokens) == (4096, 5000)
    w = window_from_error(500, "Requested tokens (3000) exceed context window of 2048")
    assert w is not None and w.n_ctx == 2048
    assert window_from_error(400, "response_format json_schema is not supported") is None
    assert window_from_error(503, "the server is busy") is None
    assert window_from_props({"default_generation_settings": {"n_ctx": 8192}}) == 8192
    assert window_from_props({"n_ctx": 512}) == 512 and window_from_props({"detail": "Not Found"}) is None


def test_cut_prompt_shortens_the_material_and_keeps_the_instructions():
    prompt = extraction_prompt(LONG, TYPES)
    cut = cut_prompt(prompt, 2000)
    assert len(cut) <= 2000 and CUT_MARK in cut
    head, _, tail = prompt.partition(LONG)
    assert cut.startswith(head) and cut.endswith(tail), "everything but the material is whole"
    assert cut_prompt(prompt, len(prompt)) == prompt
    plain = "x" * 1000
    short = cut_prompt(plain, 300)
    assert len(short) <= 300 and CUT_MARK in short


def test_a_prompt_longer_than_the_window_is_cut_and_the_window_remembered():
    with FakeOpenAI(n_ctx=1200) as fake:  # 1,200 tokens of 4 characters: the long prompt does not fit
        backend = OpenAIBackend(settings_for(fake, max_tokens=256), cache=None)
        assert backend.extract(LONG, TYPES).entities
        first, second = fake.bodies()
        assert CUT_MARK not in first["messages"][-1]["content"] and CUT_MARK in second["messages"][-1]["content"]
        assert sum(len(m["content"]) for m in second["messages"]) // 4 + second["max_tokens"] <= 1200
        assert backend._pool.hosts[0].notes["n_ctx"] == 1200
        backend.extract(LONG.replace("Town", "City"), TYPES)  # cut before it is sent: one request
        assert len(fake.bodies()) == 3 and CUT_MARK in fake.bodies()[-1]["messages"][-1]["content"]
        backend.extract(TEXT, TYPES)  # a short prompt is sent whole
        assert fake.bodies()[-1]["messages"][-1]["content"] == extraction_prompt(TEXT, TYPES)


def test_llama_servers_window_is_read_from_props():
    with FakeOpenAI(n_ctx=1000, props=True) as fake:
        backend = OpenAIBackend(settings_for(fake, max_tokens=200), cache=None)
        assert backend.extract(LONG, TYPES).entities
        assert fake.count("/props") == 1 and backend._pool.hosts[0].notes["n_ctx"] == 1000


def test_max_tokens_bounds_every_call_and_half_the_window_once_known():
    with FakeOpenAI(n_ctx=1200) as fake:
        backend = OpenAIBackend(settings_for(fake, max_tokens=2048), cache=None)
        backend.answer("Who?", backend_context())
        backend.extract(TEXT, TYPES)
        assert all("max_tokens" in b for b in fake.bodies())
        assert fake.bodies()[0]["max_tokens"] == 2048  # the window is not known yet: refused, then halved
        assert all(b["max_tokens"] == 600 for b in fake.bodies()[1:])


def backend_context():
    from core.protocols import ContextBlock

    return ContextBlock(local=["Ada Lovelace wrote the first algorithm."], sources=[])


# -- tokens per second ---------------------------------------------------------------------------------------------


def test_each_reply_records_its_host_and_tokens_and_the_hosts_speed(tmp_path):
    store = Store(tmp_path / "s.db")
    since = utcnow() - timedelta(seconds=1)
    with FakeOpenAI() as fake:
        backend = OpenAIBackend(settings_for(fake), cache=CallCache(store))
        for i in range(5):
            backend.extract(f"Person{i} Name met Other{i} Person in London." * (i + 1), TYPES)
        backend.extract("Person0 Name met Other0 Person in London.", TYPES)  # from the cache: no request
    with store.session() as s:
        rows = list(s.exec(select(LLMCall)))
    assert len(rows) == 5 and all(r.request["host"] == fake.base_url for r in rows)
    assert all(r.request["usage"]["in"] > 0 and r.request["usage"]["out"] > 0 and r.request["usage"]["s"] > 0
               for r in rows)
    (h,) = host_speeds(store, since)
    assert (h.host, h.calls) == (fake.base_url, 5) and h.tokens_out == sum(r.request["usage"]["out"] for r in rows)
    assert h.write_per_s and h.write_per_s > 0
    assert host_speeds(store, utcnow() + timedelta(seconds=5)) == []  # nothing asked since


def test_speed_from_server_timings_from_a_fit_and_from_totals():
    timed = [{"in": 100, "out": 20, "s": 3.0, "in_s": 2.0, "out_s": 1.0}, {"in": 50, "out": 10, "s": 1.5,
                                                                          "in_s": 1.0, "out_s": 0.5}]
    h = speed("h", timed)
    assert h.how == "server's timings" and h.read_per_s == pytest.approx(50) and h.write_per_s == pytest.approx(20)
    fitted = [{"in": i, "out": o, "s": i / 50 + o / 20 + 0.1} for i, o in [(100, 10), (400, 30), (250, 80),
                                                                           (800, 20), (60, 60)]]
    h = speed("h", fitted)
    assert h.how == "fit" and h.read_per_s == pytest.approx(50, rel=0.01) and h.write_per_s == pytest.approx(20, rel=0.01)
    h = speed("h", fitted[:2])
    assert h.read_per_s is None and h.write_per_s == pytest.approx(40 / sum(u["s"] for u in fitted[:2]))
