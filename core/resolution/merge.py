"""Entity resolution beyond same-name merging: the rules of the `merge` stage (core/pipeline/stages/merge.py), and
reviewable, undoable merges.

Candidates and their evidence (name similarity, type agreement, embedding cosine, shared neighbours, combined
score) come from core/resolution/candidates.py. The build merges a candidate itself only when its score >= auto_merge
and `evidence["auto_eligible"]` (same type, names matching by core, reordering or spelling); containment and
initials ("Porcaro" ~ "Jeff Porcaro", "J. Smith" ~ "John Smith") are always left to a reviewer. A merge changes
the kept entity's text (so its vector) and neighbours, so the stage repeats until a pass merges nothing: a re-run
then finds only pairs it has recorded already, whatever became of them (merged, rejected, undone), so a rejected
pair is never proposed again.

Review API (for the Quality page; core/resolution/review.py wraps it for the app): `list_merges`, `merge`, `undo`,
`reject`, `unreject`, `merged_into`. A merge moves every edge of the merged node onto the kept one and keeps the
original rows (and both entities' vectors) in `EntityMerge.snapshot`, so `undo` restores the graph exactly; merges
into one entity are undone last-first. Given an embedder, `merge` re-embeds the kept entity from its new text and
`undo` puts its earlier vector back.

Stale reports: a merge or an undo changes what the communities holding either entity contain, so their reports
(written before) no longer describe them. Both mark every Community (any method, any level) with an `in_community`
edge from either entity: `data["stale"] = True` and a reason in `data["stale_reasons"]`. An undo cancels the mark
its own merge left (and a re-merge the mark its undo left): a community whose reasons all cancel describes again
exactly the graph its report was written for, so it is no longer stale. A community built after the merge (a
rebuild gives changed communities new ids and fresh reports) has no merge reason to cancel, so the undo marks it.
"""

from __future__ import annotations

import numpy as np
from sqlmodel import col, select

from core.ids import owned
from core.index.embedding import node_text_for_embedding
from core.models import Community, Edge, EntityMerge, Node, sql_table, utcnow
from core.resolution.candidates import Candidate, find_candidates  # noqa: F401  (re-exported: merge's public API)
from core.resolution.names import add_description, settle
from core.store import content_id


class MergeError(ValueError):
    """A merge, undo or reject that cannot be done in the current state (shown to the reviewer as is)."""


# -- merge, undo, reject --------------------------------------------------------------------------------------------
def _row(obj) -> dict:
    return {c.name: getattr(obj, c.name) for c in sql_table(type(obj)).columns}


def _settle(node: Node) -> None:
    """Title, type and text from the merged mentions, exactly as the resolve stage settles them."""
    node.title, node.type, node.text = settle(node.title, node.type, node.data)


def _counts(node: Node, field: str) -> dict:
    """A node's alias or type counts; a node without them counts its own title or type once per mention."""
    got = (node.data or {}).get(field)
    value = node.title if field == "aliases" else node.type
    return dict(got) if got else ({value: max(1, int(node.weight or 1))} if value else {})


def _merged_data(kept: Node, gone: Node) -> dict:
    data = dict(kept.data or {})
    for field in ("aliases", "types"):
        mine = _counts(kept, field)
        for k, v in _counts(gone, field).items():
            mine[k] = mine.get(k, 0) + v
        data[field] = mine
    descs, n_about = list(data.get("descriptions", [])), int(data.get("about", 0))
    theirs = (gone.data or {}).get("descriptions", [])
    their_about = int((gone.data or {}).get("about", 0))
    for k, d in enumerate(theirs):  # the kept entity's, then the merged one's; passages about either lead
        descs, n_about = add_description(descs, n_about, d, k < their_about)
    data["descriptions"], data["about"] = descs, n_about
    data["merged"] = list(data.get("merged", [])) + [gone.id]
    return data


def _get_merge(s, ws_id: int, merge_id: int) -> EntityMerge:
    row = owned(s, EntityMerge, ws_id, merge_id)
    if row is None:
        raise MergeError(f"no merge candidate {merge_id} in this workspace")
    return row


def _edges_of(s, ws_id: int, node_id: str) -> list[Edge]:
    """Every edge with `node_id` at either end (two indexed lookups; an OR would scan the table)."""
    out = {e.id: e for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id, Edge.src == node_id))}
    out.update((e.id, e) for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id, Edge.dst == node_id)))
    return [out[i] for i in sorted(out)]


