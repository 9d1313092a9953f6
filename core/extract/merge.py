"""Entity resolution beyond same-name merging: merge candidates, the `merge` stage, and reviewable, undoable merges.

Same-named mentions already share a node (its id is the normalized name). This module finds further candidates
among layer-0 entities, blocked three ways so the work stays near-linear: names with the same core (the normalized
name without a leading title, glue words and trailing legal forms: "Acme", "Acme Inc.", "ACME Corporation";
"Professor Daniel Osei", "Daniel Osei"), names sharing a token that few names share, and each entity's nearest
neighbours in the "entity" vector collection (faiss; exact up to 20k entities, IVF above). Evidence per pair:

* name similarity n (0-1, token-aware): same core 1.0; same tokens reordered 0.9; same number of tokens all
  matching exactly, by initial ("J." ~ "John", 0.8 per token) or by spelling (difflib ratio >= 0.85) -> the mean;
  all tokens of the shorter name found in order in the longer ("Porcaro" in "Jeff Porcaro") ->
  (0.75 + 0.2 * characters of shorter / characters of longer) * mean token match; otherwise 0.9 * Dice of tokens;
* types: same (t = 1), one generic CONCEPT/unknown (t = 0.9), both specific and different (t = 0.6);
* embedding cosine c of the two entity vectors; e = clip((c - 0.5) / 0.5, 0, 1);
* shared graph neighbours: Jaccard j of the entities each is related to through relationship nodes.

score = t * (1 - (1 - n) * (1 - e / 2) * (1 - j / 2)): name evidence dominates, the embedding and the neighbours
can each remove at most half of the remaining doubt, and a type disagreement caps the score.

A pair is a candidate when n >= name_similarity (containment and initials: only with compatible types, the same
or one generic), or when both have the same type and c >= embedding_similarity. The kept entity has more mentions
(weight). The build merges a candidate itself only when score >= auto_merge, both have the same type AND the names
match by core, reordering or spelling: containment and initials ("Porcaro" ~ "Jeff Porcaro", "J. Smith" ~
"John Smith") are always left to a reviewer, and are flagged `ambiguous` when the vaguer name matches several
others that way. A merge changes the kept entity's text (so its vector) and neighbours, so the stage repeats until
a pass merges nothing: a re-run then finds only pairs it has recorded already.

Review API (for the Quality page): `list_merges`, `merge`, `undo`, `reject`, `merged_into`. A merge moves every
edge of the merged node onto the kept one and keeps the original rows in `EntityMerge.snapshot`, so `undo`
restores the graph exactly; merges into one entity are undone last-first.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func
from sqlmodel import select

from core.extract.names import combined_score, name_similarity, name_tokens
from core.extract.resolve import norm_key, settle
from core.models import Edge, EntityMerge, Node, utcnow

_GENERIC = frozenset({"", "CONCEPT", "UNKNOWN", "OTHER"})
_TOKEN_DF_CAP = 50  # a token shared by more names than this blocks nothing (it is a common word, not a name)
_AUTO_KINDS = frozenset({"same_core", "reordered", "spelling"})
_MAX_ROUNDS = 5  # auto-merge rounds of one stage run (a merge changes the kept entity's vector and neighbours)
_DESC_CAP = 1200
_EXACT_KNN = 20000  # up to this many entities the kNN search is exact; above, a faiss IVF index


class MergeError(ValueError):
    """A merge, undo or reject that cannot be done in the current state (shown to the reviewer as is)."""


@dataclass
class Candidate:
    kept_id: str
    merged_id: str
    score: float
    evidence: dict


# -- candidates -----------------------------------------------------------------------------------------------------
def _knn_pairs(vecs: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    import faiss

    n = len(vecs)
    if n < 2 or k <= 0:
        return []
    x = np.ascontiguousarray(vecs, dtype=np.float32)
    if n <= _EXACT_KNN:
        index = faiss.IndexFlatIP(x.shape[1])
    else:  # near-duplicates are what matters here, and they share a cell: a few probes find them
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], int(np.sqrt(n)),
                                   faiss.METRIC_INNER_PRODUCT)
        index.cp.max_points_per_centroid, index.cp.niter = 64, 10  # faiss's fixed k-means seed: deterministic
        index.train(x)
        index.nprobe = 4
    index.add(x)
    sims, nbrs = index.search(x, min(n, k + 1))
    return [(i, int(j), float(s)) for i in range(n) for j, s in zip(nbrs[i], sims[i]) if j >= 0 and j != i]


def _neighbours(store, ws_id: int) -> dict[str, set[str]]:
    """Entity -> the entities it is related to through relationship nodes."""
    with store.session() as s:
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
            Edge.workspace_id == ws_id, Edge.kind.in_(("subject", "object")))).all()  # type: ignore[attr-defined]
    sub: dict[str, str] = {}
    obj: dict[str, str] = {}
    for src, dst, kind in ends:
        (sub if kind == "subject" else obj)[src] = dst
    nb: dict[str, set[str]] = defaultdict(set)
    for rid, a in sub.items():
        b = obj.get(rid)
        if b and b != a:
            nb[a].add(b)
            nb[b].add(a)
    return nb


def find_candidates(store, ws_id: int, index, settings, vectors: dict | None = None) -> list[Candidate]:
    """Merge candidates among layer-0 entities, best first (see the module docstring for blocking and evidence).
    `settings` is the ResolveSettings (or the whole Settings); `index` may be None (no embedding evidence);
    `vectors` (id -> vector) spares reading the entity vectors from the index again."""
    cfg = getattr(settings, "resolve", settings)
    with store.session() as s:
        rows = s.exec(select(Node.id, Node.key, Node.title, Node.type, Node.weight).where(
            Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0).order_by(Node.id)).all()
    ids = [r[0] for r in rows]
    toks = [name_tokens(r[1] or norm_key(r[2])) for r in rows]
    pairs: set[tuple[int, int]] = set()
    by_core: dict[str, list[int]] = defaultdict(list)
    by_tok: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(toks):
        by_core["".join(t)].append(i)
        for tok in set(t):
            if len(tok) >= 2:
                by_tok[tok].append(i)

    def rank(i: int) -> tuple:  # the kept one of a pair ranks first: more mentions, then the longer name
        return -rows[i][4], -len(rows[i][2]), ids[i]

    for group in by_core.values():  # a star onto the first-ranked name of the same core
        head = min(group, key=rank)
        pairs.update((min(head, i), max(head, i)) for i in group if i != head)
    for group in by_tok.values():
        if 2 <= len(group) <= _TOKEN_DF_CAP:
            for x, i in enumerate(group):
                for j in group[x + 1:]:
                    short = min(len(toks[i]), len(toks[j]))
                    if len(set(toks[i]) & set(toks[j])) >= max(1, short - 1):
                        pairs.add((i, j))
    cos: dict[tuple[int, int], float] = {}
    vec_row: dict[int, np.ndarray] = {}
    if (index is not None or vectors is not None) and ids:
        got = vectors if vectors is not None else index.vectors("entity", ids)
        have = [i for i, e in enumerate(ids) if e in got]
        if have:
            mat = np.vstack([got[ids[i]] for i in have])
            vec_row = {i: mat[r] for r, i in enumerate(have)}
            initials = ["".join(t[0] for t in tk) for tk in toks]
            for a, b, c in _knn_pairs(mat, cfg.neighbours):
                i, j = min(have[a], have[b]), max(have[a], have[b])
                cos[(i, j)] = c
                same_type = rows[i][3] == rows[j][3] and rows[i][3] not in _GENERIC
                # beyond the blocks above, a neighbour adds only spelling variants: same count and initials
                if (same_type and c >= cfg.embedding_similarity) or initials[i] == initials[j]:
                    pairs.add((i, j))
    nb = _neighbours(store, ws_id)
    found: list[tuple[int, int, float, str, float | None, float, float]] = []
    for i, j in sorted(pairs):
        n, kind = name_similarity(toks[i], toks[j])
        ti, tj = rows[i][3], rows[j][3]
        t = 1.0 if ti == tj and ti not in _GENERIC else (0.9 if ti in _GENERIC or tj in _GENERIC else 0.6)
        c = cos.get((i, j))
        if c is None and i in vec_row and j in vec_row:
            c = float(vec_row[i] @ vec_row[j])
        by_name = n >= cfg.name_similarity and (kind not in ("contained", "initials") or t >= 0.9)
        by_vector = t == 1.0 and c is not None and c >= cfg.embedding_similarity
        if not (by_name or by_vector):
            continue
        na, nb_ = nb.get(ids[i], set()) - {ids[j]}, nb.get(ids[j], set()) - {ids[i]}
        jac = len(na & nb_) / len(na | nb_) if na | nb_ else 0.0
        found.append((i, j, n, kind, c, t, jac))
    def vaguer(i: int, j: int) -> int:  # the less informative name of a pair (a surname, an initial)
        return min((i, j), key=lambda x: (sum(map(len, toks[x])), x))

    vague = Counter(vaguer(i, j) for i, j, _, kind, *_ in found if kind in ("contained", "initials"))
    out = []
    for i, j, n, kind, c, t, jac in found:
        kept, gone = sorted((i, j), key=rank)
        ambiguous = kind in ("contained", "initials") and vague[vaguer(i, j)] >= 2  # it matches several names
        score = combined_score(n, t, c, jac)
        out.append(Candidate(ids[kept], ids[gone], score, {
            "name_similarity": round(n, 4), "match": kind, "same_type": t == 1.0,
            "types": [rows[kept][3], rows[gone][3]], "cosine": None if c is None else round(c, 4),
            "jaccard": round(jac, 4), "ambiguous": ambiguous, "titles": [rows[kept][2], rows[gone][2]],
            "weights": [rows[kept][4], rows[gone][4]],
            "auto_eligible": kind in _AUTO_KINDS and t == 1.0 and not ambiguous}))
    out.sort(key=lambda c: (-c.score, c.kept_id, c.merged_id))
    return out


# -- merge, undo, reject --------------------------------------------------------------------------------------------
def _row(obj) -> dict:
    return {c.name: getattr(obj, c.name) for c in type(obj).__table__.columns}  # type: ignore[attr-defined]


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
    descs = list(data.get("descriptions", []))
    for d in (gone.data or {}).get("descriptions", []):
        if d not in descs and sum(map(len, descs)) < _DESC_CAP:
            descs.append(d)
    data["descriptions"] = descs
    data["merged"] = list(data.get("merged", [])) + [gone.id]
    return data


def _get_merge(s, ws_id: int, merge_id: int) -> EntityMerge:
    row = s.get(EntityMerge, merge_id)
    if row is None or row.workspace_id != ws_id:
        raise MergeError(f"no merge candidate {merge_id} in this workspace")
    return row


def _edges_of(s, ws_id: int, node_id: str) -> list[Edge]:
    """Every edge with `node_id` at either end (two indexed lookups; an OR would scan the table)."""
    out = {e.id: e for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id, Edge.src == node_id))}
    out.update((e.id, e) for e in s.exec(select(Edge).where(Edge.workspace_id == ws_id, Edge.dst == node_id)))
    return [out[i] for i in sorted(out)]


def _vectors_of(index, ids: list[str]) -> dict[str, tuple[list[float], dict]]:
    if index is None or not ids:
        return {}
    out = {}
    for off in range(0, len(ids), 5000):
        got = index.collection("entity").get(ids=ids[off : off + 5000], include=["embeddings", "metadatas"])
        out.update((i, ([float(x) for x in v], m or {})) for i, v, m in zip(got["ids"], got["embeddings"],
                                                                           got["metadatas"]))
    return out


def _apply(s, ws_id: int, row: EntityMerge, auto: bool, vector: tuple | None) -> list[str]:
    """The graph changes of one merge, inside session `s` (the caller commits); returns the affected node ids."""
    if row.status == "merged":
        raise MergeError(f"candidate {row.id} is already merged")
    kept, gone = s.get(Node, row.kept_id), s.get(Node, row.merged_id)
    if kept is None or gone is None:
        raise MergeError(f"candidate {row.id} refers to an entity that no longer exists")
    K, M = kept.id, gone.id
    edges = _edges_of(s, ws_id, M)
    theirs = {(e.src, e.dst, e.kind): e for e in _edges_of(s, ws_id, K)}
    snap: dict = {"kept": _row(kept), "merged": _row(gone), "edges": [_row(e) for e in edges], "touched": [],
                  "nodes": [], "vector": vector[0] if vector else None, "meta": vector[1] if vector else None}
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
            s.add(hit)
            s.delete(e)
        else:
            e.src, e.dst, e.data = src, dst, {**(e.data or {}), "merged_from": M}
            theirs[(src, dst, e.kind)] = e
            s.add(e)
    for rel in s.exec(select(Node).where(Node.id.in_(rel_ids))) if rel_ids else []:  # type: ignore[union-attr]
        snap["nodes"].append(_row(rel))
        rel.data = {k: (K if k in ("source", "target") and v == M else v) for k, v in (rel.data or {}).items()}
        s.add(rel)
    kept.data = _merged_data(kept, gone)
    kept.weight = (kept.weight or 0.0) + (gone.weight or 0.0)
    _settle(kept)
    s.add(kept)
    s.delete(gone)
    row.status, row.auto, row.snapshot, row.decided_at = "merged", auto, snap, utcnow()
    s.add(row)
    return sorted(affected)


def merge(store, ws_id: int, merge_id: int, index=None, auto: bool = False) -> list[str]:
    """Merge candidate `merge_id`: every edge of the merged entity moves onto the kept one (a collision adds its
    weight to the existing edge instead), the kept entity's data absorbs the merged one's, relationships follow,
    the merged node and its vector are removed. The original rows go into the snapshot. Returns the affected ids."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        affected = _apply(s, ws_id, row, auto, _vectors_of(index, [row.merged_id]).get(row.merged_id))
        s.commit()
    if index is not None:
        index.delete("entity", [row.merged_id])
    return affected


