"""What a workspace holds: node counts by kind and layer, communities by method and level (wcc, leiden, hirag,
attributed, noderag), modularity per level of the `leiden` and `hirag` runs, and the stage timings of its last
build."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import col, select

from core.explore.build_counts import communities_per_level
from core.models import BuildRun, Document, Edge, EntityMerge, Node, StageRun, Workspace


def workspace_stats(store, ws: Workspace) -> dict:
    assert ws.id is not None  # a row read from or written to the store has its key
    with store.session() as s:
        nodes: dict[str, dict[str, int]] = {}
        for kind, layer, n in s.exec(select(Node.kind, Node.layer, func.count()).where(Node.workspace_id == ws.id)
                                     .group_by(Node.kind, col(Node.layer))):
            nodes.setdefault(kind, {})[str(layer)] = n
        nodes["document"] = {"0": s.exec(select(func.count()).select_from(Document)
                                         .where(Document.workspace_id == ws.id)).one()}
        edges = dict(s.exec(select(Edge.kind, func.count()).where(Edge.workspace_id == ws.id)
                            .group_by(Edge.kind)).all())
        merges = dict(s.exec(select(EntityMerge.status, func.count()).where(EntityMerge.workspace_id == ws.id)
                             .group_by(EntityMerge.status)).all())
        run = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id, BuildRun.status == "done",
                                            BuildRun.kind == "build")
                     .order_by(col(BuildRun.id).desc())).first()
        stages: dict[str, float] = {}
        modularity: dict[str, float] = {}
        hirag_modularity: dict[str, float] = {}
        layers: list[dict] = []
        stop_reason = None
        if run is not None:
            for sr in s.exec(select(StageRun).where(StageRun.run_id == run.id).order_by(col(StageRun.ordinal))):
                stages[sr.stage] = round(sr.seconds, 3)
                if sr.stage == "communities":
                    modularity = dict((sr.counts or {}).get("modularity", {}))
                    hirag_modularity = dict(((sr.counts or {}).get("hirag") or {}).get("modularity", {}))
                if sr.stage == "layers":
                    layers = list((sr.counts or {}).get("layers", []))
                    stop_reason = (sr.counts or {}).get("stop_reason")
    return {
        "workspace": ws.name,
        "build_version": ws.build_version,
        "backend": ws.backend,
        "embedder": ws.embedder,
        "nodes": nodes,
        "edges": edges,
        "communities": communities_per_level(store, ws.id),
        "merges": merges,
        "modularity": modularity,
        "hirag_modularity": hirag_modularity,
        "layers": layers,
        "stop_reason": stop_reason,
        "stages": stages,
        "engine": (run.params or {}).get("engine", "") if run is not None else "",  # where its units ran
    }


def format_stats(st: dict) -> str:
    """The stats as a few aligned plain-text tables, for `python -m core stats` without `--json`."""
    on = f"  units on {st['engine']}" if st.get("engine") else ""
    out = [f"workspace {st['workspace']}  build {st['build_version']}  backend {st['backend']}  "
           f"embedder {st['embedder']}{on}", "", "nodes (kind: count per layer)"]
    for kind, per_layer in sorted(st["nodes"].items()):
        total = sum(per_layer.values())
        layers = "  ".join(f"L{k}={v:,}" for k, v in sorted(per_layer.items(), key=lambda kv: int(kv[0])))
        out.append(f"  {kind:<14}{total:>9,}   {layers}")
    out += ["", "edges (kind: count)"]
    out += [f"  {k:<14}{v:>9,}" for k, v in sorted(st.get("edges", {}).items())]
    out += ["", "communities (method: count per level, 0 = coarsest)"]
    for method, per_level in sorted(st["communities"].items()):
        levels = "  ".join(f"{k}={v:,}" for k, v in sorted(per_level.items(), key=lambda kv: int(kv[0])))
        out.append(f"  {method:<14}{sum(per_level.values()):>9,}   {levels}")
    if st.get("modularity"):
        out.append("  leiden modularity per level: " + "  ".join(
            f"{k}={v:.3f}" for k, v in sorted(st["modularity"].items(), key=lambda kv: int(kv[0]))))
    if st.get("hirag_modularity"):
        out.append("  hirag modularity per level:  " + "  ".join(
            f"{k}={v:.3f}" for k, v in sorted(st["hirag_modularity"].items(), key=lambda kv: int(kv[0]))))
    if st.get("layers"):
        out += ["", "HiRAG layers (entities, clusters, cluster sparsity CS_i, change rate)"]
        for row in st["layers"]:
            rate, cs = row.get("change_rate"), row.get("cluster_sparsity")
            out.append(f"  layer {row['layer']}: {row['entities']:,} entities, {row.get('clusters') or 0:,} clusters, "
                       f"CS={'-' if cs is None else f'{cs:.3f}'}, change {'-' if rate is None else f'{rate:.1%}'}")
    if st.get("stop_reason"):
        out.append(f"  stopped: {st['stop_reason']}")
    if st.get("merges"):
        out += ["", "entity merges: " + ", ".join(f"{k} {v:,}" for k, v in sorted(st["merges"].items()))]
    if st.get("stages"):
        out += ["", "stage timings (seconds)"]
        out += [f"  {k:<14}{v:>9.2f}" for k, v in st["stages"].items()]
        out.append(f"  {'total':<14}{sum(st['stages'].values()):>9.2f}")
    return "\n".join(out)
