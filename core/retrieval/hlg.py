"""HLG StatementGraphRAG and TopicGraphRAG, with their chunk-based variants (hierarchical-lexical-graph.txt §4, §6.4).

StatementGraphRAG (§4.1, Algorithm 1):
1. Keywords K (Eq. 1). The paper asks an LLM for keywords and synonyms and matches them exactly to entity names
   (its published code compares normalized search strings). Offline, the question's word n-grams (its content
   words and noun phrases) are the candidate keywords, matched exactly against normalized entity names by
   `res.names.find`, longest first; a name made only of stop words ("a", "the") is not a keyword.
2. Keyword retrieval (Eq. 2-3): Score_kw(s) = |K_s|, the number of keywords whose entities s mentions, ties by
   cos(e_Q, e_s); the top `keyword_k` are S_kw.
3. Vector search (Eq. 4): the `statement_k` statements nearest to the question (exact cosine) are S_vss;
   S_init = S_kw ∪ S_vss (at most 50 + 50 by default: the paper starts from 100 statements).
4. Beam search (Eq. 5-8): Nbr(s) = the statements sharing an entity with s (statement -> entity -> statement over
   `mentions`). A path P = <s_1..s_n> scores Score_beam(P) = sim(e_Q, Σ α_i e_si), α = softmax_i sim(e_Q, e_si)
   (`path_score`). From each start separately, every path of the beam grows by one neighbour of its last statement
   not already on it; a child is kept only if it improves its parent's score, and the `beam_width` best children
   per start are kept, until no child improves or `depth` hops are made. Left open by the paper, taken from its
   published code (graphrag-toolkit SemanticBeamGraphSearch): the neighbours scored for an expanded statement are
   its `beam_width` nearest to the question. S_beam = the statements on kept paths; S_final = S_init ∪ S_beam.
5. Rerank (Eq. 9-10): Score_rank(s) = sim(Rerank(Q), Rerank(s)); the paper's reranker is a cross-encoder
   (bge-reranker-v2-minicpm-layerwise), not bundled here. Offline, rerank="context" embeds a statement together
   with the chunk it was extracted from (Rerank(s) = e_s + e_chunk, the statement enhancement of §4.3.2: offline
   statements are plain sentences, often without the name they are about: "He was inducted ..."), and
   rerank="similarity" is the plain cosine. Asked with Ollama, the model reranks the `llm_rerank_k` best of them
   (the backend task `rerank`, one listwise call scoring each statement 0-10), and step 1's keywords and synonyms
   come from the model (`query_terms`), matched whole against entity names.
6. Diversity (§4.3.1, core/retrieval/diversity.py) over the reranked list, then the top `top_k` are kept.

TopicGraphRAG (§4.2): top-down, the `topic_k` topics nearest to the question give their statements; bottom-up, the
keyword statements; both start the same beam search, rerank and diversity filter. Chunk-based variants (§6.4, §7.2):
the reranked statements are traced back to their chunks; the first `top_k` distinct chunks, diversity-filtered,
are the context.

Sections: local = the kept statements (chunk variants: chunks); bridge = the hops the sources took and those of the
best beam paths through kept statements: the entities the two statements share and the facts they state about
them; global = the topics of the kept statements (TopicGraphRAG: the retrieved topics).

Sources (not the paper's). Ranking documents by their best reranked statement loses to plain chunk search, as
offline statements lack their context (hotpotqa, 200 questions, R@2/5/10: 0.53/0.73/0.86 by statement cosine,
0.58/0.76/0.88 with rerank="context", 0.59/0.80/0.88 for naive chunks; this ranking: 0.61/0.83/0.92). Every document behind S_final scores the cosine of its
best chunk backing a statement of S_final, plus 0.1 × its keyword score (the IDF-weighted share of the question's
keywords its statements mention: Eq. 2 at document level). The first two documents come first, then, for each, the
document its best hop leads to: the one-hop path <x, y> (Eq. 5: x in it, y in another document of S_final) with the
highest Score_beam (Eq. 7) among those through a specific entity, one at most `bridge_max_statements` statements
mention (a hub such as "American" joins unrelated statements: the paper's over-expansion error, appendix C.2.1);
then the other documents. This is what finds the second document of a two-hop question.
Path: the hops (beam: their statements, shared entities, `mentions` edges), keyword entities and the other kept
statements that were entry points (entry), other kept statements (result), topics (`in_topic`; entry for
TopicGraphRAG), chunks (chunk, `derived_from`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import scipy.sparse as sp
from sqlmodel import select
from threadpoolctl import threadpool_limits

from core.extract.text import STOPWORDS
from core.models import Document, Edge, Node
from core.retrieval.base import (
    ContextItem,
    PathEdge,
    PathStep,
    Resources,
    Retrieval,
    RetrievalLLM,
    Source,
    Timer,
    register,
)
from core.retrieval.diversity import diversity_filter, similarity_cutoff

_KEYWORD_WEIGHT = 0.1  # weight of a document's keyword score beside its best chunk's cosine (sources)
_HOP_FROM = 2  # the first documents each followed by the document their best hop leads to (sources)


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    if m.size == 0:
        return np.zeros((len(m), 0), dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _cos(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosine of every unit row of m to the unit vector q (float64)."""
    return (m @ q).astype(np.float64) if m.shape[1:] == q.shape else np.zeros(len(m))