def undo(store, ws_id: int, merge_id: int, index=None) -> list[str]:
    """Restore the graph as it was before merge `merge_id`: the merged node, its edges (same weights and data),
    the edges that absorbed its weight, the kept node and its relationships. Returns the affected node ids."""
    with store.session() as s:
        row = _get_merge(s, ws_id, merge_id)
        if row.status != "merged":
            raise MergeError(f"candidate {merge_id} is not merged (status {row.status})")
        snap = row.snapshot
        K, M = snap["kept"]["id"], snap["merged"]["id"]
        node = s.get(Node, K)
        if node is None:
            raise MergeError(f"{K} was merged away since; undo that merge first")
        if (node.data or {}).get("merged", [M])[-1:] != [M]:
            raise MergeError(f"{node.title} absorbed another entity since; undo that merge first")
        if s.get(Node, M) is not None:
            raise MergeError(f"an entity with the merged id {M} exists again; merge or remove it first")
        originals = snap["edges"] + snap["touched"]
        current = {e.id: e for e in s.exec(select(Edge).where(
            Edge.id.in_([o["id"] for o in originals])))}  # type: ignore[union-attr]
        for o in originals:
            e = current.get(o["id"])
            if e is None:
                s.add(Edge(**o))
            else:
                for k, v in o.items():
                    setattr(e, k, v)
                s.add(e)
        for o in [snap["kept"]] + snap["nodes"]:
            n = s.get(Node, o["id"])
            if n is not None:
                for k, v in o.items():
                    setattr(n, k, v)
                s.add(n)
        s.add(Node(**snap["merged"]))
        row.status, row.decided_at = "undone", utcnow()
        s.add(row)
        s.commit()
    if index is not None and snap.get("vector"):
        index.upsert("entity", [M], np.asarray([snap["vector"]], dtype=np.float32), [snap.get("meta") or {}])
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
        return list(s.exec(q.order_by(EntityMerge.score.desc(), EntityMerge.id)))  # type: ignore[attr-defined]


