"""The `layers` stage: HiRAG's HiIndex (hirag.txt §4.1, Algorithm 1) over the stored graph.

Layer 0 is the extracted entities. For each layer: its entities' vectors are clustered with a Gaussian mixture
chosen by BIC (soft membership); each cluster of two or more gets a summary entity one layer up, named and
described by the backend (guided by the layer's meta-summary concepts), linked from every member by a
`summarizes` edge, and embedded into the entity collection. Layering stops by the paper's rule (cluster sparsity
high enough, or its change rate small enough) or at the layer cap. The stage is one unit: it replaces the
summary layers it built before, so a rerun gives the same layers.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from sqlalchemy import insert
from sqlmodel import delete, select

from core.config import LayerSettings
from core.graph.layers import (
    cluster_layer,
    meta_summary_concepts,
    stop_reason,
    summary_entity_offline,
)
from core.index.stage import node_text_for_embedding
from core.models import Edge, Node
from core.store import content_id, release_memory


def _clear_summary_layers(ctx) -> None:
    with ctx.store.session() as s:
        old = list(s.exec(select(Node.id).where(Node.workspace_id == ctx.ws.id, Node.kind == "entity",
                                                Node.layer > 0)))
        for i in range(0, len(old), 500):
            part = old[i : i + 500]
            s.exec(delete(Edge).where(Edge.workspace_id == ctx.ws.id, Edge.kind == "summarizes",
                                      Edge.dst.in_(part)))  # type: ignore[attr-defined]
            s.exec(delete(Node).where(Node.id.in_(part)))  # type: ignore[union-attr]
        s.commit()
    ctx.index.delete("entity", old)


def layers_stage(ctx) -> Iterator:
    from core.pipeline import Progress

    cfg: LayerSettings = ctx.settings.layers
    _clear_summary_layers(ctx)
    if not cfg.enabled:
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
    reason = "no entities to layer"
    previous: float | None = None
    layer = 0
    while ids:
        if len(ids) < cfg.min_entities or layer >= cfg.max_layers:
            reason = (f"layer {layer} has {len(ids)} entities (< {cfg.min_entities})" if len(ids) < cfg.min_entities
                      else f"reached max_layers {cfg.max_layers}")
            layers.append({"layer": layer, "entities": len(ids), "clusters": 0, "summary_entities": 0,
                           "cluster_sparsity": None, "change_rate": None, "n_components": 0})
            break
        yield Progress(layer, cfg.max_layers, f"clustering layer {layer}: {len(ids)} entities",
                       {"layers": layers})
        vectors = np.vstack([vec_of[i] for i in ids])
        c = cluster_layer(vectors, cfg, layer, previous)
        multi = [m for m in c.clusters if len(m) >= 2]
        layers.append({"layer": layer, "entities": len(ids), "clusters": len(c.clusters),
                       "summary_entities": 0, "cluster_sparsity": round(c.sparsity, 4),
                       "change_rate": None if c.change_rate is None else round(c.change_rate, 4),
                       "n_components": c.n_components})
        # Algorithm 1: the sparsity test comes before a layer is generated; no layer is built past it
        if c.n_components < 2 or not multi:
            reason = f"layer {layer} shows no cluster structure (BIC chose {c.n_components} component)"
            break
        if c.sparsity >= cfg.sparsity_stop or (c.change_rate is not None and c.change_rate <= cfg.change_rate_stop):
            reason = stop_reason(c, len(multi), cfg) or "cluster sparsity rule"
            break
        concepts = meta_summary_concepts([texts[i] for i in ids])
        new_rows, edges, new_ids = [], [], []
        for members in multi:
            member_ids = sorted(ids[m] for m in members)
            name, desc = _summary(ctx, [titles[m] for m in member_ids], [texts[m] for m in member_ids], concepts)
            sid = content_id(str(ctx.ws.id), "summary", str(layer + 1), ",".join(member_ids))
            new_rows.append({"id": sid, "workspace_id": ctx.ws.id, "kind": "entity", "key": f"summary:{sid}",
                             "title": name[:200], "text": desc, "type": "SUMMARY", "layer": layer + 1,
                             "weight": float(len(member_ids)), "document_id": None, "ord": None,
                             "data": {"members": len(member_ids), "concepts": concepts}})
            edges += [{"workspace_id": ctx.ws.id, "src": m, "dst": sid, "kind": "summarizes", "weight": 1.0,
                       "data": {}} for m in member_ids]
            titles[sid], texts[sid] = name, desc
            new_ids.append(sid)
        layers[-1]["summary_entities"] = len(new_ids)
        if new_rows:
            with ctx.store.session() as s:
                conn = s.connection()
                conn.execute(insert(Node.__table__), new_rows)  # type: ignore[attr-defined]
                conn.execute(insert(Edge.__table__), edges)  # type: ignore[attr-defined]
                s.commit()
            vecs = ctx.embedder.embed([node_text_for_embedding("entity", titles[i], texts[i][:1000])
                                       for i in new_ids])
            ctx.index.upsert("entity", new_ids, vecs, [{"type": "SUMMARY", "layer": layer + 1} for _ in new_ids])
            vec_of.update(zip(new_ids, vecs))
        previous = c.sparsity
        ids = new_ids  # the next layer: the summary entities just made (size and layer cap checked above)
        layer += 1
    del vec_of, titles, texts
    release_memory()
    yield Progress(1, 1, f"{len(layers)} layer(s) clustered; stopped: {reason}",
                   {"layers": layers, "stop_reason": reason})


def _summary(ctx, member_titles: list[str], member_texts: list[str], concepts: list[str]) -> tuple[str, str]:
    """A summary entity's name and description: extractive offline, from the model otherwise."""
    if ctx.backend.name == "offline":
        return summary_entity_offline(member_titles, member_texts, concepts)
    hint = "; ".join(member_titles[:3]) + (f" (concepts: {', '.join(concepts[:5])})" if concepts else "")
    rep = ctx.backend.report(hint, [f"{t}: {x[:300]}" for t, x in zip(member_titles[:30], member_texts[:30])])
    return rep.title, rep.summary
