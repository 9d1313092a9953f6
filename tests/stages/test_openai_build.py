"""Whole builds and a question through an OpenAI-compatible server: the real `openai` client against local HTTP
servers that speak the OpenAI API (tests/fake_openai.py); and builds whose calls several hosts share (OpenAI-compatible
or Ollama), which must equal a one-host build, even when a host goes down mid-build."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest
from sqlmodel import select

from core.models import Community, LLMCall, Node
from core.pipeline.factory import make_backend, make_context
from core.pipeline.runner import create_run, run_build
from core.store import Store
from core.workspace import ask, ingest_paths, open_resources
from tests.fake_ollama import FakeOllama
from tests.fake_openai import CHAT, EMBED, FakeOpenAI
from tests.stages.test_pipeline import snapshot

pytestmark = pytest.mark.timeout(300)


def served_settings(make_settings, home, kind: str, urls: list[str]):
    s = make_settings(home)
    s.backend.kind = kind
    if kind == "openai":
        s.backend.openai_base_url = urls[0]
    else:
        s.backend.ollama_host = urls[0]
    s.backend.hosts = list(urls) if len(urls) > 1 else []
    s.backend.timeout_s, s.backend.retries, s.backend.backoff_s = 5.0, 1, 0.01
    s.archrag.min_clusters = 2  # the four tiny documents give fewer than ArchRAG's published 5 communities a level
    return s


def fake_url(fake) -> str:
    return fake.base_url if isinstance(fake, FakeOpenAI) else fake.url


def chat_count(fake) -> int:
    return fake.count(CHAT) if isinstance(fake, FakeOpenAI) else fake.count("/api/chat")


def test_openai_build_extracts_reports_and_answers(tmp_path, tiny_corpus, build, make_settings):
    with FakeOpenAI() as fake:
        s = served_settings(make_settings, tmp_path / "h", "openai", [fake.base_url])
        b = build(tmp_path / "h", [tiny_corpus], settings=s)
        with b.store.session() as sess:
            entities = sess.exec(select(Node).where(Node.workspace_id == b.ws.id, Node.kind == "entity")).all()
            comms = sess.exec(select(Community).where(Community.workspace_id == b.ws.id)).all()
            calls = sess.exec(select(LLMCall).where(LLMCall.backend == "openai")).all()
            kinds = {n.kind for n in sess.exec(select(Node).where(Node.workspace_id == b.ws.id))}
        assert entities and b.ws.backend == "openai" and b.ws.chat_model == "llama3.1:8b"
        assert {c.method for c in comms} >= {"leiden", "hirag", "attributed", "noderag"}
        assert all(c.title and c.summary for c in comms if c.method != "wcc"), "every community has a report"
        assert {c.task for c in calls} >= {"extract", "report", "summarize-attribute", "topics",
                                           "summary-entities"}
        assert kinds >= {"chunk", "statement", "entity", "relationship", "attribute", "high_level", "overview",
                         "topic"}
        bodies = fake.bodies()
        assert bodies and all(body["response_format"]["type"] == "json_schema" for body in bodies)
        assert len(bodies) == len(calls), "each distinct call asked once, then cached"

        before = len(fake.bodies())
        res = open_resources(b.store, b.ws, s, b.embedder)
        r, a = ask(res, make_backend(s, b.store), "Who conducts the Kelmouth Choir?", "hirag")
        assert a.text.strip() and r.sources
        assert len(fake.bodies()) == before + 1 and "response_format" not in fake.bodies()[-1]


def test_openai_embeddings_build(tmp_path, tiny_corpus, make_settings):
    """The embedder "openai": the build's vectors come from /v1/embeddings, and the workspace says so."""
    with FakeOpenAI(dim=32) as fake:
        s = served_settings(make_settings, tmp_path / "h", "openai", [fake.base_url])
        s.embed.embedder = "openai"
        store = Store(s.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], s)
        ctx = make_context(store, ws, s)
        assert events_of(ctx, store, ws, s)[-1].status == "done"
        ws = store.require_workspace("w")
        assert ws.embedder == "openai-nomic-embed-text" and ctx.embedder.dim == 32
        assert fake.count(EMBED) > 0 and fake.paths()[0] == "/v1/models"  # checked before the build


def events_of(ctx, store, ws, s) -> list:
    run = create_run(store, ws, s)
    return list(run_build(ctx, run.id))


def _build(build, home, tiny_corpus, make_settings, kind: str, fakes: list) -> dict:
    s = served_settings(make_settings, home, kind, [fake_url(f) for f in fakes])
    b = build(home, [tiny_corpus], settings=s)
    return snapshot(b.store, b.ws.id)


@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_two_hosts_share_a_build_and_give_what_one_host_gives(tmp_path, tiny_corpus, build, make_settings, kind):
    server = FakeOpenAI if kind == "openai" else FakeOllama
    with server() as one:
        alone = _build(build, tmp_path / "one", tiny_corpus, make_settings, kind, [one])
    with server() as a, server() as b:
        shared = _build(build, tmp_path / "two", tiny_corpus, make_settings, kind, [a, b])
        assert chat_count(a) > 0 and chat_count(b) > 0, "both hosts answered calls of the build"
        assert chat_count(a) + chat_count(b) == chat_count(one)
    assert shared == alone


def test_a_host_down_mid_build_leaves_the_build_to_the_other(tmp_path, tiny_corpus, build, make_settings):
    with FakeOpenAI() as one:
        alone = _build(build, tmp_path / "one", tiny_corpus, make_settings, "openai", [one])
    with ExitStack() as stack:
        a, b = stack.enter_context(FakeOpenAI()), stack.enter_context(FakeOpenAI())
        stop = threading.Event()

        def take_b_down() -> None:  # once b has answered a few calls, it drops every connection
            while not stop.wait(0.005):
                if b.count(CHAT) >= 3:
                    b.down = True
                    return

        watcher = threading.Thread(target=take_b_down, daemon=True)
        watcher.start()
        try:
            shared = _build(build, tmp_path / "two", tiny_corpus, make_settings, "openai", [a, b])
        finally:
            stop.set()
            watcher.join(timeout=5)
        assert b.down and b.count(CHAT) >= 3 and a.count(CHAT) > b.count(CHAT)
    assert shared == alone
