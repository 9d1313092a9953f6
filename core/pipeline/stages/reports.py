"""Community reports: a title, summary, findings with importance ratings and keywords for every community.

The material of a report is its members' descriptions and inner relationships (core/pipeline/report_material.py,
which also names the methods REPORTED and why). The stage writes the reports still missing and rewrites those
marked stale by an entity merge or undo since they were written (core/resolution/merge.py `mark_stale`), clearing
the mark, and (for `leiden` and `hirag`) those whose material changed since: each report keeps the hash of the
material it was written from (`data["material"]`), so after documents are added or deleted only the communities
whose members' descriptions or inner relationships changed get a new report; the others keep theirs.

The communities reported are those whose paper reports them: GraphRAG's `leiden` (§2: a report per community of
every level), HiRAG's `hirag` (hirag.txt §4.1: "for each community p in P, we generate an interpretable semantic
report") and ArchRAG's `attributed` (its stage writes them as it goes; any still missing are written here). The
`wcc` components GraphRAG clusters from, and NodeRAG's own communities (summarized by its high-level elements in
the augment stage, noderag.txt §2.3), get none.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import bindparam, or_, update
from sqlmodel import col, select

from core.models import Community, sql_table
from core.pipeline.context import BuildContext, Progress
from core.pipeline.report_material import HASHED, REPORTED, CommunityElements, material_hash, report_material
from core.pipeline.tasks import report_one
from core.store import content_id, json_field


def reports_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws_id = ctx.store, ctx.ws_id
    with store.session() as s:  # no report yet, or a report written before entity merges changed its members
        stale = json_field(s, Community.data, "stale", as_text=True)
        rows = s.exec(select(Community.id, Community.data).where(
            Community.workspace_id == ws_id, col(Community.method).in_(REPORTED),
            or_(col(Community.summary) == "", stale.is_not(None)))
            .order_by(Community.method, col(Community.level), Community.id)).all()
        # a stale mark on a community without a report (a wcc component, NodeRAG's) has nothing to rewrite: cleared
        bare = s.exec(select(Community.id, Community.data).where(
            Community.workspace_id == ws_id, col(Community.method).not_in(REPORTED),
            Community.summary == "", stale.is_not(None))).all()
    if bare:
        table = sql_table(Community)
        with store.session() as s:
            s.connection().execute(update(table).where(table.c.id == bindparam("_id")), [
                {"_id": cid, "data": {k: v for k, v in (data or {}).items() if k not in ("stale", "stale_reasons")}}
                for cid, data in bare])
            s.commit()
    elements: CommunityElements | None = CommunityElements(store, ws_id)
    assert elements is not None
    # a report whose material changed (members' descriptions, inner relationships: documents added or deleted) is
    # written again; one whose material hash is unchanged is kept, whatever else changed in the graph
    due = {cid for cid, _ in rows}
    with store.session() as s:
        reported = s.exec(select(Community.id, Community.data).where(
            Community.workspace_id == ws_id, col(Community.method).in_(HASHED), Community.summary != "")
            .order_by(Community.method, col(Community.level), Community.id)).all()
    rows = list(rows) + [(cid, data) for cid, data in reported
                         if cid not in due and (data or {}).get("material") != material_hash(*elements.of(cid))]
    todo = [cid for cid, _ in rows]
    fresh = {cid: {k: v for k, v in (data or {}).items() if k not in ("stale", "stale_reasons")} for cid, data in rows}
    total = len(todo)
    if total == 0:
        yield Progress(0, 0, "all reports present", {})
        return
    workers = ctx.settings.backend.parallel_calls if ctx.backend.name != "offline" else 1
    batch = max(32, workers * 4) if workers > 1 else 256  # reports written per transaction
    table = sql_table(Community)
    with store.session() as s:
        hashed = set(s.exec(select(Community.id).where(Community.workspace_id == ws_id,
                                                       col(Community.method).in_(HASHED))))

    hints: dict[str, str] = {}

    def material(cid: str) -> tuple[str, list]:
        """What the community's report is written from (read here; the engine's unit writes the report)."""
        assert elements is not None  # dropped only after the last report
        hint, material = report_material(*elements.of(cid))
        if cid in hashed:
            fresh[cid]["material"] = content_id(hint, *material)
        hints[cid] = hint
        return hint, material

    # a report whose model call failed after its retries is a failed unit, left unwritten (absent, or the stale
    # one kept with its mark), so the next build writes it
    results = ctx.model_engine.map(report_one, (material(c) for c in todo), ctx.parts, window=workers)
    n_failed = 0
    for off in range(0, total, batch):
        part = todo[off : off + batch]
        got = [(cid, ctx.failures.take(cid, next(results), f"report of {hints.pop(cid)!r}")) for cid in part]
        made = [(cid, rep) for cid, rep in got if rep is not None]
        n_failed += len(got) - len(made)
        if made:
            with store.session() as s:
                s.connection().execute(update(table).where(table.c.id == bindparam("_id")), [
                    {"_id": cid, "title": rep.title[:300], "summary": rep.summary, "report": rep.model_dump(),
                     "data": fresh[cid]}
                    for cid, rep in made])
                s.commit()
        failed = f", {n_failed} failed" if n_failed else ""
        yield Progress(off + len(part), total, f"{off + len(part)}/{total} reports{failed}",
                       {"reports": off + len(part) - n_failed, "failed_reports": n_failed})
        if ctx.should_stop():
            return

