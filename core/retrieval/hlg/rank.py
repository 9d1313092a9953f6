"""HLG reranking, context selection and sources (hierarchical-lexical-graph.txt §4.1 Step 4, §4.3.1, §6.3-6.4).

Rerank (Eq. 9-10): "Each s ∈ S_final is rescored by a cross-encoder reranker: Score_rank(s) = sim(Rerank(Q),
Rerank(s))" over S_final = S_init ∪ S_beam: the statement is scored, nothing else. The paper's reranker is a
cross-encoder (bge-reranker-v2-minicpm-layerwise, §6.3), not bundled here, so offline there is no reranker:
rerank="statement" (the default) scores the statement by its cosine to the question, the very score S_vss was ranked
by, and the strategies say so (S_final ranked by similarity, TopicGraphRAG's beam similarity-guided).
rerank="hybrid" (issue 37's stand-in, the ablations hlg-statement-hybrid and hlg-topic-hybrid) is the mean of that
cosine and the statement's lexical match, the TF-IDF cosine (the diversity filter's preprocessing, the statements'
idf) to the question and its keywords K, as the published graphrag-toolkit's offline `tfidf` reranker scores
statements; measured on every set it is not better everywhere (factbook R@5 0.400 against 0.644: its questions' words
are field names every entry holds), so it is not the default. rerank="chunk-blend" is an ablation, not the paper: it
scores the statement embedded together with the chunk it was extracted from (cos(e_Q, e_s + e_chunk)). Asked with
a model backend, the model is the reranker (the backend task `rerank`, listwise calls scoring each statement 0-10)
over ALL of S_final (Eq. 9-10): the pool, in the offline order, is cut into batches that each fit `context_tokens`,
each batch one call, and the whole pool is ordered by the model's scores (ties keep the offline order).

Context (§6.3: "the context window is fixed at 10 chunks, which corresponds to approximately 3,000 tokens"):
statement variants keep the reranked statements that pass the diversity filter (§4.3.1), best first, while they fit
in `context_tokens`; chunk variants (§6.4: "the top-ranked statements are traced back to their source chunks. We
select up to 10 unique chunks and apply a diversity filter") trace the reranked statements to their chunks, first
seen first, and keep the first `top_k` that pass the diversity filter.

Sources: the documents of the context, in its rank order (a document first seen at its best statement or chunk).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from core.retrieval.base import Source, llm_calls
from core.retrieval.diversity import iter_diverse
from core.retrieval.hlg.beam import Beam
from core.retrieval.hlg.graph import Lexicon

RERANK_MODES = ("hybrid", "statement", "chunk-blend")


def rerank_scores(lx: Lexicon, sims: np.ndarray, csims: np.ndarray, mode: str, query_text: str = "") -> np.ndarray:
    """Score_rank (Eq. 9) of every statement: "hybrid" = (cos(e_Q, e_s) + tfidf_cos(Q + K, s)) / 2, the
    statement alone scored densely and lexically (`query_text` = the question and its keywords); "statement" =
    cos(e_Q, e_s) alone (no rerank: the vector search's own score); "chunk-blend" (ablation) = cos(e_Q, e_s +
    e_chunk)."""
    if mode not in RERANK_MODES:
        raise ValueError(f"unknown HLG rerank mode {mode!r} (one of {', '.join(RERANK_MODES)})")
    if mode == "statement":
        return sims
    if mode == "hybrid":
        return (sims + lx.lexical_scores(query_text)) / 2.0
    out = sims.copy()
    has = lx.srow_chunk >= 0
    out[has] = (sims[has] + csims[lx.srow_chunk[has]]) / np.sqrt(2.0 + 2.0 * lx.esc[has])
    return out


def ranked_pool(beam: Beam, sims: np.ndarray, score: np.ndarray) -> np.ndarray:
    """S_final = S_init ∪ S_beam (every statement on a kept path; depth 0 is S_init) ordered by Score_rank (Eq. 10),
    ties by cosine to the question, then by row."""
    final = np.unique(np.concatenate([p.ravel() for p in beam.paths]))
    return final[np.lexsort((final, -sims[final], -score[final]))]


def budget_head(lx: Lexicon, ranked: np.ndarray, tokens: int) -> int:
    """How many of the ranked statements fit in `tokens` (at least one, when there is one)."""
    used = 0
    for n, s in enumerate(ranked):
        used += lx.statement_tokens(int(s))
        if used > tokens:
            return max(n, 1)
    return len(ranked)


def rerank_batches(lx: Lexicon, ranked: np.ndarray, tokens: int) -> list[np.ndarray]:
    """The ranked pool cut into consecutive batches that each fit `tokens` (`budget_head`; at least one each)."""
    out: list[np.ndarray] = []
    rest = ranked
    while len(rest):
        n = budget_head(lx, rest, tokens)
        out.append(rest[:n])
        rest = rest[n:]
    return out


def llm_rerank(llm, question: str, lx: Lexicon, ranked: np.ndarray, tokens: int, workers: int = 1) -> np.ndarray:
    """The model as the reranker of all of S_final (Eq. 9-10): every candidate scored 0-10, a batch of statements
    that fits `tokens` per call (`workers` calls at once), then the pool ordered by score (stable: ties keep the
    offline order)."""
    if len(ranked) < 2:
        return ranked
    batches = rerank_batches(lx, ranked, tokens)
    scored = llm_calls(lambda b: llm.rerank(question, [lx.stext[s] for s in b]), batches, workers)
    scores = np.concatenate([np.asarray(x, dtype=np.float64) for x in scored])
    return ranked[np.argsort(-scores, kind="stable")]


def select_statements(lx: Lexicon, ranked: np.ndarray, cut: float, tokens: int) -> tuple[list[int], int]:
    """(statement rows kept, their tokens): the ranked statements passing the diversity filter (cosine cut), best
    first, while they fit in `tokens`; the first always."""
    m = lx.statement_tfidf()
    kept: list[int] = []
    used = 0
    for i in range(len(ranked)) if m is None else iter_diverse(m[ranked], cut):
        n = lx.statement_tokens(int(ranked[i]))
        if kept and used + n > tokens:
            break
        kept.append(int(ranked[i]))
        used += n
    return kept, used


def select_chunks(lx: Lexicon, ranked: np.ndarray, cut: float, k: int) -> list[tuple[str, int]]:
    """[(chunk, its best statement row)]: the ranked statements traced back to their chunks, first seen first, the
    first k passing the diversity filter (cosine cut)."""
    row, m = lx.chunk_tfidf()
    best: dict[str, int] = {}
    for s in ranked:
        for c in lx.schunks[s]:
            if c in row:
                best.setdefault(c, int(s))
    cids = list(best)
    out: list[tuple[str, int]] = []
    if k <= 0:
        return out
    for i in range(len(cids)) if m is None else iter_diverse(m[[row[c] for c in cids]], cut):
        out.append((cids[i], best[cids[i]]))
        if len(out) >= k:
            break
    return out


def sources_in_order(lx: Lexicon, units: list[tuple[str | None, list[str], float]], limit: int) -> list[Source]:
    """The documents of the context units (document, chunks, score), in the units' order: a document is ranked where
    its first unit is and scores that unit; its chunks are those of all its units, first seen first."""
    chunks_of: dict[str, list[str]] = {}
    score_of: dict[str, float] = {}
    for doc, chunks, sc in units:
        if doc is None:
            continue
        score_of.setdefault(doc, sc)
        have = chunks_of.setdefault(doc, [])
        have += [c for c in chunks if c not in have and lx.cdoc.get(c) == doc]
    out: list[Source] = []
    for doc in list(score_of)[:limit]:
        ext, title = lx.docs.get(doc, (None, doc))
        out.append(Source(doc, ext, title, round(score_of[doc], 4), chunks_of[doc]))
    return out


# -- the hops shown (bridge section and path) ----------------------------------------------------------------------
@dataclass
class Hop:
    src: int  # statement rows sharing an entity: a one-hop path <src, dst>
    dst: int
    score: float  # Score_beam(<src, dst>)
    entities: list[str]  # shared entities, most specific first


def make_hop(lx: Lexicon, w: np.ndarray, sims: np.ndarray, x: int, y: int) -> Hop:
    shared = np.intersect1d(lx.M[x].indices, lx.M[y].indices)
    shared = shared[np.lexsort((shared, lx.edeg[shared]))]
    u = w[x] * lx.E[x].astype(np.float64) + w[y] * lx.E[y]
    sc = (w[x] * sims[x] + w[y] * sims[y]) / max(float(np.linalg.norm(u)), 1e-12)
    return Hop(x, y, float(sc), [lx.eids[e] for e in shared])


def kept_hops(lx: Lexicon, beam: Beam, sims: np.ndarray, kept: list[int], k: int) -> list[Hop]:
    """The hops of the k best beam paths (Eq. 7) through a kept statement."""
    best: list[tuple[float, tuple[int, ...]]] = []
    for paths, scores in zip(beam.paths[1:], beam.scores[1:]):
        hit = np.isin(paths, kept).any(axis=1)
        paths, scores = paths[hit], scores[hit]
        if len(paths) > k:  # only a depth's k best distinct paths (ties included) can be among the k best overall
            paths, first = np.unique(paths, axis=0, return_index=True)  # a path reached from two starts, once
            scores = scores[first]
        if len(paths) > k:
            top = scores >= np.partition(scores, len(scores) - k)[len(scores) - k]
            paths, scores = paths[top], scores[top]
        best += [(float(sc), tuple(int(x) for x in p)) for p, sc in zip(paths, scores)]
    w = np.exp(sims)
    seen: set[tuple[int, int]] = set()
    out: list[Hop] = []
    for _, p in sorted(set(best), key=lambda b: (-b[0], b[1]))[:k]:
        for x, y in pairwise(p):
            if (x, y) not in seen:
                seen.add((x, y))
                out.append(make_hop(lx, w, sims, x, y))
    return out
