"""The chunk stage: token-aware chunks of each new document, `derived_from` their document, `next` in order."""

from __future__ import annotations

from collections.abc import Iterator

from sqlmodel import select

from core.models import Checkpoint, Document, Edge, Node
from core.store import content_id

STAGE = "chunk"


def chunk_stage(ctx) -> Iterator:
    from core.ingest.chunking import chunk_text
    from core.pipeline import Progress

    store, ws = ctx.store, ctx.ws
    done = store.done_units(ws.id, STAGE)
    with store.session() as s:
        doc_ids = [d for d in s.exec(select(Document.id).where(Document.workspace_id == ws.id)) if d not in done]
    total = len(doc_ids)
    n_chunks = 0
    for i, doc_id in enumerate(doc_ids):
        with store.session() as s:
            doc = s.get(Document, doc_id)
            spans = chunk_text(doc.text, ctx.settings.chunk)
            prev = None
            for j, sp in enumerate(spans):
                cid = content_id(str(ws.id), "chunk", doc.id, str(j), sp.text)
                s.add(Node(id=cid, workspace_id=ws.id, kind="chunk", title=f"{doc.title} #{j + 1}", text=sp.text,
                           document_id=doc.id, ord=j, weight=float(sp.n_tokens),
                           data={"start": sp.start, "end": sp.end, "n_tokens": sp.n_tokens}))
                s.add(Edge(workspace_id=ws.id, src=cid, dst=doc.id, kind="derived_from"))
                if prev:
                    s.add(Edge(workspace_id=ws.id, src=prev, dst=cid, kind="next"))
                prev = cid
            s.add(Checkpoint(workspace_id=ws.id, stage=STAGE, unit=doc.id))
            s.commit()
            n_chunks += len(spans)
        yield Progress(i + 1, total, f"chunked {doc.title[:60]}", {"documents": i + 1, "chunks": n_chunks})
    if total == 0:
        yield Progress(0, 0, "no new documents", {"chunks": store.counts(ws.id).get("chunk", 0)})
