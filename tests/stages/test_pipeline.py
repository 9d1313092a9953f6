"""The build pipeline end to end on real storage: chunk order, provenance, entity merging, relationship shape,
vector counts, run records, idempotent re-upload and rebuild, and resume after a cancelled build."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest
from sqlmodel import select

from core.models import BuildRun, Checkpoint, Community, Edge, Node, Workspace
from core.pipeline.factory import make_context, open_index
from core.pipeline.runner import create_run, run_build, stage_names
from core.pipeline.runs import request_cancel
from core.store import Store
from core.workspace import ingest_paths

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data" / "sample"


# ------------------------------------------------------------------------------------------------------ helpers
def nodes(store: Store, ws_id: int, kind: str | None = None) -> list[Node]:
    with store.session() as s:
        q = select(Node).where(Node.workspace_id == ws_id)
        if kind:
            q = q.where(Node.kind == kind)
        return list(s.exec(q))


def edges(store: Store, ws_id: int, kind: str | None = None) -> list[Edge]:
    with store.session() as s:
        q = select(Edge).where(Edge.workspace_id == ws_id)
        if kind:
            q = q.where(Edge.kind == kind)
        return list(s.exec(q))


def communities(store: Store, ws_id: int) -> list[Community]:
    with store.session() as s:
        return list(s.exec(select(Community).where(Community.workspace_id == ws_id)))


def snapshot(store: Store, ws_id: int) -> dict:
    """Everything a build writes, in a form two builds can be compared by (row ids of edges excluded)."""
    return {
        "nodes": {(n.id, n.kind, n.key, n.title, n.type, round(n.weight, 6), n.document_id, n.ord)
                  for n in nodes(store, ws_id)},
        "edges": sorted((e.src, e.dst, e.kind, e.weight) for e in edges(store, ws_id)),
        "communities": {(c.id, c.method, c.level, c.parent_id, c.size) for c in communities(store, ws_id)},
        "counts": store.counts(ws_id),
    }


def first_run(store: Store, ws_id: int) -> BuildRun:
    with store.session() as s:
        return s.exec(select(BuildRun).where(BuildRun.workspace_id == ws_id).order_by(BuildRun.id)).first()


# ------------------------------------------------------------------------------------------------------ chunks
def test_chunks_follow_document_order_and_point_to_their_document(sample_built):
    settings, store, ws, _ = sample_built
    docs = {d.id: d for d in store.documents(ws.id)}
    assert len(docs) == 15
    chunks = nodes(store, ws.id, "chunk")
    assert chunks
    by_doc: dict[str, list[Node]] = defaultdict(list)
    for c in chunks:
        assert c.document_id in docs
        by_doc[c.document_id].append(c)
    assert set(by_doc) == set(docs), "every document gives at least one chunk"

    derived = Counter()
    for e in edges(store, ws.id, "derived_from"):
        if e.src in {c.id for c in chunks}:
            derived[e.src] += 1
    derived_to = {(e.src, e.dst) for e in edges(store, ws.id, "derived_from")}
    for c in chunks:
        assert derived[c.id] == 1
        assert (c.id, c.document_id) in derived_to

    expected_next = set()
    for doc_id, cs in by_doc.items():
        cs.sort(key=lambda c: c.ord)
        assert [c.ord for c in cs] == list(range(len(cs)))
        starts = [c.data["start"] for c in cs]
        assert starts == sorted(starts) and len(set(starts)) == len(starts)
        text = docs[doc_id].text
        for c in cs:
            assert c.text == text[c.data["start"] : c.data["end"]]
        expected_next |= {(a.id, b.id) for a, b in zip(cs, cs[1:])}
    got_next = [(e.src, e.dst) for e in edges(store, ws.id, "next")]
    assert len(got_next) == len(set(got_next))
    assert set(got_next) == expected_next
    assert len(expected_next) == len(chunks) - len(docs)


# ------------------------------------------------------------------------------------------------------ graph shape
def test_every_relationship_has_one_subject_and_one_object(sample_built):
    _, store, ws, _ = sample_built
    ents = {n.id for n in nodes(store, ws.id, "entity")}
    rels = nodes(store, ws.id, "relationship")
    assert len(rels) > 50
    ends: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for e in edges(store, ws.id):
        if e.kind in ("subject", "object"):
            ends[e.src][e.kind].append(e.dst)
    rel_ids = {r.id for r in rels}
    assert set(ends) == rel_ids, "subject/object edges start only at relationship nodes"
    for r in rels:
        sub, obj = ends[r.id]["subject"], ends[r.id]["object"]
        assert len(sub) == 1 and len(obj) == 1, r.title
        assert sub[0] in ents and obj[0] in ents
        assert sub[0] != obj[0]
        assert (r.data["source"], r.data["target"]) == (sub[0], obj[0])
        assert r.weight > 0


def test_same_named_entities_are_one_node_weighted_by_mentions(sample_built):
    _, store, ws, _ = sample_built
    ents = nodes(store, ws.id, "entity")
    keys = [e.key for e in ents]
    assert len(keys) == len(set(keys)), "one node per normalized name"
    amara = [e for e in ents if e.key == "amara okafor"]
    assert len(amara) == 1
    amara = amara[0]
    assert amara.title == "Amara Okafor"
    assert amara.type == "PERSON"

    chunk_doc = {c.id: c.document_id for c in nodes(store, ws.id, "chunk")}
    mentions: dict[str, list[str]] = defaultdict(list)
    mention_weight: dict[str, float] = defaultdict(float)
    # a chunk's mention of its page's subject (the profile of Amara Okafor is titled after her) is marked, and
    # weighs 1 as any other mention
    for e in edges(store, ws.id, "mentions"):
        if e.src in chunk_doc:
            mentions[e.dst].append(e.src)
            mention_weight[e.dst] += e.weight
    assert any((e.data or {}).get("subject") and e.dst == amara.id for e in edges(store, ws.id, "mentions"))
    docs_of_amara = {chunk_doc[c] for c in mentions[amara.id]}
    assert len(docs_of_amara) >= 4, "Amara Okafor is named in several sample documents"
    assert amara.weight == mention_weight[amara.id] >= len(docs_of_amara)
    # the same bookkeeping holds for every extracted entity: weight = mentions by chunks (an entity merge moves
    # the merged name's mentions over, adding to the weight of a chunk's edge when both names were in it)
    for e in ents:
        if e.layer == 0:  # HiRAG summary entities (layer >= 1) are weighted by the members they summarize
            assert e.weight == mention_weight[e.id], e.title


def test_statements_derive_from_chunks_of_their_document(sample_built):
    _, store, ws, _ = sample_built
    chunk_doc = {c.id: c.document_id for c in nodes(store, ws.id, "chunk")}
    stmts = nodes(store, ws.id, "statement")
    assert len(stmts) > len(chunk_doc)
    derived: dict[str, list[str]] = defaultdict(list)
    for e in edges(store, ws.id, "derived_from"):
        derived[e.src].append(e.dst)
    for st in stmts:
        assert len(derived[st.id]) == 1, st.text
        chunk = derived[st.id][0]
        assert chunk in chunk_doc
        assert chunk_doc[chunk] == st.document_id
        assert len(st.text.split()) >= 4


def test_vector_collections_match_the_graph(sample_built):
    settings, store, ws, embedder = sample_built
    index = open_index(settings, ws.name, embedder.name)
    chunk_ids = {n.id for n in nodes(store, ws.id, "chunk")}
    entity_ids = {n.id for n in nodes(store, ws.id, "entity")}
    from core.pipeline.report_material import REPORTED

    reported = {c.id for c in communities(store, ws.id) if c.method in REPORTED}
    # every community of a reported method (leiden, hirag, attributed) has its report and its vector; the wcc
    # components have neither, NodeRAG's communities are searched through their high-level elements
    assert reported and all(c.summary for c in communities(store, ws.id) if c.id in reported)
    assert index.count("chunk") == len(chunk_ids)
    assert index.count("entity") == len(entity_ids)
    assert index.count("community") == len(reported)
    assert set(index.existing("chunk")) == chunk_ids
    assert set(index.existing("entity")) == entity_ids
    assert set(index.existing("community")) == reported
    vec = index.vectors("chunk", [next(iter(chunk_ids))])
    assert next(iter(vec.values())).shape == (embedder.dim,)


def test_statements_are_embedded_with_the_title_of_a_document_about_one_entity(sample_built):
    """A statement is one sentence offline. In a document about one entity (its heading names it: the extract stage
    marked that subject) it is embedded with the document's title, the referent a propositionizer would write into
    it, as its chunk is; in a document without such a title (a .txt titled by its file name) it is embedded alone."""
    import numpy as np

    from core.models import Document

    settings, store, ws, embedder = sample_built
    index = open_index(settings, ws.name, embedder.name)
    with store.session() as s:
        titles = {d.id: d.title for d in s.exec(select(Document).where(Document.workspace_id == ws.id))}
        chunk_doc = {n.id: n.document_id for n in s.exec(select(Node).where(Node.workspace_id == ws.id,
                                                                           Node.kind == "chunk"))}
        about = {chunk_doc[e.src] for e in s.exec(select(Edge).where(Edge.workspace_id == ws.id,
                                                                     Edge.kind == "mentions"))
                 if e.src in chunk_doc and (e.data or {}).get("subject")}
    assert 0 < len(about) < len(titles)
    stmts = [n for n in nodes(store, ws.id, "statement") if not n.text.startswith(titles[n.document_id])]
    titled = [n for n in stmts if n.document_id in about][:5]
    alone = [n for n in stmts if n.document_id not in about][:5]
    assert len(titled) == len(alone) == 5
    stored = index.vectors("statement", [n.id for n in titled + alone])

    def cos(x, y) -> float:
        return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))

    for n, with_title, bare in zip(titled + alone, embedder.embed([f"{titles[n.document_id]}\n{n.text}"
                                                                   for n in titled + alone]),
                                   embedder.embed([n.text for n in titled + alone])):
        v = np.asarray(stored[n.id], dtype=np.float64)
        want, other = (with_title, bare) if n.document_id in about else (bare, with_title)
        assert cos(v, want) > 0.999 and cos(v, other) < 0.99, (titles[n.document_id], n.text)


def test_run_records(sample_built):
    _, store, ws, _ = sample_built
    run = first_run(store, ws.id)
    assert run.status == "done"
    assert run.finished_at is not None and run.error == ""
    rows = store.stage_runs(run.id)
    assert [r.stage for r in rows] == stage_names()
    for r in rows:
        assert r.status == "done", (r.stage, r.status, r.message)
        assert r.seconds > 0, r.stage
        assert r.started_at is not None and r.finished_at is not None
    by_stage = {r.stage: r for r in rows}
    assert by_stage["chunk"].counts["documents"] == 15
    assert by_stage["chunk"].counts["chunks"] == store.counts(ws.id)["chunk"]
    assert by_stage["extract"].done == by_stage["extract"].total == store.counts(ws.id)["chunk"]
    with store.session() as s:
        wsrow = s.get(Workspace, ws.id)
        done_runs = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id, BuildRun.status == "done")).all()
    assert wsrow.build_version == len(done_runs) >= 1
    assert (wsrow.backend, wsrow.embedder) == ("offline", "minilm")


def test_reupload_and_rebuild_add_nothing(sample_built):
    settings, store, ws, embedder = sample_built
    before = snapshot(store, ws.id)
    version = store.require_workspace(ws.name).build_version
    rep = ingest_paths(store, ws, [SAMPLE_DIR], settings)
    assert rep.added == []
    assert len(rep.duplicates) == 15
    assert store.counts(ws.id) == before["counts"]

    ctx = make_context(store, ws, settings, embedder=embedder)
    run = create_run(store, ws, settings)
    events = list(run_build(ctx, run.id))
    assert events[-1].status == "done"
    after = snapshot(store, ws.id)
    assert after["counts"] == before["counts"]
    assert after["nodes"] == before["nodes"]
    assert after["edges"] == before["edges"]
    assert after["communities"] == before["communities"]
    assert store.require_workspace(ws.name).build_version == version + 1
    index = open_index(settings, ws.name, embedder.name)
    assert index.count("chunk") == before["counts"]["chunk"]
    assert index.count("entity") == before["counts"]["entity"]


def test_tiny_corpus_merges_names_across_documents(tmp_path, tiny_corpus, build):
    b = build(tmp_path / "home", [tiny_corpus])
    ents = {n.key: n for n in nodes(b.store, b.ws.id, "entity")}
    chunk_doc = {c.id: c.document_id for c in nodes(b.store, b.ws.id, "chunk")}
    for key in ("lena marsh", "okoro institute", "tidewater bridge", "harwick engineering"):
        assert key in ents, sorted(ents)
        docs = {chunk_doc[e.src] for e in edges(b.store, b.ws.id, "mentions")
                if e.dst == ents[key].id and e.src in chunk_doc}
        assert len(docs) >= 2, key
    assert ents["okoro institute"].type == "ORGANIZATION"
    assert ents["lena marsh"].type == "PERSON"
    assert store_counts_positive(b.store.counts(b.ws.id))


def store_counts_positive(c: dict) -> bool:
    return all(c.get(k, 0) > 0 for k in ("document", "chunk", "entity", "relationship", "statement", "community"))


# ------------------------------------------------------------------------------------------------------ resume
def test_cancel_mid_extract_then_resume_matches_uninterrupted_build(tmp_path, sample_built, make_settings):
    ref_settings, ref_store, ref_ws, embedder = sample_built
    settings = make_settings(tmp_path / "resume_home")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("sample")
    assert ws.id == ref_ws.id, "content ids include the workspace id; both databases start at 1"
    ingest_paths(store, ws, [SAMPLE_DIR], settings)

    ctx = make_context(store, ws, settings, embedder=embedder)
    run1 = create_run(store, ws, settings)
    events = []
    for ev in run_build(ctx, run1.id):
        events.append(ev)
        if ev.stage == "extract" and ev.status == "running" and ev.done > 0:
            request_cancel(store, run1.id)
    assert events[-1].status == "cancelled" and events[-1].stage == "extract"
    assert not any(ev.stage in ("resolve", "embed", "communities") for ev in events)
    with store.session() as s:
        r1 = s.get(BuildRun, run1.id)
        assert r1.status == "cancelled"
        assert s.get(Workspace, ws.id).build_version == 0
    stages1 = {r.stage: r for r in store.stage_runs(run1.id)}
    assert stages1["chunk"].status == "done"
    assert stages1["extract"].status == "cancelled"
    assert stages1["embed"].status == "pending"

    n_chunks = store.counts(ws.id)["chunk"]
    done_extract = store.done_units(ws.id, "extract")
    assert 0 < len(done_extract) < n_chunks, "the cancel landed mid-way through the extract stage"
    assert store.counts(ws.id).get("community", 0) == 0

    ctx2 = make_context(store, ws, settings, embedder=embedder)
    run2 = create_run(store, ws, settings)
    events2 = list(run_build(ctx2, run2.id))
    assert events2[-1].status == "done"
    extract_done = [e for e in events2 if e.stage == "extract" and e.status == "done"][0]
    assert extract_done.total == n_chunks - len(done_extract), "only the unfinished chunks were extracted"
    chunk_done = [e for e in events2 if e.stage == "chunk" and e.status == "done"][0]
    assert chunk_done.total == 0, "no document was chunked twice"

    with store.session() as s:
        cps = s.exec(select(Checkpoint.stage, Checkpoint.unit).where(Checkpoint.workspace_id == ws.id)).all()
    assert len(cps) == len(set(cps))
    per_stage = Counter(st for st, _ in cps)
    assert per_stage["chunk"] == 15 and per_stage["extract"] == n_chunks

    got, want = snapshot(store, ws.id), snapshot(ref_store, ref_ws.id)
    assert got["counts"] == want["counts"]
    assert got["nodes"] == want["nodes"]
    assert got["edges"] == want["edges"]
    assert got["communities"] == want["communities"]
    assert store.require_workspace("sample").build_version == 1
    index = open_index(settings, ws.name, embedder.name)
    assert index.count("chunk") == got["counts"]["chunk"]
    assert index.count("entity") == got["counts"]["entity"]
    from core.pipeline.report_material import REPORTED

    assert index.count("community") == sum(1 for _, method, *_ in got["communities"] if method in REPORTED)


def test_cancel_request_only_applies_to_live_runs(tmp_path, make_settings):
    settings = make_settings(tmp_path / "h")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    run = create_run(store, ws, settings)
    request_cancel(store, run.id)
    with store.session() as s:
        assert s.get(BuildRun, run.id).status == "cancelling"
        row = s.get(BuildRun, run.id)
        row.status = "done"
        s.add(row)
        s.commit()
    request_cancel(store, run.id)
    with store.session() as s:
        assert s.get(BuildRun, run.id).status == "done"
    assert [r.status for r in store.stage_runs(run.id)] == ["pending"] * len(stage_names())


@pytest.mark.parametrize("bad", ["", "-x", "a b", "x" * 65, "../etc"])
def test_bad_workspace_names_are_refused(tmp_path, bad):
    from core.store import StoreError

    store = Store(tmp_path / "db.sqlite")
    with pytest.raises(StoreError):
        store.create_workspace(bad)
    assert store.workspaces() == []


def test_active_run_ignores_finished_and_silent_runs(tmp_path, make_settings):
    from datetime import timedelta

    from core.models import utcnow
    from core.pipeline.runs import active_run
    from core.worker import run_worker

    settings = make_settings(tmp_path / "h")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    assert active_run(store, ws) is None
    run = create_run(store, ws, settings)
    assert active_run(store, ws).id == run.id

    def set_run(**fields):
        with store.session() as s:
            row = s.get(BuildRun, run.id)
            for k, v in fields.items():
                setattr(row, k, v)
            s.add(row)
            s.commit()

    set_run(status="running", heartbeat=utcnow())
    assert active_run(store, ws).id == run.id
    set_run(heartbeat=utcnow() - timedelta(minutes=5))
    assert active_run(store, ws) is None, "a worker that stopped sending heartbeats is not active"
    set_run(lease_s=600.0)  # the run's own lease decides (STRATA_WORKER_LEASE_S of whoever started or claimed it)
    assert active_run(store, ws).id == run.id
    set_run(status="done", heartbeat=utcnow())
    assert active_run(store, ws) is None
    assert run_worker(store, 9999) == 2


def test_cancel_requested_while_queued_is_honoured(tmp_path, tiny_corpus, make_settings, embedder):
    settings = make_settings(tmp_path / "h")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_corpus], settings)
    run = create_run(store, ws, settings)
    request_cancel(store, run.id)  # the worker has not started yet
    events = list(run_build(make_context(store, ws, settings, embedder=embedder), run.id))
    assert [e.status for e in events] == ["cancelled"]
    with store.session() as s:
        assert s.get(BuildRun, run.id).status == "cancelled"
    assert store.counts(ws.id).get("chunk", 0) == 0
    assert {r.status for r in store.stage_runs(run.id)} == {"pending"}


def test_background_worker_builds_and_records_progress(tmp_path, tiny_corpus, make_settings):
    from core.pipeline.runs import active_run, launch_worker

    settings = make_settings(tmp_path / "h")
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    ingest_paths(store, ws, [tiny_corpus], settings)
    run = create_run(store, ws, settings)
    proc = launch_worker(settings, run.id)
    try:
        log = settings.storage.home / "logs" / f"run-{run.id}.log"
        assert proc.wait(timeout=240) == 0, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    with store.session() as s:
        row = s.get(BuildRun, run.id)
    assert row.status == "done" and row.pid == proc.pid and row.heartbeat is not None
    assert all(r.status == "done" for r in store.stage_runs(run.id))
    assert store.require_workspace("w").build_version == 1
    assert active_run(store, ws) is None
    text = log.read_text()
    assert "[extract] done" in text and "[build] done" in text
    assert store.counts(ws.id)["community"] > 0
