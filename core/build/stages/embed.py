"""The `embed` stage: vectors for chunks, statements and entities (what each is embedded as:
core/index/embedding.py `node_text_for_embedding`; chunks and statements with their document's title).

It skips ids already in their collection with the same text, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from sqlmodel import select

from core.build.context import BuildContext, Progress
from core.index.embedding import embed_missing, node_text_for_embedding, statement_rows
from core.models import Document, Node
from core.protocols import Embedder
from core.store import release_memory

log = logging.getLogger(__name__)
BESIDE_ROWS = 8  # texts per embedder call beside the extract stage: one forward at a time (torch: 2,048 tokens)


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


class _OneForward:
    """An embedder fed a few texts per call, so the runtime runs one forward at a time (one core)."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        parts = [self.inner.embed(texts[i : i + BESIDE_ROWS]) for i in range(0, len(texts), BESIDE_ROWS)]
        return np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)


@contextmanager
def chunks_embedded_beside(ctx: BuildContext) -> Iterator[None]:
    """Embed the chunks on a second thread while the body runs: the extract stage, whose offline parser keeps one
    core while the embedder takes the other. A chunk's vector is the same whichever thread or batch embeds it
    (core/backends/minilm_runtime.py), and the embed stage skips what is stored (same id, same text); what this
    did not store (the body ended first, a stop, a failure: logged, not raised) the embed stage embeds and
    reports. When the body ends, the part in hand is finished and stored, then the thread stops."""
    done = threading.Event()

    def run() -> None:
        try:
            for _ in embed_missing(ctx.index, _OneForward(ctx.embedder), "chunk", chunk_rows(ctx), 1,
                                   lambda: done.is_set() or ctx.should_stop()):
                pass
        except Exception as exc:  # noqa: BLE001 - the embed stage embeds these chunks again and reports the error
            log.warning("embedding chunks beside the extraction stopped: %s: %s", type(exc).__name__, exc)

    worker = threading.Thread(target=run, name="embed-chunks-beside", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()


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
    counts: dict[str, int] = {}
    for kind, kind_rows in rows.items():
        for done, total in embed_missing(ctx.index, ctx.embedder, kind, kind_rows, ctx.settings.embed.batch_size,
                                         ctx.should_stop):
            yield Progress(done, total, f"embedded {done}/{total} {'entities' if kind == 'entity' else kind + 's'}", counts | {kind: done})
        counts[f"{kind}_vectors"] = ctx.index.count(kind)
    del rows, ents
    release_memory()
    yield Progress(1, 1, "vectors stored", counts)
