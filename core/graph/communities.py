"""Communities: weakly connected components first, then hierarchical Leiden (leidenalg on igraph), run once on
each graph a reference design clusters.

* `leiden` (GraphRAG, hierarchical-graph-rag.md; GraphRAG's `cluster_graph`): the EXTRACTED entity graph only,
  layer-0 entities and their relationship links (core/graph/entity_graph.py `EntityGraph.extracted`), no summary
  entity, no `summarizes` link. Its components are stored as `wcc` rows. GraphRAG local / global, the what-if
  variants and the Graph page use it.
* `hirag` (HiRAG's HiIndex, hirag.txt §4.1): "We also employ the Leiden algorithm to compute a set of communities
  P from the hierarchical KG. Each community may contain entities from multiple layers and an entity may appear in
  multiple communities. For each community p in P, we generate an interpretable semantic report." The graph is
  G_k: the entities of every layer plus the `summarizes` links (Algorithm 1 line 23). An entity lies in several
  communities of one partition only through the levels of a hierarchy, which is how HiRAG's code computes P
  (hierarchical Leiden with max cluster size 10 and every level's communities reported): so `hirag` is
  hierarchical too, with the same settings as `leiden`.

Level 0 is Leiden run on each component; a community larger than `max_cluster_size` is split again by Leiden on
its own subgraph into children one level down (GraphRAG's recursive split), up to `max_levels`. Every level's
communities are kept (`includeIntermediateCommunities`), each child lies inside its parent, and relationship
weights are used when `use_weights` is on. The seed is fixed, so the same graph gives the same communities.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import igraph as ig
import leidenalg
from sqlalchemy import bindparam, delete, select, update

from core.config import CommunitySettings
from core.graph.entity_graph import EntityGraph, load_entity_graph
from core.models import Community, Edge
from core.store import bulk_insert, content_id, release_memory

METHODS = ("wcc", "leiden", "hirag")


@dataclass
class Cluster:
    level: int
    members: list[int]  # vertex indices
    parent: int | None = None  # index into the cluster list
    children: list[int] = field(default_factory=list)


@dataclass
class Hierarchy:
    components: list[list[int]]  # WCC components (vertex indices), largest first
    clusters: list[Cluster]
    modularity: dict[int, float]  # level -> modularity of the level's view of the partition
    tiny_components: int = 0


# Leiden passes run until a pass improves the quality by less than this share of it (or not at all). Iterating
# until nothing changes took 70 passes and 55 s on the 41k-entity graph of the generated 1M-token corpus, the last
# 55 of them adding 0.2 % to the quality between them; 1e-4 stops after 15 passes. Small graphs converge first.
LEIDEN_TOLERANCE = 1e-4
LEIDEN_MAX_PASSES = 100


def leiden_partition(g: ig.Graph, weights: list[float] | None, resolution: float, seed: int) -> list[int]:
    """Seeded Leiden (RB configuration model, i.e. modularity at `resolution`) run to convergence: passes repeat
    while one still improves the quality by at least LEIDEN_TOLERANCE of it, at most LEIDEN_MAX_PASSES."""
    part = leidenalg.RBConfigurationVertexPartition(g, weights=weights, resolution_parameter=resolution)
    opt = leidenalg.Optimiser()
    opt.set_rng_seed(seed)
    for _ in range(LEIDEN_MAX_PASSES):
        gain = opt.optimise_partition(part, n_iterations=1)
        if gain <= LEIDEN_TOLERANCE * abs(part.quality()):
            break
    return list(part.membership)


def hierarchical_leiden(g: ig.Graph, cfg: CommunitySettings) -> Hierarchy:
    """WCC, then Leiden per component, then recursive splits of large communities."""
    weighted = cfg.use_weights and "weight" in g.es.attributes()
    comps = sorted((list(c) for c in g.connected_components(mode="weak")), key=lambda c: (-len(c), c[0]))
    clusters: list[Cluster] = []
    tiny = 0

    def split(members: list[int], level: int, parent: int | None) -> None:
        sub = g.induced_subgraph(members)
        w = sub.es["weight"] if weighted and sub.ecount() else None
        membership = leiden_partition(sub, w, cfg.resolution, cfg.seed) if sub.ecount() else [0] * len(members)
        groups: dict[int, list[int]] = {}
        for local, cid in enumerate(membership):
            groups.setdefault(cid, []).append(members[local])
        parts = sorted(groups.values(), key=lambda m: (-len(m), min(m)))
        if parent is not None and len(parts) < 2:
            return  # Leiden keeps it whole: the parent is a leaf
        for m in parts:
            idx = len(clusters)
            clusters.append(Cluster(level=level, members=sorted(m), parent=parent))
            if parent is not None:
                clusters[parent].children.append(idx)
            if len(m) > cfg.max_cluster_size and level + 1 < cfg.max_levels:
                split(sorted(m), level + 1, idx)

    for comp in comps:
        if len(comp) < cfg.min_component_size:
            tiny += 1
            continue
        split(sorted(comp), 0, None)
    return Hierarchy(comps, clusters, level_modularity(g, clusters, weighted), tiny)


def level_modularity(g: ig.Graph, clusters: list[Cluster], weighted: bool) -> dict[int, float]:
    """Modularity of each level's view: a vertex takes its community at that level, or its deepest one above."""
    if not clusters or g.ecount() == 0:
        return {}
    max_level = max(c.level for c in clusters)
    out: dict[int, float] = {}
    assign = [-1] * g.vcount()
    for level in range(max_level + 1):
        for i, c in enumerate(clusters):
            if c.level == level:
                for v in c.members:
                    assign[v] = i
        # unclustered vertices (tiny components) each form their own block
        labels, nxt = [], len(clusters)
        for a in assign:
            if a < 0:
                labels.append(nxt)
                nxt += 1
            else:
                labels.append(a)
        out[level] = float(g.modularity(labels, weights=g.es["weight"] if weighted else None))
    return out


