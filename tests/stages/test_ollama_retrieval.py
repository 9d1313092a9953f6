"""The strategies' language steps through the Ollama backend: GraphRAG's map, ArchRAG's adaptive filter, HLG's
keywords and rerank, NodeRAG's question entities, each a structured call of the real `ollama` client to a local
server speaking the Ollama API (tests/fake_ollama.py), whose replies are derived from the prompt, so the tests can
tell what the model's answer changed. Offline the same strategies send nothing."""

from __future__ import annotations

import json

import pytest

from core.backends.offline import OfflineBackend
from core.pipeline.factory import make_backend
from core.protocols import BackendError
from core.retrieval.archrag.filter import layer_material
from core.retrieval.archrag.search import layer_content
from core.workspace import ask, open_resources
from tests.fake_ollama import FakeOllama, Malformed, Reply, delimited, fake_points, overlap

QUESTION = "Who designed the Tidewater Bridge at Kelmouth?"


@pytest.fixture(scope="module")
def ollama_ws(tmp_path_factory, embedder):
    """A workspace of the tiny corpus built through the fake Ollama server, which stays up for the module."""
    from tests.conftest import TINY_DOCS, _settings, build_workspace

    home = tmp_path_factory.mktemp("ollama_retrieval")
    corpus = home / "corpus"
    corpus.mkdir()
    for name, text in TINY_DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    with FakeOllama() as fake:
        s = _settings(home)
        s.backend.kind, s.backend.ollama_host, s.backend.timeout_s, s.backend.retries = "ollama", fake.url, 5.0, 1
        s.archrag.min_clusters = 2  # the four tiny documents give fewer than ArchRAG's published 5 communities a level
        b = build_workspace(home, [corpus], embedder, settings=s)
        yield fake, b, s


def _asked(fake: FakeOllama, since: int) -> list[dict]:
    return [body for path, body in fake.requests[since:] if path == "/api/chat"]


def _schemas(bodies: list[dict]) -> list[str]:
    return [(b.get("format") or {}).get("title", "") if isinstance(b.get("format"), dict) else "" for b in bodies]


def _ask(fake, b, s, strategy: str, question: str = QUESTION):
    since = len(fake.requests)
    res = open_resources(b.store, b.ws, s, b.embedder)
    r, a = ask(res, make_backend(s, b.store), question, strategy, log=False)
    return r, a, _asked(fake, since)


def test_graphrag_global_map_step_is_the_models_rated_points(ollama_ws):
    fake, b, s = ollama_ws
    r, a, bodies = _ask(fake, b, s, "graphrag-global")
    maps = [x for x in bodies if _schemas([x]) == ["RatedPoints"]]
    assert maps and len(maps) == r.trace["llm"]["map_calls"] == r.trace["counts"]["reports_mapped"]
    # every kept point is one the model returned for its report, with the model's rating
    replies = {}
    for body in maps:
        prompt = body["messages"][0]["content"]
        for p in fake_points(prompt)["points"]:
            replies.setdefault(p["description"], p["score"])
    kept = r.sections["global"]
    assert kept, "the map step kept points"
    for item in kept:
        assert item.text in replies and item.score == replies[item.text]
        assert item.score >= s.retrieval.graphrag_global.min_importance
    assert [i.score for i in kept] == sorted((i.score for i in kept), reverse=True)
    assert _schemas(bodies)[-1] == "", "then the answer, generated without a schema"