def entity_vectors(index, ids: list[str]) -> dict[str, tuple[list[float], dict]]:
    """id -> (vector, meta) of these entities' stored vectors (none without an index)."""
    if index is None or not ids:
        return {}
    out: dict[str, tuple[list[float], dict]] = {}
    for off in range(0, len(ids), 5000):
        got = index.collection("entity").get(ids=ids[off : off + 5000], include=["embeddings", "metadatas"])
        out.update((i, ([float(x) for x in v], m or {})) for i, v, m in zip(got["ids"], got["embeddings"],
                                                                           got["metadatas"]))
    return out


def apply_merge(s, ws_id: int, row: EntityMerge, auto: bool, vector: tuple | None,
                kept_vector: tuple | None = None) -> list[str]:
    """The graph changes of one merge, inside session `s` (the caller commits); returns the affected node ids.
    `vector` and `kept_vector` are the (vector, meta) of the merged and the kept entity, kept for `undo`."""
    if row.status == "merged":
        raise MergeError(f"candidate {row.id} is already merged")
    kept, gone = owned(s, Node, ws_id, row.kept_id), owned(s, Node, ws_id, row.merged_id)
    if kept is None or gone is None:
        raise MergeError(f"candidate {row.id} refers to an entity that no longer exists")
    K, M = kept.id, gone.id
    _toggle_stale(s, ws_id, [K, M], {"merge": row.id, "action": "merge", "kept": kept.title, "merged": gone.title})
    edges = _edges_of(s, ws_id, M)
    theirs = {(e.src, e.dst, e.kind): e for e in _edges_of(s, ws_id, K)}
    snap: dict = {"kept": _row(kept), "merged": _row(gone), "edges": [_row(e) for e in edges], "touched": [],
                  "nodes": [], "vector": vector[0] if vector else None, "meta": vector[1] if vector else None,
                  "kept_vector": kept_vector[0] if kept_vector else None,
                  "kept_meta": kept_vector[1] if kept_vector else None}
    affected = {K, M}
    rel_ids = [e.src for e in edges if e.kind in ("subject", "object") and e.dst == M]
    for e in edges:
        src, dst = (K if e.src == M else e.src), (K if e.dst == M else e.dst)
        affected.update((e.src, e.dst))
        hit = theirs.get((src, dst, e.kind))
        if src == dst:  # an edge between the two entities themselves
            s.delete(e)
        elif hit is not None:  # the kept entity has this edge already: it absorbs the weight
            snap["touched"].append(_row(hit))
            absorbed = dict((hit.data or {}).get("absorbed", {}))
            absorbed[M] = absorbed.get(M, 0.0) + (e.weight or 0.0)
            hit.weight, hit.data = (hit.weight or 0.0) + (e.weight or 0.0), {**(hit.data or {}), "absorbed": absorbed}
            if "x" in (hit.data or {}) and "x" in (e.data or {}):  # the chunk's contributions to both (a later refold)
                hit.data = {**hit.data, "x": list(hit.data["x"]) + list(e.data["x"])}
            if (e.data or {}).get("subject"):  # the chunk's document is about the merged entity, so about the kept
                hit.data = {**hit.data, "subject": True}
            s.add(hit)
            s.delete(e)
        else:
            e.src, e.dst, e.data = src, dst, {**(e.data or {}), "merged_from": M}
            theirs[(src, dst, e.kind)] = e
            s.add(e)
    for rel in s.exec(select(Node).where(Node.workspace_id == ws_id, col(Node.id).in_(rel_ids))) if rel_ids else []:
        snap["nodes"].append(_row(rel))
        rel.data = {k: (K if k in ("source", "target") and v == M else v) for k, v in (rel.data or {}).items()}
        s.add(rel)
    kept.data = _merged_data(kept, gone)
    if (row.evidence or {}).get("keep_name"):  # the reviewer chose the name the merged entity goes by
        kept.data["name"] = str(row.evidence["keep_name"])
    kept.weight = (kept.weight or 0.0) + (gone.weight or 0.0)
    _settle(kept)
    s.add(kept)
    s.delete(gone)
    row.status, row.auto, row.snapshot, row.decided_at = "merged", auto, snap, utcnow()
    s.add(row)
    return sorted(affected)


