"""The `attributed` stage: ArchRAG's attributed communities (archrag.txt §3.1.2, Algorithm 1) and the C-HNSW
index over them (§3.1.3, Appendix A.2).

Input: the layer-0 entities with their vectors (collection "entity") as attributes, linked by their
relationships (relationship nodes collapsed; Algorithm 1 then weighs every link by attribute similarity, so the
relationship weights only decide which links exist). Each level: KNN augmentation, weighted Leiden
(core/algorithms/attributed.py), a report per community from the language backend (level 1: the members'
descriptions and the relationships inside, capped as in core/pipeline/report_material.py; higher levels: the children's titles and
summaries), and the embedding of "title\\nsummary" into collection "community" — the attribute of the
community at the next level. A singleton community is its only member: it takes the member's title and
description (level 1) or its child's report (above) instead of a model call, and above level 1 its child's
vector (same text, so the same embedding).

Storage: `Community` rows, method "attributed", level 0 = coarsest (ArchRAG layer i of L is level L - i,
`data["layer"] = i`), parent = the containing community one layer up, `in_community` edges from every entity
member (transitively), title/summary/report filled so the `reports` stage skips them. Ids hash (workspace,
"attributed", layer, entity members), so they do not depend on L.

A level with a report that still failed after its retries (a failed unit, core/pipeline/failures.py) ends the hierarchy
below it: the next level's attributes are this level's report vectors, so it is left out whole (its reports made
so far replay from the call cache) and the next build makes it and the levels above.

Resumable: reports are persisted in batches as they are made (rows at a provisional level until the build
ends), and a community whose id is stored with a summary written from the same material (`data["material"]`, a hash)
keeps it, so after documents are added or deleted only communities whose material changed get a new report; the end of the stage writes the final levels
and parents and removes stale rows, so a resumed build ends with the rows of an uninterrupted one.
The C-HNSW index (layer 0 entities, layer i the communities of layer i) is stored in the database as the workspace's
`chnsw` artifact, so every worker and app host sharing the database reads the same one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import update
from sqlmodel import col, select

from core.algorithms.attributed import Hierarchy, Level
from core.algorithms.chnsw import CHNSW, CHNSW_ARTIFACT, CHNSW_FILE
from core.graph.entity_graph import load_entity_graph
from core.index.embedding import embed_missing, node_text_for_embedding
from core.models import Community, Edge, Node, sql_table
from core.pipeline.community_rows import community_id, write_communities
from core.pipeline.context import BuildContext, Progress
from core.pipeline.report_material import MAX_ENTITIES, Element, report_material
from core.pipeline.tasks import report_one
from core.protocols import Report
from core.store import bulk_insert, content_id
from core.text import truncate

METHOD = "attributed"


@dataclass
class Comm:
    id: str
    layer: int
    members: np.ndarray  # entity indices (sorted)
    member_ids: list[str]  # their ids
    children: list[int]  # indices into the previous layer's communities (layer >= 2)
    title: str = ""
    summary: str = ""
    report: dict = field(default_factory=dict)
    material: str = ""  # hash of what its report is written from (a stored report with the same hash is kept)


@dataclass
class Base:
    ids: list[str]
    titles: list[str]
    types: list[str]
    texts: list[str]
    weights: list[float]
    vecs: np.ndarray
    edges: np.ndarray  # (m, 2) relationship links between entity indices
    rels: list[list[str]]  # relationship ids of each link


def _load_base(ctx) -> Base:
    with ctx.store.session() as s:  # sqlmodel types select() for at most 4 columns, hence the ignore
        ents = s.exec(select(Node.id, Node.title, Node.type, Node.text, Node.weight)  # type: ignore[call-overload]
                      .where(Node.workspace_id == ctx.ws.id, Node.kind == "entity", Node.layer == 0)
                      .order_by(Node.id)).all()
    vec_of = ctx.index.vectors("entity", [e[0] for e in ents])
    ents = [e for e in ents if e[0] in vec_of]
    index = {e[0]: i for i, e in enumerate(ents)}
    pair_rels: dict[tuple[int, int], list[str]] = {}
    if ents:
        eg = load_entity_graph(ctx.store, ctx.ws.id)
        for (a, b), rids in eg.link_rels.items():
            ia, ib = index.get(eg.ids[a]), index.get(eg.ids[b])
            if ia is not None and ib is not None and ia != ib:
                pair_rels.setdefault((min(ia, ib), max(ia, ib)), []).extend(rids)
    keys = sorted(pair_rels)
    vecs = np.vstack([vec_of[e[0]] for e in ents]) if ents else np.zeros((0, 1), np.float32)
    return Base([e[0] for e in ents], [e[1] for e in ents], [e[2] for e in ents], [e[3] or "" for e in ents],
                [float(e[4] or 0.0) for e in ents], vecs, np.array(keys, dtype=np.int64).reshape(-1, 2),
                [pair_rels[k] for k in keys])


def _stored(ctx) -> dict[str, tuple[str, str, dict, str]]:
    """id -> (title, summary, report, material hash) of the attributed communities already stored with a summary."""
    with ctx.store.session() as s:
        rows = s.exec(select(Community.id, Community.title, Community.summary, Community.report,
                             Community.data).where(  # type: ignore[call-overload]  # five columns
            Community.workspace_id == ctx.ws.id, Community.method == METHOD, Community.summary != "")).all()
    # a report marked stale (its members' documents deleted, a merge) is never reused
    return {i: (t, x, r or {}, "" if (d or {}).get("stale") else (d or {}).get("material", ""))
            for i, t, x, r, d in rows}


def _rel_elements(ctx, rel_ids: list[str]) -> dict[str, Element]:
    out: dict[str, Element] = {}
    with ctx.store.session() as s:
        for i in range(0, len(rel_ids), 5000):
            part = rel_ids[i : i + 5000]
            for rid, t, x, w in s.exec(select(Node.id, Node.title, Node.text, Node.weight).where(
                    Node.workspace_id == ctx.ws_id, col(Node.id).in_(part))):
                out[rid] = Element(t, "", x or "", float(w or 0.0))
    return out


def _persist(ctx, comms: list[Comm], level: int) -> None:
    """Store these communities (new ones with their in_community edges; a stored one without a summary gets it)."""
    with ctx.store.session() as s:
        have = {i: (x, t, None if (d or {}).get("stale") else (d or {}).get("material", "")) for i, x, t, d in s.exec(
            select(Community.id, Community.summary, Community.title, Community.data).where(
                Community.workspace_id == ctx.ws_id, col(Community.id).in_([c.id for c in comms]))).all()}
        new = [c for c in comms if c.id not in have]
        conn = s.connection()
        if new:
            bulk_insert(conn, sql_table(Community), [
                {"id": c.id, "workspace_id": ctx.ws.id, "method": METHOD, "level": level, "parent_id": None,
                 "size": len(c.members), "title": c.title, "summary": c.summary, "report": c.report,
                 "data": _data(c)} for c in new])
            edges = [{"workspace_id": ctx.ws.id, "src": m, "dst": c.id, "kind": "in_community", "weight": 1.0,
                      "data": {}} for c in new for m in c.member_ids]
            for i in range(0, len(edges), 50_000):
                bulk_insert(conn, sql_table(Edge), edges[i : i + 50_000])
        table = sql_table(Community)
        for c in comms:  # a stored row without a report, or with one written from other material, gets this one
            if c.id in have and have[c.id] != (c.summary, c.title, c.material):
                conn.execute(update(table).where(table.c.id == c.id).values(title=c.title, summary=c.summary,
                                                                            report=c.report, data=_data(c)))
        s.commit()


def _data(c: Comm) -> dict:
    return {"layer": c.layer, "children": len(c.children), "material": c.material}


def _singleton(c: Comm, base: Base, below: list[Comm]) -> None:
    if c.layer == 1:
        e = int(c.members[0])
        c.title = base.titles[e][:300] or base.ids[e]
        c.summary = base.texts[e].strip() or c.title
        c.report = Report(title=c.title, summary=c.summary, findings=[], rating=1.0, keywords=[c.title]).model_dump()
    else:
        child = below[c.children[0]]
        c.title, c.summary, c.report = child.title, child.summary, dict(child.report)


def _material(c: Comm, base: Base, below: list[Comm], rels: dict[str, Element],
              inner: list[str]) -> tuple[str, list[str]]:
    """(title hint, material) of a report: members and inner relationships at layer 1, children above."""
    if c.layer == 1:
        members = [Element(base.titles[e], base.types[e], base.texts[e], base.weights[e]) for e in c.members.tolist()]
        return report_material(members, [rels[r] for r in inner if r in rels])
    # the hint names the community's most-mentioned entities (child titles would nest into ever longer titles)
    top = sorted(c.members.tolist(), key=lambda e: (-base.weights[e], base.titles[e]))[:3]
    kids = sorted((below[k] for k in c.children), key=lambda k: (-len(k.members), k.title))
    lines = [f"{k.title}: {truncate(k.summary, 400)}" for k in kids[:MAX_ENTITIES]]
    return "; ".join(base.titles[e] for e in top), lines


def attributed_stage(ctx: BuildContext) -> Iterator[Progress]:
    cfg, ws = ctx.settings.archrag, ctx.ws
    ctx.settings.storage.vector_dir(ws.name).joinpath(CHNSW_FILE).unlink(missing_ok=True)  # where older builds kept it
    if not cfg.enabled:
        _finish(ctx, [])
        ctx.store.put_artifact(ctx.ws_id, CHNSW_ARTIFACT, None)
        yield Progress(1, 1, "attributed communities switched off", _counts([], 0, None))
        return
    yield Progress(0, 1, "loading layer-0 entities and their vectors")
    base = _load_base(ctx)
    stored = _stored(ctx)
    h = Hierarchy(base.edges, base.vecs, cfg, keep_k=cfg.chnsw_m)
    layers: list[list[Comm]] = []
    layer_vecs: list[np.ndarray] = []  # the summary vectors of each layer's communities
    knn_total = 0
    workers = ctx.settings.backend.parallel_calls if ctx.backend.name != "offline" else 1
    batch = max(32, workers * 4)
    while not h.done:
        layer = h.layer
        for done, total in h.augment():
            yield Progress(done, total, f"layer {layer}: kNN of {total} nodes ({done}/{total})")
        assert h.pairs is not None  # set by h.augment()
        yield Progress(0, 1, f"layer {layer}: clustering {h.n} nodes, {len(h.pairs)} links ({h.knn_added} kNN)")
        level = h.cluster()
        if level is None:
            break
        knn_total += level.knn_added
        below = layers[-1] if layers else []
        comms = []
        for g in level.groups:
            g = g.tolist()
            members = np.sort(np.concatenate([below[k].members for k in g])) if below else np.array(g)
            member_ids = [base.ids[m] for m in members.tolist()]
            comms.append(Comm(community_id(ctx.ids, METHOD, layer, member_ids), layer, members, member_ids,
                              g if below else []))
        inner, rels = _inner_relationships(ctx, base, level, comms) if layer == 1 else ({}, {})
        todo: list[int] = []
        materials: dict[int, tuple[str, list[str]]] = {}
        for gi, c in enumerate(comms):
            if len(level.groups[gi]) == 1:  # no model call: made again, so it follows its member or child
                _singleton(c, base, below)
                c.material = content_id(c.title, c.summary)
                continue
            materials[gi] = _material(c, base, below, rels, inner.get(gi, []))
            c.material = content_id(materials[gi][0], *materials[gi][1])
            got = stored.get(c.id)
            if got is not None and got[3] == c.material:  # written from the same material: kept
                c.title, c.summary, c.report = got[:3]
            else:
                todo.append(gi)
        provisional = cfg.max_levels - layer
        _persist(ctx, [c for c in comms if c.summary], provisional)

        # each community's report is a unit; one that failed after its retries is a failed unit (see below)
        asked = ctx.model_engine.map(report_one, [materials[gi] for gi in todo], ctx.parts, window=workers)
        failed = 0
        for off in range(0, len(todo), batch):
            part = todo[off : off + batch]
            for gi in part:
                hint = materials[gi][0]
                rep = ctx.failures.take(comms[gi].id, next(asked), f"ArchRAG layer {layer} report of {hint!r}")
                if rep is None:  # failed after its retries: a failed unit, see below
                    failed += 1
                    continue
                c = comms[gi]
                c.title = (rep.title or "").strip()[:300] or hint[:300] or c.id
                c.summary = (rep.summary or "").strip() or c.title
                c.report = rep.model_dump() | {"title": c.title, "summary": c.summary}
            _persist(ctx, [comms[gi] for gi in part if comms[gi].summary], provisional)
            yield Progress(off + len(part), len(todo), f"layer {layer}: summarized {off + len(part)}/{len(todo)}")
            if ctx.should_stop():
                return
        if failed:  # the next level's attributes are this level's report vectors: the hierarchy ends below it
            h.stop_reason = (f"layer {layer}: {failed} of {len(todo)} community reports failed (recorded as failed "
                             f"units), so this layer and those above are left to the next build")
            break
        vecs = yield from _embed_layer(ctx, comms, layer, provisional, h.vecs, level)
        if vecs is None or ctx.should_stop():
            return
        layers.append(comms)
        layer_vecs.append(vecs)
        h.advance(vecs)
    yield Progress(0, 1, f"writing {sum(len(c) for c in layers)} attributed communities")
    _finish(ctx, layers)
    yield Progress(0, 1, "building the C-HNSW index")
    index = None
    if base.ids:
        chnsw_layers = [(base.ids, base.vecs)] + [([c.id for c in comms], v) for comms, v in zip(layers, layer_vecs)]
        index = CHNSW.build(chnsw_layers, cfg.chnsw_m, cfg.seed, knn=dict(enumerate(h.knn_of)),
                            meta={"embedder": ctx.embedder.name, "workspace": ws.name})
    ctx.store.put_artifact(ctx.ws_id, CHNSW_ARTIFACT, index.to_bytes() if index is not None else None)
    counts = _counts([len(base.ids)] + [len(c) for c in layers], knn_total, index)
    counts["stop_reason"] = h.stop_reason
    yield Progress(1, 1, f"{sum(len(c) for c in layers)} attributed communities on {len(layers)} levels; "
                         f"stopped: {h.stop_reason or 'no entities'}", counts)


def _inner_relationships(ctx, base: Base, level: Level, comms: list[Comm]) -> tuple[dict, dict]:
    """Relationship ids inside each level-1 community of two or more members, and their elements."""
    need = {gi for gi, c in enumerate(comms) if len(level.groups[gi]) > 1}
    inner: dict[int, list[str]] = {}
    if not need or not len(base.edges):
        return inner, {}
    ca, cb = level.membership[base.edges[:, 0]], level.membership[base.edges[:, 1]]
    for p in np.flatnonzero(ca == cb).tolist():
        gi = int(ca[p])
        if gi in need:
            inner.setdefault(gi, []).extend(base.rels[p])
    return inner, _rel_elements(ctx, sorted({r for rs in inner.values() for r in rs}))


def _embed_layer(ctx, comms: list[Comm], layer: int, provisional: int, node_vecs: np.ndarray, level: Level):
    """Embed the layer's communities into "community"; returns their vectors in order (None when stopped)."""
    rows = [(c.id, node_text_for_embedding("community", c.title, c.summary),
             {"method": METHOD, "level": provisional, "layer": layer}) for c in comms]
    if layer > 1:  # a singleton's text is its child's: copy the child's vector instead of embedding it again
        have = ctx.index.existing("community")
        copy = [gi for gi, g in enumerate(level.groups)
                if len(g) == 1 and have.get(comms[gi].id) != content_id(rows[gi][1])]
        if copy:
            ctx.index.upsert("community", [comms[gi].id for gi in copy],
                             np.vstack([node_vecs[int(level.groups[gi][0])] for gi in copy]),
                             [rows[gi][2] | {"h": content_id(rows[gi][1])} for gi in copy])
    for done, total in embed_missing(ctx.index, ctx.embedder, "community", rows, ctx.settings.embed.batch_size,
                                     ctx.should_stop):
        yield Progress(done, total, f"layer {layer}: embedded {done}/{total} community summaries")
    vec_of = ctx.index.vectors("community", [c.id for c in comms])
    if len(vec_of) < len(comms):
        return None
    return np.vstack([vec_of[c.id] for c in comms])