# -- the lexical graph, loaded once per Resources -------------------------------------------------------------------
@dataclass
class Lexicon:
    sids: list[str]  # statements with a vector, in the row order of E
    E: np.ndarray  # statement vectors, unit rows
    stext: list[str]
    sdoc: list[str | None]  # the document of the statement's chunk (else its own document id)
    sdoc_code: np.ndarray  # sdoc as an index into doc_ids (-1: none)
    doc_ids: list[str]
    doc_code: dict[str, int]
    schunks: list[list[str]]
    srow_chunk: np.ndarray  # statement -> row of its chunk in C (-1: none)
    esc: np.ndarray  # statement vector · its chunk's vector
    C: np.ndarray  # chunk vectors, unit rows
    cdoc: dict[str, str]  # chunk -> document
    crow: dict[str, int]
    eids: list[str]  # entities a statement mentions, in the column order of M
    erow: dict[str, int]
    M: sp.csr_matrix  # statement x entity (`mentions`)
    MT: sp.csr_matrix
    edeg: np.ndarray  # statements mentioning each entity
    nbr: sp.csr_matrix  # statement x statement sharing an entity (Eq. 5)
    sfacts: dict[int, list[str]]  # statement -> the facts (relationships) it states
    fact_ends: dict[str, tuple[str, str]]
    stopics: dict[int, list[str]]
    tids: list[str]  # topics with a vector, in the row order of T
    T: np.ndarray
    tstmts: dict[str, list[int]]
    docs: dict[str, tuple[str | None, str]]  # document -> (external id, title)

    @classmethod
    def load(cls, res: Resources) -> Lexicon:
        ws = res.ws.id
        ids, vecs = res.index.all_vectors("statement")
        srow = {i: r for r, i in enumerate(ids)}
        stext, sdoc = [""] * len(ids), [None] * len(ids)
        with res.store.session() as s:
            for sid, text, doc in s.exec(select(Node.id, Node.text, Node.document_id).where(
                    Node.workspace_id == ws, Node.kind == "statement")):
                if sid in srow:
                    stext[srow[sid]], sdoc[srow[sid]] = text, doc
            kinds = dict(s.exec(select(Node.id, Node.kind).where(
                Node.workspace_id == ws, Node.kind.in_(("entity", "relationship", "chunk")))).all())  # type: ignore
            edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws, Edge.kind.in_(
                ("mentions", "in_topic", "derived_from", "subject", "object")))).all()  # type: ignore[attr-defined]
            cdoc = dict(s.exec(select(Node.id, Node.document_id).where(Node.workspace_id == ws,
                                                                       Node.kind == "chunk")).all())
            docs = {d: (x, t) for d, x, t in s.exec(select(Document.id, Document.external_id, Document.title)
                                                     .where(Document.workspace_id == ws)).all()}
        tids, tvecs = res.index.all_vectors("topic")
        trow = {t: r for r, t in enumerate(tids)}
        cids, cvecs = res.index.all_vectors("chunk")
        crow = {c: r for r, c in enumerate(cids)}
        erow: dict[str, int] = {}
        mr, mc = [], []
        schunks: list[list[str]] = [[] for _ in ids]
        sfacts: dict[int, list[str]] = {}
        stopics: dict[int, list[str]] = {}
        tstmts: dict[str, list[int]] = {}
        ends: dict[str, list[str]] = {}
        for src, dst, kind in edges:
            if kind in ("subject", "object"):
                ends.setdefault(src, ["", ""])[kind == "object"] = dst
                continue
            r = srow.get(src)
            if r is None:
                continue
            k = kinds.get(dst)
            if kind == "mentions" and k == "entity":
                mr.append(r)
                mc.append(erow.setdefault(dst, len(erow)))
            elif kind == "mentions" and k == "relationship":
                sfacts.setdefault(r, []).append(dst)
            elif kind == "derived_from" and k == "chunk":
                schunks[r].append(dst)
            elif kind == "in_topic":
                stopics.setdefault(r, []).append(dst)
                if dst in trow:
                    tstmts.setdefault(dst, []).append(r)
        M = sp.csr_matrix((np.ones(len(mr), np.float32), (mr, mc)), shape=(len(ids), len(erow)))
        M.data[:] = 1.0
        nbr = (M @ M.T).tocsr()
        nbr.setdiag(0)
        nbr.eliminate_zeros()
        nbr.sort_indices()
        E, C = _unit(vecs), _unit(cvecs)
        srow_chunk = np.array([next((crow[c] for c in cs if c in crow), -1) for cs in schunks], dtype=np.int64)
        has = srow_chunk >= 0
        esc = np.zeros(len(ids), dtype=np.float32)
        esc[has] = np.einsum("ij,ij->i", E[has], C[srow_chunk[has]])
        MT = M.T.tocsr()
        sdoc = [next((cdoc[c] for c in cs if c in cdoc), d) for cs, d in zip(schunks, sdoc)]
        doc_ids = list(docs)
        code = {d: i for i, d in enumerate(doc_ids)}
        sdoc_code = np.array([code.get(d, -1) if d else -1 for d in sdoc], dtype=np.int64)
        return cls(sids=list(ids), E=E, stext=stext, sdoc=sdoc, sdoc_code=sdoc_code, doc_ids=doc_ids,
                   doc_code=code, schunks=schunks, srow_chunk=srow_chunk, esc=esc,
                   C=C, cdoc=cdoc, crow=crow, eids=list(erow), erow=erow, M=M, MT=MT, edeg=np.diff(MT.indptr),
                   nbr=nbr, sfacts=sfacts, fact_ends={f: (a, b) for f, (a, b) in ends.items() if f in kinds},
                   stopics=stopics, tids=list(tids), T=_unit(tvecs), tstmts=tstmts, docs=docs)


