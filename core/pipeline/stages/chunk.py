"""The chunk stage: token-aware chunks of each new document, `derived_from` their document, `next` in order.

Documents are chunked in batches written in one transaction each, with a checkpoint per document, so a stopped
build resumes at the first document not written.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlmodel import col, select

from core.ids import local_id
from core.ingest.chunking import chunk_text
from core.models import Checkpoint, Document, Edge, Node, sql_table
from core.pipeline.context import BuildContext, Progress
from core.store import bulk_insert

STAGE = "chunk"
_BATCH_CHARS = 400_000  # text chunked per transaction


def chunk_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws_id = ctx.store, ctx.ws_id
    done = store.done_units(ws_id, STAGE)
    with store.session() as s:
        todo = [(d, n) for d, n in s.exec(select(Document.id, Document.n_chars).where(Document.workspace_id == ws_id))
                if d not in done]
    total = len(todo)
    n_chunks = 0
    i = 0
    most = max(1, total // 50)  # documents per transaction: small builds still report progress as they go
    while i < total:
        j, size = i, 0
        while j < total and (j == i or (size + todo[j][1] <= _BATCH_CHARS and j - i < most)):
            size += todo[j][1]
            j += 1
        nodes: list[dict] = []
        edges: list[dict] = []
        title = ""
        with store.session() as s:
            ids = [d for d, _ in todo[i:j]]
            docs = {d.id: d for d in s.exec(select(Document).where(Document.workspace_id == ws_id,
                                                                    col(Document.id).in_(ids)))}
            for doc_id, _ in todo[i:j]:
                doc = docs[doc_id]
                title = doc.title
                prev = None
                for k, sp in enumerate(chunk_text(doc.text, ctx.settings.chunk)):
                    cid = ctx.ids.id("chunk", local_id(doc.id), str(k), sp.text)
                    nodes.append({"id": cid, "workspace_id": ws_id, "kind": "chunk", "key": "",
                                  "title": f"{doc.title} #{k + 1}", "text": sp.text, "type": "", "layer": 0,
                                  "weight": float(sp.n_tokens), "document_id": doc.id, "ord": k,
                                  "data": {"start": sp.start, "end": sp.end, "n_tokens": sp.n_tokens}})
                    edges.append(_edge(ws_id, cid, doc.id, "derived_from"))
                    if prev:
                        edges.append(_edge(ws_id, prev, cid, "next"))
                    prev = cid
            conn = s.connection()
            if nodes:
                bulk_insert(conn, sql_table(Node), nodes)
                bulk_insert(conn, sql_table(Edge), edges)
            bulk_insert(conn, sql_table(Checkpoint),
                        [{"workspace_id": ws_id, "stage": STAGE, "unit": d} for d, _ in todo[i:j]])
            s.commit()
        n_chunks += len(nodes)
        i = j
        yield Progress(i, total, f"chunked {title[:60]}", {"documents": i, "chunks": n_chunks})
    if total == 0:
        yield Progress(0, 0, "no new documents", {"chunks": store.counts(ws_id).get("chunk", 0)})


def _edge(ws_id: int, src: str, dst: str, kind: str) -> dict:
    return {"workspace_id": ws_id, "src": src, "dst": dst, "kind": kind, "weight": 1.0, "data": {}}