def test_archrag_adaptive_filter_is_one_model_call_per_visited_layer(ollama_ws):
    """Eq. 3: A_i = LLM(P_filter || R_i), one analysis per C-HNSW layer over that layer's retrieved items."""
    fake, b, s = ollama_ws
    r, _, bodies = _ask(fake, b, s, "archrag")
    filters = [x for x in bodies if _schemas([x]) == ["RatedPoints"]]
    visited = [x for x in r.trace["layers"] if x["items"]]
    assert len(visited) >= 2, "entities and at least one community layer"
    assert len(filters) == len(visited) == r.trace["llm"]["filter_calls"]
    assert all(x["filter_calls"] == 1 for x in visited)
    assert sum(x["filter_calls"] for x in r.trace["layers"]) == len(filters)
    # each call's data table is exactly one layer's R_i: the k found there (and, on layer 0, their relationships)
    found = [[(i, sim) for i, sim in hits] for hits in r.trace["chnsw"]["found"]]
    layers = layer_content(open_resources(b.store, b.ws, s, b.embedder).view, found)
    assert all(sum(it.kind != "relationship" for it in items) <= s.retrieval.archrag.k_per_layer for items in layers)
    tables = ["\n".join(delimited(body["messages"][0]["content"], "DATA")) for body in filters]
    assert sorted(tables) == sorted(layer_material(items) for items in layers if items)
    texts = {p["description"] for body in filters for p in fake_points(body["messages"][0]["content"])["points"]
             if p["score"] > 0}
    items = [i for sec in r.sections.values() for i in sec]
    assert items, "some points were kept"
    for i in items:  # each item's text is made of the model's points, its score the best one's relevance 0-1
        assert any(t in i.text for t in texts) and 0 < i.score <= 1
    assert r.trace["counts"]["sentences_embedded"] == 0, "the model analyses; nothing is embedded for it"
    backed = {d for i in items for d in i.documents}
    assert r.sources and {x.document_id for x in r.sources} <= backed


def test_hlg_takes_keywords_from_the_model_and_reranks_with_it(ollama_ws):
    fake, b, s = ollama_ws
    r, _, bodies = _ask(fake, b, s, "hlg-statement")
    kinds = _schemas(bodies)
    assert kinds.count("QueryTerms") == 1 and kinds.count("PassageScores") >= 1  # a context window per call
    rerank = "\n".join(b["messages"][0]["content"] for b, k in zip(bodies, kinds) if k == "PassageScores")
    assert "Tidewater Bridge" in rerank
    # the kept statements follow the model's scores: word overlap with the question, best first
    scores = [overlap(QUESTION, i.text) for i in r.sections["local"]]
    assert scores and scores == sorted(scores, reverse=True)
    assert r.trace["counts"]["keywords"] >= 1, "the model's entities matched entity names"
    # the model reranked every candidate of S_final (Eq. 9-10), and the sources follow its order
    assert r.trace["llm"]["reranked"] == r.trace["counts"]["final_statements"] >= len(r.sections["local"])
    assert [x.document_id for x in r.sources] == list(dict.fromkeys(i.documents[0] for i in r.sections["local"]))


def test_noderag_exact_entries_are_the_models_question_entities(ollama_ws):
    fake, b, s = ollama_ws
    r, _, bodies = _ask(fake, b, s, "noderag", "Where did Lena Marsh study civil engineering?")
    assert _schemas(bodies).count("QueryTerms") == 1, "asked once (a repeated question replays the call cache)"
    entries = {p.label.lower() for p in r.path_nodes if p.role == "entry" and p.kind == "entity"}
    assert "lena marsh" in entries


def test_offline_strategies_send_nothing_to_a_model(ollama_ws):
    fake, b, s = ollama_ws
    res = open_resources(b.store, b.ws, s, b.embedder)
    since = len(fake.requests)
    for name in ("graphrag-global", "archrag", "hlg-topic", "noderag"):
        r, a = ask(res, OfflineBackend(), QUESTION, name, log=False)
        assert "llm" not in r.trace and a.text
    assert fake.requests[since:] == []


def test_a_model_returning_garbage_fails_clearly_and_keeps_the_workspace(ollama_ws):
    fake, b, s = ollama_ws
    counts = b.store.counts(b.ws.id)
    for _ in range(4):
        fake.script["/api/chat"].append(Malformed("the points are: nothing useful"))
    with pytest.raises(BackendError, match="malformed reply"):  # a question not asked yet: no cached replies
        _ask(fake, b, s, "archrag", "Which river does the Tidewater Bridge cross?")
    fake.script["/api/chat"].clear()
    # a rerank reply with the wrong number of scores is malformed too (asked again, then refused)
    for _ in range(4):
        fake.script["/api/chat"].append(Reply(content=json.dumps({"scores": [1]})))
    fake.script["/api/chat"].appendleft(Reply(content=json.dumps({"entities": [], "keywords": []})))
    with pytest.raises(BackendError, match="expected .* scores"):
        _ask(fake, b, s, "hlg-statement", "Who built the Kelmouth Railway?")
    fake.script["/api/chat"].clear()
    assert b.store.counts(b.ws.id) == counts
    r, a, _ = _ask(fake, b, s, "hlg-statement", "Who built the Kelmouth Railway?")  # asked again, it works
    assert r.sections["local"] and a.text