def community_id(ws_id: int, method: str, level: int, member_ids: list[str]) -> str:
    return content_id(str(ws_id), method, str(level), ",".join(sorted(member_ids)))


def _cluster_rows(ws_id: int, method: str, eg: EntityGraph, h: Hierarchy, rows: list[Community],
                  members_of: dict[str, list[str]]) -> None:
    """Community rows (and their members) of every level of `h`, each child pointing at its parent."""
    cluster_ids: list[str] = []
    for c in h.clusters:
        ids = [eg.ids[v] for v in c.members]
        cid = community_id(ws_id, method, c.level, ids)
        cluster_ids.append(cid)
        rows.append(Community(id=cid, workspace_id=ws_id, method=method, level=c.level, size=len(ids),
                              parent_id=cluster_ids[c.parent] if c.parent is not None else None,
                              data={"children": len(c.children),
                                    "modularity_level": round(h.modularity.get(c.level, 0.0), 4)}))
        members_of[cid] = ids


def _level_counts(h: Hierarchy) -> dict[str, int]:
    levels: dict[str, int] = {}
    for c in h.clusters:
        levels[str(c.level)] = levels.get(str(c.level), 0) + 1
    return levels


def communities_stage(ctx) -> Iterator:
    """Two hierarchical Leiden runs, each on the graph its paper clusters (module doc): `leiden` (with the `wcc`
    components it starts from) on the extracted entity graph, `hirag` on HiRAG's layered graph."""
    from core.build.context import Progress

    store, ws, cfg = ctx.store, ctx.ws, ctx.settings.community
    yield Progress(0, 4, "loading the entity graph")
    eg: EntityGraph = load_entity_graph(store, ws.id)
    ex = eg.extracted()
    g = ex.to_igraph()
    yield Progress(1, 4, f"Leiden (GraphRAG): clustering {g.vcount()} extracted entities, {g.ecount()} links")
    h = hierarchical_leiden(g, cfg)
    layered = len(eg.ids) != len(ex.ids) or len(eg.links) != len(ex.links)
    gl = eg.to_igraph() if layered else g
    yield Progress(2, 4, f"Leiden (HiRAG): clustering {gl.vcount()} entities of every layer, {gl.ecount()} links")
    hh = hierarchical_leiden(gl, cfg) if layered else h  # no summary layer: the layered graph is the extracted one
    rows: list[Community] = []
    members_of: dict[str, list[str]] = {}
    for comp in h.components:
        if len(comp) < cfg.min_component_size:
            continue
        ids = [ex.ids[v] for v in comp]
        cid = community_id(ws.id, "wcc", 0, ids)
        rows.append(Community(id=cid, workspace_id=ws.id, method="wcc", level=0, size=len(ids)))
        members_of[cid] = ids
    _cluster_rows(ws.id, "leiden", ex, h, rows, members_of)
    _cluster_rows(ws.id, "hirag", eg, hh, rows, members_of)
    yield Progress(3, 4, f"writing {len(rows):,} communities")
    write_communities(store, ws.id, rows, members_of, METHODS)
    levels, hlevels = _level_counts(h), _level_counts(hh)
    summaries = sum(1 for lv in eg.layer if lv > 0)
    counts = {
        "entities": g.vcount(),
        "components": sum(1 for c in h.components if len(c) >= cfg.min_component_size),
        "tiny_components": h.tiny_components,
        "communities_per_level": levels,
        "modularity": {str(k): round(v, 4) for k, v in h.modularity.items()},
        "hirag": {
            "entities": gl.vcount(),
            "summary_entities": summaries,
            "links": gl.ecount(),
            "components": sum(1 for c in hh.components if len(c) >= cfg.min_component_size),
            "communities_per_level": hlevels,
            "modularity": {str(k): round(v, 4) for k, v in hh.modularity.items()},
            "with_summary_entities": sum(1 for c in hh.clusters if any(eg.layer[v] > 0 for v in c.members)),
        },
    }
    n_clusters, n_hirag = len(h.clusters), len(hh.clusters)
    del eg, ex, g, gl, h, hh, rows, members_of
    release_memory()
    yield Progress(4, 4, f"{n_clusters} Leiden communities on {len(levels)} levels, {n_hirag} HiRAG communities on "
                         f"{len(hlevels)} levels", counts)


