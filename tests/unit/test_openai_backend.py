"""The OpenAI-compatible backend, embedder and check against FakeOpenAI, a real HTTP server, through the official
`openai` client; and several hosts (OpenAI-compatible or Ollama) sharing the calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from sqlmodel import select

from core.backends.cache import CallCache
from core.backends.model_backend import json_schema
from core.backends.ollama_backend import OllamaBackend
from core.backends.openai_backend import OpenAIBackend
from core.backends.openai_client import check
from core.backends.openai_embedder import OpenAIEmbedder
from core.backends.servers import require_servers
from core.config import BackendSettings, Settings
from core.extract.prompts import extraction_prompt
from core.models import LLMCall
from core.protocols import (
    BackendError,
    ContextBlock,
    Embedder,
    Extraction,
    LanguageBackend,
    RetrievalLLM,
    Summary,
    SummaryEntities,
)
from core.store import Store
from tests.fake_ollama import FakeOllama
from tests.fake_openai import CHAT, EMBED, Fail, FakeOpenAI, Malformed, Missing, Reply, Sleep
from tests.unit.test_ollama_backend import closed_port_url as closed_port

pytestmark = pytest.mark.timeout(60)

TYPES = ["PERSON", "ORGANIZATION", "LOCATION", "CONCEPT"]
TEXT = "Ada Lovelace worked with Charles Babbage in London. She wrote the first published algorithm."
GOOD = {"entities": [{"name": "Ada Lovelace", "type": "PERSON", "description": "A mathematician."},
                     {"name": "Charles Babbage", "type": "PERSON", "description": "An inventor."}],
        "relationships": [], "statements": ["Ada Lovelace worked with Charles Babbage."]}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def settings_for(*fakes: FakeOpenAI, **kw) -> BackendSettings:
    base = {"kind": "openai", "openai_base_url": fakes[0].base_url, "timeout_s": 5.0, "retries": 2,
            "backoff_s": 0.01}
    if len(fakes) > 1:
        base["hosts"] = [f.base_url for f in fakes]
    return BackendSettings(**{**base, **kw})


def closed_port_url() -> str:
    return f"{closed_port()}/v1"


def formats(fake: FakeOpenAI) -> list[str | None]:
    return [(b.get("response_format") or {}).get("type") for b in fake.bodies()]


# -- round trips ----------------------------------------------------------------------------------------------


def test_extract_sends_the_json_schema_response_format(fake):
    backend = OpenAIBackend(settings_for(fake), cache=None)
    assert isinstance(backend, LanguageBackend) and isinstance(backend, RetrievalLLM)
    assert (backend.name, backend.model, backend.host) == ("openai", "llama3.1:8b", fake.base_url)
    ex = backend.extract(TEXT, TYPES)
    assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage", "London"]
    assert ex.statements == ["Ada Lovelace worked with Charles Babbage in London."]
    (body,) = fake.bodies()
    assert body["model"] == "llama3.1:8b" and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Extraction", "schema": json_schema(Extraction), "strict": True}}
    assert body["messages"] == [{"role": "user", "content": extraction_prompt(TEXT, TYPES)}]


def test_every_task_round_trips(fake):
    b = OpenAIBackend(settings_for(fake), cache=None)
    rep = b.report("Ada; Babbage", ["Ada Lovelace worked with Charles Babbage.", "Babbage built engines."])
    assert rep.title == "Ada Lovelace and Charles Babbage" and rep.findings
    s = b.summarize("attribute", "Ada Lovelace", ["Ada Lovelace wrote notes on the Analytical Engine."])
    assert isinstance(s, Summary) and s.title == "Ada Lovelace Analytical Engine" and "notes" in s.summary
    se = b.summary_entities([("Ada Lovelace", "a mathematician"), ("Charles Babbage", "an inventor")], ["person"])
    assert isinstance(se, SummaryEntities) and se.entities[0].name == "Ada Lovelace Circle"
    assert {(r.source, r.target) for r in se.relationships} == {("Ada Lovelace", "Ada Lovelace Circle"),
                                                                ("Charles Babbage", "Ada Lovelace Circle")}
    answer = b.answer("Who wrote the notes?", ContextBlock(local=["x"], sources=["Ada Lovelace notes", "Other"]))
    assert answer == "According to the sources, this concerns Ada Lovelace and Other [1]."
    points = b.rate_points("When did the bridge open?", "The bridge opened in 2011. Apples grow in the vale.")
    assert points[0].description == "The bridge opened in 2011." and points[0].score > points[1].score
    scores = b.rerank("Who designed the Tidewater Bridge?",
                      ["Lena Marsh designed the Tidewater Bridge.", "Apples grow in Arden Vale."])
    assert scores[0] > scores[1] == 0.0
    terms = b.query_terms("Who designed what Lena Marsh built?")
    assert terms.entities == ["Who", "Lena Marsh"] and "designed" in terms.keywords
    bodies = fake.bodies()
    assert [(bd.get("response_format") or {}).get("json_schema", {}).get("name") for bd in bodies] == [
        "Report", "Summary", "SummaryEntities", None, "RatedPoints", "PassageScores", "QueryTerms"]
    assert "response_format" not in bodies[3]  # the answer is plain text


def test_rerank_refuses_a_wrong_count(fake):
    for _ in range(2):
        fake.script[CHAT].append(Reply(content=json.dumps({"scores": [3, 4, 5]})))
    with pytest.raises(BackendError, match="expected 2 scores, got 3"):
        OpenAIBackend(settings_for(fake, retries=1), cache=None).rerank("Who?", ["a passage", "another"])


def test_a_reasoning_models_thoughts_are_dropped(fake):
    fake.script[CHAT].append(Reply(content="<think>The user wants {json}.</think>\n" + json.dumps(GOOD)))
    ex = OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage"] and len(fake.bodies()) == 1


# -- malformed replies, repair, retries ----------------------------------------------------------------------------


def test_repairable_reply_succeeds_without_retry(fake):
    fake.script[CHAT].append(Reply(content="Here:\n```json\n" + json.dumps(GOOD)[:-1] + ",}\n```\nDone."))
    ex = OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage"] and len(fake.bodies()) == 1


def test_control_characters_in_a_reply_are_dropped(fake):
    """A garbage byte, raw or JSON-escaped, never reaches a stored name (PostgreSQL refuses NUL in text)."""
    reply = json.dumps(GOOD).replace("Ada Lovelace", "Ada\\u0000 Love\x07lace", 1)
    fake.script[CHAT].append(Reply(content=reply))
    ex = OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage"]
    fake.script[CHAT].append(Reply(content="Ada\x00 wrote it [1].\tShe was first."))
    answer = OpenAIBackend(settings_for(fake), cache=None).answer("Who?", ContextBlock(local=["x"], sources=["a source"]))
    assert "\x00" not in answer and "Ada wrote it [1]." in answer


def test_malformed_then_missing_fields_then_good_is_retried_warmer(fake):
    fake.script[CHAT].extend([Malformed(), Missing(), Reply(content=json.dumps(GOOD))])
    ex = OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert len(ex.entities) == 2
    temps = [b["temperature"] for b in fake.bodies()]
    assert temps[0] == 0.0 and temps[1] > 0.0 and temps[2] > temps[1]


def test_persistently_malformed_replies_raise(fake):
    fake.script[CHAT].extend([Missing(), Missing(body=True), Missing()])
    with pytest.raises(BackendError) as err:
        OpenAIBackend(settings_for(fake, retries=2), cache=None).report("T", ["m"])
    msg = str(err.value)
    assert fake.base_url in msg and "'llama3.1:8b'" in msg and "after 3 attempts" in msg and "malformed" in msg
    assert len(fake.bodies()) == 3


def test_http_500_then_success_is_retried(fake):
    fake.script[CHAT].append(Fail(500, "llama runner crashed"))
    ex = OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert len(ex.entities) == 3 and len(fake.bodies()) == 2


def test_persistent_500_names_host_model_and_status(fake):
    fake.script[CHAT].extend([Fail(500, "llama runner crashed")] * 5)
    with pytest.raises(BackendError) as err:
        OpenAIBackend(settings_for(fake, retries=2), cache=None).extract(TEXT, TYPES)
    msg = str(err.value)
    assert fake.base_url in msg and "'llama3.1:8b'" in msg and "HTTP 500: llama runner crashed" in msg
    assert len(fake.bodies()) == 3  # 1 + retries, by the pool (the client makes one try per attempt)


def test_timeout_then_success_and_timeouts_raise(fake):
    fake.script[CHAT].append(Sleep(3.0))
    ex = OpenAIBackend(settings_for(fake, timeout_s=0.5, retries=1), cache=None).extract(TEXT, TYPES)
    assert len(ex.entities) == 3 and len(fake.bodies()) == 2
    fake.script[CHAT].extend([Sleep(3.0), Sleep(3.0)])
    started = time.monotonic()
    with pytest.raises(BackendError, match="timeout"):
        OpenAIBackend(settings_for(fake, timeout_s=0.5, retries=1), cache=None).extract("Grace Hopper.", TYPES)
    assert time.monotonic() - started < 2.9  # two 0.5 s timeouts and a short pause, not the 3 s sleeps


def test_missing_model_and_bad_key_fail_at_once(fake):
    with pytest.raises(BackendError) as err:
        OpenAIBackend(settings_for(fake, chat_model="qwen2.5:7b"), cache=None).extract(TEXT, TYPES)
    assert "no model 'qwen2.5:7b'" in str(err.value) and "HTTP 404" in str(err.value)
    assert len(fake.bodies()) == 1
    fake.script[CHAT].append(Fail(401, "invalid api key"))
    with pytest.raises(BackendError, match="refused the API key .*STRATA_OPENAI_API_KEY"):
        OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)


def test_unreachable_endpoint_raises_one_clear_error():
    url = closed_port_url()
    with pytest.raises(BackendError) as err:
        OpenAIBackend(BackendSettings(kind="openai", openai_base_url=url, retries=0), cache=None).extract(TEXT, TYPES)
    assert url in str(err.value) and "connection failed" in str(err.value)


# -- structured output fallback ----------------------------------------------------------------------------------


def test_400_on_json_schema_falls_back_to_json_object_and_is_remembered():
    with FakeOpenAI(formats=("json_object",)) as fake:
        backend = OpenAIBackend(settings_for(fake), cache=None)
        ex = backend.extract(TEXT, TYPES)
        assert [e.name for e in ex.entities] == ["Ada Lovelace", "Charles Babbage", "London"]
        backend.report("T", ["Ada Lovelace met Charles Babbage."])
        assert formats(fake) == ["json_schema", "json_object", "json_object"]
        second = fake.bodies()[1]  # llama-cpp-python's form: the schema inside the json_object format
        assert second["response_format"] == {"type": "json_object", "schema": json_schema(Extraction)}
        assert [m["role"] for m in second["messages"]] == ["user"]


def test_a_server_without_structured_output_is_prompted_plainly():
    with FakeOpenAI(formats=()) as fake:
        backend = OpenAIBackend(settings_for(fake), cache=None)
        assert [e.name for e in backend.extract(TEXT, TYPES).entities][:1] == ["Ada Lovelace"]
        backend.extract("Grace Hopper joined the Navy.", TYPES)
        assert formats(fake) == ["json_schema", "json_object", None, None]
        system = fake.bodies()[2]["messages"][0]  # plain prompting states the schema
        assert system["role"] == "system" and json.dumps(json_schema(Extraction)) in system["content"]


def test_the_mode_is_remembered_per_host():
    with FakeOpenAI(formats=()) as plain, FakeOpenAI() as full:
        backend = OpenAIBackend(settings_for(plain, full, concurrency=1), cache=None)
        for i in range(4):
            backend.extract(f"Person{i} Name met Other{i} Person.", TYPES)
        assert formats(plain) == ["json_schema", "json_object", None, None]
        assert formats(full) == ["json_schema", "json_schema"]


def test_a_400_about_something_else_is_not_a_format_fallback(fake):
    fake.script[CHAT].append(Fail(400, "the prompt is longer than the context window"))
    with pytest.raises(BackendError, match="refused to extract .*HTTP 400: the prompt is longer"):
        OpenAIBackend(settings_for(fake), cache=None).extract(TEXT, TYPES)
    assert formats(fake) == ["json_schema"]


# -- cache ----------------------------------------------------------------------------------------------------


def test_cache_hit_makes_no_request_on_any_host(tmp_path):
    store = Store(tmp_path / "strata.db")
    with FakeOpenAI() as a, FakeOpenAI() as b:
        first = OpenAIBackend(settings_for(a), cache=CallCache(store)).extract(TEXT, TYPES)
        again = OpenAIBackend(settings_for(b), cache=CallCache(store)).extract(TEXT, TYPES)  # another host
        assert again == first and len(a.bodies()) == 1 and len(b.bodies()) == 0
        with store.session() as sess:
            (row,) = sess.exec(select(LLMCall)).all()
        assert (row.backend, row.model, row.task) == ("openai", "llama3.1:8b", "extract")
        assert row.key == CallCache.key("openai", "llama3.1:8b", "extract", extraction_prompt(TEXT, TYPES),
                                        json_schema(Extraction), {"temperature": 0.0, "max_tokens": 2048})
        OpenAIBackend(settings_for(a, temperature=0.2), cache=CallCache(store)).extract(TEXT, TYPES)
        assert len(a.bodies()) == 2  # other options: another call


def test_failed_calls_are_not_cached(fake, tmp_path):
    store = Store(tmp_path / "s.db")
    fake.script[CHAT].extend([Malformed(), Malformed()])
    backend = OpenAIBackend(settings_for(fake, retries=1), cache=CallCache(store))
    with pytest.raises(BackendError):
        backend.extract(TEXT, TYPES)
    backend.extract(TEXT, TYPES)
    assert len(fake.bodies()) == 3


# -- settings, key, check ----------------------------------------------------------------------------------------


def test_settings_from_env_and_the_key_is_never_dumped(fake):
    env = {"STRATA_BACKEND": "openai", "STRATA_OPENAI_BASE_URL": fake.base_url, "STRATA_OPENAI_API_KEY": "sk-secret",
           "STRATA_HOSTS": "127.0.0.1:1/v1, http://127.0.0.1:2/v1"}
    s = Settings.from_env(env)
    assert s.backend.kind == "openai" and s.backend.openai_base_url == fake.base_url
    assert s.backend.endpoints() == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert s.backend.endpoints("ollama") == ["http://127.0.0.1:11434"]
    assert s.backend.parallel_calls == 2 * s.backend.concurrency
    assert s.backend.api_key is not None and s.backend.api_key.get_secret_value() == "sk-secret"
    assert "sk-secret" not in json.dumps(s.model_dump(mode="json")) and "sk-secret" not in repr(s)
    s = Settings.from_env({k: v for k, v in env.items() if k != "STRATA_HOSTS"})
    assert s.backend.endpoints() == [fake.base_url]
    OpenAIBackend(s.backend, cache=None).extract(TEXT, TYPES)
    assert fake.keys == ["Bearer sk-secret"]


def test_check_ready_missing_and_unreachable(fake):
    st = check(settings_for(fake, embed_model="nomic-embed-text:latest"))
    assert st.ok and st.models == ["llama3.1:8b", "nomic-embed-text"] and fake.paths() == ["/v1/models"]
    st = check(settings_for(fake, chat_model="qwen2.5:7b"), need_embed=False)
    assert not st.ok and st.missing == ["qwen2.5:7b"] and "it serves: llama3.1:8b, nomic-embed-text" in st.message
    url = closed_port_url()
    st = check(BackendSettings(kind="openai", openai_base_url=url, timeout_s=2.0))
    assert not st.reachable and url in st.message and "not reachable" in st.message


def test_require_servers_checks_every_host(fake):
    s = Settings()
    s.backend = settings_for(fake)
    require_servers(s)  # ready
    dead = closed_port_url()
    s.backend.hosts = [fake.base_url, dead]
    with pytest.raises(BackendError) as err:
        require_servers(s)
    assert dead in str(err.value) and "\n" not in str(err.value)


def test_cli_says_an_unreachable_endpoint_in_one_line(tmp_path):
    url = closed_port_url()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATA_", "OLLAMA_", "OPENAI_"))}
    env.update(STRATA_HOME=str(tmp_path), STRATA_OPENAI_BASE_URL=url, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONPATH=str(ROOT))
    (tmp_path / "a.txt").write_text("Ada Lovelace met Charles Babbage.", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "core", "build", "--workspace", "w", "--backend", "openai",
                        str(tmp_path / "a.txt")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and url in lines[0] and "not reachable" in lines[0], p.stderr


# -- embedder -------------------------------------------------------------------------------------------------


def test_embedder_batches_orders_and_normalizes():
    with FakeOpenAI(dim=24) as fake:
        emb = OpenAIEmbedder(settings_for(fake), batch_size=2)
        assert isinstance(emb, Embedder) and emb.name == "openai-nomic-embed-text" and emb.dim == 0
        vecs = emb.embed(["alpha", "beta", "gamma", "alpha", ""])
        assert vecs.shape == (5, 24) and vecs.dtype == np.float32 and emb.dim == 24
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(vecs[0], vecs[3])
        assert not np.allclose(vecs[0], vecs[1])
        assert [b["input"] for b in fake.bodies(EMBED)] == [["alpha", "beta"], ["gamma", "alpha"], ["(empty)"]]
        assert emb.discover_dim() == 24 and len(fake.bodies(EMBED)) == 3


def test_embedder_retries_a_bad_reply_and_a_500(fake):
    one = {"object": "list", "model": "m", "data": [{"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}]}
    fake.script[EMBED].extend([Fail(503, "loading"), Reply(body=one)])
    vecs = OpenAIEmbedder(settings_for(fake)).embed(["a", "b"])
    assert vecs.shape == (2, 16) and len(fake.bodies(EMBED)) == 3


def test_embedder_unreachable_raises():
    url = closed_port_url()
    with pytest.raises(BackendError) as err:
        OpenAIEmbedder(BackendSettings(openai_base_url=url, retries=0)).embed(["x"])
    assert url in str(err.value) and "nomic-embed-text" in str(err.value)


# -- several hosts ---------------------------------------------------------------------------------------------


def test_two_hosts_share_the_calls_with_the_same_results():
    texts = [f"Person{i} Name met Other{i} Person in City{i}." for i in range(8)]
    with FakeOpenAI() as one:
        alone = [OpenAIBackend(settings_for(one), cache=None).extract(t, TYPES) for t in texts]
    with FakeOpenAI() as a, FakeOpenAI() as b:
        backend = OpenAIBackend(settings_for(a, b), cache=None)
        assert backend.hosts == [a.base_url, b.base_url]
        shared = [backend.extract(t, TYPES) for t in texts]  # one caller at a time: the hosts take turns
        assert shared == alone
        assert len(a.bodies()) == 4 and len(b.bodies()) == 4


def test_each_host_has_its_own_slots():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        for f in (a, b):
            f.script[CHAT].extend([Sleep(0.2)] * 4)
        backend = OpenAIBackend(settings_for(a, b, concurrency=2), cache=None)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda i: backend.extract(f"Person{i} Name met X.", TYPES), range(8)))
        assert all(r.entities for r in results)
        assert a.max_inflight == 2 and b.max_inflight == 2


def test_a_host_that_goes_down_is_passed_over():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        backend = OpenAIBackend(settings_for(a, b, retries=1, concurrency=1), cache=None)
        backend.extract("Grace Hopper joined the Navy.", TYPES)
        b.down = True
        results = [backend.extract(f"Person {i} met Other {i} in Paris.", TYPES) for i in range(6)]
        assert all([e.name for e in r.entities] == ["Person", "Other", "Paris"] for r in results)
        # the first call after it went down was b's turn: one try (the client does not retry by itself), then it
        # moved to a, and b, marked down, got no call since
        assert len(b.bodies()) == 1 and len(a.bodies()) == 1 + 6


def test_when_every_host_is_down_the_error_names_one():
    with FakeOpenAI() as a, FakeOpenAI() as b:
        a.down = b.down = True
        with pytest.raises(BackendError) as err:
            OpenAIBackend(settings_for(a, b, retries=0), cache=None).extract(TEXT, TYPES)
        assert a.base_url in str(err.value) or b.base_url in str(err.value)
        assert "connection failed" in str(err.value)


def test_ollama_hosts_share_the_calls_too():
    texts = [f"Person{i} Name met Other{i} Person." for i in range(6)]
    with FakeOllama() as a, FakeOllama() as b:
        s = BackendSettings(kind="ollama", hosts=[a.url, b.url], timeout_s=5.0, retries=1)
        backend = OllamaBackend(s, cache=None)
        shared = [backend.extract(t, TYPES) for t in texts]
        assert a.count("/api/chat") == 3 and b.count("/api/chat") == 3
        b.script["/api/chat"].extend([Fail(503, "gone")] * 10)  # b fails: the call moves to a, b is passed over
        backend.extract("Grace Hopper joined the Navy.", TYPES)
        backend.extract("Alan Turing studied at Cambridge.", TYPES)
        assert a.count("/api/chat") == 5 and b.count("/api/chat") == 4
    with FakeOllama() as one:
        alone = [OllamaBackend(BackendSettings(kind="ollama", ollama_host=one.url), cache=None).extract(t, TYPES)
                 for t in texts]
    assert shared == alone
