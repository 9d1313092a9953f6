"""Strata on a real model server (issue 38): llama-cpp-python's OpenAI-compatible server with Gemma 3 270M base
(tests/real_model/conftest.py). A one-document corpus is built through STRATA_BACKEND=openai, a question is answered by
the model, HLG's keywords and rerank are run by it (on the same documents built offline), and the documents are built
again from the call cache.

What is asserted is what a user relies on, not what the tiny model says: the build finishes; every unit either
stored a parsed result or is a failed unit with the server's own reason (never stored empty); the answer is the
model's text, shown beside its context; the rebuild asks the server nothing. And what the real server taught the
backend: its refusal of the json_schema format (HTTP 500) is followed at once by the next format, a prompt longer than
its window is cut to fit, and max_tokens bounds every request.

The settings a user would set for such a server and model are set here: a small reply bound (`max_tokens`), one
request at a time (the server answers one at a time), a few retries (a base model's malformed reply is asked again
warmer, but 13 tries of a 270M model are minutes: none here, a reply that does not
parse makes a failed unit at once), and `num_ctx` as the server's window (the answer's context fits it).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import select

from core.backends.context_fit import CUT_MARK
from core.backends.host_speed import host_speeds
from core.backends.openai_backend import OpenAIBackend
from core.config import Settings
from core.models import Checkpoint, Community, FailedUnit, LLMCall, Node
from core.pipeline.factory import make_backend, make_context
from core.pipeline.runner import create_run, run_build
from core.protocols import ContextBlock
from core.store import Store
from core.workspace import ask, ingest_paths, open_resources
from tests.fake_openai import CHAT, FakeOpenAI
from tests.real_model.conftest import N_CTX
from tests.real_model.server import MODEL_ALIAS, Requests
from tests.stores import configure

pytestmark = pytest.mark.timeout(900)

DOCS = {  # one short document: a build of a 270M model on two shared cores takes minutes already
    "bridge.md": "# Tidewater Bridge\n\nThe Tidewater Bridge crosses the Salt River at Kelmouth. It was designed by "
                 "Lena Marsh, an engineer who studied at the Okoro Institute, and opened in 2011. Harwick Engineering "
                 "built it.\n",
}
QUESTION = "Who designed the Tidewater Bridge?"
REPORTED = ("leiden", "hirag", "attributed", "noderag")  # community methods whose rows carry a model's report
FIGURES = Path(__file__).resolve().parents[2] / "bench" / "out" / "real_model_test.json"


def real_settings(home: Path, url: str) -> Settings:
    env = {"STRATA_BACKEND": "openai", "STRATA_OPENAI_BASE_URL": url, "STRATA_CHAT_MODEL": MODEL_ALIAS,
           "STRATA_HOME": str(home)}
    s = configure(Settings.from_env(env))
    b = s.backend
    b.max_tokens, b.concurrency, b.retries, b.backoff_s, b.num_ctx, b.timeout_s = 96, 1, 0, 0.2, N_CTX, 300.0
    s.archrag.min_clusters = 2  # two tiny documents give fewer than ArchRAG's published 5 communities a level
    return s


def build(s: Settings, store: Store, name: str, corpus: Path, embedder):
    ws = store.create_workspace(name)
    rep = ingest_paths(store, ws, [corpus], s)
    assert rep.added and not rep.refusals, rep
    ctx = make_context(store, ws, s, embedder=embedder)
    run = create_run(store, ws, s)
    events = list(run_build(ctx, run.id))
    return store.require_workspace(name), events


@pytest.fixture(scope="module")
def built(llama_server, tmp_path_factory, embedder):
    """The corpus built once through the real server, with every request it was sent."""
    home = tmp_path_factory.mktemp("real_home")
    corpus = tmp_path_factory.mktemp("real_corpus")
    for name, text in DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    s = real_settings(home, llama_server)
    store = Store(s.storage.db_url)
    mp = pytest.MonkeyPatch()
    requests = Requests(mp)
    started = time.perf_counter()
    ws, events = build(s, store, "real", corpus, embedder)
    seconds = time.perf_counter() - started
    yield dict(s=s, store=store, ws=ws, events=events, requests=requests, corpus=corpus, seconds=seconds,
               embedder=embedder, mp=mp)
    mp.undo()


def rows(store: Store, model, *where):
    with store.session() as sess:
        return list(sess.exec(select(model).where(*where)))


def test_the_build_finishes_and_every_unit_is_a_result_or_a_failed_unit_with_the_servers_reason(built):
    s, store, ws, events, requests = (built[k] for k in ("s", "store", "ws", "events", "requests"))
    failed = rows(store, FailedUnit, FailedUnit.workspace_id == ws.id)
    calls = rows(store, LLMCall, LLMCall.backend == "openai")
    chunks = rows(store, Node, Node.workspace_id == ws.id, Node.kind == "chunk")
    comms = rows(store, Community, Community.workspace_id == ws.id)
    speeds = host_speeds(store, min(c.created_at for c in calls)) if calls else []
    figures = {"build_seconds": round(built["seconds"], 1), "status": events[-1].status, "message": events[-1].message,
               "requests": len(requests.sent), "refused_requests": len(requests.refused), "calls_cached": len(calls),
               "calls_by_task": dict(Counter(c.task for c in calls)), "failed_units": len(failed),
               "failed_by_stage": dict(Counter(f.stage for f in failed)),
               "failure_reasons": sorted({f.reason.split(": ", 1)[-1][:100] for f in failed}), "chunks": len(chunks),
               "entities": len(rows(store, Node, Node.workspace_id == ws.id, Node.kind == "entity")),
               "communities_by_method": dict(Counter(c.method for c in comms)),
               "speeds": [vars(h) for h in speeds]}
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2, default=str), encoding="utf-8")
    print("real model build:", json.dumps(figures, default=str))

    assert events[-1].status == "done", events[-1]
    assert ws.backend == "openai" and ws.chat_model == MODEL_ALIAS
    assert all(f.reason and ("OpenAI-compatible server at" in f.reason or "malformed reply" in f.reason)
               for f in failed), [f.reason for f in failed]
    failed_keys = {(f.stage, f.unit) for f in failed}
    extracted = {c.unit for c in rows(store, Checkpoint, Checkpoint.workspace_id == ws.id,
                                      Checkpoint.stage == "extract")}
    assert chunks and all((c.id in extracted) != (("extract", c.id) in failed_keys) for c in chunks), \
        "each chunk is extracted or failed, never both, never neither"
    for c in comms:
        if c.method in REPORTED:
            assert (c.title.strip() and c.summary.strip()) or any(u == c.id for _, u in failed_keys), \
                f"{c.method} community {c.id} stored without a report: {c.title!r} / {c.summary!r}"
    assert calls and len(calls) <= len(requests.sent)
    assert all(r.get("max_tokens") and r["max_tokens"] <= s.backend.max_tokens for r in requests.sent)
    assert len(speeds) == 1 and speeds[0].calls == len(calls) and speeds[0].tokens_out > 0
    assert speeds[0].write_per_s and speeds[0].write_per_s > 0


def test_a_question_is_answered_with_the_models_text_beside_its_context(built):
    s, store, ws = built["s"], built["store"], built["ws"]
    res = open_resources(store, ws, s, built["embedder"])
    r, a = ask(res, make_backend(s, store), QUESTION, "hirag")
    answers = rows(store, LLMCall, LLMCall.task == "answer")
    assert a.text.strip() and a.text in {c.response for c in answers}, "the model's own reply, as it gave it"
    assert r.trace["answered_by"] == MODEL_ALIAS
    assert a.context.local or a.context.global_, "the answer is shown beside the context it was given"
    assert any("Tidewater" in line for line in a.context.local + a.context.global_)
    print("real model answer:", json.dumps(a.text[:300]))


def test_hlgs_keywords_and_rerank_run_on_the_model(built):
    """A strategy's model steps: HLG takes the question's keywords from the model and reranks its statements with it
    (the trace says so; the calls are in the cache). Asked of the same documents built offline (`ask --backend
    openai` on an offline build), as the tiny model's own extraction gives HLG no statements to rerank."""
    s, store = built["s"], built["store"]
    offline = s.model_copy(deep=True)
    offline.backend.kind = "offline"
    ws, events = build(offline, store, "offline", built["corpus"], built["embedder"])
    assert events[-1].status == "done", events[-1]
    before = {c.key for c in rows(store, LLMCall)}
    res = open_resources(store, ws, s, built["embedder"])
    r, a = ask(res, make_backend(s, store), QUESTION, "hlg-statement-chunk")
    assert r.trace["llm"]["model"] == MODEL_ALIAS and r.trace["llm"]["reranked"] >= 2
    new = [c.task for c in rows(store, LLMCall) if c.key not in before]
    assert "query-terms" in new and "rerank" in new, new
    assert a.text.strip() and r.trace["answered_by"] == MODEL_ALIAS
    print("real model HLG step:", json.dumps({"llm": r.trace["llm"], "new_calls": new}))


