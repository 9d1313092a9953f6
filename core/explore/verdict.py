"""A build's verdict in plain words, what the Build page opens on: which build it is ("build N", never a row id:
core/pipeline/runs.py), how it ended and how long it took, what the graph holds (documents, entities, the communities
of each method, HLG topics: core/explore/build_counts.py, the one source of those counts), its failed units, and
what is unusual, spelled out: a HiRAG layer that collapsed into one cluster or a layering that stopped early, a
community bigger than its method's cap, many single-member communities, many entities left out of every Leiden
community, a fallback embedder, a graph changed since by a promote or merge decisions.

Everything here is plain text (no Markdown): the page escapes it as it draws it."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import select

from core.explore.build_counts import GraphCounts, MethodCounts, graph_counts
from core.models import UNFINISHED, BuildRun, EntityMerge, StageRun, Workspace, is_active
from core.pipeline.failures import count_failed, plural
from core.pipeline.runs import build_numbers, started

# the community methods as the verdict names them, in the order it lists them
NAMES = {"hirag": "HiRAG", "leiden": "Hierarchical Leiden (GraphRAG)", "attributed": "ArchRAG attributed",
         "noderag": "NodeRAG"}
SINGLETON_SHARE = 0.10  # "many" single-member communities: at least this share of a method's (and at least 5)
LEFT_OUT_SHARE = 0.10  # "many" entities in no Leiden community: at least this share of the entities
# HiRAG's own rule, nothing left to cluster, or a layer that is one cluster (its summaries are the top; the collapse
# itself is spelled out by `_layer_notes`)
NATURAL_STOPS = ("cluster sparsity change rate", "too few to cluster", "summary entities are the top layer")


@dataclass(frozen=True)
class Verdict:
    tone: str  # success, warning, error or info: how the page colours the headline
    headline: str  # "Build 3 finished in 2 min 1 s with the offline backend · no failed units"
    stress: str  # the part of the headline drawn in bold
    facts: list[str] = field(default_factory=list)  # what the graph holds, one line each
    notes: list[str] = field(default_factory=list)  # what is unusual; empty: nothing
    number: int | None = None  # the build's number, when it finished
    counts: GraphCounts = field(default_factory=GraphCounts)
    stages: dict[str, dict] = field(default_factory=dict)  # stage -> its last counts, for the figures below
    rows: list[StageRun] = field(default_factory=list)  # the run's stages, in order


def duration(seconds: float) -> str:
    """"41 s", "2 min 1 s", "1 h 5 min"."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"


def _seconds(run: BuildRun, stage_seconds: float) -> float:
    """The run's wall time (created to finished), else the sum of its stages' times."""
    if run.finished_at is not None and run.created_at is not None:
        wall = (run.finished_at.replace(tzinfo=None) - run.created_at.replace(tzinfo=None)).total_seconds()
        if wall >= 0:
            return wall
    return stage_seconds


def _caps(run: BuildRun) -> dict[str, int]:
    """method -> the largest community its clustering keeps, from the settings the run was built with."""
    st = run.settings or {}
    leiden = int((st.get("community") or {}).get("max_cluster_size") or 10)
    return {"leiden": leiden, "hirag": leiden, "attributed": int((st.get("archrag") or {}).get("max_cluster_size") or 0)}