def lexicon(res: Resources) -> Lexicon:
    """The lexicon of this Resources (built once and kept on the object, which is cached per build version)."""
    lx = res.__dict__.get("_hlg_lexicon")
    if lx is None:
        lx = res.__dict__["_hlg_lexicon"] = Lexicon.load(res)
    return lx


# -- Eq. 6-7 and the beam search (Eq. 5, 8) ---------------------------------------------------------------------------
def path_embedding(q: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    """Eq. 6: Σ α_i e_i with α = softmax over i of sim(e_Q, e_i) (cosine)."""
    vecs = np.asarray(vecs, dtype=np.float64)
    qn = np.asarray(q, dtype=np.float64) / max(np.linalg.norm(q), 1e-12)
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
                depth: int) -> Beam:
    """Beam search from each start separately (Eq. 8), vectorized over all starts. E has unit rows (cosine = dot
    product). A path's state is u = Σ w_i e_i with w_i = exp(sim_i): Score_beam = q·u / (|q| |u|) (the softmax
    normalizer cancels in the cosine), and a child u' = u + w e only needs u·e, computed per expanded statement
    as one matrix product over the paths that end there."""
    qn = (q / max(np.linalg.norm(q), 1e-12)).astype(np.float32)
    sims = (E @ qn).astype(np.float64)
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
        dots = np.zeros((P, width), dtype=np.float64)
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
            dots[idx, :len(nb)] = U[idx] @ E[nb].T
        valid = (cand >= 0) & ~(paths[:, :, None] == cand[:, None, :]).any(axis=1)
        c = np.where(valid, cand, 0)
        wc = w[c]
        child = (a[:, None] + wc * sims[c]) / np.sqrt(np.maximum(nn[:, None] + 2 * wc * dots + wc ** 2, 1e-24))
        p, j = np.nonzero(valid & (child > score[:, None]))  # (i) a child must improve its parent
        if not len(p):
            break
        n, ch, g = cand[p, j], child[p, j], group[p]
        o = np.lexsort((n, p, -ch, g))  # per start, best first; deterministic ties
        p, n, ch, g = p[o], n[o], ch[o], g[o]
        first = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
        rank = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)]))
        keep = rank < width  # B best paths per start
        p, n, ch = p[keep], n[keep], ch[keep]
        paths = np.hstack([paths[p], n[:, None]])
        group = group[p]
        U = U[p] + (w[n, None] * E[n]).astype(np.float32)
        a = a[p] + w[n] * sims[n]
        nn = nn[p] + 2 * w[n] * dots[p, j[o][keep]] + w[n] ** 2
        score = ch
        beam.paths.append(paths)
        beam.scores.append(score)
        beam.starts.append(group)
    return beam