# -- the stage ------------------------------------------------------------------------------------------------------
def record_candidates(store, ws_id: int, cands: list[Candidate]) -> list[int]:
    """Store candidates as EntityMerge rows (status "candidate"); returns their ids."""
    with store.session() as s:
        rows = [EntityMerge(workspace_id=ws_id, kept_id=c.kept_id, merged_id=c.merged_id, score=c.score,
                            evidence=c.evidence) for c in cands]
        s.add_all(rows)
        s.commit()
        return [r.id for r in rows]  # type: ignore[misc]


def _reembed(ctx, ids: list[str]) -> None:
    """The kept entities' vectors, as the embed stage would compute them from their settled text."""
    from core.index.stage import _embed_missing, node_text_for_embedding

    with ctx.store.session() as s:
        ents = s.exec(select(Node.id, Node.title, Node.text, Node.type, Node.layer).where(
            Node.id.in_(ids))).all()  # type: ignore[union-attr]
    rows = [(i, node_text_for_embedding("entity", t, x[:1000]), {"type": ty, "layer": int(la)})
            for i, t, x, ty, la in ents]
    for _ in _embed_missing(ctx, "entity", rows):
        pass


def merge_stage(ctx) -> Iterator:
    from core.pipeline import Progress

    store, ws, cfg = ctx.store, ctx.ws, ctx.settings.resolve
    if not cfg.enabled:
        yield Progress(1, 1, "entity resolution switched off", {})
        return
    with store.session() as s:
        decided = {frozenset((k, m)) for k, m in s.exec(select(EntityMerge.kept_id, EntityMerge.merged_id).where(
            EntityMerge.workspace_id == ws.id)).all()}
        gone = list(s.exec(select(EntityMerge.merged_id).where(EntityMerge.workspace_id == ws.id,
                                                              EntityMerge.status == "merged")))
        alive = set(s.exec(select(Node.id).where(Node.id.in_(gone)))) if gone else set()  # type: ignore[union-attr]
    stale = [i for i in ctx.index.vectors("entity", gone) if i not in alive] if gone else []
    ctx.index.delete("entity", stale)  # a build stopped between a merge and its vector deletion
    with store.session() as s:
        ids = list(s.exec(select(Node.id).where(Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 0)))
    vec_cache = ctx.index.vectors("entity", ids)
    auto_merged, new = 0, []
    for rnd in range(_MAX_ROUNDS):
        cands = find_candidates(store, ws.id, ctx.index, cfg, vectors=vec_cache)
        new = [c for c in cands if frozenset((c.kept_id, c.merged_id)) not in decided]
        sure = [c for c in new if c.score >= cfg.auto_merge and c.evidence["auto_eligible"]]
        losing = {c.merged_id for c in sure}
        kept, gone_now, auto = set(), set(), []
        for c in sure:  # best first; an entity that is itself merged away keeps nothing this round
            if c.kept_id not in losing and c.merged_id not in gone_now | kept:
                auto.append(c)
                kept.add(c.kept_id)
                gone_now.add(c.merged_id)
        if not auto or rnd == _MAX_ROUNDS - 1:
            break
        vectors = _vectors_of(ctx.index, [c.merged_id for c in auto])
        with store.session() as s:  # the round's records and merges in one transaction
            for c in auto:
                row = EntityMerge(workspace_id=ws.id, kept_id=c.kept_id, merged_id=c.merged_id, score=c.score,
                                  evidence=c.evidence)
                s.add(row)
                s.flush()
                _apply(s, ws.id, row, True, vectors.get(c.merged_id))
                decided.add(frozenset((c.kept_id, c.merged_id)))
            s.commit()
        ctx.index.delete("entity", sorted(gone_now))
        auto_merged += len(auto)
        _reembed(ctx, sorted(kept))
        for i in gone_now:
            vec_cache.pop(i, None)
        vec_cache.update(ctx.index.vectors("entity", sorted(kept)))
        yield Progress(rnd + 1, _MAX_ROUNDS, f"merged {auto_merged} entities automatically",
                       {"auto_merged": auto_merged})
        if ctx.should_stop():
            return
    record_candidates(store, ws.id, new)
    with store.session() as s:
        n_cands = s.exec(select(func.count()).select_from(EntityMerge).where(
            EntityMerge.workspace_id == ws.id, EntityMerge.status == "candidate")).one()
        n_ents = s.exec(select(func.count()).select_from(Node).where(
            Node.workspace_id == ws.id, Node.kind == "entity", Node.layer == 0)).one()
    yield Progress(1, 1, f"{len(new)} new merge candidates, {auto_merged} merged automatically",
                   {"candidates": n_cands, "auto_merged": auto_merged, "entities": n_ents})
