"""The extract stage: entities, relationships and statements from every chunk, written as graph nodes and edges.

Each chunk is one unit, written in one transaction with its checkpoint, so an interrupted build neither loses nor
duplicates a chunk's elements. A chunk whose extraction still fails after its retries is a failed unit
(core/pipeline/failures.py): nothing is written for it and it has no checkpoint, so the next build extracts it and folds
its mentions in as for an added document (and the lexical stage makes its document's topics again). Entities are keyed by their normalized name, so same-named mentions land on one
node (the `resolve` stage then settles type and description); relationships are nodes (NodeRAG's R) linked to
their `subject` and `object` entities and `derived_from` the chunk.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator

from sqlmodel import col, select

from core.ids import IdScope, local_id, scope_by_id
from core.models import Document, Node, sql_table
from core.pipeline.beside import embedded_beside
from core.pipeline.context import BuildContext, Progress
from core.pipeline.mentions import chunk_ords, fold_entity, fold_relationship
from core.pipeline.stages.embed import chunk_rows, statements_so_far
from core.pipeline.tasks import extract_batch, extract_one, subject_one
from core.protocols import Extraction
from core.resolution.merge import merged_into
from core.store import bulk_insert, driver_sql
from core.text import norm_key

log = logging.getLogger(__name__)
STAGE = "extract"
ROW_FORMATS = {"csv", "tsv", "jsonl", "ndjson", "json"}
REAL_TITLES = {"field", "heading", "html"}  # Document.meta["title_from"] values that name the document's subject
_OFFLINE_BATCH = 64  # chunks per transaction with the offline heuristics


def entity_id(ids: IdScope, key: str) -> str:
    return ids.id("entity", key)


def extract_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws_id = ctx.store, ctx.ws_id
    done = store.done_units(ws_id, STAGE)
    with store.session() as s:
        rows = s.exec(
            select(Node.id, Node.text, Node.document_id).where(Node.workspace_id == ws_id, Node.kind == "chunk")
            .order_by(col(Node.document_id), col(Node.ord))
        ).all()
        docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws_id))}
    todo = [r for r in rows if r[0] not in done]
    total = len(todo)
    types = ctx.settings.extract.entity_types
    workers = ctx.settings.backend.parallel_calls if ctx.backend.name != "offline" else 1
    counts: Counter[str] = Counter()
    redirect = merged_into(store, ws_id) if total else {}
    todo_docs = {d: docs[d] for d in dict.fromkeys(r[2] for r in todo) if d in docs}
    subjects = document_subjects(ctx, todo_docs) if ctx.settings.extract.title_subject else {}

    def unit(row) -> tuple[str, str | None]:
        """What a chunk's extraction reads: its text and its subject (a model reads the document's title as
        context; offline extraction only trusts a real title as the subject)."""
        _, text, doc_id = row
        doc = docs.get(doc_id)
        return text, subjects.get(doc_id) if ctx.backend.name == "offline" else (doc.title if doc else None)

    def label(row) -> str:
        doc = docs.get(row[2])
        return f"chunk of {doc.title!r}" if doc else "chunk"

    # The offline heuristics parse a batch of chunks per unit and write many chunks per transaction; a model reads
    # one chunk per unit, a few written at a time (each chunk with its checkpoint, so a stop resumes at the first
    # unwritten one). Small builds still write in 50 or more steps, so progress moves and a stop lands mid-stage.
    # A unit whose model call failed after its retries is a failed unit: nothing written, no checkpoint, so the
    # next build extracts it again (core/pipeline/failures.py).
    by = f" ({ctx.backend.model})" if ctx.backend.name == "offline" and total else ""  # which extractor ran
    if by:
        log.info("extract: offline extractor %s", ctx.backend.model)
    offline = ctx.backend.name == "offline"
    batch = min(_OFFLINE_BATCH, max(1, total // 50)) if offline else max(1, workers * 4)
    parts = [todo[i : i + batch] for i in range(0, total, batch)]
    if offline:
        results: Iterator[list] = ctx.engine.map(extract_batch, ([unit(r) for r in p] for p in parts), ctx.parts,
                                                 types, cpu=True)
    else:
        flat = ctx.engine.map(extract_one, (unit(r) for r in todo), ctx.parts, types, window=workers)
        results = ([next(flat) for _ in p] for p in parts)
    # on a cluster the chunks go ahead only while a model is asked: offline, spaCy keeps every worker busy, and the
    # chunks sent ahead of the 1M-token build made extraction 54 s longer and saved the embed stage 17 s
    with embedded_beside(ctx, ("chunk", chunk_rows), ("statement", statements_so_far), ahead=not offline):
        done_n = 0
        for part, got in zip(parts, results):
            exs = [ctx.failures.take(r[0], ex, label(r)) for r, ex in zip(part, got)]
            items = [(cid, doc_id, ex) for (cid, _, doc_id), ex in zip(part, exs) if ex is not None]
            if items:
                counts.update(write_extractions(store, ws_id, items, redirect, subjects))
            done_n += len(part)
            counts["chunks"] = done_n
            if len(items) < len(part):
                counts["failed_chunks"] += len(part) - len(items)
            failed = f", {counts['failed_chunks']} failed" if counts["failed_chunks"] else ""
            yield Progress(done_n, total, f"extracted {done_n}/{total} chunks{by}{failed}", dict(counts))
            if ctx.should_stop():
                return
    if total == 0:
        yield Progress(0, 0, "no new chunks", {})


def document_subjects(ctx: BuildContext, docs: dict[str, Document]) -> dict[str, str]:
    """document id -> the name of the entity it is about, for the documents with a real title (`row_subject`); the
    offline backend narrows a page's heading to the name it holds (`subject_of`, units where the build's offline
    units run: on a cluster, spaCy stays out of the lease holder), a model reads the title whole."""
    titled = {d: t for d, t in ((d, row_subject(doc)) for d, doc in docs.items()) if t}
    if getattr(ctx.backend, "subject_of", None) is not None:
        asks = [(t, (docs[d].meta or {}).get("title_from", "field"), docs[d].text) for d, t in titled.items()]
        titled = dict(zip(titled, ctx.model_engine.map(subject_one, asks, ctx.parts)))
    return {d: t for d, t in titled.items() if t}


def row_subject(doc: Document | None) -> str | None:
    """A document's real title names the subject of its text: a corpus row's title field (an encyclopedia page's
    name), a Markdown page's `# heading`, an HTML page's <title>/<h1>. A title made from the file name (a plain-text
    book, an untitled row "corpus #12") or from PDF/DOCX metadata is not (ingest records `meta["title_from"]`;
    documents ingested before that fall back to: a row format, not numbered after its file)."""
    if doc is None:
        return None
    meta = doc.meta or {}
    if "title_from" in meta:
        return doc.title if meta["title_from"] in REAL_TITLES and doc.title.strip() else None
    if meta.get("format") not in ROW_FORMATS:
        return None
    return None if re.search(r" #\d+$", doc.title) else doc.title


def subject_keys(title: str | None) -> set[str]:
    """Normalized names a document's subject answers to: its title, and its title without a trailing
    parenthetical qualifier ("Steve Smith (musician)" -> "steve smith")."""
    if not title:
        return set()
    return {k for k in (norm_key(title), norm_key(re.sub(r"\s*\([^()]*\)\s*$", "", title))) if k}


def write_extractions(store, ws_id: int, items: list[tuple[str, str | None, Extraction]],
                      redirect: dict[str, str] | None = None, subjects: dict[str, str] | None = None) -> Counter:
    """Write the extractions of several chunks, in order, with their checkpoints, in one transaction.

    `subjects` maps a document to the title naming its subject (`row_subject`): a chunk's `mentions` edge to the
    entity of that name is marked {"subject": true}, so what reads the graph knows which chunks are *about* an
    entity rather than merely naming it (an entity's descriptions from those passages come first,
    core/pipeline/mentions.py). It weighs 1, as every mention: no paper weights a mention by a title field.

    `redirect` maps entities merged away by entity resolution to the entity holding their mentions now, so a new
    mention of a merged name joins that entity instead of bringing the merged node back.

    The result is the same as writing the chunks one by one: entities and relationships already in the graph (or
    met in an earlier chunk of the batch) are merged in memory, then written once; new rows and every edge go in
    through the driver's executemany (the ORM's per-object cost dominated large builds)."""
    counts: Counter = Counter()
    ids = scope_by_id(store, ws_id)
    new_nodes: dict[str, dict] = {}  # id -> row, inserted at the end
    changed: dict[str, dict] = {}  # id -> {"weight", "data", "text"} of rows already stored, updated at the end
    edges: list[tuple] = []

    # what each chunk names: entities by normalized name, relationships by (subject, object)
    plans = []
    for chunk_id, doc_id, ex in items:
        by_name: dict[str, str] = {}
        wanted: dict[str, tuple] = {}
        for e in ex.entities:
            key = norm_key(e.name)
            if not key:
                continue
            eid = entity_id(ids, key)
            eid = redirect.get(eid, eid) if redirect else eid
            by_name[e.name.lower()] = eid
            wanted.setdefault(eid, (key, e))
        rel_ids: dict[str, tuple] = {}
        for r in ex.relationships:
            a, b = by_name.get(r.source.lower()), by_name.get(r.target.lower())
            if not a or not b or a == b:
                continue
            rid = ids.id("relationship", local_id(a), local_id(b))
            if rid in rel_ids:
                prev = rel_ids[rid]
                rel_ids[rid] = (a, b, prev[2], prev[3] + float(r.weight), prev[4])
            else:
                rel_ids[rid] = (a, b, r.predicate.strip()[:120] or "related to", float(r.weight),
                                r.description.strip())
        plans.append((chunk_id, doc_id, ex, by_name, wanted, rel_ids))

    with store.session() as s:
        conn = s.connection()
        stored = _load(conn, {i for p in plans for i in (*p[4], *p[5])})
        ords = chunk_ords(conn, [p[0] for p in plans])

        def current(nid: str) -> dict | None:
            """The row as it stands after the chunks already merged: a new row, a changed row or a stored one."""
            if nid in new_nodes:
                return new_nodes[nid]
            if nid in changed:
                return changed[nid]
            row = stored.get(nid)
            if row is not None:
                changed[nid] = row
            return row

        for chunk_id, doc_id, ex, by_name, wanted, rel_ids in plans:
            about = subject_keys((subjects or {}).get(doc_id)) if doc_id else set()
            pos = (doc_id or "", ords.get(chunk_id, 0))  # the canonical order of contributions (core/pipeline/mentions.py)
            for eid, (key, e) in wanted.items():
                name, desc = e.name.strip(), (e.description or "").strip()
                node = current(eid)
                if node is None:
                    node = new_nodes[eid] = _node_row(ws_id, eid, "entity", key=key, weight=0.0,
                                                      data={"aliases": {}, "types": {}, "descriptions": []})
                    counts["entities_new"] += 1
                fold_entity(node, name, e.type, desc, pos, key in about)
                mention: dict = {"x": [[name, e.type, desc]]}  # this chunk's contribution, for a refold
                if key in about:
                    mention = {"subject": True} | mention
                    counts["subject_mentions"] += 1
                edges.append((ws_id, chunk_id, eid, "mentions", 1.0, json.dumps(mention)))
                counts["mentions"] += 1
            # relationships: nodalized, keyed by (subject, object)
            titles = {by_name[e.name.lower()]: e.name for e in reversed(ex.entities) if e.name.lower() in by_name}
            for rid, (a, b, pred, w, desc) in rel_ids.items():
                node = current(rid)
                if node is None:
                    node = new_nodes[rid] = _node_row(ws_id, rid, "relationship", key=f"{a}|{b}", weight=0.0,
                                                      data={"source": a, "target": b})
                    edges.append((ws_id, rid, a, "subject", 1.0, "{}"))
                    edges.append((ws_id, rid, b, "object", 1.0, "{}"))
                    counts["relationships_new"] += 1
                title = f"{titles.get(a, a)} — {pred} — {titles.get(b, b)}"[:300]
                fold_relationship(node, pred, w, desc, title, pos)
                edges.append((ws_id, rid, chunk_id, "derived_from", 1.0, json.dumps({"x": [[pred, w, desc, title]]})))
            # statements: propositions of this chunk, mentioning the chunk's entities they name
            names = list(by_name.items())
            for k, text in enumerate(dict.fromkeys(t.strip() for t in ex.statements if t.strip())):
                sid = ids.id("statement", local_id(chunk_id), str(k))
                new_nodes[sid] = _node_row(ws_id, sid, "statement", title=text[:80], text=text, document_id=doc_id,
                                           ord=k)
                edges.append((ws_id, sid, chunk_id, "derived_from", 1.0, "{}"))
                low = text.lower()
                for eid in sorted({eid for name, eid in names if name in low}):
                    edges.append((ws_id, sid, eid, "mentions", 1.0, "{}"))
                counts["statements"] += 1
        bulk_insert(conn, sql_table(Node), list(new_nodes.values()))
        if changed:
            conn.exec_driver_sql(driver_sql(conn, "UPDATE node SET weight = ?, text = ?, data = ? WHERE id = ?"),
                                 [(r["weight"], r["text"], json.dumps(r["data"]), nid) for nid, r in changed.items()])
        if edges:
            conn.exec_driver_sql(driver_sql(conn, "INSERT INTO edge (workspace_id, src, dst, kind, weight, data) "
                                                  "VALUES (?, ?, ?, ?, ?, ?)"), edges)
        conn.exec_driver_sql(driver_sql(conn, "INSERT INTO checkpoint (workspace_id, stage, unit) VALUES (?, ?, ?)"),
                             [(ws_id, STAGE, cid) for cid, _, _ in items])
        # a document whose topics were made without this chunk (its extraction had failed): made again (lexical.py)
        conn.exec_driver_sql(driver_sql(conn, "DELETE FROM checkpoint WHERE workspace_id = ? AND stage = 'lexical' "
                                              "AND unit = ?"), [(ws_id, d) for d in sorted({d for _, d, _ in items if d})])
        s.commit()
    return counts


def _load(conn, ids) -> dict[str, dict]:
    """id -> {"weight", "text", "data"} of the stored nodes among `ids` (the data a private copy, to update)."""
    ids = list(ids)
    out: dict[str, dict] = {}
    t = sql_table(Node)
    for i in range(0, len(ids), 900):
        for nid, w, text, data in conn.execute(select(t.c.id, t.c.weight, t.c.text, t.c.data)
                                               .where(t.c.id.in_(ids[i : i + 900]))):
            out[nid] = {"weight": w, "text": text or "", "data": copy.deepcopy(dict(data or {}))}
    return out


def _node_row(ws_id: int, nid: str, kind: str, **fields) -> dict:
    row = {"id": nid, "workspace_id": ws_id, "kind": kind, "key": "", "title": "", "text": "", "type": "",
           "layer": 0, "weight": 1.0, "document_id": None, "ord": None, "data": {}}
    row.update(fields)
    return row