# -- entry points (Eq. 1-4, §4.2 top-down) ---------------------------------------------------------------------------
def keywords(res: Resources, lx: Lexicon, question: str, llm=None) -> list[tuple[str, np.ndarray]]:
    """(keyword, entity columns) for every entity name in the question that some statement mentions; with a
    model, the names among its keywords, synonyms and entities of the question (Eq. 1), matched whole."""
    out: dict[str, np.ndarray] = {}
    if llm is not None:
        terms = llm.query_terms(question)
        found = res.names.lookup(terms.entities + terms.keywords)
    else:
        found = res.names.find(question)
    for name, ids in found:
        if len(name) < 2 or all(t in STOPWORDS for t in name.split()) or name in out:
            continue
        cols = np.array(sorted({lx.erow[i] for i in ids if i in lx.erow}), dtype=np.int64)
        if len(cols):
            out[name] = cols
    return list(out.items())


def keyword_statements(lx: Lexicon, kws: list[tuple[str, np.ndarray]], sims: np.ndarray, k: int) -> np.ndarray:
    """S_kw: the k statements mentioning the most keywords (Eq. 2), ties by similarity to the question."""
    count = np.zeros(len(lx.sids), dtype=np.int64)
    for _, cols in kws:
        count[np.unique(lx.MT[cols].indices)] += 1
    hit = np.flatnonzero(count)
    return hit[np.lexsort((hit, -sims[hit], -count[hit]))][:k]


def _top(sims: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(sims))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-sims, k - 1)[:k]
    return idx[np.lexsort((idx, -sims[idx]))]


def rerank_scores(lx: Lexicon, sims: np.ndarray, csims: np.ndarray, mode: str) -> np.ndarray:
    """Score_rank (Eq. 9) of every statement: "context" = cos(e_Q, e_s + e_chunk), else cos(e_Q, e_s)."""
    if mode != "context":
        return sims
    out = sims.copy()
    has = lx.srow_chunk >= 0
    out[has] = (sims[has] + csims[lx.srow_chunk[has]]) / np.sqrt(2.0 + 2.0 * lx.esc[has])
    return out


