"""The `index` stage: vectors for the community reports retrieval searches (the methods in
core/pipeline/report_material.py `REPORTED`), stale ones removed.

It skips reports already in the collection with the same text, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlmodel import col, select

from core.index.embedding import embed_missing, node_text_for_embedding
from core.models import Community
from core.pipeline.context import BuildContext, Progress
from core.pipeline.report_material import REPORTED


def report_rows(ctx: BuildContext) -> list[tuple[str, str, dict]]:
    """(id, text embedded, meta) of the reports retrieval searches (leiden, hirag, attributed); NodeRAG's communities
    are searched through their high-level element and overview nodes, which the augment stage embeds."""
    with ctx.store.session() as s:
        comms = s.exec(select(Community).where(Community.workspace_id == ctx.ws.id,
                                               col(Community.method).in_(REPORTED))).all()
    return [(c.id, node_text_for_embedding("community", c.title, c.summary), {"method": c.method, "level": c.level})
            for c in comms if c.summary]


def index_stage(ctx: BuildContext) -> Iterator[Progress]:
    with ctx.store.session() as s:
        live = set(s.exec(select(Community.id).where(Community.workspace_id == ctx.ws.id,
                                                     col(Community.method).in_(REPORTED))).all())
    stale = [i for i in ctx.index.existing("community") if i not in live]
    ctx.index.delete("community", stale)
    rows = report_rows(ctx)  # most were embedded beside the augment stage (core/pipeline/beside.py)
    for done, total in embed_missing(ctx.index, ctx.embedder, "community", rows, ctx.settings.embed.batch_size,
                                     ctx.should_stop):
        yield Progress(done, total, f"embedded {done}/{total} community reports", {"community": done})
    yield Progress(1, 1, "community reports indexed", {"community_vectors": ctx.index.count("community")})
