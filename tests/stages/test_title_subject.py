"""A document's real title names the entity its chunks are about (their `mentions` edge to it carries the subject
weight and flag): a row's title field, a Markdown page's heading. A plain-text book titled after its file is about
no entity, nor is a row titled by a headline (a sentence about entities, not a name); `extract.title_subject = False` turns the marking off everywhere (the ablation)."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from core.models import Edge, Node
from core.pipeline.factory import make_context
from core.pipeline.runner import create_run, run_build
from core.store import Store
from core.workspace import ingest_paths

BOOK = ("Ada Lovelace met Charles Babbage in London. Lovelace wrote notes on the Analytical Engine. "
        "Babbage admired the notes and showed them to Michael Faraday.\n\n") * 3


def _subject_mentions(tmp_path, make_settings, embedder, marking: bool, extractor: str):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "page.md").write_text("# The Thames Barrier: An Overview\n\nThe Thames Barrier protects London "
                                             "from storm surges. Engineers from Rendel, Palmer and Tritton designed "
                                             "the Thames Barrier.\n", encoding="utf-8")
    (tmp_path / "in" / "ada_lovelace.txt").write_text(BOOK, encoding="utf-8")
    rows = [{"title": "Michael Faraday", "text": "Michael Faraday lectured at the Royal Institution in London."},
            # a news headline is a real title, but it names no single entity: no subject
            {"title": "Why the Royal Institution Lectures Still Draw Crowds in London",
             "text": "Crowds queue at the Royal Institution every Christmas for lectures begun by Michael Faraday."}]
    (tmp_path / "in" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = make_settings(tmp_path / "home")
    settings.extract.title_subject = marking
    settings.extract.offline_extractor = extractor
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tmp_path / "in"], settings)
    list(run_build(make_context(store, ws, settings, embedder=embedder), create_run(store, ws, settings).id,
                   only=["chunk", "extract"]))
    with store.session() as s:
        nodes = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws.id))}
        edges = s.exec(select(Edge).where(Edge.workspace_id == ws.id, Edge.kind == "mentions")).all()
    return {(nodes[e.src].title.rsplit(" #", 1)[0], nodes[e.dst].title) for e in edges
            if nodes[e.src].kind == "chunk" and (e.data or {}).get("subject") is True}


@pytest.mark.parametrize("extractor", ["spacy", "heuristic"])
def test_real_titles_name_the_subject_and_a_book_file_does_not(tmp_path, make_settings, embedder, extractor):
    marked = _subject_mentions(tmp_path, make_settings, embedder, True, extractor)
    assert marked == {("The Thames Barrier: An Overview", "Thames Barrier"), ("Michael Faraday", "Michael Faraday")}


def test_title_subject_off_marks_nothing(tmp_path, make_settings, embedder):
    assert _subject_mentions(tmp_path, make_settings, embedder, False, "spacy") == set()


@pytest.mark.parametrize("titled", [True, False])
def test_title_prefix_setting_decides_what_chunks_and_statements_are_embedded_as(tmp_path, make_settings, embedder,
                                                                                   titled):
    """`embed.title_prefix` (the title ablation): on, a titled row's chunk vector is its title + text and its
    statements (a row titled by a name is about that entity) carry the title too; off, both are embedded alone.
    Checked on the stored vectors against the embedder itself."""
    import numpy as np

    from core.index.embedding import statement_rows

    (tmp_path / "in").mkdir()
    rows = [{"title": "Michael Faraday", "text": "He lectured at the Royal Institution in London for decades."}]
    (tmp_path / "in" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = make_settings(tmp_path / "home")
    settings.embed.title_prefix = titled
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tmp_path / "in"], settings)
    ctx = make_context(store, ws, settings, embedder=embedder)
    list(run_build(ctx, create_run(store, ws, settings).id, only=["chunk", "extract", "resolve", "embed"]))
    with store.session() as s:
        chunk = s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "chunk")).one()
        stmts = s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "statement")).all()
    assert stmts
    expect = (f"Michael Faraday\n{chunk.text}" if titled else chunk.text)
    got = ctx.index.vectors("chunk", [chunk.id])[chunk.id]
    assert np.allclose(got, embedder.embed([expect])[0], atol=1e-3)
    texts = dict((i, t) for i, t, _ in statement_rows(store, ws.id, titled=titled))
    for st in stmts:
        assert texts[st.id] == (f"Michael Faraday\n{st.text}" if titled else st.text)
        assert np.allclose(ctx.index.vectors("statement", [st.id])[st.id], embedder.embed([texts[st.id]])[0],
                           atol=1e-3)