def test_a_rebuild_replays_every_call_from_the_cache(built):
    """The same document built again in another workspace against a stand-in host that lists the model and fails
    every chat request (the cache is keyed by backend, model, prompt and options, never by host): every call the first
    build made comes from the call cache and the build finishes; only the first build's failed units (never cached)
    are asked, once each, and are failed units again with that host's refusal as their reason."""
    s, store, requests = built["s"], built["store"], built["requests"]
    failed = rows(store, FailedUnit, FailedUnit.workspace_id == built["ws"].id)
    prompts = {c.request.get("prompt") for c in rows(store, LLMCall)}
    with FakeOpenAI(models=[MODEL_ALIAS]) as stand_in:
        stand_in.fail_when = lambda prompt: True
        other = s.model_copy(deep=True)
        other.backend.openai_base_url = stand_in.base_url
        before = len(requests.sent)
        ws2, events = build(other, store, "again", built["corpus"], built["embedder"])
        asked = stand_in.count(CHAT)
    assert events[-1].status == "done", events[-1]
    new = requests.sent[before:]
    assert len(new) == asked == len(failed) * (s.backend.retries + 1), "only the failed units were asked"
    assert not [r for r in new if r["messages"][-1]["content"] in prompts], "a cached call was asked again"
    again = rows(store, FailedUnit, FailedUnit.workspace_id == ws2.id)
    assert Counter(f.stage for f in again) == Counter(f.stage for f in failed)  # (unit keys name the workspace's rows)
    assert all("HTTP 500" in f.reason for f in again), [f.reason for f in again]
    first = sorted(n.key for n in rows(store, Node, Node.workspace_id == built["ws"].id, Node.kind == "entity"))
    assert first == sorted(n.key for n in rows(store, Node, Node.workspace_id == ws2.id, Node.kind == "entity"))
    print("real model rebuild:", json.dumps({"requests": len(new), "first_build_failed_units": len(failed)}))


