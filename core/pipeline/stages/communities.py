"""The `communities` stage: weakly connected components first, then hierarchical Leiden (leidenalg on igraph), run
once on each graph a reference design clusters.

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

The clustering is core/algorithms/leiden.py (hierarchical Leiden, pure); the rows are written by
core/pipeline/community_rows.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from core.algorithms.leiden import Hierarchy, hierarchical_leiden
from core.graph.entity_graph import EntityGraph, load_entity_graph
from core.models import Community
from core.pipeline.community_rows import METHODS, cluster_rows, community_id, write_communities
from core.pipeline.context import BuildContext, Progress


def _level_counts(h: Hierarchy) -> dict[str, int]:
    levels: dict[str, int] = {}
    for c in h.clusters:
        levels[str(c.level)] = levels.get(str(c.level), 0) + 1
    return levels


def communities_stage(ctx: BuildContext) -> Iterator[Progress]:
    """Two hierarchical Leiden runs, each on the graph its paper clusters (module doc): `leiden` (with the `wcc`
    components it starts from) on the extracted entity graph, `hirag` on HiRAG's layered graph."""
    store, ws_id, cfg = ctx.store, ctx.ws_id, ctx.settings.community
    yield Progress(0, 4, "loading the entity graph")
    eg: EntityGraph = load_entity_graph(store, ws_id)
    ex = eg.extracted()
    g = ex.to_igraph()
    layered = len(eg.ids) != len(ex.ids) or len(eg.links) != len(ex.links)
    gl = eg.to_igraph() if layered else g
    # the two runs are independent: on a cluster a worker clusters HiRAG's graph while this process clusters GraphRAG's
    hirag = ctx.engine.submit(hierarchical_leiden, gl, cfg, cpu=True) if layered else None
    yield Progress(1, 4, f"Leiden (GraphRAG): clustering {g.vcount()} extracted entities, {g.ecount()} links")
    h = hierarchical_leiden(g, cfg)
    yield Progress(2, 4, f"Leiden (HiRAG): clustering {gl.vcount()} entities of every layer, {gl.ecount()} links")
    hh = hirag.result() if hirag is not None else h  # no summary layer: the layered graph is the extracted one
    rows: list[Community] = []
    members_of: dict[str, list[str]] = {}
    for comp in h.components:
        if len(comp) < cfg.min_component_size:
            continue
        ids = [ex.ids[v] for v in comp]
        cid = community_id(ctx.ids, "wcc", 0, ids)
        rows.append(Community(id=cid, workspace_id=ws_id, method="wcc", level=0, size=len(ids)))
        members_of[cid] = ids
    cluster_rows(ctx.ids, "leiden", ex, h, rows, members_of)
    cluster_rows(ctx.ids, "hirag", eg, hh, rows, members_of)
    yield Progress(3, 4, f"writing {len(rows):,} communities")
    write_communities(store, ws_id, rows, members_of, METHODS)
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
    yield Progress(4, 4, f"{n_clusters} Leiden communities on {len(levels)} levels, {n_hirag} HiRAG communities on "
                         f"{len(hlevels)} levels", counts)