def _finish(ctx, layers: list[list[Comm]]) -> None:
    """Final rows: levels (0 = coarsest), parents, stale rows and their vectors removed, vector metas updated."""
    n_levels = len(layers)
    rows: list[Community] = []
    members_of: dict[str, list[str]] = {}
    for i, comms in enumerate(layers):
        parent_of: dict[int, str] = {}
        if i + 1 < n_levels:
            for p in layers[i + 1]:
                for k in p.children:
                    parent_of[k] = p.id
        for j, c in enumerate(comms):
            rows.append(Community(id=c.id, workspace_id=ctx.ws.id, method=METHOD, level=n_levels - c.layer,
                                  parent_id=parent_of.get(j), size=len(c.members), title=c.title, summary=c.summary,
                                  report=c.report, data=_data(c)))
            members_of[c.id] = c.member_ids
    with ctx.store.session() as s:
        old = set(s.exec(select(Community.id).where(Community.workspace_id == ctx.ws.id, Community.method == METHOD)))
    write_communities(ctx.store, ctx.ws.id, rows, members_of, (METHOD,))
    table = sql_table(Community)
    with ctx.store.session() as s:  # write_communities keeps a stored row's level: set the final ones
        conn = s.connection()
        for lvl in sorted({r.level for r in rows}):
            ids = [r.id for r in rows if r.level == lvl]
            for i in range(0, len(ids), 5000):
                conn.execute(update(table).where(table.c.id.in_(ids[i : i + 5000]), table.c.level != lvl)
                             .values(level=lvl))
        s.commit()
    ctx.index.delete("community", sorted(old - set(members_of)))
    _fix_vector_levels(ctx, {r.id: r.level for r in rows})


