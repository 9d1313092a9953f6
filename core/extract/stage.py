"""The extract stage: entities, relationships and statements from every chunk, written as graph nodes and edges.

Each chunk is one unit, written in one transaction with its checkpoint, so an interrupted build neither loses nor
duplicates a chunk's elements. Entities are keyed by their normalized name, so same-named mentions land on one
node (the `resolve` stage then settles type and description); relationships are nodes (NodeRAG's R) linked to
their `subject` and `object` entities and `derived_from` the chunk.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import insert
from sqlmodel import select

from core.backends.base import Extraction
from core.extract.resolve import norm_key
from core.models import Checkpoint, Document, Edge, Node
from core.store import content_id

STAGE = "extract"
ROW_FORMATS = {"csv", "tsv", "jsonl", "ndjson", "json"}
_DESC_CAP = 1200


def entity_id(ws_id: int, key: str) -> str:
    return content_id(str(ws_id), "entity", key)


def extract_stage(ctx) -> Iterator:
    from core.pipeline import Progress

    store, ws = ctx.store, ctx.ws
    done = store.done_units(ws.id, STAGE)
    with store.session() as s:
        rows = s.exec(
            select(Node.id, Node.text, Node.document_id).where(Node.workspace_id == ws.id, Node.kind == "chunk")
            .order_by(Node.document_id, Node.ord)
        ).all()
        docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws.id))}
    todo = [r for r in rows if r[0] not in done]
    total = len(todo)
    types = ctx.settings.extract.entity_types
    workers = ctx.settings.backend.concurrency if ctx.backend.name == "ollama" else 1
    counts = Counter()

    def run_one(row) -> Extraction:
        _, text, doc_id = row
        doc = docs.get(doc_id)
        # a model reads the title as context; the heuristics only trust a corpus row's title as the subject
        subject = row_subject(doc) if ctx.backend.name == "offline" else (doc.title if doc else None)
        return ctx.backend.extract(text, types, subject=subject)

    batch = max(1, workers * 4)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start in range(0, total, batch):
            part = todo[start : start + batch]
            results = list(pool.map(run_one, part)) if workers > 1 else [run_one(r) for r in part]
            for (cid, _, doc_id), ex in zip(part, results):
                c = write_extraction(store, ws.id, cid, doc_id, ex)
                counts.update(c)
            counts["chunks"] = start + len(part)
            yield Progress(start + len(part), total, f"extracted {start + len(part)}/{total} chunks", dict(counts))
            if ctx.should_stop():
                return
    if total == 0:
        yield Progress(0, 0, "no new chunks", {})


def row_subject(doc: Document | None) -> str | None:
    """A corpus row's own title (an encyclopedia page's name) is the subject of its text; a file's title is not."""
    if doc is None or (doc.meta or {}).get("format") not in ROW_FORMATS:
        return None
    return None if re.search(r" #\d+$", doc.title) else doc.title


