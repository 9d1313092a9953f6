"""Promoting a what-if variant (core/quality/variants.py): its communities become the Leiden partition retrieval uses.

The current leiden partition is saved first as a variant "before-<UTC time>" with its reports; the variant's
communities then replace the leiden rows (core/pipeline/community_rows.write_communities: ids hash the members, so an
unchanged community keeps its row and report, and promoting a "before-" variant back restores ids and reports
exactly); reports are made for the new ones (the reports stage with the workspace's backend), NodeRAG's high-level
elements are re-synced (the augment stage), the "community" vectors are rewritten (the index stage drops the old
ids' vectors, embeds the new) and the workspace's build_version is bumped.

Those are the four steps of a promote job (core/worker.py, kind "promote": `start_promote`, planned by
`promote_plan`), which the background worker runs with the runner's progress rows, heartbeat and cancel. A cancel
takes effect between units: before "replace" has finished nothing has changed; after it the stored partition is the
variant's, whole (it is written in one step, which yields no progress until it is written), and the version is
bumped; the reports and vectors not yet made are made by the next build (Build / resume) or by promoting again.
`promote` runs the same steps in the caller's process (tests, scripts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime, timezone

import numpy as np
from sqlmodel import col, select

from core.config import Settings
from core.models import Community, CommunityVariant, Workspace
from core.pipeline.community_rows import community_id, write_communities
from core.pipeline.context import BuildContext, JobPlan, Progress, Stage
from core.pipeline.factory import make_context
from core.pipeline.runs import active_run
from core.pipeline.stages.augment import augment_stage
from core.pipeline.stages.index import index_stage
from core.pipeline.stages.reports import reports_stage
from core.quality.data import EntityBase, Group, build_settings, load_base, stored_groups
from core.quality.variants import (
    VariantError,
    VariantSettings,
    defaults,
    figures_by_level,
    get_variant,
    list_variants,
    variant_groups,
)


def promote_settings(store, ws: Workspace, settings: Settings) -> Settings:
    """The last build's settings with the workspace's own backend (the one that wrote its reports) and the caller's
    storage."""
    assert ws.id is not None  # a row read from or written to the store has its key
    s = build_settings(store, ws.id, settings)
    if ws.backend in ("offline", "ollama", "openai"):
        s.backend.kind = ws.backend  # type: ignore[assignment]
    return s


def promote_context(store, ws: Workspace, settings: Settings, embedder) -> BuildContext:
    """A build context for `promote` in the caller's process."""
    return make_context(store, ws, promote_settings(store, ws, settings), embedder=embedder)


def _snapshot(store, ws: Workspace, base: EntityBase, settings: Settings) -> str | None:
    """Save the stored leiden partition (with its reports) as a variant "before-<UTC time>"; returns its name."""
    assert ws.id is not None  # a row read from or written to the store has its key
    ws_id: int = ws.id
    cur = stored_groups(store, ws_id, "leiden", {e: i for i, e in enumerate(base.ids)})
    if not cur:
        return None
    with store.session() as s:
        rows = s.exec(select(Community.id, Community.title, Community.summary, Community.report)
                      .where(Community.workspace_id == ws_id, Community.method == "leiden")
                      .add_columns(col(Community.data))).all()
    reports = {cid: [t, x, r or {}] for cid, t, x, r, _ in rows if x}
    made_by = next((d.get("variant_settings") for *_, d in rows if (d or {}).get("variant_settings")), None)
    # the name evaluations measured this partition under (core/evaluation/records.partition_name)
    was = next((str(d["variant"]) for *_, d in rows if (d or {}).get("variant")), "built")
    vs = VariantSettings.from_dict(made_by) if made_by else defaults(store, ws_id, settings)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    taken = {v.name for v in list_variants(store, ws)}
    name, k = f"before-{stamp}", 2
    while name in taken:
        name, k = f"before-{stamp}-{k}", k + 1
    metrics = figures_by_level(base, cur, settings)
    part = {"entities": base.ids, "clusters": [[g.level, g.parent, g.members.tolist()] for g in cur],
            "reports": reports}
    with store.session() as s:
        s.add(CommunityVariant(workspace_id=ws_id, name=name, settings=asdict(vs) | {"snapshot": True, "was": was},
                               metrics=metrics, partition=part, build_version=ws.build_version))
        s.commit()
    return name


