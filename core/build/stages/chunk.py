"""The chunk stage: token-aware chunks of each new document, `derived_from` their document, `next` in order.

Documents are chunked in batches written in one transaction each, with a checkpoint per document, so a stopped
build resumes at the first document not written.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import insert
from sqlmodel import select

from core.models import Checkpoint, Document, Edge, Node
from core.store import content_id

STAGE = "chunk"
_BATCH_CHARS = 400_000  # text chunked per transaction


def chunk_stage(ctx) -> Iterator:
    from core.build.context import Progress
    from core.ingest.chunking import chunk_text

    store, ws = ctx.store, ctx.ws
    done = store.done_units(ws.id, STAGE)
    with store.session() as s:
        todo = [(d, n) for d, n in s.exec(select(Document.id, Document.n_chars).where(Document.workspace_id == ws.id))
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
            docs = {d.id: d for d in s.exec(select(Document).where(Document.id.in_(ids)))}  # type: ignore[union-attr]
            for doc_id, _ in todo[i:j]:
                doc = docs[doc_id]
                title = doc.title
                prev = None
                for k, sp in enumerate(chunk_text(doc.text, ctx.settings.chunk)):
                    cid = content_id(str(ws.id), "chunk", doc.id, str(k), sp.text)
                    nodes.append({"id": cid, "workspace_id": ws.id, "kind": "chunk", "key": "",
                                  "title": f"{doc.title} #{k + 1}", "text": sp.text, "type": "", "layer": 0,
                                  "weight": float(sp.n_tokens), "document_id": doc.id, "ord": k,
                                  "data": {"start": sp.start, "end": sp.end, "n_tokens": sp.n_tokens}})
                    edges.append(_edge(ws.id, cid, doc.id, "derived_from"))
                    if prev:
                        edges.append(_edge(ws.id, prev, cid, "next"))
                    prev = cid
            conn = s.connection()
            if nodes:
                conn.execute(insert(Node.__table__), nodes)  # type: ignore[attr-defined]
                conn.execute(insert(Edge.__table__), edges)  # type: ignore[attr-defined]
            conn.execute(insert(Checkpoint.__table__),  # type: ignore[attr-defined]
                         [{"workspace_id": ws.id, "stage": STAGE, "unit": d} for d, _ in todo[i:j]])
            s.commit()
        n_chunks += len(nodes)
        i = j
        yield Progress(i, total, f"chunked {title[:60]}", {"documents": i, "chunks": n_chunks})
    if total == 0:
        yield Progress(0, 0, "no new documents", {"chunks": store.counts(ws.id).get("chunk", 0)})


def _edge(ws_id: int, src: str, dst: str, kind: str) -> dict:
    return {"workspace_id": ws_id, "src": src, "dst": dst, "kind": kind, "weight": 1.0, "data": {}}