def merge(store, ws_id: int, merge_id: int, index=None, auto: bool = False, embedder=None) -> list[str]:
    """Merge candidate `merge_id`: every edge of the merged entity moves onto the kept one (a collision adds its
    weight to the existing edge instead), the kept entity's data absorbs the merged one's, relationships follow,
    the merged node and its vector are removed, and the communities holding either are marked stale. The original
    rows and both vectors go into the snapshot. With an `embedder` (and `index`) the kept entity is re-embedded from
    its new text. Returns the affected node ids."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        vecs = entity_vectors(index, [row.merged_id, row.kept_id])
        affected = apply_merge(s, ws_id, row, auto, vecs.get(row.merged_id), vecs.get(row.kept_id))
        s.commit()
    if index is not None:
        index.delete("entity", [row.merged_id])
        if embedder is not None:
            reembed(store, index, embedder, [row.kept_id])
    return affected


def undo(store, ws_id: int, merge_id: int, index=None, embedder=None) -> list[str]:
    """Restore the graph as it was before merge `merge_id`: the merged node, its edges (same weights and data),
    the edges that absorbed its weight, the kept node and its relationships; then both vectors (the kept one from
    the snapshot when it matches the restored text, else re-embedded with `embedder` if given). The communities
    holding either entity are marked stale again or, if this merge marked them, cleared of its mark. Returns the
    affected node ids."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        if row.status != "merged":
            raise MergeError(f"candidate {merge_id} is not merged (status {row.status})")
        snap = row.snapshot
        K, M = snap["kept"]["id"], snap["merged"]["id"]
        node = owned(s, Node, ws_id, K)
        if node is None:
            raise MergeError(f"{K} was merged away since; undo that merge first")
        if (node.data or {}).get("merged", [M])[-1:] != [M]:
            raise MergeError(f"{node.title} absorbed another entity since; undo that merge first")
        if s.get(Node, M) is not None:  # any workspace's: the id is about to be written again
            raise MergeError(f"an entity with the merged id {M} exists again; merge or remove it first")
        originals = snap["edges"] + snap["touched"]
        current = {e.id: e for e in s.exec(select(Edge).where(
            Edge.workspace_id == ws_id, col(Edge.id).in_([o["id"] for o in originals])))}
        for o in originals:
            e = current.get(o["id"])
            if e is None:
                s.add(Edge(**o))
            else:
                for k, v in o.items():
                    setattr(e, k, v)
                s.add(e)
        for o in [snap["kept"]] + snap["nodes"]:
            n = owned(s, Node, ws_id, o["id"])
            if n is not None:
                for k, v in o.items():
                    setattr(n, k, v)
                s.add(n)
        s.add(Node(**snap["merged"]))
        s.flush()
        _toggle_stale(s, ws_id, [K, M], {"merge": row.id, "action": "undo", "kept": snap["kept"]["title"],
                                         "merged": snap["merged"]["title"]})
        row.status, row.decided_at = "undone", utcnow()
        s.add(row)
        s.commit()
    if index is not None:
        if snap.get("vector"):
            index.upsert("entity", [M], np.asarray([snap["vector"]], dtype=np.float32), [snap.get("meta") or {}])
        h = (snap.get("kept_meta") or {}).get("h")
        if snap.get("kept_vector") and (not h or h == _text_hash(snap["kept"]["title"], snap["kept"]["text"])):
            index.upsert("entity", [K], np.asarray([snap["kept_vector"]], dtype=np.float32), [snap["kept_meta"]])
        elif embedder is not None:
            reembed(store, index, embedder, [K])
    return sorted({K, M} | {o["src"] for o in snap["edges"]} | {o["dst"] for o in snap["edges"]})


def reject(store, ws_id: int, merge_id: int) -> None:
    """Mark candidate `merge_id` rejected: no build proposes or merges the pair again."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        if row.status == "merged":
            raise MergeError(f"candidate {merge_id} is merged; undo it first")
        row.status, row.decided_at = "rejected", utcnow()
        s.add(row)
        s.commit()


def unreject(store, ws_id: int, merge_id: int) -> None:
    """Undo a rejection: candidate `merge_id` is open for review again (the graph never changed)."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        if row.status != "rejected":
            raise MergeError(f"candidate {merge_id} is not rejected (status {row.status})")
        row.status, row.decided_at = "candidate", utcnow()  # the time of the last decision, reopening included
        s.add(row)
        s.commit()


# -- stale community reports ------------------------------------------------------------------------------------------
_OPPOSITE = {"merge": "undo", "undo": "merge"}


