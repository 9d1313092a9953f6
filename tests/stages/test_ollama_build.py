"""A whole build and a question through the Ollama backend: the real `ollama` client against a local HTTP server
that speaks the Ollama API (tests/fake_ollama.py), with the bundled embedder for vectors."""

from __future__ import annotations

import json
import re

from sqlmodel import select

from core.models import Community, Edge, LLMCall, Node
from core.pipeline.factory import make_backend
from core.workspace import ask, open_resources
from tests.fake_ollama import Fail, FakeOllama, delimited


def _ollama_settings(make_settings, home, url):
    s = make_settings(home)
    s.backend.kind = "ollama"
    s.backend.ollama_host = url
    s.backend.timeout_s = 5.0
    s.backend.retries = 1
    s.archrag.min_clusters = 2  # the four tiny documents give fewer than ArchRAG's published 5 communities a level
    return s


def test_ollama_build_extracts_reports_and_answers(tmp_path, tiny_corpus, build, make_settings):
    with FakeOllama() as fake:
        s = _ollama_settings(make_settings, tmp_path / "h", fake.url)
        b = build(tmp_path / "h", [tiny_corpus], settings=s)
        chats = fake.count("/api/chat")
        assert chats > 0
        with b.store.session() as sess:
            entities = sess.exec(select(Node).where(Node.workspace_id == b.ws.id, Node.kind == "entity")).all()
            comms = sess.exec(select(Community).where(Community.workspace_id == b.ws.id)).all()
            calls = sess.exec(select(LLMCall).where(LLMCall.backend == "ollama")).all()
        assert entities, "the model's entities are in the graph"
        assert {c.method for c in comms} >= {"leiden", "hirag", "attributed", "noderag"}
        # WCC components are recorded, not reported; every other community has its report (NodeRAG's from the
        # augment stage, whose high-level elements summarize it)
        assert all(c.title and c.summary for c in comms if c.method != "wcc"), "every community has a report"
        # every construction ran through the model: reports (Leiden and ArchRAG), NodeRAG attributes, HLG topics
        # (the model groups each chunk's statements into topics it titles, §6.2 (3))
        assert {c.task for c in calls} >= {"extract", "report", "summarize-attribute", "topics"}
        assert {c.method for c in comms} >= {"leiden", "attributed"}
        with b.store.session() as sess:
            kinds = {n.kind for n in sess.exec(select(Node).where(Node.workspace_id == b.ws.id))}
        assert kinds >= {"chunk", "statement", "entity", "relationship", "attribute", "high_level", "overview",
                         "topic"}
        assert b.ws.backend == "ollama" and b.ws.chat_model == s.backend.chat_model
        # every chat request asked for structured output with a JSON schema
        bodies = [body for path, body in fake.requests if path == "/api/chat"]
        assert all(isinstance(body.get("format"), dict) for body in bodies)

        # HiRAG's summary entities (hirag.txt Appendix I.3): its own prompt, fed with the cluster's member entities
        # (names and descriptions) and the meta summary concepts X; the reply's entities and relations are stored
        assert "summary-entities" in {c.task for c in calls}
        asks = [b["messages"][0]["content"] for b in bodies if b["format"].get("title") == "SummaryEntities"]
        assert asks
        with b.store.session() as sess:
            layer0 = {n.title: n.text for n in sess.exec(select(Node).where(
                Node.workspace_id == b.ws.id, Node.kind == "entity", Node.layer == 0))}
            summaries = sess.exec(select(Node).where(Node.workspace_id == b.ws.id, Node.kind == "entity",
                                                     Node.layer == 1)).all()
            ups = sess.exec(select(Edge).where(Edge.workspace_id == b.ws.id, Edge.kind == "summarizes")).all()
        for prompt in asks:
            assert "summarize at least one attribute entity" in prompt
            assert "Meta attribute list: " + json.dumps(s.layers.meta_summary_concepts) in prompt
            listed = [json.loads(m) for m in re.findall(r'^\((".*?(?<!\\)"), ', delimited(prompt, "ENTITIES")[0],
                                                        re.M)]
            assert len(listed) >= 2
            assert all(name in layer0 for name in listed), "the members are layer-0 entities, by name"
            assert any(f'("{n}", "{" ".join(layer0[n].split())[:60]}' in prompt for n in listed), "with descriptions"
        assert summaries and all(n.title.endswith(" Circle") and n.data["concept"] == "organization"
                                 for n in summaries)
        assert ups and all(e.data.get("description", "").endswith("Circle.") for e in ups)

        # a second workspace over the same corpus replays the cache: no chunk is sent to the model again
        # (its communities may differ, as vertex order follows workspace-scoped ids, and so may their reports)
        n_requests = len(fake.requests)
        extract_calls = len([c for c in calls if c.task == "extract"])
        build(tmp_path / "h", [tiny_corpus], name="again", settings=s)
        new = [body for path, body in fake.requests[n_requests:] if path == "/api/chat"]
        assert all(body["format"].get("title") != "Extraction" for body in new)
        with b.store.session() as sess:
            assert len(sess.exec(select(LLMCall).where(LLMCall.task == "extract")).all()) == extract_calls
        before = fake.count("/api/chat")

        res = open_resources(b.store, b.ws, s, b.embedder)
        r, a = ask(res, make_backend(s, b.store), "Who conducts the Kelmouth Choir?", "hirag")
        assert a.text.strip()
        assert fake.count("/api/chat") == before + 1  # the answer is generated by the model


def test_ollama_failures_fail_their_units_not_the_run_and_keep_the_data(tmp_path, tiny_corpus, build, make_settings,
                                                                        embedder):
    """Calls that still fail after their retries are failed units (core/pipeline/failures.py): the run goes on and
    finishes with them listed; a server failing every call is tests/stages/test_failed_units.py's."""
    from core.pipeline.factory import make_context
    from core.pipeline.failures import failed_units
    from core.pipeline.runner import create_run, run_build
    from core.store import Store
    from core.workspace import ingest_paths

    with FakeOllama() as fake:
        s = _ollama_settings(make_settings, tmp_path / "h", fake.url)
        store = Store(s.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], s)
        ctx = make_context(store, ws, s, embedder=embedder)
        for _ in range(20):
            fake.script["/api/chat"].append(Fail(500, "model crashed"))
        run = create_run(store, ws, s)
        events = list(run_build(ctx, run.id))
        units = failed_units(store, ws.id, run.id)
        assert units and all("model crashed" in u.reason and "500" in u.reason for u in units)
        assert events[-1].status == "done" and events[-1].message.endswith(f"with {len(units)} failed units")
        assert store.latest_run(ws.id).status == "done"
        counts = store.counts(ws.id)
        assert counts["document"] == len(list(tiny_corpus.iterdir()))
        assert counts.get("chunk", 0) > 0, "chunks written before the failure are kept"
