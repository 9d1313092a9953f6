"""HLG topics made by the model, the paper's way (hierarchical-lexical-graph.txt §6.2 (3): "From each chunk, we
extract fine-grained propositions, and then link them with topics"; core/pipeline/stages/lexical.py): through a local
server speaking the Ollama API (tests/fake_ollama.py) whose topic replies the tests script. Offline, and with
lexical.topics = "clustering", the clustering stands in (tests/stages/test_lexical.py covers it offline)."""

from __future__ import annotations

from collections import Counter

from sqlmodel import col, delete, select

from core.models import Checkpoint, Document, Edge, LLMCall, Node
from core.pipeline.factory import make_context, open_index
from core.pipeline.failures import failed_units
from core.pipeline.runner import create_run, run_build
from core.pipeline.stages.lexical import lexical_stage, model_topics
from core.store import Store
from core.workspace import ingest_paths
from tests import fake_ollama
from tests.fake_ollama import FakeOllama, delimited
from tests.stages.test_lexical import lexical_rows

TOPICS_ASK = "Group them into topics"


def _ollama(settings, url: str):
    settings.backend.kind = "ollama"
    settings.backend.ollama_host = url
    settings.backend.timeout_s = 5.0
    settings.backend.retries = 1
    settings.backend.backoff_s = 0.05
    return settings


def _numbered(prompt: str) -> list[str]:
    """The statements of a topics prompt, in their numbered order."""
    lines = "\n".join(delimited(prompt, "STATEMENTS")).splitlines()
    return [line.split("] ", 1)[1] for line in lines]


def _odd_even(prompt: str) -> dict:
    """A scripted reply: "Odd ..." holds the odd numbers, "Even ..." the even ones (and 1 again, and 99, which no
    statement has); with 3 statements or more the last is left out."""
    stmts = _numbered(prompt)
    n = len(stmts)
    upto = n - 1 if n >= 3 else n
    head = " ".join(stmts[0].split()[:3])
    return {"topics": [
        {"title": f"Odd {head}", "summary": "the odd ones", "statements": [i for i in range(1, upto + 1, 2)] + [99],
         "keywords": ["odd"]},
        {"title": f"Even {head}", "summary": "", "statements": [1] + [i for i in range(2, upto + 1, 2)]},
    ]}


def _expected(prompt: str) -> list[tuple[str, tuple[str, ...]]]:
    """The topics the cleaning makes of `_odd_even`'s reply: (title, statements)."""
    stmts = _numbered(prompt)
    n = len(stmts)
    upto = n - 1 if n >= 3 else n
    head = " ".join(stmts[0].split()[:3])
    out = [(f"Odd {head}", tuple(stmts[i - 1] for i in range(1, upto + 1, 2)))]
    if upto >= 2:
        out.append((f"Even {head}", tuple(stmts[i - 1] for i in range(2, upto + 1, 2))))
    if upto < n:
        words = stmts[-1].split()
        out.append((" ".join(words[:8]) + (" ..." if len(words) > 8 else ""), (stmts[-1],)))
    return out


def _stored(store, ws_id: int) -> list[tuple[str, tuple[str, ...]]]:
    """Every stored topic: (title, its statements' texts in document order)."""
    with store.session() as s:
        topics = dict(s.exec(select(Node.id, Node.title).where(Node.workspace_id == ws_id, Node.kind == "topic")).all())
        stmts = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws_id, Node.kind == "statement"))}
        links = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_topic")).all()
    members: dict[str, list] = {t: [] for t in topics}
    for sid, tid in links:
        members[tid].append(stmts[sid])
    return [(topics[t], tuple(" ".join(n.text.split()) for n in sorted(m, key=lambda n: n.ord or 0)))
            for t, m in members.items()]


def _topic_prompts(fake) -> list[str]:
    return [body["messages"][0]["content"] for path, body in fake.requests
            if path == "/api/chat" and TOPICS_ASK in body["messages"][0]["content"]]


def test_with_a_model_the_topics_are_the_models_groups_of_each_chunk(tmp_path, tiny_corpus, build, make_settings,
                                                                      monkeypatch):
    monkeypatch.setattr(fake_ollama, "fake_topics", _odd_even)
    with FakeOllama() as fake:
        b = build(tmp_path / "h", [tiny_corpus], settings=_ollama(make_settings(tmp_path / "h"), fake.url))
        prompts = _topic_prompts(fake)
    assert len(prompts) >= 4, "one topics call per chunk"
    want = [t for p in prompts for t in _expected(p)]
    assert Counter(_stored(b.store, b.ws.id)) == Counter(want)
    assert any(len(s) >= 2 for _, s in want) and any(t.startswith("Even") for t, _ in want)
    with b.store.session() as s:
        tasks = {c.task for c in s.exec(select(LLMCall).where(LLMCall.backend == "ollama"))}
        summaries = dict(s.exec(select(Node.title, Node.text).where(Node.workspace_id == b.ws.id,
                                                                   Node.kind == "topic")).all())
        marks = set(s.exec(select(Checkpoint.unit).where(Checkpoint.workspace_id == b.ws.id,
                                                         Checkpoint.stage == "lexical")))
        docs = set(s.exec(select(Document.id).where(Document.workspace_id == b.ws.id)))
        topic_ids = list(s.exec(select(Node.id).where(Node.workspace_id == b.ws.id, Node.kind == "topic")).all())
    assert "topics" in tasks and "summarize-topic" not in tasks, "the model groups; no separate summary per group"
    assert all(summaries[t] == "the odd ones" for t, _ in want if t.startswith("Odd"))
    assert all(summaries[t] == t for t, _ in want if t.startswith("Even")), "an empty summary is the title"
    assert marks == docs
    index = open_index(b.settings, b.ws.name, b.embedder.name)
    assert set(index.existing("topic")) == set(topic_ids), "every topic embedded"
    with b.store.session() as s:
        linked = set(s.exec(select(Edge.src).where(Edge.workspace_id == b.ws.id, Edge.kind == "derived_from",
                                                   col(Edge.src).in_(topic_ids))))
    assert linked == set(topic_ids), "every topic derived from its document"


