"""The merge-decision job: accepting merge candidates or undoing a merge, then re-embedding the kept entities, as
steps the background worker runs (core/worker.py) with progress and a stop between merges."""

from __future__ import annotations

from collections.abc import Iterator

from core.pipeline.context import BuildContext, JobPlan, Progress
from core.resolution import review as rv


def merge_plan(params: dict) -> JobPlan:
    """params: {"action": "accept" | "undo", "merge_ids": [...], "label": ...}. Accept merges the records best score
    first (skipping, with the reason, one an earlier merge made impossible), undo restores one; then the kept
    entities are re-embedded from their text (core/resolution/merge.py) and the version is bumped. A stop between
    two merges of a bulk accept keeps the merges made (each one whole and undoable); the next decision's re-embedding
    step also rewrites the kept entities' vectors a stopped one left behind."""
    action, ids = params.get("action"), [int(i) for i in params.get("merge_ids") or []]
    if action not in ("accept", "undo") or not ids or (action == "undo" and len(ids) != 1):
        raise ValueError(f"a merge decision needs action accept or undo and its record ids (got {params!r})")
    state: dict = {"kept": []}

    def decide(ctx: BuildContext) -> Iterator[Progress]:
        if action == "undo":
            state["kept"] = rv.apply_undo(ctx.store, ctx.ws_id, ids[0], ctx.index)
            yield Progress(1, 1, f"merge {ids[0]} undone", {"action": "undo", "merge_ids": ids, "kept": state["kept"]})
            return
        done, skipped = 0, []
        for i, (mid, outcome) in enumerate(rv.apply_accepts(ctx.store, ctx.ws_id, ids, ctx.index)):
            if isinstance(outcome, str):
                done += 1
                state["kept"].append(outcome)
            else:
                skipped.append([mid, str(outcome)])
            yield Progress(i + 1, len(ids), f"{done} merged, {len(skipped)} skipped",
                           {"action": "accept", "merge_ids": ids, "merged": done, "skipped": skipped,
                            "kept": state["kept"]})

    def reembed(ctx: BuildContext) -> Iterator[Progress]:  # also any kept entity a stopped decision left behind
        kept = state["kept"] + rv.kept_of_merges(ctx.store, ctx.ws_id)
        again = rv.reembed_kept(ctx.store, ctx.ws_id, ctx.index, ctx.embedder, kept)
        yield Progress(1, 1, f"{len(again)} entity vector(s) rewritten", {"reembedded": len(again)})

    n = len(ids)
    label = (f"Accept {n} merge candidate(s)" if action == "accept" else f"Undo merge {ids[0]}")
    return JobPlan([("decide", "Merge" if action == "accept" else "Undo the merge", decide),
                    ("reembed", "Re-embed the kept entities", reembed)],
                   changes=frozenset({"decide", "reembed"}), label=str(params.get("label") or label),
                   done_message="Merge decision recorded")