def test_the_servers_format_refusal_and_window_are_learnt_at_once(built):
    """The real server refuses response_format json_schema with HTTP 500; the next format is asked at once. A prompt
    longer than its window is refused, cut to the window the refusal names, and sent again; max_tokens bounds the
    reply."""
    requests = built["requests"]
    settings = built["s"].backend.model_copy(update={"max_tokens": 24})
    backend = OpenAIBackend(settings, cache=None)
    host = backend._pool.hosts[0]
    before = len(requests.sent)
    backend.query_terms(QUESTION)
    sent = requests.sent[before:]
    assert [r["response_format"]["type"] for r in sent] == ["json_schema", "json_object"]
    assert requests.refused[-1] == before and host.notes["format"] == "json_object"
    long_text = " ".join(f"The Kelmouth ferry number {i} crossed the Salt River at dawn." for i in range(100))
    before = len(requests.sent)
    text = backend.answer(QUESTION, ContextBlock(local=[long_text], sources=[]))
    sent = requests.sent[before:]
    assert text.strip() and len(sent) == 2 and host.notes["n_ctx"] == N_CTX, "refused as too long, then cut"
    assert CUT_MARK not in sent[0]["messages"][-1]["content"] and CUT_MARK in sent[1]["messages"][-1]["content"]
    assert all(r["max_tokens"] == 24 for r in sent)
