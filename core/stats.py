"""What a workspace holds: node counts by kind and layer, communities by method and level, modularity per level,
and the stage timings of its last build."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import select

from core.models import BuildRun, Community, Document, Node, StageRun, Workspace


def workspace_stats(store, ws: Workspace) -> dict:
    with store.session() as s:
        nodes: dict[str, dict[str, int]] = {}
        for kind, layer, n in s.exec(select(Node.kind, Node.layer, func.count()).where(Node.workspace_id == ws.id)
                                     .group_by(Node.kind, Node.layer)):
            nodes.setdefault(kind, {})[str(layer)] = n
        nodes["document"] = {"0": s.exec(select(func.count()).select_from(Document)
                                         .where(Document.workspace_id == ws.id)).one()}
        comms: dict[str, dict[str, int]] = {}
        for method, level, n in s.exec(select(Community.method, Community.level, func.count())
                                       .where(Community.workspace_id == ws.id)
                                       .group_by(Community.method, Community.level)):
            comms.setdefault(method, {})[str(level)] = n
        run = s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id, BuildRun.status == "done")
                     .order_by(BuildRun.id.desc())).first()  # type: ignore[union-attr]
        stages: dict[str, float] = {}
        modularity: dict[str, float] = {}
        layers: list[dict] = []
        stop_reason = None
        if run is not None:
            for sr in s.exec(select(StageRun).where(StageRun.run_id == run.id).order_by(StageRun.ordinal)):
                stages[sr.stage] = round(sr.seconds, 3)
                if sr.stage == "communities":
                    modularity = dict((sr.counts or {}).get("modularity", {}))
                if sr.stage == "layers":
                    layers = list((sr.counts or {}).get("layers", []))
                    stop_reason = (sr.counts or {}).get("stop_reason")
    return {
        "workspace": ws.name,
        "build_version": ws.build_version,
        "backend": ws.backend,
        "embedder": ws.embedder,
        "nodes": nodes,
        "communities": comms,
        "modularity": modularity,
        "layers": layers,
        "stop_reason": stop_reason,
        "stages": stages,
    }
