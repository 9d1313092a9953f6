"""HLG graph beam search over statements (hierarchical-lexical-graph.txt §4.1 Step 3, Eq. 5-8).

Nbr(s) = the statements sharing an entity with s (Eq. 5). A path P = <s_1..s_n> scores
Score_beam(P) = sim(e_Q, Σ α_i e_si), α = softmax_i sim(e_Q, e_si) (Eq. 6-7). From each start separately, every path
of the beam grows by one neighbour of its last statement not already on it; a child is kept only if it improves its
parent's score (stop rule (i)), and the B best children per start are kept (§6.3.2: B = 50), until no child improves
or D_max hops are made (§6.3.2: D_max = 3). Left open by the paper, taken from its published code (graphrag-toolkit
SemanticBeamGraphSearch): the neighbours scored for an expanded statement are its B nearest to the question.
S_beam = the statements on kept paths (Eq. 8).

TopicGraphRAG's beam (§4.2 (3): "A beam search explores additional context in multiple hops, guided by a reranker at
each step") is `reranker_beam`, as the paper's published code runs it (graphrag-toolkit RerankingBeamGraphSearch):
best first over statements by the reranker's Score_rank (Eq. 9), all of S_init queued at depth 0; the best queued
statement not yet visited is taken (visited once), and unless it lies D_max hops from its start its neighbours
(Eq. 5) are scored by the reranker and the B best are queued one hop further; the search ends when B statements have
been taken. No child has to improve its parent (the published code has no such rule).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import scipy.sparse as sp

from core.algorithms.similarity import cross_dots, dots


def path_embedding(q: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Eq. 6: Σ α_i e_i with α = softmax over i of sim(e_Q, e_i) (cosine)."""
    vecs = np.asarray(vecs, dtype=np.float64)
    qn = np.asarray(q, dtype=np.float64) / max(float(np.linalg.norm(q)), 1e-12)
    sims = dots(vecs, qn) / np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
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
                depth: int) -> Beam:
    """Beam search from each start separately (Eq. 8), vectorized over all starts. E has unit rows (cosine = dot
    product). A path's state is u = Σ w_i e_i with w_i = exp(sim_i): Score_beam = q·u / (|q| |u|) (the softmax
    normalizer cancels in the cosine), and a child u' = u + w e only needs u·e, computed per expanded statement
    as one matrix product over the paths that end there."""
    qn = (q / max(np.linalg.norm(q), 1e-12)).astype(np.float32)
    sims = dots(E, qn)
    w = np.exp(sims)
    starts = np.asarray(starts, dtype=np.int64)
    paths = starts[:, None]
    group = np.arange(len(starts))
    U = (w[starts, None] * E[starts]).astype(np.float32)
    a = w[starts] * sims[starts]  # q·u
    nn = w[starts] ** 2  # |u|^2
    score = a / np.sqrt(nn)
    beam = Beam([paths], [score], [group])
    width = max(1, int(width))
    for _ in range(max(0, int(depth))):
        if not len(paths):
            break
        P = len(paths)
        cand = np.full((P, width), -1, dtype=np.int64)
        pair_dots = np.zeros((P, width), dtype=np.float64)
        order = np.argsort(paths[:, -1], kind="stable")
        lasts = paths[order, -1]
        bounds = np.r_[0, np.flatnonzero(np.diff(lasts)) + 1, P]
        for b0, b1 in pairwise(bounds):
            last = lasts[b0]
            nb = nbr.indices[nbr.indptr[last]:nbr.indptr[last + 1]]
            if len(nb) > width:  # the expanded statement's `width` neighbours nearest to the question
                nb = nb[np.lexsort((nb, -sims[nb]))[:width]]
            if not len(nb):
                continue
            idx = order[b0:b1]
            cand[idx, :len(nb)] = nb
            pair_dots[idx, :len(nb)] = cross_dots(U[idx], E[nb])
        valid = (cand >= 0) & ~(paths[:, :, None] == cand[:, None, :]).any(axis=1)
        c = np.where(valid, cand, 0)
        wc = w[c]
        child = (a[:, None] + wc * sims[c]) / np.sqrt(np.maximum(nn[:, None] + 2 * wc * pair_dots + wc ** 2, 1e-24))
        p, j = np.nonzero(valid & (child > score[:, None]))  # (i) a child must improve its parent
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
        nn = nn[p] + 2 * w[n] * pair_dots[p, j[o][keep]] + w[n] ** 2
        score = ch
        beam.paths.append(paths)
        beam.scores.append(score)
        beam.starts.append(group)
    return beam


def reranker_beam(score: np.ndarray, nbr: sp.csr_matrix, starts: np.ndarray, width: int, depth: int) -> Beam:
    """TopicGraphRAG's beam, guided by the reranker at each step (§4.2 (3); the published RerankingBeamGraphSearch):
    `score` is Score_rank (Eq. 9) of every statement. paths[0] holds every start (S_init); paths[d] the taken paths of
    d hops, in the order taken, each scored by its last statement's Score_rank. At most `width` statements are taken
    (starts included); ties go to the shallower path, then the lower row."""
    score = np.asarray(score, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    width = max(1, int(width))
    beam = Beam([starts[:, None]], [score[starts]], [np.arange(len(starts))])
    queue: list[tuple[float, int, int, tuple[int, ...], int]] = [
        (-float(score[s]), 0, int(s), (int(s),), i) for i, s in enumerate(starts.tolist())]
    heapq.heapify(queue)
    visited: set[int] = set()
    taken: dict[int, list[tuple[tuple[int, ...], float, int]]] = {}
    while queue and len(visited) < width:
        neg, d, s, path, start = heapq.heappop(queue)
        if s in visited:
            continue
        visited.add(s)
        if d:
            taken.setdefault(d, []).append((path, -neg, start))
        if d >= depth:
            continue
        nb = nbr.indices[nbr.indptr[s]:nbr.indptr[s + 1]]
        nb = nb[np.lexsort((nb, -score[nb]))][:width]  # the B neighbours the reranker scores best
        for n in nb.tolist():
            if n not in visited:
                heapq.heappush(queue, (-float(score[n]), d + 1, n, path + (n,), start))
    for d in range(1, max(taken, default=0) + 1):
        rows = taken.get(d, [])
        beam.paths.append(np.array([p for p, _, _ in rows], dtype=np.int64).reshape(len(rows), d + 1))
        beam.scores.append(np.array([sc for _, sc, _ in rows], dtype=np.float64))
        beam.starts.append(np.array([g for _, _, g in rows], dtype=np.int64))
    return beam
