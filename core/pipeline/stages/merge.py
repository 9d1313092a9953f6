"""The `merge` stage: entity resolution beyond same-name merging (core/resolution/merge.py explains the rules).

Candidates come from core/resolution/candidates.py. The stage merges a candidate itself only when its score >=
auto_merge and `evidence["auto_eligible"]`; a merge changes the kept entity's text (so its vector) and neighbours,
so the stage repeats (at most `_MAX_ROUNDS` rounds) until a pass merges nothing. Pairs recorded before, whatever
became of them (merged, rejected, undone), are never proposed again; the rest are recorded as candidates for review.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func
from sqlmodel import col, select

from core.index.embedding import embed_missing, statement_rows
from core.models import EntityMerge, Node
from core.pipeline.context import BuildContext, Progress
from core.resolution.candidates import find_candidates
from core.resolution.merge import apply_merge, entity_vectors, record_candidates, reembed

_MAX_ROUNDS = 5  # auto-merge rounds of one stage run (a merge changes the kept entity's vector and neighbours)


def merge_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws_id, cfg = ctx.store, ctx.ws.id, ctx.settings.resolve
    assert ws_id is not None  # a stored workspace
    if not cfg.enabled:
        yield Progress(1, 1, "entity resolution switched off", {})
        return
    with store.session() as s:
        decided = {frozenset((k, m)) for k, m in s.exec(select(EntityMerge.kept_id, EntityMerge.merged_id).where(
            EntityMerge.workspace_id == ws_id)).all()}
        gone = list(s.exec(select(EntityMerge.merged_id).where(EntityMerge.workspace_id == ws_id,
                                                              EntityMerge.status == "merged")))
        alive = set(s.exec(select(Node.id).where(Node.workspace_id == ws_id, col(Node.id).in_(gone)))) if gone else set()
    stale = [i for i in ctx.index.vectors("entity", gone) if i not in alive] if gone else []
    ctx.index.delete("entity", stale)  # a build stopped between a merge and its vector deletion
    with store.session() as s:
        ids = list(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0)))
    vec_cache = ctx.index.vectors("entity", ids)
    auto_merged, new = 0, []
    for rnd in range(_MAX_ROUNDS):
        cands = find_candidates(store, ws_id, ctx.index, cfg, vectors=vec_cache)
        new = [c for c in cands if frozenset((c.kept_id, c.merged_id)) not in decided]
        sure = [c for c in new if c.score >= cfg.auto_merge and c.evidence["auto_eligible"]]
        losing = {c.merged_id for c in sure}
        kept: set[str] = set()
        gone_now: set[str] = set()
        auto = []
        for c in sure:  # best first; an entity that is itself merged away keeps nothing this round
            if c.kept_id not in losing and c.merged_id not in gone_now | kept:
                auto.append(c)
                kept.add(c.kept_id)
                gone_now.add(c.merged_id)
        if not auto or rnd == _MAX_ROUNDS - 1:
            break
        vectors = entity_vectors(ctx.index, [c.merged_id for c in auto] + sorted(kept))
        with store.session() as s:  # the round's records and merges in one transaction
            for c in auto:
                row = EntityMerge(workspace_id=ws_id, kept_id=c.kept_id, merged_id=c.merged_id, score=c.score,
                                  evidence=c.evidence)
                s.add(row)
                s.flush()
                apply_merge(s, ws_id, row, True, vectors.get(c.merged_id), vectors.get(c.kept_id))
                decided.add(frozenset((c.kept_id, c.merged_id)))
            s.commit()
        ctx.index.delete("entity", sorted(gone_now))
        auto_merged += len(auto)
        reembed(store, ctx.index, ctx.embedder, sorted(kept))
        for i in gone_now:
            vec_cache.pop(i, None)
        vec_cache.update(ctx.index.vectors("entity", sorted(kept)))
        yield Progress(rnd + 1, _MAX_ROUNDS, f"merged {auto_merged} entities automatically",
                       {"auto_merged": auto_merged})
        if ctx.should_stop():
            return
    record_candidates(store, ws_id, new)
    # a statement's embedded text follows its document's subject mark (core/index/embedding.py `statement_rows`),
    # which merges may move: vectors follow the graph as it now is, whether the embed stage ran before this stage
    # (a build in one go) or again after it (a resumed one)
    rows = statement_rows(store, ws_id, titled=ctx.settings.embed.title_prefix)
    for done, total in embed_missing(ctx.index, ctx.embedder, "statement", rows, ctx.settings.embed.batch_size,
                                     ctx.should_stop):
        yield Progress(done, total, f"statements embedded again after merges: {done}/{total}", {})
    with store.session() as s:
        n_cands = s.exec(select(func.count()).select_from(EntityMerge).where(
            EntityMerge.workspace_id == ws_id, EntityMerge.status == "candidate")).one()
        n_ents = s.exec(select(func.count()).select_from(Node).where(
            Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0)).one()
    yield Progress(1, 1, f"{len(new)} new merge candidates, {auto_merged} merged automatically",
                   {"candidates": n_cands, "auto_merged": auto_merged, "entities": n_ents})
