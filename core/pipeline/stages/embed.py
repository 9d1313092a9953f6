"""The `embed` stage: vectors for chunks, statements and entities (what each is embedded as:
core/index/embedding.py `node_text_for_embedding`; chunks and statements with their document's title).

It skips ids already in their collection with the same text, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlmodel import select

from core.index.embedding import embed_missing, node_text_for_embedding, statement_rows
from core.models import Document, Node
from core.pipeline.context import BuildContext, Progress


def chunk_rows(ctx: BuildContext) -> list[tuple[str, str, dict]]:
    """(id, text embedded, meta) of the workspace's chunks, in id order."""
    with ctx.store.session() as s:
        titles: dict[str | None, str] = dict(s.exec(select(Document.id, Document.title)
                                                    .where(Document.workspace_id == ctx.ws_id)).all())
        chunks = s.exec(select(Node.id, Node.title, Node.text, Node.document_id)
                        .where(Node.workspace_id == ctx.ws_id, Node.kind == "chunk").order_by(Node.id)).all()
    titled = ctx.settings.embed.title_prefix
    return [(i, node_text_for_embedding("chunk", t, x, titles.get(d, "") if titled else ""),
             {"document_id": d or ""}) for i, t, x, d in chunks]


def statements_so_far(ctx: BuildContext) -> list[tuple[str, str, dict]]:
    """`statement_rows` of the workspace as it stands (beside the extract stage: the chunks extracted so far)."""
    return statement_rows(ctx.store, ctx.ws_id, titled=ctx.settings.embed.title_prefix)


def embed_stage(ctx: BuildContext) -> Iterator[Progress]:
    ws = ctx.ws
    assert ws.id is not None  # a stored workspace
    with ctx.store.session() as s:
        # summary layers embed their own; sqlmodel types select() for at most 4 columns, hence the ignore
        ents = s.exec(select(Node.id, Node.title, Node.text, Node.type, Node.layer)  # type: ignore[call-overload]
                      .where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 0)
                      .order_by(Node.id)).all()
    titled = ctx.settings.embed.title_prefix
    rows = {
        "chunk": chunk_rows(ctx),
        "statement": statement_rows(ctx.store, ws.id, titled=titled),
        "entity": [(i, node_text_for_embedding("entity", t, x[:1000]), {"type": ty, "layer": int(la)})
                   for i, t, x, ty, la in ents],
    }
    counts: dict[str, int | str] = {}
    for kind, kind_rows in rows.items():
        for done, total in embed_missing(ctx.index, ctx.embedder, kind, kind_rows, ctx.settings.embed.batch_size,
                                         ctx.should_stop):
            yield Progress(done, total, f"embedded {done}/{total} {'entities' if kind == 'entity' else kind + 's'}", counts | {kind: done})
        counts[f"{kind}_vectors"] = ctx.index.count(kind)
    yield Progress(1, 1, "vectors stored", counts)
