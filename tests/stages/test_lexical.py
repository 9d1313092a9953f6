"""HLG's lexical graph (core/pipeline/stages/lexical.py) as built into workspaces: facts linking statements across documents,
topics grouping every statement of a document, topic vectors, and a stage that resumes and re-runs cleanly."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from sqlmodel import col, delete, select

from core.algorithms.topics import topic_groups
from core.models import Checkpoint, Edge, Node
from core.pipeline.factory import make_context
from core.pipeline.stages import lexical
from core.pipeline.stages.lexical import lexical_stage


def lexical_rows(store, ws_id):
    with store.session() as s:
        nodes = sorted((n.id, n.title, n.text, n.document_id, n.ord, repr(n.data))
                       for n in s.exec(select(Node).where(Node.workspace_id == ws_id, Node.kind == "topic")))
        edges = sorted(s.exec(select(Edge.src, Edge.dst, Edge.kind, Edge.weight).where(
            Edge.workspace_id == ws_id, Edge.kind.in_(("in_topic", "mentions", "derived_from")))).all())
        marks = sorted(s.exec(select(Checkpoint.unit).where(Checkpoint.workspace_id == ws_id,
                                                            Checkpoint.stage == "lexical")))
    return nodes, edges, marks


def test_topic_groups_cut_the_tree_cap_the_size_and_are_deterministic():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 32))
    rows = np.vstack([centres[i % 3] + 0.05 * rng.normal(size=32) for i in range(30)])
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    groups = topic_groups(rows, 0.5, 100)
    assert sorted(map(sorted, groups)) == [list(range(k, 30, 3)) for k in range(3)], "three themes, three topics"
    capped = topic_groups(rows, 0.5, 4)
    assert max(map(len, capped)) <= 4 and sorted(i for g in capped for i in g) == list(range(30))
    assert all({i % 3 for i in g} == {g[0] % 3} for g in capped), "splits stay inside a theme"
    assert capped == topic_groups(rows, 0.5, 4), "deterministic"
    assert [g[0] for g in capped] == sorted(g[0] for g in capped), "topics in document order"
    assert len(topic_groups(rows, 0.9999, 100)) == 30 and topic_groups(rows[:1], 0.5, 4) == [[0]]
    windowed = topic_groups(rows, 0.5, 100, window=10)
    assert all(g[-1] // 10 == g[0] // 10 for g in windowed), "a topic never spans two windows"


def test_every_statement_is_in_one_topic_of_its_own_document(sample_built):
    settings, store, ws, embedder = sample_built
    with store.session() as s:
        stmt_doc = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws.id,
                                                                       Node.kind == "statement")).all())
        topics = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "topic"))}
        in_topic = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id,
                                                           Edge.kind == "in_topic")).all()
        topic_doc = dict(s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id,
                                                                 Edge.kind == "derived_from",
                                                                 Edge.src.in_(list(topics)))).all())
    assert topics and stmt_doc
    of_stmt = defaultdict(list)
    members = defaultdict(list)
    for sid, tid in in_topic:
        of_stmt[sid].append(tid)
        members[tid].append(sid)
    assert set(of_stmt) == set(stmt_doc) and all(len(t) == 1 for t in of_stmt.values())
    for sid, (tid,) in of_stmt.items():
        assert topics[tid].document_id == stmt_doc[sid] == topic_doc[tid]
    cap = settings.lexical.max_topic_statements
    for tid, t in topics.items():
        assert 1 <= len(members[tid]) <= cap and t.data["statements"] == len(members[tid])
        assert t.title.strip() and t.text.strip() and isinstance(t.data["keywords"], list)
    # topic vectors: one per topic node, embedded with the topic's statements
    ctx = make_context(store, ws, settings, embedder=embedder)
    assert set(ctx.index.existing("topic")) == set(topics)
    tid = max(members, key=lambda t: len(members[t]))
    probe = embedder.embed([f"{topics[tid].title}\n{topics[tid].text}"])[0]
    hits = ctx.index.query("topic", probe, 3)
    assert tid in [h.id for h in hits]


def test_a_fact_stated_in_two_documents_links_statements_of_both(sample_built):
    settings, store, ws, _ = sample_built
    with store.session() as s:
        stmts = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "statement"))}
        rels = {n.id for n in s.exec(select(Node).where(Node.workspace_id == ws.id, Node.kind == "relationship"))}
        edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws.id)).all()
    ends, chunks_of, ents_of, stated = {}, defaultdict(set), defaultdict(set), defaultdict(set)
    for src, dst, kind in edges:
        if kind in ("subject", "object"):
            ends[(src, kind)] = dst
        elif kind == "derived_from":
            chunks_of[src].add(dst)
        elif kind == "mentions" and src in stmts:
            (stated[dst].add(src) if dst in rels else ents_of[src].add(dst))
    assert stated, "statements link to facts"
    for rid, sids in stated.items():
        for sid in sids:  # the statement comes from the fact's chunk and names both its ends
            assert chunks_of[sid] & chunks_of[rid]
            assert {ends[(rid, "subject")], ends[(rid, "object")]} <= ents_of[sid]
    cross = {rid for rid, sids in stated.items() if len({stmts[i].document_id for i in sids}) >= 2}
    assert cross, "some fact connects two documents"
    with store.session() as s:
        from core.models import StageRun

        # the sample's first build did the linking (a later test may rebuild the shared sample: its row comes after)
        run = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "lexical")
                     .order_by(col(StageRun.id))).first()
    assert run is not None
    assert run.counts["cross_document_facts"] == len(cross)
    assert run.counts["facts_linked"] == sum(map(len, stated.values()))
    # and every statement of a fact's chunk that names both ends is linked (none missed)
    stmts_of_chunk = defaultdict(set)
    for sid in stmts:
        for c in chunks_of[sid]:
            stmts_of_chunk[c].add(sid)
    for rid in rels:
        a, b = ends.get((rid, "subject")), ends.get((rid, "object"))
        want = {sid for c in chunks_of[rid] for sid in stmts_of_chunk[c] if {a, b} <= ents_of[sid]} if a != b else set()
        assert stated.get(rid, set()) == want


def test_rerun_adds_nothing_and_an_interrupted_run_resumes_to_the_same_rows(tmp_path, build, tiny_corpus,
                                                                            monkeypatch):
    settings, store, ws, embedder = build(tmp_path / "home", [tiny_corpus])
    ctx = make_context(store, ws, settings, embedder=embedder)
    full = lexical_rows(store, ws.id)
    assert full[0] and len(full[2]) == 4
    list(lexical_stage(ctx))
    assert lexical_rows(store, ws.id) == full, "a re-run adds no rows"
    # forget the topics, then stop after the first document and resume
    with store.session() as s:
        tids = list(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "topic")))
        s.exec(delete(Edge).where(Edge.kind == "in_topic"))
        s.exec(delete(Edge).where(Edge.src.in_(tids)))
        s.exec(delete(Node).where(Node.id.in_(tids)))
        s.exec(delete(Checkpoint).where(Checkpoint.stage == "lexical"))
        s.commit()
    monkeypatch.setattr(lexical, "_BATCH_STATEMENTS", 1)
    ctx.should_stop = lambda: True
    list(lexical_stage(ctx))
    partial = lexical_rows(store, ws.id)
    assert len(partial[2]) == 1 and 0 < len(partial[0]) < len(full[0])
    ctx.should_stop = lambda: False
    counts = list(lexical_stage(ctx))[-1].counts
    assert lexical_rows(store, ws.id) == full
    assert counts["topics"] == len(full[0]) and counts["documents"] == 4
