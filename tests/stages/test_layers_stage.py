"""HiRAG's HiIndex as built into the sample workspace: summary layers, `summarizes` edges, cluster sparsity."""

from __future__ import annotations

from collections import defaultdict

from sqlmodel import select

from core.algorithms.layers import cluster_sparsity
from core.models import Edge, Node, StageRun
from core.stats import workspace_stats


def members_of(ups, e: str) -> list[str]:
    """The summary entities `e` is a member of."""
    return [dst for src, dst in ups if src == e]


def test_summary_layers_are_stored_with_their_edges_vectors_and_sparsity(sample_built):
    settings, store, ws, _ = sample_built
    with store.session() as s:
        layer_of = dict(s.exec(select(Node.id, Node.layer).where(Node.workspace_id == ws.id,
                                                                 Node.kind == "entity")).all())
        cluster_of = {n.id: n.data["clusters"] for n in s.exec(select(Node).where(
            Node.workspace_id == ws.id, Node.kind == "entity", Node.layer >= 1))}
        ups = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws.id, Edge.kind == "summarizes")).all()
        stage = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "layers",
                                              StageRun.status == "done")).first()
    summaries = {e for e, layer in layer_of.items() if layer >= 1}
    assert summaries, "the sample has at least one summary layer"
    members: dict[str, list[str]] = defaultdict(list)
    for src, dst in ups:
        # one layer above, or more: an entity alone in its cluster is carried up as it is (HiRAG's code) and may be
        # summarized from a higher layer
        assert layer_of[dst] >= layer_of[src] + 1, "a summary entity sits above what it summarizes"
        members[dst].append(src)
    assert set(members) == summaries, "every summary entity summarizes lower-layer entities"
    assert all(len(m) >= 2 for m in members.values())
    carried = {e for e, layer in layer_of.items() if any(layer_of[d] > layer + 1 for d in members_of(ups, e))}
    for row in stage.counts["layers"]:
        assert row.get("carried", 0) >= 0
    assert len(carried) <= sum(r.get("carried", 0) for r in stage.counts["layers"])

    # CS_i (hirag.txt Eq. 17) recomputed from the stored clusters equals what the build recorded
    rows = {r["layer"]: r for r in stage.counts["layers"]}
    checked = 0
    for layer, row in rows.items():
        if row["cluster_sparsity"] is None or not row.get("summary_entities"):
            continue  # not clustered, or clustered and then stopped (Algorithm 1 line 9): no cluster was stored
        if layer and rows[layer - 1].get("carried"):
            continue  # the layer also holds entities carried up from below: not all of its nodes sit at `layer`
        n = sum(1 for v in layer_of.values() if v == layer)
        assert row["entities"] == n
        index = {e: i for i, e in enumerate(sorted(e for e, v in layer_of.items() if v == layer))}
        # a cluster's members: those of the summary entities made from it (offline, a set of them per cluster,
        # each its own cluster's); singleton clusters add nothing to the sum, so these give the recorded value
        by_cluster: dict[int, set[int]] = defaultdict(set)
        for sid, ms in members.items():
            if layer_of[sid] == layer + 1:
                for k in cluster_of[sid]:
                    by_cluster[k] |= {index[m] for m in ms}
        clusters = [sorted(c) for c in by_cluster.values()]
        assert abs(cluster_sparsity(clusters, n) - row["cluster_sparsity"]) < 1e-3
        checked += 1
    assert checked, "at least one layer's clusters were stored and checked"
    st = workspace_stats(store, ws)
    assert st["layers"] == stage.counts["layers"] and st["stop_reason"]
    assert st["nodes"]["entity"].get("1", 0) == sum(1 for e in summaries if layer_of[e] == 1)


def test_summary_entities_are_embedded_and_join_communities(sample_built):
    from core.workspace import open_resources

    settings, store, ws, embedder = sample_built
    res = open_resources(store, ws, settings, embedder)
    with store.session() as s:
        summaries = list(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity",
                                                      Node.layer >= 1)))
        in_comm = set(s.exec(select(Edge.src).where(Edge.workspace_id == ws.id, Edge.kind == "in_community")))
    assert set(res.index.vectors("entity", summaries)) == set(summaries)
    assert set(summaries) <= in_comm, "communities hold entities of several layers (HiRAG)"


def test_layering_stops_by_the_papers_rule_and_records_it_per_layer(sample_built):
    """Algorithm 1 (hirag.txt §5.4): every layer that was built past the first had a CS change rate above ε; the build
    ends at the first layer whose change rate is <= ε, or at a layer too small to cluster; the reason is recorded on
    that layer's row and as the stage's stop reason."""
    settings, store, ws, _ = sample_built
    with store.session() as s:
        stage = s.exec(select(StageRun).where(StageRun.workspace_id == ws.id, StageRun.stage == "layers",
                                              StageRun.status == "done")).first()
    rows, reason = stage.counts["layers"], stage.counts["stop_reason"]
    eps = settings.layers.change_rate_stop
    assert [r["layer"] for r in rows] == list(range(len(rows)))
    assert [r["stop_reason"] for r in rows[:-1]] == [None] * (len(rows) - 1) and rows[-1]["stop_reason"] == reason
    for r in rows[:-1]:  # layers the build went past: clustered, summarized, change rate above ε (or none yet)
        assert r["cluster_sparsity"] is not None and r["summary_entities"] > 0
        assert r["change_rate"] is None or r["change_rate"] > eps
        assert r["clusters"] >= 1 and r["global_clusters"] >= 1
    for below, above in zip(rows, rows[1:]):  # summary entities, and the entities of single-member clusters carried up
        assert above["entities"] == below["summary_entities"] + below["carried"]
    last = rows[-1]
    # issue 37: the sample stops on a real plateau of the CS curve, not on "too few to cluster" nor on CS 0 -> 0
    assert reason.startswith("cluster sparsity change rate"), reason
    assert last["change_rate"] is not None and last["change_rate"] <= eps and last["summary_entities"] == 0
    assert last["entities"] >= settings.layers.min_entities
    assert last["cluster_sparsity"] > 0 and rows[-2]["cluster_sparsity"] > 0, "a plateau, not CS 0 -> 0"
    assert "0.98" not in reason and "BIC" not in reason