def write_communities(store, ws_id: int, rows: list[Community], members_of: dict[str, list[str]],
                      methods: tuple[str, ...]) -> None:
    """Replace the communities of `methods` by `rows`, keeping unchanged ones (and their reports) as they are.

    One transaction; new rows and their `in_community` edges go in through bulk inserts (the ORM took 35 s for
    the 10k communities and 200k member edges of a 1M-token corpus)."""
    t = Community.__table__  # type: ignore[attr-defined]
    e = Edge.__table__  # type: ignore[attr-defined]
    rows = list({r.id: r for r in rows}.values())
    with store.session() as s:
        conn = s.connection()
        old = {i for (i,) in conn.execute(select(t.c.id).where(t.c.workspace_id == ws_id, t.c.method.in_(methods)))}
        new = {r.id for r in rows}
        gone = sorted(old - new)
        for i in range(0, len(gone), 500):
            part = gone[i : i + 500]
            conn.execute(delete(e).where(e.c.workspace_id == ws_id, e.c.kind == "in_community", e.c.dst.in_(part)))
            conn.execute(delete(t).where(t.c.id.in_(part)))
        kept_ids = sorted(old & new)
        kept_data: dict[str, dict] = {}
        for i in range(0, len(kept_ids), 500):
            for cid, data in conn.execute(select(t.c.id, t.c.data).where(t.c.id.in_(kept_ids[i : i + 500]))):
                kept_data[cid] = dict(data or {})
        kept = [{"_id": r.id, "parent_id": r.parent_id, "size": r.size, "data": kept_data[r.id] | dict(r.data or {})}
                for r in rows if r.id in kept_data]
        if kept:
            conn.execute(update(t).where(t.c.id == bindparam("_id")), kept)
        fresh = [r for r in rows if r.id not in kept_data]
        bulk_insert(conn, t, [{"id": r.id, "workspace_id": ws_id, "method": r.method, "level": r.level,
                               "parent_id": r.parent_id, "size": r.size, "title": r.title or "",
                               "summary": r.summary or "", "report": dict(r.report or {}), "data": dict(r.data or {})}
                              for r in fresh])
        bulk_insert(conn, e, [{"workspace_id": ws_id, "src": m, "dst": r.id, "kind": "in_community", "weight": 1.0,
                               "data": {}} for r in fresh for m in members_of[r.id]])
        s.commit()
