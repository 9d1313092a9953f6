"""The embed and index stages: vectors for chunks, statements and entities, then for community reports.

Both skip ids already in their collection, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from sqlmodel import select

from core.build.stages.reports import REPORTED
from core.models import Community, Document, Node
from core.store import content_id, release_memory


def node_text_for_embedding(kind: str, title: str, text: str, doc_title: str = "") -> str:
    """What a node is embedded as: chunks with their document title, entities as 'name: description'."""
    if kind == "chunk":
        return f"{doc_title}\n{text}" if doc_title and not text.startswith(doc_title) else text
    if kind == "community":
        return f"{title}\n{text}"
    return f"{title}: {text}" if text and text != title else title


def embed_missing(ctx, kind: str, rows: list[tuple[str, str, dict]]) -> Iterator[tuple[int, int]]:
    """Embed (id, text, meta) rows whose text is not in the collection of `kind` yet; yields (done, total).

    Rows go to the embedder sorted by length, so each batch pads to about its own length, and a text that occurs
    more than once (the same sentence in two overlapping chunks) is embedded once."""
    have = ctx.index.existing(kind)
    todo = []
    for i, text, meta in rows:
        h = content_id(text)
        if have.get(i) != h:
            todo.append((i, text, meta | {"h": h}))
    todo.sort(key=lambda r: (len(r[1]), r[1]))  # equal texts end up next to each other
    step = max(ctx.settings.embed.batch_size * 16, 256)
    last: dict[str, np.ndarray] = {}  # vectors of the previous part, for a run of equal texts cut by a boundary
    for off in range(0, len(todo), step):
        part = todo[off : off + step]
        texts = list(dict.fromkeys(t for _, t, _ in part if t not in last))
        got = dict(zip(texts, ctx.embedder.embed(texts))) if texts else {}
        vecs = np.vstack([got[t] if t in got else last[t] for _, t, _ in part])
        ctx.index.upsert(kind, [i for i, _, _ in part], vecs, [m for _, _, m in part])
        last = got
        yield off + len(part), len(todo)
        if ctx.should_stop():
            return


def embed_stage(ctx) -> Iterator:
    from core.build.context import Progress

    ws = ctx.ws
    with ctx.store.session() as s:
        titles = dict(s.exec(select(Document.id, Document.title).where(Document.workspace_id == ws.id)).all())
        chunks = s.exec(select(Node.id, Node.title, Node.text, Node.document_id)
                        .where(Node.workspace_id == ws.id, Node.kind == "chunk").order_by(Node.id)).all()
        stmts = s.exec(select(Node.id, Node.text, Node.document_id)
                       .where(Node.workspace_id == ws.id, Node.kind == "statement").order_by(Node.id)).all()
        ents = s.exec(select(Node.id, Node.title, Node.text, Node.type, Node.layer)  # summary layers embed their own
                      .where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 0)
                      .order_by(Node.id)).all()
    rows = {
        "chunk": [(i, node_text_for_embedding("chunk", t, x, titles.get(d, "")), {"document_id": d or ""})
                  for i, t, x, d in chunks],
        "statement": [(i, x, {"document_id": d or ""}) for i, x, d in stmts],
        "entity": [(i, node_text_for_embedding("entity", t, x[:1000]), {"type": ty, "layer": int(la)})
                   for i, t, x, ty, la in ents],
    }
    counts = {}
    for kind, kind_rows in rows.items():
        for done, total in embed_missing(ctx, kind, kind_rows):
            yield Progress(done, total, f"embedded {done}/{total} {'entities' if kind == 'entity' else kind + 's'}", counts | {kind: done})
        counts[f"{kind}_vectors"] = ctx.index.count(kind)
    del rows, chunks, stmts, ents
    release_memory()
    yield Progress(1, 1, "vectors stored", counts)


def index_stage(ctx) -> Iterator:
    from core.build.context import Progress

    with ctx.store.session() as s:
        comms = s.exec(select(Community).where(Community.workspace_id == ctx.ws.id)).all()
    live = {c.id for c in comms if c.method in REPORTED}
    stale = [i for i in ctx.index.existing("community") if i not in live]
    ctx.index.delete("community", stale)
    # the reports retrieval searches (leiden, hirag, attributed); NodeRAG's communities are searched through their
    # high-level element and overview nodes, which the embed stage indexes
    rows = [(c.id, node_text_for_embedding("community", c.title, c.summary), {"method": c.method, "level": c.level})
            for c in comms if c.summary and c.method in REPORTED]
    for done, total in embed_missing(ctx, "community", rows):
        yield Progress(done, total, f"embedded {done}/{total} community reports", {"community": done})
    yield Progress(1, 1, "community reports indexed", {"community_vectors": ctx.index.count("community")})
