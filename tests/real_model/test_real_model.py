"""Strata on a real model server (issue 38): llama-cpp-python's OpenAI-compatible server with Gemma 3 270M base
(tests/real_model/conftest.py). A two-document corpus is built through STRATA_BACKEND=openai, a question is answered by
the model, GraphRAG global's map step is run by it, and the same documents are built again from the call cache.

What is asserted is what a user relies on, not what the tiny model says: the build finishes; every unit either
stored a parsed result or is a failed unit with the server's own reason (never stored empty); the answer is the
model's text, shown beside its context; the rebuild asks the server nothing. And what the real server taught the
backend: its refusal of the json_schema format (HTTP 500) is followed at once by the next format, a prompt longer than
its window is cut to fit, and max_tokens bounds every request.

The settings a user would set for such a server and model are set here: a small reply bound (`max_tokens`), one
request at a time (the server answers one at a time), a few retries (a base model's malformed reply is asked again
warmer, but 13 tries of a 270M model are minutes), and `num_ctx` as the server's window (the answer's context fits it).
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
from core.store import Store
from core.workspace import ask, ingest_paths, open_resources
from tests.real_model.conftest import N_CTX
from tests.real_model.server import MODEL_ALIAS, Requests
from tests.stores import configure

pytestmark = pytest.mark.timeout(900)

DOCS = {
    "bridge.md": "# Tidewater Bridge\n\nThe Tidewater Bridge crosses the Salt River at Kelmouth. It was designed by "
                 "Lena Marsh and opened in 2011. Harwick Engineering built it.\n",
    "marsh.md": "# Lena Marsh\n\nLena Marsh is an engineer. She studied at the Okoro Institute in Kelmouth and "
                "designed the Tidewater Bridge.\n",
}
QUESTION = "Who designed the Tidewater Bridge?"
REPORTED = ("leiden", "hirag", "attributed", "noderag")  # community methods whose rows carry a model's report
FIGURES = Path(__file__).resolve().parents[2] / "bench" / "out" / "real_model_test.json"


def real_settings(home: Path, url: str) -> Settings:
    env = {"STRATA_BACKEND": "openai", "STRATA_OPENAI_BASE_URL": url, "STRATA_CHAT_MODEL": MODEL_ALIAS,
           "STRATA_HOME": str(home)}
    s = configure(Settings.from_env(env))
    b = s.backend
    b.max_tokens, b.concurrency, b.retries, b.backoff_s, b.num_ctx, b.timeout_s = 160, 1, 2, 0.2, N_CTX, 300.0
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
    assert events[-1].status == "done", events[-1]
    assert ws.backend == "openai" and ws.chat_model == MODEL_ALIAS
    failed = rows(store, FailedUnit, FailedUnit.workspace_id == ws.id)
    assert all(f.reason and ("OpenAI-compatible server at" in f.reason or "malformed reply" in f.reason)
               for f in failed), [f.reason for f in failed]
    failed_keys = {(f.stage, f.unit) for f in failed}
    chunks = rows(store, Node, Node.workspace_id == ws.id, Node.kind == "chunk")
    extracted = {c.unit for c in rows(store, Checkpoint, Checkpoint.workspace_id == ws.id,
                                      Checkpoint.stage == "extract")}
    assert chunks and all((c.id in extracted) != (("extract", c.id) in failed_keys) for c in chunks), \
        "each chunk is extracted or failed, never both, never neither"
    comms = rows(store, Community, Community.workspace_id == ws.id)
    for c in comms:
        if c.method in REPORTED:
            assert (c.title.strip() and c.summary.strip()) or any(u == c.id for _, u in failed_keys), \
                f"{c.method} community {c.id} stored without a report"
    calls = rows(store, LLMCall, LLMCall.backend == "openai")
    assert calls and len(calls) <= len(requests.sent)
    assert all(r.get("max_tokens") and r["max_tokens"] <= s.backend.max_tokens for r in requests.sent)
    entities = rows(store, Node, Node.workspace_id == ws.id, Node.kind == "entity")
    speeds = host_speeds(store, min(c.created_at for c in calls))
    assert len(speeds) == 1 and speeds[0].calls == len(calls) and speeds[0].tokens_out > 0
    assert speeds[0].write_per_s and speeds[0].write_per_s > 0
    figures = {"build_seconds": round(built["seconds"], 1), "requests": len(requests.sent),
               "refused_requests": len(requests.refused), "calls_cached": len(calls),
               "calls_by_task": dict(Counter(c.task for c in calls)), "failed_units": len(failed),
               "failed_by_stage": dict(Counter(f.stage for f in failed)), "chunks": len(chunks),
               "entities": len(entities), "tokens_in": speeds[0].tokens_in, "tokens_out": speeds[0].tokens_out,
               "read_tokens_per_s": speeds[0].read_per_s, "written_tokens_per_s": speeds[0].write_per_s,
               "speed_measured_by": speeds[0].how}
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    print("real model build:", json.dumps(figures))


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


def test_graphrag_globals_map_step_runs_on_the_model(built):
    s, store, ws = built["s"], built["store"], built["ws"]
    before = len(built["requests"].sent)
    res = open_resources(store, ws, s, built["embedder"])
    r, a = ask(res, make_backend(s, store), "What are the main themes of these documents?", "graphrag-global")
    assert r.trace["llm"]["model"] == MODEL_ALIAS and r.trace["llm"]["map_calls"] >= 1
    tasks = [c.task for c in rows(store, LLMCall, LLMCall.task == "rate-points")]
    assert len(tasks) >= 1 and len(built["requests"].sent) > before
    assert a.text.strip()


def test_a_rebuild_replays_every_call_from_the_cache(built):
    s, store, requests = built["s"], built["store"], built["requests"]
    before, cached = len(requests.sent), len(rows(store, LLMCall))
    ws2, events = build(s, store, "again", built["corpus"], built["embedder"])
    assert events[-1].status == "done", events[-1]
    assert len(requests.sent) == before, "no request reached the server"
    assert len(rows(store, LLMCall)) == cached
    first = sorted(n.key for n in rows(store, Node, Node.workspace_id == built["ws"].id, Node.kind == "entity"))
    again = sorted(n.key for n in rows(store, Node, Node.workspace_id == ws2.id, Node.kind == "entity"))
    assert again == first


def test_the_servers_format_refusal_and_window_are_learnt_at_once(built):
    """The real server refuses response_format json_schema with HTTP 500; the next format is asked at once. A prompt
    longer than its window is refused, cut to the window the refusal names, and sent again."""
    requests = built["requests"]
    backend = OpenAIBackend(built["s"].backend, cache=None)
    host = backend._pool.hosts[0]
    before = len(requests.sent)
    backend.extract("Harwick Engineering built the Tidewater Bridge in Kelmouth.", ["ORGANIZATION", "LOCATION"])
    sent = requests.sent[before:]
    assert [r["response_format"]["type"] for r in sent] == ["json_schema", "json_object"]
    assert requests.refused[-1] == before and host.notes["format"] == "json_object"
    long_text = " ".join(f"The Kelmouth ferry number {i} crossed the Salt River at dawn." for i in range(400))
    before = len(requests.sent)
    backend.extract(long_text, ["LOCATION"])
    sent = requests.sent[before:]
    assert len(sent) >= 2 and host.notes["n_ctx"] == N_CTX, "refused as too long, then cut to the window"
    assert CUT_MARK not in sent[0]["messages"][-1]["content"] and CUT_MARK in sent[-1]["messages"][-1]["content"]