def _toggle_stale(s, ws_id: int, entity_ids: list[str], reason: dict) -> list[str]:
    """Inside session `s`: add `reason` to the stale reasons of every community holding one of `entity_ids`, or
    cancel the opposite reason of the same merge (see the module docstring). Returns the community ids."""
    cids = sorted(set(s.exec(select(Edge.dst).where(
        Edge.workspace_id == ws_id, Edge.kind == "in_community", col(Edge.src).in_(entity_ids)))))
    if not cids:
        return []
    reason = {**reason, "at": utcnow().isoformat(timespec="seconds")}
    undoes = _OPPOSITE.get(reason.get("action", ""))
    for c in s.exec(select(Community).where(Community.workspace_id == ws_id,
                                            col(Community.id).in_(cids))):
        data = dict(c.data or {})
        reasons = list(data.get("stale_reasons") or ([{"action": "marked"}] if data.get("stale") else []))
        hit = next((i for i, r in enumerate(reasons) if undoes and r.get("merge") == reason.get("merge")
                    and r.get("action") == undoes), None) if reason.get("merge") is not None else None
        if hit is None:
            reasons.append(reason)
        else:
            reasons.pop(hit)
        data.pop("stale", None)
        data.pop("stale_reasons", None)
        if reasons:
            data.update(stale=True, stale_reasons=reasons)
        c.data = data
        s.add(c)
    return cids


def mark_stale(store, ws_id: int, entity_ids, reason: dict | None = None) -> list[str]:
    """Mark every community (any method, any level) holding one of `entity_ids` stale: its report was written for
    other members. `reason` (shown to the reader) defaults to an unnamed edit. Returns the community ids."""
    with store.session() as s:
        cids = _toggle_stale(s, ws_id, list(entity_ids), reason or {"action": "edit"})
        s.commit()
    return cids


def is_stale(community) -> bool:
    """Whether a Community (or its `data` dict) carries the stale mark of a merge or undo since its report."""
    data = community if isinstance(community, dict) else (getattr(community, "data", None) or {})
    return bool(data.get("stale"))


# -- vectors of kept entities -----------------------------------------------------------------------------------------
def _embed_text(title: str, text: str) -> str:
    return node_text_for_embedding("entity", title or "", (text or "")[:1000])


def _text_hash(title: str, text: str) -> str:
    return content_id(_embed_text(title, text))


def reembed(store, index, embedder, ids: list[str], batch: int = 256) -> list[str]:
    """Entity vectors as the embed stage computes them ("title: description", meta type, layer and the text's hash
    "h"), for the `ids` whose stored hash differs from their current text's. Returns the ids re-embedded."""
    if not ids:
        return []
    with store.session() as s:
        # sqlmodel's select() stubs type at most four columns; this one reads five
        ents = s.exec(select(Node.id, Node.title, Node.text, Node.type, Node.layer).where(  # type: ignore[call-overload]
            col(Node.id).in_(ids), Node.kind == "entity")).all()
    have = {i: (m or {}).get("h") for i, (_, m) in entity_vectors(index, [e[0] for e in ents]).items()}
    todo = []
    for i, t, x, ty, la in ents:
        text = _embed_text(t, x)
        h = _text_hash(t, x)
        if have.get(i) != h:
            todo.append((i, text, {"type": ty or "", "layer": int(la or 0), "h": h}))
    for off in range(0, len(todo), batch):
        part = todo[off : off + batch]
        index.upsert("entity", [i for i, _, _ in part], embedder.embed([t for _, t, _ in part]),
                     [m for _, _, m in part])
    return [i for i, _, _ in todo]


def merged_into(store, ws_id: int) -> dict[str, str]:
    """Merged-away entity id -> the entity that holds its mentions now (chains followed), for writers that would
    otherwise re-create a merged entity from new mentions of its name."""
    with store.session() as s:
        pairs = dict((m, k) for m, k in s.exec(select(EntityMerge.merged_id, EntityMerge.kept_id).where(
            EntityMerge.workspace_id == ws_id, EntityMerge.status == "merged")).all())
    out = {}
    for m in pairs:
        k, seen = pairs[m], {m}
        while k in pairs and k not in seen:
            seen.add(k)
            k = pairs[k]
        out[m] = k
    return out


def list_merges(store, ws_id: int, status: str | None = None) -> list[EntityMerge]:
    """Merge records of a workspace (of one status if given), best score first."""
    with store.session() as s:
        q = select(EntityMerge).where(EntityMerge.workspace_id == ws_id)
        if status:
            q = q.where(EntityMerge.status == status)
        return list(s.exec(q.order_by(col(EntityMerge.score).desc(), col(EntityMerge.id))))


# -- candidates of the merge stage ---------------------------------------------------------------------------------
def record_candidates(store, ws_id: int, cands: list[Candidate]) -> list[int]:
    """Store candidates as EntityMerge rows (status "candidate"); returns their ids."""
    with store.session() as s:
        rows = [EntityMerge(workspace_id=ws_id, kept_id=c.kept_id, merged_id=c.merged_id, score=c.score,
                            evidence=c.evidence) for c in cands]
        s.add_all(rows)
        s.commit()
        ids: list[int] = []
        for r in rows:
            assert r.id is not None  # assigned by the database on commit
            ids.append(r.id)
        return ids