def test_the_answer_context_fits_the_models_window(ollama_ws):
    """A model is given the context that fits its window (backend.num_ctx less core.answer.PROMPT_RESERVE), taken in
    turns across sections and kinds; offline the whole context is read."""
    from core.answer import context_block, context_budget
    from core.ingest import count_tokens

    fake, b, s = ollama_ws
    small = s.model_copy(deep=True)
    small.backend.num_ctx = 1536 + 300  # a 300-token context
    r, a, bodies = _ask(fake, b, small, "hirag")
    # the whole context, cited as the answer cites it: by the source document that holds each sentence
    docs_of = {d: x.text for d, x in b.store.documents_by_id(b.ws.id, [s.document_id for s in r.sources]).items()}
    full = context_block(r, docs=docs_of)
    budget = context_budget(small.backend.num_ctx)
    kept = a.context.local + a.context.bridge + a.context.global_
    assert budget == 300 and kept and sum(count_tokens(t) for t in kept) <= budget
    assert len(kept) < len(full.local + full.bridge + full.global_)  # this context does not fit in 300 tokens
    assert a.context.local and a.context.bridge and a.context.global_  # every section keeps its best items
    assert a.context.local[0] == full.local[0] and a.context.bridge[0] == full.bridge[0]
    prompt = [x for x in bodies if not x.get("format")][-1]["messages"][0]["content"]  # the answer call
    assert QUESTION in prompt and all(line in prompt for line in kept)
    r2, a2 = ask(open_resources(b.store, b.ws, small, b.embedder), OfflineBackend(), QUESTION, "hirag", log=False)
    docs = {d: x.text for d, x in b.store.documents_by_id(b.ws.id, [s.document_id for s in r2.sources]).items()}
    assert a2.context == context_block(r2, docs=docs, plain=True)  # offline: no budget (titles for its reading)


def test_eval_runs_the_language_steps_through_the_builds_model(ollama_ws, tmp_path, capsys, monkeypatch):
    """`core eval` measures what `ask` retrieves: on a workspace built with Ollama the model runs the strategies'
    language steps (the build's backend is the default) and each row names it; `--backend offline` measures their
    offline versions and sends nothing."""
    from core.__main__ import main

    fake, b, s = ollama_ws
    monkeypatch.setenv("STRATA_HOME", str(s.storage.home))
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    monkeypatch.delenv("STRATA_BACKEND", raising=False)
    for var, value in (("STRATA_DATABASE_URL", s.storage.database_url), ("STRATA_CHROMA_URL", s.storage.chroma_url)):
        if value:
            monkeypatch.setenv(var, value)
        else:
            monkeypatch.delenv(var, raising=False)
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"id": "q1", "question": "Which river does the Tidewater Bridge cross?",
                                   "gold_ids": ["none"]}) + "\n", encoding="utf-8")
    args = ["eval", "--workspace", b.ws.name, "--queries", str(queries), "--k", "5", "--strategies",
            "hlg-statement,graphrag-global", "--json"]

    since = len(fake.requests)
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["llm"] for r in rows.values()} == {s.backend.chat_model}
    kinds = _schemas(_asked(fake, since))
    assert {"QueryTerms", "PassageScores", "RatedPoints"} <= set(kinds), kinds

    since = len(fake.requests)
    assert main([*args, "--backend", "offline"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all("llm" not in r for r in rows.values())
    assert _asked(fake, since) == [], "the offline steps send nothing"