def _fix_vector_levels(ctx, level_of: dict[str, int]) -> None:
    col = ctx.index.collection("community")
    ids = list(level_of)
    for i in range(0, len(ids), 5000):
        got = col.get(ids=ids[i : i + 5000], include=["metadatas"])
        stale = {gid: (m or {}) for gid, m in zip(got["ids"], got["metadatas"])
                 if (m or {}).get("level") != level_of[gid]}
        if stale:
            vec_of = ctx.index.vectors("community", list(stale))
            keep = [gid for gid in stale if gid in vec_of]
            ctx.index.upsert("community", keep, np.vstack([vec_of[g] for g in keep]),
                             [stale[g] | {"level": level_of[g]} for g in keep])


def _counts(sizes: list[int], knn_edges: int, index: CHNSW | None) -> dict:
    """The Build page's counts; `sizes` = [entities, communities of layer 1, layer 2, ...]."""
    n_levels = max(len(sizes) - 1, 0)
    per_level = {str(n_levels - i): n for i, n in enumerate(sizes[1:], start=1)}
    return {"levels": n_levels, "communities_per_level": per_level, "layer_sizes": sizes, "knn_edges": knn_edges,
            "chnsw_nodes": int(len(index.ids)) if index else 0,
            "chnsw_links": (index.n_intra_links + index.n_inter_links) if index else 0}
