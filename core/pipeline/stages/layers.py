"""The `layers` stage: HiRAG's HiIndex (hirag.txt §4.1, §5.4, Algorithm 1) over the stored graph.

Layer 0 is the extracted entities. For each layer L_{i-1}: its entities' vectors are clustered as HiRAG's code does
(UMAP, one Gaussian mixture over the layer with its components chosen by BIC, soft membership;
`core.algorithms.layers.cluster_layer`), and CS_i (Eq. 17) and its change rate are computed. If the change rate is <= ε
on a real plateau (`is_plateau`: never CS 0 -> 0 nor an empty layer) the build stops there (Algorithm 1 lines 9-11).
Otherwise every cluster is taken up (Algorithm 1 line 16 summarizes every cluster): the entity of a single-member
cluster is carried up into the next layer as it is (HiRAG's code), and each cluster of two or more entities is handed, names and
descriptions of its members, with the meta summary entities X, to the backend's `summary_entities` (line 17): with
a model, HiRAG's own prompt (Appendix I.3), whose summary entities are merged by name across the layer as HiRAG's
code does; offline, a set of extractive summary entities per cluster, one per group of members sharing a term
(`core.backends.summary_replies.offline_summary_entities`), each its cluster's own. Each summary entity is linked by `summarizes` edges
from the members the reply relates to it (a member the reply relates to nothing is linked to every summary entity of
its cluster, so the layer stays covered), stored one layer up and embedded; the new layer is then clustered in turn.
A layer clustered into one cluster of everything is summarized and ends the build (its summary entities are the top);
a layer too small to cluster, or the safety cap, also ends the build, with that reason. The stage is one unit: it
replaces the summary layers it built before, so a rerun gives the same layers. A cluster whose call still fails after
its retries is a failed unit (core/pipeline/failures.py): the layer it was making is kept with the summary entities of
the other clusters, and no layer is built above it (it would cluster an incomplete layer); the next build, whose
calls that succeeded replay from the call cache, makes the whole hierarchy.

Recorded per layer (StageRun counts "layers", read by the Build page and `core stats`): layer, entities, clusters,
global_clusters (the GMM's k), summary_entities, carried (single-member clusters' entities carried up),
cluster_sparsity (CS of this layer's clustering), change_rate, n_components (the GMM's k), stop_reason (None unless the build stopped at this layer); the overall "stop_reason", and "epsilon" (ε of
the change-rate rule the build ran with).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from sqlmodel import col, delete, select

from core.algorithms.layers import (
    cluster_layer,
    collapse_reason,
    forget_terms,
    meta_summary_concepts,
    stop_reason,
    too_few_reason,
)
from core.config import LayerSettings
from core.extract.nouns import forget_readings
from core.ids import local_id
from core.index.embedding import embed_missing, node_text_for_embedding
from core.models import Edge, Node, sql_table
from core.pipeline.context import BuildContext, Progress
from core.pipeline.tasks import summary_one
from core.store import bulk_insert, content_id

DESCRIPTION_CHARS = 400  # a member's description as shown to the model


def _clear_summary_layers(ctx) -> None:
    """Remove the summary entities and their links (their vectors stay: a summary entity made again with the same
    id and text keeps its vector; `_drop_stale_vectors` removes the others at the end)."""
    with ctx.store.session() as s:
        old = list(s.exec(select(Node.id).where(Node.workspace_id == ctx.ws.id, Node.kind == "entity",
                                                col(Node.layer) > 0)))
        for i in range(0, len(old), 500):
            part = old[i : i + 500]
            s.exec(delete(Edge).where(col(Edge.workspace_id) == ctx.ws.id, col(Edge.kind) == "summarizes",
                                      col(Edge.dst).in_(part)))
            s.exec(delete(Node).where(col(Node.id).in_(part)))
        s.commit()


def _drop_stale_vectors(ctx) -> None:
    """Entity vectors of nodes that no longer exist (summary entities not made again)."""
    with ctx.store.session() as s:
        live = set(s.exec(select(Node.id).where(Node.workspace_id == ctx.ws.id, Node.kind == "entity")))
    ctx.index.delete("entity", [i for i in ctx.index.existing("entity") if i not in live])


def _row(layer: int, n: int) -> dict:
    return {"layer": layer, "entities": n, "clusters": 0, "global_clusters": 0, "summary_entities": 0, "carried": 0,
            "cluster_sparsity": None, "change_rate": None, "n_components": 0, "stop_reason": None}


def layers_stage(ctx: BuildContext) -> Iterator[Progress]:
    cfg: LayerSettings = ctx.settings.layers
    _clear_summary_layers(ctx)
    if not cfg.enabled:
        _drop_stale_vectors(ctx)
        yield Progress(1, 1, "summary layers switched off", {"layers": [], "stop_reason": "disabled"})
        return
    with ctx.store.session() as s:
        rows = s.exec(select(Node.id, Node.title, Node.text).where(Node.workspace_id == ctx.ws.id,
                                                                   Node.kind == "entity", Node.layer == 0)
                      .order_by(Node.id)).all()
    ids = [r[0] for r in rows]
    titles = {r[0]: r[1] for r in rows}
    texts = {r[0]: r[2] for r in rows}
    vec_of = ctx.index.vectors("entity", ids)
    ids = [i for i in ids if i in vec_of]
    layers: list[dict] = []
    previous: float | None = None
    layer = 0
    while True:
        row = _row(layer, len(ids))
        layers.append(row)
        reason = too_few_reason(layer, len(ids), cfg)
        if reason:
            break
        yield Progress(layer, layer + 1, f"clustering layer {layer}: {len(ids)} entities", {"layers": layers})
        vectors = np.vstack([vec_of[i] for i in ids])
        c = cluster_layer(vectors, cfg, layer, previous)
        row.update(clusters=len(c.clusters), global_clusters=c.n_components,
                   cluster_sparsity=round(c.sparsity, 4), n_components=c.n_components,
                   change_rate=None if c.change_rate is None else round(c.change_rate, 4))
        reason = stop_reason(c, cfg)  # Algorithm 1 line 9: tested before layer i is generated
        if reason:
            break
        multi = [sorted(ids[m] for m in members) for members in c.clusters if len(members) >= 2]
        if not multi:
            reason = f"layer {layer}: every cluster holds a single entity, so there is nothing to summarize"
            break
        # a single-member cluster's entity goes up as it is (HiRAG's code: `node_clusters += cluster_nodes`)
        carried = sorted({ids[members[0]] for members in c.clusters if len(members) == 1})
        yield Progress(layer, layer + 1, f"summarizing {len(multi)} clusters of layer {layer}", {"layers": layers})
        new_ids, failed = _summary_layer(ctx, cfg, layer, ids, multi, titles, texts, vec_of)
        row.update(summary_entities=len(new_ids), carried=len(carried))
        if failed:  # the layer above would cluster an incomplete layer: kept as made, and the next build goes on
            reason = (f"layer {layer}: {failed} of {len(multi)} clusters' summary entities failed (recorded as failed "
                      f"units); the next build makes them and the layers above")
            break
        reason = collapse_reason(c)
        if reason:  # one cluster of everything: its summary entities are the top
            row = _row(layer + 1, len(new_ids))
            layers.append(row)
            break
        previous = c.sparsity
        ids = new_ids + carried  # summary ids are new: no carried entity is among them
        layer += 1
    row["stop_reason"] = reason
    _drop_stale_vectors(ctx)
    del vec_of, titles, texts
    forget_terms()
    forget_readings()
    clustered = sum(1 for r in layers if r["cluster_sparsity"] is not None)
    yield Progress(1, 1, f"{clustered} layer(s) clustered; stopped: {reason}",
                   {"layers": layers, "stop_reason": reason, "epsilon": cfg.change_rate_stop})


def _central_first(member_ids: list[str], vec_of: dict) -> list[str]:
    """Members by cosine to their mean vector, closest first (ties by id): what the model sees first."""
    v = np.vstack([vec_of[m] for m in member_ids]).astype(np.float64)
    centre = v.mean(axis=0)
    norms = np.linalg.norm(v, axis=1) * (np.linalg.norm(centre) or 1.0)
    sims = v @ centre / np.where(norms == 0, 1.0, norms)
    return [member_ids[i] for i in sorted(range(len(member_ids)), key=lambda i: (-sims[i], member_ids[i]))]


def _summary_layer(ctx, cfg: LayerSettings, layer: int, ids: list[str], clusters: list[list[str]],
                   titles: dict, texts: dict, vec_of: dict) -> tuple[list[str], int]:
    """Summary entities of layer + 1 from the clusters of `layer` (member ids); stored, linked, embedded. Returns
    their ids and how many clusters' calls failed (recorded as failed units)."""
    offline = ctx.backend.name == "offline"
    # X: HiRAG's meta summary concepts for a model; offline, the layer's own most shared terms stand in for them
    concepts = meta_summary_concepts([texts[i] for i in ids]) if offline else list(cfg.meta_summary_concepts)
    budget = max(2000, 2 * int(ctx.settings.backend.num_ctx))  # half the context window at ~4 characters a token

    def material(members: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
        if offline:
            return members, [(titles[m], texts[m]) for m in members]
        shown: list[tuple[str, str]] = []
        used = 0
        for m in _central_first(members, vec_of):  # as many members as the context holds, most central first
            d = " ".join((texts[m] or "").split())[:DESCRIPTION_CHARS]
            used += len(titles[m]) + len(d) + 8
            if shown and used > budget:
                break
            shown.append((m, d))
        return [m for m, _ in shown], [(titles[m], d) for m, d in shown]

    shown_of = [material(c) for c in clusters]
    # offline the summaries are extractive and quick: in this process, one after another; a model's run as the
    # engine's units (a cluster whose call failed after its retries is a failed unit and gets no summary entity)
    asked = ctx.summary_engine.map(summary_one, [pairs for _, pairs in shown_of], ctx.parts, concepts,
                                 window=1 if offline else max(1, int(ctx.settings.backend.concurrency)))
    replies = []
    for members, (shown, pairs), got in zip(clusters, shown_of, asked):
        unit = f"layer {layer}: {content_id(*members)}"  # the cluster, by its members
        label = f"summary entities of {len(members)} layer-{layer} entities ({', '.join(p[0] for p in pairs[:3])})"
        replies.append((members, shown, ctx.failures.take(unit, got, label)))

    nodes: dict[str, dict] = {}
    links: dict[str, dict[str, str]] = {}  # summary id -> member id -> relation description
    for k, (members, shown, rep) in enumerate(replies):
        if rep is None:  # failed after its retries (a failed unit): this cluster gets no summary entity
            continue
        by_name = {titles[m].casefold(): m for m in shown}
        sids = {}
        for e in rep.entities:
            # a model's entities merge by name across the layer (HiRAG's code); offline, each is its cluster's own
            # (its extractive description is of that cluster's group): identified by the cluster and its name
            name_key = " ".join(e.name.casefold().split())
            key = ",".join(map(local_id, members)) + "|" + name_key if offline else name_key
            sid = ctx.ids.id("summary", str(layer + 1), key)
            sids[e.name.casefold()] = sid
            if sid not in nodes:
                nodes[sid] = {"id": sid, "workspace_id": ctx.ws.id, "kind": "entity", "key": f"summary:{sid}",
                              "title": e.name[:200], "text": e.description, "type": "SUMMARY",
                              "layer": layer + 1, "weight": 0.0, "document_id": None, "ord": None,
                              "data": {"concept": e.type, "concepts": concepts, "clusters": [k]}}
                links[sid] = {}
            elif k not in nodes[sid]["data"]["clusters"]:
                nodes[sid]["data"]["clusters"].append(k)
        related: set[str] = set()
        for r in rep.relationships:
            m, target = by_name.get(r.source.casefold()), sids.get(r.target.casefold())
            if m is not None and target is not None:
                links[target].setdefault(m, r.description)
                related.add(m)
        for m in members:  # unrelated (or not shown) members: summarized by every entity of their cluster
            if m not in related:
                for sid in sids.values():
                    links[sid].setdefault(m, "")
    new_ids = [sid for sid in nodes if links[sid]]
    for sid in new_ids:
        nodes[sid]["weight"] = float(len(links[sid]))
        nodes[sid]["data"]["members"] = len(links[sid])
    edges = [{"workspace_id": ctx.ws.id, "src": m, "dst": sid, "kind": "summarizes", "weight": 1.0,
              "data": {"description": d} if d else {}} for sid in new_ids for m, d in sorted(links[sid].items())]
    if new_ids:
        with ctx.store.session() as s:
            conn = s.connection()
            bulk_insert(conn, sql_table(Node), [nodes[i] for i in new_ids])
            for i in range(0, len(edges), 5000):
                bulk_insert(conn, sql_table(Edge), edges[i : i + 5000])
            s.commit()
        for sid in new_ids:
            titles[sid], texts[sid] = nodes[sid]["title"], nodes[sid]["text"]
        # embedded only when new or changed (a summary entity's id and text made again keep their stored vector)
        rows = [(i, node_text_for_embedding("entity", titles[i], texts[i][:1000]), {"type": "SUMMARY",
                                                                                       "layer": layer + 1})
                for i in new_ids]
        for _ in embed_missing(ctx.index, ctx.embedder, "entity", rows, ctx.settings.embed.batch_size):
            pass
        vec_of.update(ctx.index.vectors("entity", new_ids))
    return new_ids, sum(1 for *_, rep in replies if rep is None)