def llm_rerank(llm, question: str, lx: Lexicon, final: np.ndarray, k: int) -> np.ndarray:
    """The model as the reranker (Eq. 9-10): the first `k` candidates reordered by its 0-10 scores (stable: ties
    keep the offline order), the rest after them."""
    head = final[:k]
    if len(head) < 2:
        return final
    scores = np.asarray(llm.rerank(question, [lx.stext[s] for s in head]), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    return np.concatenate([head[order], final[k:]])


# -- sources: the documents behind S_final, the first ones each followed by where their best hop leads ------------
@dataclass
class Hop:
    src: int  # statement rows sharing an entity: a one-hop path <src, dst>
    dst: int
    score: float  # Score_beam(<src, dst>)
    entities: list[str]  # shared entities, most specific first


def _hop(lx: Lexicon, w: np.ndarray, sims: np.ndarray, x: int, y: int) -> Hop:
    shared = np.intersect1d(lx.M[x].indices, lx.M[y].indices)
    shared = shared[np.lexsort((shared, lx.edeg[shared]))]
    u = w[x] * lx.E[x].astype(np.float64) + w[y] * lx.E[y]
    sc = (w[x] * sims[x] + w[y] * sims[y]) / max(float(np.linalg.norm(u)), 1e-12)
    return Hop(x, y, float(sc), [lx.eids[e] for e in shared])


def rank_documents(lx: Lexicon, final: np.ndarray, sims: np.ndarray, csims: np.ndarray, kws,
                   max_statements: int, limit: int) -> tuple[list[tuple[str, float, list[str]]], list[Hop]]:
    """([(document, score, backing chunks best first)], the hops that placed a document): see the module
    docstring, "Sources"."""
    chunk_score: dict[str, float] = {}
    for s in final:
        for c in lx.schunks[s]:
            if c in lx.crow and c in lx.cdoc:
                chunk_score[c] = float(csims[lx.crow[c]])
    base: dict[str, float] = {}
    chunks_of: dict[str, list[str]] = {}
    for c, sc in sorted(chunk_score.items(), key=lambda kv: (-kv[1], kv[0])):
        base.setdefault(lx.cdoc[c], sc)
        chunks_of.setdefault(lx.cdoc[c], []).append(c)
    code = lx.doc_code
    idf = [(np.log(len(lx.sids) / max(1, len(rows))), set(lx.sdoc_code[rows].tolist()))
           for rows in (np.unique(lx.MT[cols].indices) for _, cols in kws)]
    total = sum(i for i, _ in idf)
    for d in base:
        base[d] += _KEYWORD_WEIGHT * sum(i for i, c in idf if code.get(d) in c) / total if total else 0.0
    ranked = sorted(base, key=lambda d: (-base[d], d))
    # each first document's best one-hop path (Eq. 5, 7) to another retrieved document through a specific entity
    w = np.exp(sims)
    specific = (lx.edeg <= max_statements).astype(np.float32)
    in_pool = np.isin(lx.sdoc_code, [code.get(d, -2) for d in base])
    best: dict[str, Hop] = {}
    for d in ranked[:_HOP_FROM]:
        xs = np.flatnonzero(lx.sdoc_code == code.get(d, -2))
        links = (lx.M[xs].multiply(specific[None, :]).tocsr() @ lx.MT).tocoo()
        x, y = xs[links.row], links.col
        keep = in_pool[y] & (lx.sdoc_code[y] != code.get(d, -2))
        x, y = x[keep], y[keep]
        if len(x):
            ps = (w[x] * sims[x] + w[y] * sims[y]) / np.sqrt(
                w[x] ** 2 + w[y] ** 2 + 2 * w[x] * w[y] * np.einsum("ij,ij->i", lx.E[x], lx.E[y]))
            i = int(np.lexsort((y, x, -ps))[0])
            best[d] = _hop(lx, w, sims, int(x[i]), int(y[i]))
    out: list[tuple[str, float, list[str]]] = [(d, round(base[d], 4), chunks_of[d]) for d in ranked[:_HOP_FROM]]
    hops: list[Hop] = []
    for d in ranked[:_HOP_FROM]:
        to = lx.sdoc[best[d].dst] if d in best else None
        if to is not None and to not in {o[0] for o in out}:
            out.append((to, round(base[d], 4), chunks_of.get(to, [])))  # ranked with the document it is reached from
            hops.append(best[d])
    out += [(d, round(base[d], 4), chunks_of[d]) for d in ranked[_HOP_FROM:] if d not in {o[0] for o in out}]
    return out[:limit], hops


# -- the strategies ----------------------------------------------------------------------------------------------------
class _HLG:
    name = ""
    label = ""
    description = ""
    topics = False  # TopicGraphRAG: topics are the vector entry
    chunks = False  # chunk-based variant: chunks are the context

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        # many small matrix products: OpenBLAS threads cost more than they give there (10x on a busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._retrieve(res, question, llm)

    def _retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None) -> Retrieval:
        cfg = res.settings.retrieval.hlg
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        lx = lexicon(res)
        t.lap("load_lexicon")
        q = _unit(np.asarray(res.embed_query(question))[None])[0]
        sims = _cos(lx.E, q)
        t.lap("embed_query")
        if not lx.sids:
            return r
        kws = keywords(res, lx, question, llm)
        s_kw = keyword_statements(lx, kws, sims, cfg.keyword_k)
        t.lap("keyword_retrieval")
        topic_hits: list[tuple[str, float]] = []
        if self.topics:
            tsims = _cos(lx.T, q)
            topic_hits = [(lx.tids[i], float(tsims[i])) for i in _top(tsims, cfg.topic_k)]
            s_vss = np.array([s for tid, _ in topic_hits for s in lx.tstmts.get(tid, [])], dtype=np.int64)
        else:
            s_vss = _top(sims, cfg.statement_k)
        s_init = np.array(list(dict.fromkeys(s_vss.tolist() + s_kw.tolist())), dtype=np.int64)
        t.lap("vector_search")
        beam = beam_search(q, lx.E, lx.nbr, s_init, cfg.beam_width, cfg.depth)
        t.lap("beam_search")
        csims = _cos(lx.C, q)
        score = rerank_scores(lx, sims, csims, cfg.rerank)
        final = np.unique(np.concatenate([p.ravel() for p in beam.paths]))
        final = final[np.lexsort((final, -sims[final], -score[final]))]
        if llm is not None:
            final = llm_rerank(llm, question, lx, final, cfg.llm_rerank_k)
            r.trace["llm"] = {"model": llm.model, "reranked": int(min(cfg.llm_rerank_k, len(final)))}
        t.lap("rerank")
        cut = similarity_cutoff(cfg.diversity_threshold)
        nodes: dict[str, Node] = {}
        if self.chunks:  # the reranked statements' chunks, first seen first
            cscore: dict[str, float] = {}
            for s in final:
                for c in lx.schunks[s]:
                    cscore.setdefault(c, float(score[s]))
                if len(cscore) >= 4 * cfg.top_k:
                    break
            nodes = res.store.nodes_by_id(res.ws.id, list(cscore))
            cids = [c for c in cscore if c in nodes]
            kept_chunks = [cids[i] for i in diversity_filter([nodes[c].text for c in cids], cut)][: cfg.top_k]
            tracer = {c: int(s) for s in final[::-1] for c in lx.schunks[s]}  # a chunk's best statement
            kept = [tracer[c] for c in kept_chunks]
            items = [(c, "chunk", cscore[c], [lx.cdoc[c]] if c in lx.cdoc else []) for c in kept_chunks]
        else:
            pool = final[: 4 * cfg.top_k]
            kept = [int(pool[i]) for i in diversity_filter([lx.stext[s] for s in pool], cut)][: cfg.top_k]
            kept_chunks = []
            items = [(lx.sids[s], "statement", float(score[s]), [lx.sdoc[s]] if lx.sdoc[s] else []) for s in kept]
        t.lap("diversity")
        docs, src_hops = rank_documents(lx, final, sims, csims, kws, cfg.bridge_max_statements,
                                        res.settings.retrieval.max_sources)
        for doc, sc, chunks in docs:
            ext, title = lx.docs.get(doc, (None, doc))
            r.sources.append(Source(doc, ext, title, sc, chunks))
        t.lap("rank_sources")
        hops = src_hops + self._kept_hops(lx, beam, sims, kept, cfg.top_k)
        nodes = self._sections(res, lx, r, items, kept, hops, topic_hits, score, cfg.top_k, nodes)
        self._path(lx, r, kws, topic_hits, kept, kept_chunks, set(s_init.tolist()), hops,
                   {i: n.title for i, n in nodes.items()})
        by_id = {p.id: p for p in r.path_nodes if p.kind == "entity" and p.id not in nodes}  # keyword entities
        for i, n in res.store.nodes_by_id(res.ws.id, list(by_id)).items():
            by_id[i].label = n.title[:80]
        t.lap("assemble")
        r.trace["counts"] = {"keywords": len(kws), "keyword_statements": len(s_kw), "vector_statements": len(s_vss),
                             "topics": len(topic_hits), "start_statements": len(s_init),
                             "beam_paths": int(sum(len(p) for p in beam.paths[1:])), "beam_depth": len(beam.paths) - 1,
                             "final_statements": len(final), "source_hops": len(src_hops),
                             **{k: len(v) for k, v in r.sections.items()}, "sources": len(r.sources)}
        return r

    @staticmethod
    def _kept_hops(lx: Lexicon, beam: Beam, sims: np.ndarray, kept: list[int], k: int) -> list[Hop]:
        """The hops of the k best beam paths through a kept statement."""
        best: list[tuple[float, tuple[int, ...]]] = []
        for paths, scores in zip(beam.paths[1:], beam.scores[1:]):
            hit = np.isin(paths, kept).any(axis=1)
            best += [(float(sc), tuple(int(x) for x in p)) for p, sc in zip(paths[hit], scores[hit])]
        w = np.exp(sims)
        seen: set[tuple[int, int]] = set()
        out: list[Hop] = []
        for _, p in sorted(set(best), key=lambda b: (-b[0], b[1]))[:k]:
            for x, y in pairwise(p):
                if (x, y) not in seen:
                    seen.add((x, y))
                    out.append(_hop(lx, w, sims, x, y))
        return out

    def _sections(self, res, lx: Lexicon, r: Retrieval, items, kept, hops, topic_hits, score, k, nodes) -> dict:
        bridge: dict[str, float] = {}
        backing: dict[str, list[str]] = {}  # the documents of the hops' statements
        for h in hops:
            ents = h.entities[:2]
            for i in ents + [f for f in lx.sfacts.get(h.src, []) + lx.sfacts.get(h.dst, [])
                             if set(lx.fact_ends.get(f, ())) & set(ents)]:
                bridge[i] = max(bridge.get(i, -1.0), h.score)
                backing[i] = list(dict.fromkeys(backing.get(i, []) + [d for d in (lx.sdoc[h.src], lx.sdoc[h.dst]) if d]))
        bridge_ids = sorted(bridge, key=lambda i: (-bridge[i], i))[: 2 * k]
        if self.topics:
            glob = topic_hits[:k]
        else:
            tscore: dict[str, float] = {}
            for s in kept:
                for tid in lx.stopics.get(s, []):
                    tscore[tid] = max(tscore.get(tid, -1.0), float(score[s]))
            glob = sorted(tscore.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        nodes = dict(nodes) | res.store.nodes_by_id(res.ws.id, [i for i, *_ in items if i not in nodes] + bridge_ids
                                                    + [tid for tid, _ in glob])
        for i, kind, sc, docs in items:
            if i in nodes:
                r.sections["local"].append(ContextItem(i, kind, nodes[i].title, nodes[i].text, round(sc, 4),
                                                       documents=docs))
        for i in bridge_ids:
            if i in nodes:
                n = nodes[i]
                r.sections["bridge"].append(ContextItem(i, n.kind, n.title, n.text, round(bridge[i], 4),
                                                        n.layer if n.kind == "entity" else None, backing[i]))
        for tid, sc in glob:
            if tid in nodes:
                n = nodes[tid]
                r.sections["global"].append(ContextItem(tid, "topic", n.title, n.text, round(sc, 4),
                                                        documents=[n.document_id] if n.document_id else []))
        return nodes

    def _path(self, lx: Lexicon, r: Retrieval, kws, topic_hits, kept, kept_chunks, starts, hops, labels) -> None:
        steps: dict[str, PathStep] = {}
        edges: dict[frozenset, PathEdge] = {}

        def node(i: str, kind: str, role: str, label: str) -> None:
            steps.setdefault(i, PathStep(i, kind, role, (label or i)[:80]))

        def edge(a: str, b: str, kind: str, role: str) -> None:
            if a in steps and b in steps:
                edges.setdefault(frozenset((a, b)), PathEdge(a, b, kind, role))

        on_hops = [s for h in hops for s in (h.src, h.dst)]
        shown = list(dict.fromkeys(on_hops + kept))
        for s in shown:
            role = "beam" if s in on_hops else ("entry" if s in starts else "result")
            node(lx.sids[s], "statement", role, lx.stext[s])
        for h in hops:
            for e in h.entities[:2]:
                node(e, "entity", "beam", labels.get(e, e))
                edge(lx.sids[h.src], e, "mentions", "beam")
                edge(lx.sids[h.dst], e, "mentions", "beam")
        kw_ents = {lx.eids[c] for _, cols in kws for c in cols}
        for s in shown:  # the keyword entities a shown statement mentions
            for e in (lx.eids[c] for c in lx.M[s].indices if lx.eids[c] in kw_ents):
                node(e, "entity", "entry", labels.get(e, e))
                edge(lx.sids[s], e, "mentions", "entry")
        shown_set = set(shown)
        for tid in ([t for t, _ in topic_hits] if self.topics else [i.id for i in r.sections["global"]]):
            members = [s for s in lx.tstmts.get(tid, []) if s in shown_set]
            if members:
                node(tid, "topic", "entry" if self.topics else "result", labels.get(tid, tid))
                for s in members:
                    edge(lx.sids[s], tid, "in_topic", "entry" if self.topics else "membership")
        for c in kept_chunks:
            node(c, "chunk", "chunk", labels.get(c, c))
            for s in kept:
                if c in lx.schunks[s]:
                    edge(lx.sids[s], c, "derived_from", "chunk")
        r.path_nodes = list(steps.values())
        r.path_edges = list(edges.values())


_DESCRIPTION = ("local: the {unit}, after keyword + vector entry ({entry}), beam search over shared entities, rerank "
                "and the TF-IDF diversity filter; bridge: the entities and facts shared along the beam hops used; "
                "global: {glob}.")


@register
class StatementGraphRAG(_HLG):
    name = "hlg-statement"
    label = "HLG StatementGraphRAG"
    description = _DESCRIPTION.format(unit="top statements", entry="the nearest statements",
                                      glob="the topics of the kept statements")


@register
class TopicGraphRAG(_HLG):
    name = "hlg-topic"
    label = "HLG TopicGraphRAG"
    description = _DESCRIPTION.format(unit="top statements", entry="the nearest topics' statements",
                                      glob="the topics nearest to the question")
    topics = True


@register
class StatementGraphRAGChunks(_HLG):
    name = "hlg-statement-chunk"
    label = "HLG StatementGraphRAG (chunk-based)"
    description = _DESCRIPTION.format(unit="chunks behind the top statements", entry="the nearest statements",
                                      glob="the topics of the statements behind the chunks")
    chunks = True


@register
class TopicGraphRAGChunks(_HLG):
    name = "hlg-topic-chunk"
    label = "HLG TopicGraphRAG (chunk-based)"
    description = _DESCRIPTION.format(unit="chunks behind the top statements", entry="the nearest topics' statements",
                                      glob="the topics nearest to the question")
    topics = True
    chunks = True