def _non_empty(groups: list[Group]) -> list[Group]:
    """Drop communities left without members (their entities merged away since the variant ran); a child of a
    dropped one hangs from its nearest kept ancestor."""
    keep = [i for i, g in enumerate(groups) if len(g.members)]
    if len(keep) == len(groups):
        return groups
    new_index = {old: new for new, old in enumerate(keep)}

    def up(p: int) -> int:
        while p >= 0 and p not in new_index:
            p = groups[p].parent
        return new_index.get(p, -1)

    return [Group(g.id, g.title, g.level, g.members, up(g.parent)) for g in (groups[i] for i in keep)]


def replace_partition(ctx: BuildContext, name: str) -> Iterator[Progress]:
    """Step 1: save the current partition as a "before-" variant and write variant `name`'s communities as the
    leiden rows; the last progress counts name the snapshot."""
    store, ws, ws_id = ctx.store, ctx.ws, ctx.ws_id
    v = get_variant(store, ws, name)
    yield Progress(0, 1, "loading the entity graph")
    base = load_base(store, ctx.index, ws_id).extracted()
    groups = _non_empty(variant_groups(base, v))
    if not groups:
        raise VariantError(f"variant {name!r} holds no communities over the current entities")
    snap = _snapshot(store, ws, base, ctx.settings)
    ids, rows, members_of = [], [], {}
    for g in groups:
        member_ids = [base.ids[i] for i in g.members.tolist()]
        ids.append(community_id(ctx.ids, "leiden", g.level, member_ids))
        members_of[ids[-1]] = member_ids
    children = np.bincount([g.parent for g in groups if g.parent >= 0], minlength=len(groups))
    restored = (v.partition or {}).get("reports", {})
    vs = {k: val for k, val in (v.settings or {}).items() if k != "snapshot"}
    for i, g in enumerate(groups):
        title, summary, report = restored.get(ids[i], ["", "", {}])
        mod = (v.metrics or {}).get(str(g.level), {})
        rows.append(Community(id=ids[i], workspace_id=ws_id, method="leiden", level=g.level,
                              parent_id=ids[g.parent] if g.parent >= 0 else None, size=len(members_of[ids[i]]),
                              title=title, summary=summary, report=report,
                              data={"children": int(children[i]), "variant": name, "variant_settings": vs,
                                    "modularity_level": round(float(mod.get("own_modularity", mod.get(
                                        "modularity", 0.0)) or 0.0), 4)}))
    write_communities(store, ws_id, rows, members_of, ("leiden",))
    saved = f"; the previous one is saved as {snap!r}" if snap else ""
    yield Progress(1, 1, f"{len(rows):,} communities of {name!r} written{saved}",
                   {"variant": name, "snapshot": snap, "communities": len(rows)})


def _prefixed(stage: Stage, prefix: str) -> Stage:
    def run(ctx: BuildContext) -> Iterator[Progress]:
        for p in stage(ctx):
            yield Progress(p.done, p.total, f"{prefix}: {p.message}", p.counts)

    return run


def promote_steps(name: str) -> list[tuple[str, str, Stage]]:
    def replace(ctx: BuildContext) -> Iterator[Progress]:
        return replace_partition(ctx, name)

    return [("replace", f"Replace the Leiden partition with {name!r}", replace),
            ("reports", "Reports for the new communities", _prefixed(reports_stage, "reports")),
            ("augment", "NodeRAG high-level elements", _prefixed(augment_stage, "NodeRAG high-level elements")),
            ("index", "Community vectors", _prefixed(index_stage, "community vectors"))]


def promote_plan(params: dict) -> JobPlan:
    name = str(params.get("variant") or "")
    if not name:
        raise VariantError("name the variant to promote")
    steps = promote_steps(name)
    return JobPlan(steps, changes=frozenset(n for n, _, _ in steps), label=f"Promote variant {name!r}",
                   done_message=f"variant {name!r} promoted")


def promote(ctx: BuildContext, name: str) -> Iterator[Progress]:
    """Make variant `name` the leiden partition in the caller's process (module doc); yields progress, the last
    counts name the snapshot."""
    store, ws, ws_id = ctx.store, ctx.ws, ctx.ws_id
    get_variant(store, ws, name)
    if active_run(store, ws) is not None:
        raise VariantError("a build or job of this workspace is running; promote once it has finished")
    made: dict = {}
    for step, _, fn in promote_steps(name):
        ctx.failures.begin(step)
        for p in fn(ctx):
            if step == "replace":
                made = p.counts or made
            yield p
        ctx.failures.settle(step)  # units that failed stay recorded for the next build (core/pipeline/failures.py)
    version = store.bump_version(ws_id)
    yield Progress(5, 5, f"variant {name!r} promoted; build version {version}",
                   {"snapshot": made.get("snapshot"), "communities": made.get("communities", 0),
                    "build_version": version})