def write_extraction(store, ws_id: int, chunk_id: str, doc_id: str | None, ex: Extraction) -> Counter:
    """Write one chunk's extraction and its checkpoint in one transaction.

    New rows go in through bulk inserts (the ORM's per-object cost dominated large builds); entities and
    relationships already in the graph are updated in place."""
    counts: Counter = Counter()
    new_nodes: list[dict] = []
    edges: list[dict] = []

    def edge(src: str, dst: str, kind: str) -> None:
        edges.append({"workspace_id": ws_id, "src": src, "dst": dst, "kind": kind, "weight": 1.0, "data": {}})

    with store.session() as s:
        # entities: one node per normalized name
        by_name: dict[str, str] = {}
        wanted: dict[str, tuple] = {}
        for e in ex.entities:
            key = norm_key(e.name)
            if not key:
                continue
            eid = entity_id(ws_id, key)
            by_name[e.name.lower()] = eid
            wanted.setdefault(eid, (key, e))
        existing = {
            n.id: n for n in s.exec(select(Node).where(Node.id.in_(list(wanted))))  # type: ignore[union-attr]
        } if wanted else {}
        for eid, (key, e) in wanted.items():
            name, desc = e.name.strip(), (e.description or "").strip()
            node = existing.get(eid)
            if node is None:
                new_nodes.append(_node_row(ws_id, eid, "entity", key=key, title=name, type=e.type, weight=1.0,
                                           data={"aliases": {name: 1}, "types": {e.type: 1},
                                                 "descriptions": [desc] if desc else []}))
                counts["entities_new"] += 1
            else:
                data = dict(node.data or {})
                aliases = dict(data.get("aliases", {}))
                aliases[name] = aliases.get(name, 0) + 1
                types = dict(data.get("types", {}))
                types[e.type] = types.get(e.type, 0) + 1
                descs = list(data.get("descriptions", []))
                if desc and desc not in descs and sum(map(len, descs)) < _DESC_CAP:
                    descs.append(desc)
                data.update(aliases=aliases, types=types, descriptions=descs)
                node.data = data
                node.weight = (node.weight or 0.0) + 1.0
                s.add(node)
            edge(chunk_id, eid, "mentions")
            counts["mentions"] += 1
        # relationships: nodalized, keyed by (subject, object)
        rel_ids: dict[str, tuple] = {}
        for r in ex.relationships:
            a, b = by_name.get(r.source.lower()), by_name.get(r.target.lower())
            if not a or not b or a == b:
                continue
            rid = content_id(str(ws_id), "relationship", a, b)
            if rid in rel_ids:
                prev = rel_ids[rid]
                rel_ids[rid] = (a, b, prev[2], prev[3] + float(r.weight), prev[4])
            else:
                rel_ids[rid] = (a, b, r.predicate.strip()[:120] or "related to", float(r.weight), r.description.strip())
        existing_r = {
            n.id: n for n in s.exec(select(Node).where(Node.id.in_(list(rel_ids))))  # type: ignore[union-attr]
        } if rel_ids else {}
        titles = {by_name[e.name.lower()]: e.name for e in reversed(ex.entities) if e.name.lower() in by_name}
        for rid, (a, b, pred, w, desc) in rel_ids.items():
            node = existing_r.get(rid)
            if node is None:
                new_nodes.append(_node_row(ws_id, rid, "relationship", key=f"{a}|{b}",
                                           title=f"{titles.get(a, a)} — {pred} — {titles.get(b, b)}"[:300],
                                           text=desc, type=pred, weight=w,
                                           data={"source": a, "target": b, "predicates": [pred]}))
                edge(rid, a, "subject")
                edge(rid, b, "object")
                counts["relationships_new"] += 1
            else:
                data = dict(node.data or {})
                preds = list(data.get("predicates", []))
                if pred not in preds and len(preds) < 10:
                    preds.append(pred)
                data["predicates"] = preds
                node.data = data
                if desc and desc not in node.text and len(node.text) < _DESC_CAP:
                    node.text = (node.text + " " + desc).strip()
                node.weight = (node.weight or 0.0) + w
                s.add(node)
            edge(rid, chunk_id, "derived_from")
        # statements: propositions of this chunk, mentioning the chunk's entities they name
        for k, text in enumerate(dict.fromkeys(t.strip() for t in ex.statements if t.strip())):
            sid = content_id(str(ws_id), "statement", chunk_id, str(k))
            new_nodes.append(_node_row(ws_id, sid, "statement", title=text[:80], text=text, document_id=doc_id,
                                       ord=k))
            edge(sid, chunk_id, "derived_from")
            low = text.lower()
            for eid in sorted({eid for name, eid in by_name.items() if name in low}):
                edge(sid, eid, "mentions")
            counts["statements"] += 1
        conn = s.connection()
        if new_nodes:
            conn.execute(insert(Node.__table__), new_nodes)  # type: ignore[attr-defined]
        if edges:
            conn.execute(insert(Edge.__table__), edges)  # type: ignore[attr-defined]
        s.add(Checkpoint(workspace_id=ws_id, stage=STAGE, unit=chunk_id))
        s.commit()
    return counts


def _node_row(ws_id: int, nid: str, kind: str, **fields) -> dict:
    row = {"id": nid, "workspace_id": ws_id, "kind": kind, "key": "", "title": "", "text": "", "type": "",
           "layer": 0, "weight": 1.0, "document_id": None, "ord": None, "data": {}}
    row.update(fields)
    return row