def _garbage_for(text: str):
    """A scripted reply: the pairs of the default fake, but for a chunk holding `text` a topic of statement 42 only
    (which no chunk has): no usable topic, a malformed reply."""
    good = fake_ollama.fake_topics

    def reply(prompt: str) -> dict:
        if any(text in s for s in _numbered(prompt)):
            return {"topics": [{"title": "Nothing", "summary": "", "statements": [42]}]}
        return good(prompt)

    return reply


def _topics_by_doc(store, ws_id: int) -> dict[str, list[str]]:
    with store.session() as s:
        rows = s.exec(select(Node.document_id, Node.title).where(Node.workspace_id == ws_id,
                                                                Node.kind == "topic")).all()
    out: dict[str, list[str]] = {}
    for doc, title in rows:
        out.setdefault(doc, []).append(title)
    return {d: sorted(t) for d, t in out.items()}


def test_a_chunk_whose_topics_reply_is_garbage_is_a_failed_unit_the_next_build_makes(tmp_path, tiny_corpus,
                                                                                     embedder, make_settings,
                                                                                     monkeypatch):
    with FakeOllama() as fake:
        settings = _ollama(make_settings(tmp_path / "h"), fake.url)
        store = Store(settings.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], settings)

        def build() -> list:
            run = create_run(store, ws, settings)
            return list(run_build(make_context(store, ws, settings, embedder=embedder), run.id))

        monkeypatch.setattr(fake_ollama, "fake_topics", _garbage_for("Arden"))
        events = build()
        asked = [p for p in _topic_prompts(fake) if any("Arden" in s for s in _numbered(p))]
        units = failed_units(store, ws.id)
        assert [u.stage for u in units] == ["lexical"], [(u.stage, u.label) for u in units]
        assert events[-1].status == "done" and events[-1].message == "Build finished with 1 failed unit"
        assert "topics of chunk 1 of" in units[0].label and "no topic" in units[0].reason, units[0]
        assert len(asked) == settings.backend.retries + 1, "the malformed reply was asked again, then refused"
        with store.session() as s:
            docs = dict(s.exec(select(Document.id, Document.title).where(Document.workspace_id == ws.id)).all())
            marks = set(s.exec(select(Checkpoint.unit).where(Checkpoint.workspace_id == ws.id,
                                                             Checkpoint.stage == "lexical")).all())
        railway = next(d for d, t in docs.items() if "railway" in (t or "").lower())
        partial = _topics_by_doc(store, ws.id)
        assert set(partial) == set(docs) - {railway} == marks, "the other chunks' topics are stored, checkpointed"
        assert all(ts for ts in partial.values())

        monkeypatch.undo()  # the model answers well now: the next build makes the failed document's topics
        events = build()
        assert events[-1].message == "Build finished" and failed_units(store, ws.id) == []
        full = _topics_by_doc(store, ws.id)
        assert set(full) == set(docs) and {d: full[d] for d in partial} == partial


def test_topics_clustering_with_a_model_groups_by_vectors_and_the_model_titles_them(tmp_path, tiny_corpus, build,
                                                                                     make_settings):
    with FakeOllama() as fake:
        settings = _ollama(make_settings(tmp_path / "h"), fake.url)
        settings.lexical.topics = "clustering"
        b = build(tmp_path / "h", [tiny_corpus], settings=settings)
        assert _topic_prompts(fake) == [], "no topics call"
    with b.store.session() as s:
        tasks = {c.task for c in s.exec(select(LLMCall).where(LLMCall.backend == "ollama")).all()}
    assert "summarize-topic" in tasks and "topics" not in tasks
    assert _topics_by_doc(b.store, b.ws.id)


def test_offline_the_clustering_stands_in_whatever_lexical_topics_says(tmp_path, tiny_corpus, build):
    """No model is configured offline: "model" (the default) means the clustering, the same topics as "clustering"."""
    settings, store, ws, embedder = build(tmp_path / "h", [tiny_corpus])
    assert settings.backend.kind == "offline" and settings.lexical.topics == "model"
    ctx = make_context(store, ws, settings, embedder=embedder)
    assert not model_topics(ctx)
    made = lexical_rows(store, ws.id)
    assert made[0]
    with store.session() as s:
        s.exec(delete(Edge).where(Edge.kind == "in_topic"))
        s.exec(delete(Edge).where(col(Edge.src).in_([n[0] for n in made[0]])))
        s.exec(delete(Node).where(Node.kind == "topic"))
        s.exec(delete(Checkpoint).where(Checkpoint.stage == "lexical"))
        s.commit()
    settings.lexical.topics = "clustering"
    list(lexical_stage(make_context(store, ws, settings, embedder=embedder)))
    assert lexical_rows(store, ws.id) == made