def _n(n: int, one: str, many: str = "") -> str:
    """"1 chunk", "4 chunks", "1 community", "5 communities"."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _levels(n: int) -> str:
    return f"on {_n(n, 'level')}"


def _method_line(m: MethodCounts, layers: dict) -> str:
    line = f"{NAMES[m.method]}: {_n(m.total, 'community', 'communities')} {_levels(m.levels)}"
    if m.method == "hirag":
        summary = [r for r in layers.get("layers") or [] if r.get("layer", 0) > 0]
        if summary:
            line += f", over {_n(len(summary), 'summary layer')}"
    return line


def _facts(gc: GraphCounts, by_stage: dict, pending: int) -> list[str]:
    merged = int((by_stage.get("merge") or {}).get("auto_merged") or 0)
    entities = f"{_n(gc.entities, 'entity', 'entities')} after resolution"
    if merged or pending:
        entities += (f" ({_n(merged, 'pair')} merged automatically, {_n(pending, 'candidate pair')} to review on "
                     "the Quality page)")
    out = [f"{_n(gc.documents, 'document')} in {_n(gc.chunks, 'chunk')}.",
           f"{entities}, {_n(gc.relationships, 'relationship')}, {_n(gc.statements, 'statement')}."]
    if gc.summary_entities:
        out.append(f"{_n(gc.summary_entities, 'HiRAG summary entity', 'HiRAG summary entities')} above them "
                   f"({gc.all_entities:,} entities of every layer).")
    out += [_method_line(gc.methods[m], by_stage.get("layers") or {}) + "." for m in NAMES if m in gc.methods]
    if gc.topics:
        out.append(f"HLG topics: {gc.topics:,}.")
    return out


def _layer_notes(layers: dict) -> list[str]:
    rows = layers.get("layers") or []
    collapsed = [r for r in rows if r.get("cluster_sparsity") is not None and r.get("clusters") == 1]
    out = []
    if collapsed:
        which = [f"layer {r['layer']} ({_n(r.get('entities', 0), 'entity', 'entities')})" for r in collapsed]
        said = which[0] if len(which) == 1 else ", ".join(which[:-1]) + " and " + which[-1]
        out.append(f"HiRAG: {said} collapsed into a single cluster" + (" each." if len(which) > 1 else "."))
    reason = layers.get("stop_reason") or ""
    if reason == "disabled":
        out.append("HiRAG summary layers are switched off (layers.enabled): HiRAG has no summary entities.")
    elif reason and not any(s in reason for s in NATURAL_STOPS):
        out.append(f"HiRAG's layering stopped early: {reason}.")
    return out


def _community_notes(gc: GraphCounts, by_stage: dict) -> list[str]:
    out = []
    for m in (gc.methods[k] for k in NAMES if k in gc.methods):
        if m.over_cap:
            out.append(f"{NAMES[m.method]}: {_n(m.over_cap, 'community', 'communities')} bigger than the cap of "
                       f"{m.cap:,} members (largest {m.largest_over_cap:,}) that no level below splits.")
        if m.singletons >= 5 and m.singletons >= SINGLETON_SHARE * m.total:
            out.append(f"{NAMES[m.method]}: {m.singletons:,} of its {m.total:,} communities "
                       f"({m.singletons / m.total:.0%}) hold a single member.")
    alone = int((by_stage.get("communities") or {}).get("tiny_components") or 0)
    if gc.entities and alone >= LEFT_OUT_SHARE * gc.entities:
        out.append(f"{alone:,} of the {gc.entities:,} entities ({alone / gc.entities:.0%}) are linked to no other "
                   "entity, so no Leiden community holds them.")
    arch = (by_stage.get("attributed") or {}).get("stop_reason") or ""
    if "merged nothing" in arch:
        out.append(f"ArchRAG: {arch}.")
    return out


def _headline(run: BuildRun, number: int | None, stalled: bool, seconds: float, n_failed: int,
              current: int) -> tuple[str, str, str]:
    """(tone, headline, its bold part) of the run's state; `current`: the workspace's build number now."""
    keeps = f" The workspace keeps build {current}." if current else ""
    if stalled:
        return ("warning", "The last build stopped without finishing (its worker is gone). Press Build / resume to "
                           "continue from the first unfinished unit." + keeps, "stopped without finishing")
    if run.status == "failed":
        stage = run.stage or "?"
        return "error", f"Build failed in stage {stage}: {run.message or run.status}", stage
    if run.status == "cancelled":
        why = "by the user" if run.message in ("", "Stopped by the user") else f"({run.message})"
        return ("info", f"Build stopped {why}: Build / resume continues from the first unfinished unit." + keeps,
                "Build stopped")
    if run.status in UNFINISHED:
        return "info", f"Building build {current + 1} (started {started(run)})…", f"Building build {current + 1}"
    title = f"Build {number} finished"
    failed = plural(n_failed) if n_failed else "no failed units"
    engine = (run.params or {}).get("engine")  # where its units ran (core/pipeline/engine.py)
    on = f" on {engine}" if engine else ""
    return ("warning" if n_failed else "success",
            f"{title} in {duration(seconds)} with the {run.backend} backend{on} · {failed}", title)


def build_verdict(store, ws: Workspace, run: BuildRun) -> Verdict:
    """The verdict of `run`, the workspace's latest build (module doc)."""
    assert ws.id is not None and run.id is not None  # stored rows
    stages = store.stage_runs(run.id)
    by_stage = {s.stage: dict(s.counts or {}) for s in stages}
    numbers = build_numbers(store, ws.id)
    number = numbers.get(run.id)
    stalled = run.status in UNFINISHED and not is_active(run, store.now())
    n_failed = count_failed(store, ws.id, run.id) if run.status == "done" else 0
    seconds = _seconds(run, sum(s.seconds for s in stages))
    tone, headline, stress = _headline(run, number, stalled, seconds, n_failed, ws.build_version)
    gc = graph_counts(store, ws.id, _caps(run))
    with store.session() as s:
        pending = int(s.exec(select(func.count()).select_from(EntityMerge)
                             .where(EntityMerge.workspace_id == ws.id, EntityMerge.status == "candidate")).one())
    notes: list[str] = []
    if n_failed:
        notes.append(f"{plural(n_failed)}: their model calls still failed after their retries, so nothing was stored "
                     "for them (listed below; the next build retries them).")
    all_failed = count_failed(store, ws.id)
    if all_failed > n_failed:
        notes.append(f"{plural(all_failed - n_failed)} of earlier runs still outstanding (listed below).")
    note = (by_stage.get("embed") or {}).get("embedder_note")  # stored by builds before the exact runtime: why auto moved on
    if note:
        notes.append(f"Embedder: {note}")
    notes += _layer_notes(by_stage.get("layers") or {}) + _community_notes(gc, by_stage)
    if number is not None and ws.build_version > number:
        notes.append(f"The graph has changed since this build (a promote or merge decisions): it is now build "
                     f"{ws.build_version}.")
    return Verdict(tone, headline, stress, _facts(gc, by_stage, pending), notes, number, gc, by_stage, stages)

