"""HLG graph beam search over statements (hierarchical-lexical-graph.txt §4.1 Step 3, Eq. 5-8).

Nbr(s) = the statements sharing an entity with s (Eq. 5). A path P = <s_1..s_n> scores
Score_beam(P) = sim(e_Q, Σ α_i e_si), α = softmax_i sim(e_Q, e_si) (Eq. 6-7). From each start separately, every path
of the beam grows by one neighbour of its last statement not already on it; a child is kept only if it improves its
parent's score (stop rule (i)), and the B best children per start are kept (§6.3.2: B = 50), until no child improves
or D_max hops are made (§6.3.2: D_max = 3). Left open by the paper, taken from its published code (graphrag-toolkit
SemanticBeamGraphSearch): the neighbours scored for an expanded statement are its B nearest to the question.
S_beam = the statements on kept paths (Eq. 8).

TopicGraphRAG's beam (§4.2 (3): "A beam search explores additional context in multiple hops, guided by a reranker at
each step") is the same search with `guide` = the reranker's Score_rank (Eq. 9) of every statement: a child path is
ranked by the reranker's score of the statement it adds, the neighbours scored for an expanded statement are its B
best by that score, and the B best children per start are kept at each depth, up to D_max. As in the published code
(graphrag-toolkit RerankingBeamGraphSearch, which ranks each expansion's neighbours by the reranker and has no
improvement rule), no child has to improve its parent: the search stops at D_max or when no path has a new neighbour.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import scipy.sparse as sp


def path_embedding(q: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Eq. 6: Σ α_i e_i with α = softmax over i of sim(e_Q, e_i) (cosine)."""
    vecs = np.asarray(vecs, dtype=np.float64)
    qn = np.asarray(q, dtype=np.float64) / max(float(np.linalg.norm(q)), 1e-12)
    sims = vecs @ qn / np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
    alpha = np.exp(sims - sims.max())
    return (alpha / alpha.sum()) @ vecs


def path_score(q: np.ndarray, vecs: np.ndarray) -> float:
    """Eq. 7: Score_beam(P) = sim(e_Q, e_path(P))."""
    e = path_embedding(q, vecs)
    return float(e @ q / max(np.linalg.norm(e) * np.linalg.norm(q), 1e-12))


@dataclass
class Beam:
    """Every path kept by the beam search, by depth: paths[d] is (n_paths x d+1) statement rows, with scores and the
    index of the start statement each path grew from."""

    paths: list[np.ndarray]
    scores: list[np.ndarray]
    starts: list[np.ndarray]


def beam_search(q: np.ndarray, E: np.ndarray, nbr: sp.csr_matrix, starts: np.ndarray, width: int,
                depth: int, guide: np.ndarray | None = None) -> Beam:
    """Beam search from each start separately (Eq. 8), vectorized over all starts. E has unit rows (cosine = dot
    product). A path's state is u = Σ w_i e_i with w_i = exp(sim_i): Score_beam = q·u / (|q| |u|) (the softmax
    normalizer cancels in the cosine), and a child u' = u + w e only needs u·e, computed per expanded statement
    as one matrix product over the paths that end there.

    With `guide` (one reranker score per statement, §4.2), children are ranked by guide[child] instead of Eq. 7 and
    need not improve their parent; a path's score is then the reranker score of its last statement."""
    qn = (q / max(np.linalg.norm(q), 1e-12)).astype(np.float32)
    sims = (E @ qn).astype(np.float64)
    w = np.exp(sims)
    starts = np.asarray(starts, dtype=np.int64)
    paths = starts[:, None]
    group = np.arange(len(starts))
    U = (w[starts, None] * E[starts]).astype(np.float32)
    a = w[starts] * sims[starts]  # q·u
    nn = w[starts] ** 2  # |u|^2
    score = a / np.sqrt(nn) if guide is None else np.asarray(guide, dtype=np.float64)[starts]
    rank_by = sims if guide is None else np.asarray(guide, dtype=np.float64)
    beam = Beam([paths], [score], [group])
    width = max(1, int(width))
    for _ in range(max(0, int(depth))):
        if not len(paths):
            break
        P = len(paths)
        cand = np.full((P, width), -1, dtype=np.int64)
        dots = np.zeros((P, width), dtype=np.float64)
        order = np.argsort(paths[:, -1], kind="stable")
        lasts = paths[order, -1]
        bounds = np.r_[0, np.flatnonzero(np.diff(lasts)) + 1, P]
        for b0, b1 in pairwise(bounds):
            last = lasts[b0]
            nb = nbr.indices[nbr.indptr[last]:nbr.indptr[last + 1]]
            if len(nb) > width:  # the expanded statement's `width` neighbours nearest to the question (or best
                nb = nb[np.lexsort((nb, -rank_by[nb]))[:width]]  # reranked, with a guide)
            if not len(nb):
                continue
            idx = order[b0:b1]
            cand[idx, :len(nb)] = nb
            dots[idx, :len(nb)] = U[idx] @ E[nb].T
        valid = (cand >= 0) & ~(paths[:, :, None] == cand[:, None, :]).any(axis=1)
        c = np.where(valid, cand, 0)
        wc = w[c]
        child = (a[:, None] + wc * sims[c]) / np.sqrt(np.maximum(nn[:, None] + 2 * wc * dots + wc ** 2, 1e-24))
        if guide is None:
            p, j = np.nonzero(valid & (child > score[:, None]))  # (i) a child must improve its parent
        else:  # §4.2: the reranker ranks the children; no improvement rule
            p, j = np.nonzero(valid)
            child = rank_by[c]
        if not len(p):
            break
        n, ch, g = cand[p, j], child[p, j], group[p]
        # per start, best first, in one sort: starts are integers and -ch lies in [-1, 1], so g * 4 - ch orders by
        # start then score; a stable sort leaves ties in (parent, candidate) order, which is deterministic
        o = np.argsort(g * 4.0 - ch, kind="stable")
        p, n, ch, g = p[o], n[o], ch[o], g[o]
        first = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
        rank = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)]))
        keep = rank < width  # B best paths per start
        p, n, ch = p[keep], n[keep], ch[keep]
        paths = np.hstack([paths[p], n[:, None]])
        group = group[p]
        U = U[p] + E[n] * w[n, None].astype(np.float32)
        a = a[p] + w[n] * sims[n]
        nn = nn[p] + 2 * w[n] * dots[p, j[o][keep]] + w[n] ** 2
        score = ch
        beam.paths.append(paths)
        beam.scores.append(score)
        beam.starts.append(group)
    return beam
