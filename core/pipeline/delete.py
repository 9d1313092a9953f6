"""Deleting documents from a built workspace: everything only they supported goes, nothing else.

A delete is a job (a `BuildRun` of kind "delete", params {"documents": [ids]}, planned by `delete_plan`, run by the
background worker or in process by `delete_documents`). Its steps:

1. `remove` (one transaction): the documents, their chunks, statements and topics with every edge touching them
   (`derived_from`, `next`, `mentions`, `in_topic`, ...), their checkpoints; then every entity and relationship
   their chunks contributed to is folded again from the contributions left on its edges (core/pipeline/mentions.py),
   so an entity also named by another document keeps exactly that document's support (weight, aliases, types,
   descriptions as if the deleted chunks never existed), and one nothing supports any more goes with its edges.
   Entity-resolution records stay coherent: a merge whose kept or merged entity lost all its support is dropped
   (its undo would bring back a node no document supports), the other merges' undo snapshots lose the edges of the
   deleted chunks, and candidates naming a removed entity go. The communities holding a changed entity are marked
   stale (their reports were written for other members) until the steps below write them again.
2. `vectors`: every chunk, statement, topic and entity vector whose node no longer exists is removed.
3. the build's stages from `resolve` on recompute what depends on the graph (layers, communities, reports of the
   communities whose material changed, lexical facts, NodeRAG augmentation, report vectors).

Every step is idempotent (the documents already removed are simply absent; vectors are compared with the live
nodes), so a run killed at any point and started again ends in the same state: that of a from-scratch build of
the remaining documents.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import delete, select

from core.models import Checkpoint, Document, Edge, EntityMerge, FailedUnit, Node, sql_table
from core.pipeline.context import BuildContext, JobPlan, Progress
from core.pipeline.mentions import refold, write_refolded
from core.pipeline.runner import stages
from core.resolution.merge import mark_stale

_PART = 500
_SKIPPED = ("chunk", "extract")  # nothing new to chunk or extract after a delete


def find_documents(store, ws_id: int, refs: list[str]) -> tuple[list[Document], list[str]]:
    """The documents `refs` name (an id, an external id, a title or a file name, in that order of preference) and the
    refs that name none."""
    docs = store.documents(ws_id)
    found: dict[str, Document] = {}
    missing = []
    for ref in refs:
        hit = next((d for d in docs if d.id == ref), None) or next((d for d in docs if d.external_id == ref), None)
        hits = [hit] if hit else [d for d in docs if d.title == ref] or [d for d in docs if d.filename == ref]
        if not hits:
            missing.append(ref)
        for d in hits:
            found[d.id] = d
    return list(found.values()), missing


def _ids(conn, q) -> list[str]:
    return [r[0] for r in conn.execute(q)]


def _in_parts(conn, make, ids) -> list:
    ids = sorted(set(ids))
    out: list = []
    for off in range(0, len(ids), _PART):
        out += list(conn.execute(make(ids[off : off + _PART])))
    return out


def _support(conn, ws_id: int, doc_ids: list[str]) -> tuple[list[str], list[str], list[str], set[str], set[str]]:
    """(chunks, statements, topics) of the documents, and the entities and relationships their chunks support."""
    n, e = sql_table(Node), sql_table(Edge)
    own = _in_parts(conn, lambda p: select(n.c.id, n.c.kind).where(
        n.c.workspace_id == ws_id, n.c.document_id.in_(p), n.c.kind.in_(("chunk", "statement", "topic"))), doc_ids)
    chunks = sorted(i for i, k in own if k == "chunk")
    ents = {r[0] for r in _in_parts(conn, lambda p: select(e.c.dst).where(
        e.c.workspace_id == ws_id, e.c.kind == "mentions", e.c.src.in_(p)), chunks)}
    rels = {r[0] for r in _in_parts(conn, lambda p: select(e.c.src).join(n, n.c.id == e.c.src).where(
        e.c.workspace_id == ws_id, e.c.kind == "derived_from", e.c.dst.in_(p), n.c.kind == "relationship"), chunks)}
    return (chunks, sorted(i for i, k in own if k == "statement"), sorted(i for i, k in own if k == "topic"),
            ents, rels)


def preview(store, ws_id: int, doc_ids: list[str]) -> dict[str, int]:
    """What deleting these documents removes: documents, chunks, statements, and the entities and relationships
    only they support (the others stay, with their support recomputed)."""
    with store.session() as s:
        conn = s.connection()
        chunks, stmts, _, ents, rels = _support(conn, ws_id, doc_ids)
        gone = set(chunks)
        e, n = sql_table(Edge), sql_table(Node)
        kept_ents = {r[0] for r in _in_parts(conn, lambda p: select(e.c.dst).join(n, n.c.id == e.c.src).where(
            e.c.workspace_id == ws_id, e.c.kind == "mentions", e.c.dst.in_(p), n.c.kind == "chunk",
            n.c.document_id.not_in(doc_ids)), ents)}
        kept_rels = {r[0] for r in _in_parts(conn, lambda p: select(e.c.src).where(
            e.c.workspace_id == ws_id, e.c.kind == "derived_from", e.c.src.in_(p), e.c.dst.not_in(gone)), rels)} \
            if len(gone) < 30_000 else set()
    docs = store.documents_by_id(ws_id, doc_ids)
    return {"documents": len(docs), "chunks": len(chunks), "statements": len(stmts),
            "entities_only_theirs": len(ents - kept_ents), "entities_shared": len(ents & kept_ents),
            "relationships_only_theirs": len(rels - kept_rels)}


def _delete_touching(conn, ws_id: int, ids: list[str]) -> None:
    e, n = sql_table(Edge), sql_table(Node)
    ids = sorted(set(ids))
    for off in range(0, len(ids), _PART):
        part = ids[off : off + _PART]
        conn.execute(delete(e).where(e.c.workspace_id == ws_id, e.c.src.in_(part)))
        conn.execute(delete(e).where(e.c.workspace_id == ws_id, e.c.dst.in_(part)))
        conn.execute(delete(n).where(n.c.workspace_id == ws_id, n.c.id.in_(part)))


def _prune_merges(s, ws_id: int, dead: set[str], gone: set[str]) -> int:
    """Keep entity-resolution records coherent with the removed nodes (module doc); returns the records dropped."""
    dropped = 0
    m = sql_table(EntityMerge)
    for row in s.execute(select(EntityMerge).where(m.c.workspace_id == ws_id)).scalars().all():
        if row.kept_id in dead or row.merged_id in dead:
            s.delete(row)
            dropped += 1
            continue
        snap = dict(row.snapshot or {})
        if row.status != "merged" or not snap.get("edges"):
            continue
        keep = [o for o in snap["edges"] if o["src"] not in gone and o["dst"] not in gone]
        if len(keep) == len(snap["edges"]):
            continue
        if not any(o["kind"] == "mentions" and o["dst"] == row.merged_id for o in keep):  # nothing supports it now
            s.delete(row)
            dropped += 1
            continue
        snap["edges"] = keep
        snap["touched"] = [o for o in snap.get("touched", []) if o["src"] not in gone and o["dst"] not in gone]
        row.snapshot = snap
        s.add(row)
    return dropped


def remove_documents(store, ws_id: int, doc_ids: list[str]) -> dict[str, int]:
    """Step 1 of the module doc, in one transaction; returns what it removed and refolded."""
    with store.session() as s:
        conn = s.connection()
        doc_ids = sorted(store.documents_by_id(ws_id, doc_ids))
        chunks, stmts, topics, ents, rels = _support(conn, ws_id, doc_ids)
        gone = set(chunks) | set(stmts) | set(topics)
        _delete_touching(conn, ws_id, sorted(gone) + doc_ids)
        ent_rows, rel_rows = refold(conn, ws_id, "entity", sorted(ents)), refold(conn, ws_id, "relationship",
                                                                                sorted(rels))
        write_refolded(conn, {i: r for i, r in {**ent_rows, **rel_rows}.items() if r is not None})
        dead = {i for i, r in {**ent_rows, **rel_rows}.items() if r is None}
        _delete_touching(conn, ws_id, sorted(dead))
        for table in (sql_table(Checkpoint), sql_table(FailedUnit)):  # a failed chunk of theirs fails no more
            for stage, units in (("chunk", doc_ids), ("lexical", doc_ids), ("extract", chunks)):
                for off in range(0, len(units), _PART):
                    conn.execute(delete(table).where(table.c.workspace_id == ws_id, table.c.stage == stage,
                                                     table.c.unit.in_(units[off : off + _PART])))
        dropped = _prune_merges(s, ws_id, {i for i in dead if i in ent_rows}, gone | dead)
        d = sql_table(Document)
        for off in range(0, len(doc_ids), _PART):
            conn.execute(delete(d).where(d.c.workspace_id == ws_id, d.c.id.in_(doc_ids[off : off + _PART])))
        s.commit()
    changed = sorted(i for i, r in ent_rows.items() if r is not None)
    stale = mark_stale(store, ws_id, changed, {"action": "delete", "documents": len(doc_ids)}) if changed else []
    return {"documents": len(doc_ids), "chunks": len(chunks), "statements": len(stmts), "topics": len(topics),
            "entities_removed": sum(1 for i in dead if i in ent_rows), "entities_refolded": len(changed),
            "relationships_removed": sum(1 for i in dead if i in rel_rows), "merge_records_dropped": dropped,
            "communities_stale": len(stale)}


def drop_orphan_vectors(store, index, ws_id: int) -> dict[str, int]:
    """Step 2: remove the vectors of chunks, statements, topics and entities that no longer exist."""
    out = {}
    for kind in ("chunk", "statement", "topic", "entity"):
        with store.session() as s:
            n = sql_table(Node)
            live = set(s.execute(select(n.c.id).where(n.c.workspace_id == ws_id, n.c.kind == kind)).scalars())
        stale = [i for i in index.existing(kind) if i not in live]
        index.delete(kind, stale)
        out[kind] = len(stale)
    return out


def delete_plan(params: dict) -> JobPlan:
    """params: {"documents": [document ids], "label": ...} -> the delete job's steps (module doc)."""
    doc_ids = [str(d) for d in params.get("documents") or []]
    if not doc_ids:
        raise ValueError("a delete needs the ids of the documents to delete")

    def remove(ctx: BuildContext) -> Iterator[Progress]:
        counts = remove_documents(ctx.store, ctx.ws_id, doc_ids)
        yield Progress(1, 1, f"removed {counts['documents']} documents, {counts['chunks']} chunks, "
                             f"{counts['entities_removed']} entities only they supported", counts)

    def vectors(ctx: BuildContext) -> Iterator[Progress]:
        counts = drop_orphan_vectors(ctx.store, ctx.index, ctx.ws_id)
        yield Progress(1, 1, f"removed {sum(counts.values())} vectors", counts)

    steps = [("remove", "Remove the documents and what only they supported", remove),
             ("vectors", "Remove their vectors", vectors)]
    steps += [(name, label, fn) for name, label, fn in stages() if name not in _SKIPPED]
    n = len(doc_ids)
    return JobPlan(steps=steps, changes=frozenset(name for name, _, _ in steps),
                   label=f"Delete {n} document{'s' if n != 1 else ''}",
                   done_message=f"Deleted {n} document{'s' if n != 1 else ''}; the workspace is up to date")


def delete_documents(store, ws, settings, doc_ids: list[str], embedder=None):
    """Delete documents in this process (the CLI, tests): a "delete" run through the runner; yields its Events."""
    from core.pipeline.factory import make_context
    from core.pipeline.runner import run_job
    from core.pipeline.runs import check_idle, insert_run

    check_idle(store, ws)
    plan = delete_plan({"documents": doc_ids})
    run = insert_run(store, ws, settings, [(name, label) for name, label, _ in plan.steps], "delete",
                     {"documents": list(doc_ids), "label": plan.label}, plan.label)
    assert run.id is not None
    ctx = make_context(store, ws, settings, embedder=embedder)
    yield from run_job(ctx, run.id, plan)
