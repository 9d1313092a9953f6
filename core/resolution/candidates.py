"""Entity-resolution candidates among layer-0 entities (used by the `merge` stage in core/resolution/merge.py).

Same-named mentions already share a node (its id is the normalized name). Further candidates are blocked three ways
so the work stays near-linear: names with the same core (the normalized name without a leading title, glue words
and trailing legal forms: "Acme", "Acme Inc.", "ACME Corporation"; "Professor Daniel Osei", "Daniel Osei"), names
sharing a token that few names share, and each entity's nearest neighbours in the "entity" vector collection
(faiss; exact up to 20k entities, IVF above). Evidence per pair:

* name similarity n (0-1, token-aware): same core 1.0; same tokens reordered 0.9; same number of tokens all
  matching exactly, by initial ("J." ~ "John", 0.8 per token) or by spelling (difflib ratio >= 0.85) -> the mean;
  all tokens of the shorter name found in order in the longer ("Porcaro" in "Jeff Porcaro") ->
  (0.75 + 0.2 * characters of shorter / characters of longer) * mean token match; otherwise 0.9 * Dice of tokens;
* type agreement t: same (t = 1), one generic CONCEPT/unknown (t = 0.9), both specific and different (t = 0.6);
* embedding cosine c of the two entity vectors; e = clip((c - 0.5) / 0.5, 0, 1);
* shared graph neighbours: Jaccard j of the entities each is related to through relationship nodes.

score = t * (1 - (1 - n) * (1 - e / 2) * (1 - j / 2)): name evidence dominates, the embedding and the neighbours
can each remove at most half of the remaining doubt, and a type disagreement caps the score.

A pair is a candidate when n >= name_similarity (containment and initials: only with compatible types, the same
or one generic), or when both have the same type and c >= embedding_similarity. The kept entity has more mentions
(weight). `evidence["auto_eligible"]` says whether the build may merge it by itself (same type, and the names match
by core, reordering or spelling, never containment or initials, nor an `ambiguous` vaguer name that matches several
others that way).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from sqlmodel import col, select

from core.models import Edge, Node
from core.resolution.names import combined_score, name_similarity, name_tokens
from core.text import norm_key

_GENERIC = frozenset({"", "CONCEPT", "UNKNOWN", "OTHER"})
_TOKEN_DF_CAP = 50  # a token shared by more names than this blocks nothing (it is a common word, not a name)
_AUTO_KINDS = frozenset({"same_core", "reordered", "spelling"})
_EXACT_KNN = 20000  # up to this many entities the kNN search is exact; above, a faiss IVF index


@dataclass
class Candidate:
    kept_id: str
    merged_id: str
    score: float
    evidence: dict


def _knn_pairs(vecs: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    import faiss

    n = len(vecs)
    if n < 2 or k <= 0:
        return []
    x = np.ascontiguousarray(vecs, dtype=np.float32)
    index: faiss.Index
    if n <= _EXACT_KNN:
        index = faiss.IndexFlatIP(x.shape[1])
    else:  # near-duplicates are what matters here, and they share a cell: a few probes find them
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(x.shape[1]), x.shape[1], int(np.sqrt(n)),
                                 faiss.METRIC_INNER_PRODUCT)
        ivf.cp.max_points_per_centroid, ivf.cp.niter = 64, 10  # faiss's fixed k-means seed: deterministic
        ivf.train(x)
        ivf.nprobe = 4
        index = ivf
    index.add(x)
    sims, nbrs = index.search(x, min(n, k + 1))
    return [(i, int(j), float(s)) for i in range(n) for j, s in zip(nbrs[i], sims[i]) if j >= 0 and j != i]


def _neighbours(store, ws_id: int) -> dict[str, set[str]]:
    """Entity -> the entities it is related to through relationship nodes."""
    with store.session() as s:
        ends = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
            Edge.workspace_id == ws_id, col(Edge.kind).in_(("subject", "object")))).all()
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
        # sqlmodel's select() stubs type at most four columns; this one reads five
        rows = s.exec(select(Node.id, Node.key, Node.title, Node.type, Node.weight).where(  # type: ignore[call-overload]
            Node.workspace_id == ws_id, Node.kind == "entity", Node.layer == 0).order_by(Node.id)).all()
    ids = [r[0] for r in rows]
    toks = [name_tokens(r[1] or norm_key(r[2])) for r in rows]
    pairs: set[tuple[int, int]] = set()
    by_core: dict[str, list[int]] = defaultdict(list)
    by_tok: dict[str, list[int]] = defaultdict(list)
    for i, tk in enumerate(toks):
        by_core["".join(tk)].append(i)
        for tok in set(tk):
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
            for a, b, sim in _knn_pairs(mat, cfg.neighbours):
                i, j = min(have[a], have[b]), max(have[a], have[b])
                cos[(i, j)] = sim
                same_type = rows[i][3] == rows[j][3] and rows[i][3] not in _GENERIC
                # beyond the blocks above, a neighbour adds only spelling variants: same count and initials
                if (same_type and sim >= cfg.embedding_similarity) or initials[i] == initials[j]:
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
            "name_similarity": round(n, 4), "match": kind, "same_type": t == 1.0, "type_agreement": t,
            "types": [rows[kept][3], rows[gone][3]], "cosine": None if c is None else round(c, 4),
            "jaccard": round(jac, 4), "ambiguous": ambiguous, "titles": [rows[kept][2], rows[gone][2]],
            "weights": [rows[kept][4], rows[gone][4]],
            "auto_eligible": kind in _AUTO_KINDS and t == 1.0 and not ambiguous}))
    out.sort(key=lambda c: (-c.score, c.kept_id, c.merged_id))
    return out
