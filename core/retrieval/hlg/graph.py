"""The lexical graph HLG retrieves over (hierarchical-lexical-graph.txt §3), loaded once per Resources as matrices:
statement vectors, statement x entity `mentions`, statement x statement neighbours (Eq. 5), chunks, topics."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sqlmodel import col, select

from core.algorithms.similarity import dots, row_dots
from core.ingest.tokens import count_tokens
from core.models import Document, Edge, Node
from core.retrieval.base import Resources
from core.retrieval.cache import BuildCache, CacheKey
from core.retrieval.diversity import preprocess, tfidf_fit, tfidf_matrix


def unit_rows(m: np.ndarray) -> np.ndarray:
    """The rows of m scaled to unit length (float32); an empty matrix stays empty."""
    m = np.asarray(m, dtype=np.float32)
    if m.size == 0:
        return np.zeros((len(m), 0), dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def cosines(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cosine of every unit row of m to the unit vector q (float64)."""
    return dots(m, q) if m.shape[1:] == q.shape else np.zeros(len(m))


STATEMENT_TFIDF: CacheKey[tuple | None] = CacheKey("hlg.statement_tfidf")  # (vectorizer, rows), in Lexicon._tfidf
CHUNK_TFIDF: CacheKey[tuple[dict[str, int], sp.csr_matrix | None]] = CacheKey("hlg.chunk_tfidf")


@dataclass
class Lexicon:
    sids: list[str]  # statements with a vector, in the row order of E
    E: np.ndarray  # statement vectors, unit rows
    stext: list[str]
    sdoc: list[str | None]  # the document of the statement's chunk (else its own document id)
    schunks: list[list[str]]  # the chunks a statement was extracted from (`derived_from`)
    srow_chunk: np.ndarray  # statement -> row of its chunk in C (-1: none)
    esc: np.ndarray  # statement vector · its chunk's vector
    C: np.ndarray  # chunk vectors, unit rows
    cdoc: dict[str, str]  # chunk -> document
    ctext: dict[str, str]  # chunk -> text
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
    _tokens: dict[int, int] = field(default_factory=dict, repr=False)  # a count computed twice is the same count
    _tfidf: BuildCache = field(default_factory=BuildCache, repr=False)

    def statement_tokens(self, s: int) -> int:
        """Tokens of statement row s (the bundled MiniLM tokenizer), counted once."""
        n = self._tokens.get(s)
        if n is None:
            n = self._tokens[s] = count_tokens(self.stext[s])
        return n

    def statement_tfidf(self) -> sp.csr_matrix | None:
        """TF-IDF rows of every statement (row order of E) for the diversity filter (§4.3.1), fitted once."""
        fit = self._statement_fit()
        return None if fit is None else fit[1]

    def _statement_fit(self):
        return self._tfidf.get(STATEMENT_TFIDF, lambda: tfidf_fit([preprocess(t) for t in self.stext]))

    def lexical_scores(self, text: str) -> np.ndarray:
        """TF-IDF cosine of every statement (row order of E) to `text`, with the statements' own vocabulary and idf
        (terms the statements never use count for nothing); zeros when there is no term."""
        fit = self._statement_fit()
        if fit is None:
            return np.zeros(len(self.sids))
        vec, rows = fit
        q = vec.transform([preprocess(text)])
        return np.asarray((rows @ q.T).toarray()).ravel().astype(np.float64)

    def chunk_tfidf(self) -> tuple[dict[str, int], sp.csr_matrix | None]:
        """(chunk -> row, TF-IDF rows of every chunk) for the chunk variants' diversity filter, fitted once."""
        def build() -> tuple[dict[str, int], sp.csr_matrix | None]:
            ids = list(self.ctext)
            return {c: i for i, c in enumerate(ids)}, tfidf_matrix([preprocess(self.ctext[c]) for c in ids])

        return self._tfidf.get(CHUNK_TFIDF, build)

    @classmethod
    def load(cls, res: Resources) -> Lexicon:
        ws = res.ws_id
        ids, vecs = res.index.all_vectors("statement")
        srow = {i: r for r, i in enumerate(ids)}
        stext: list[str] = [""] * len(ids)
        sdoc: list[str | None] = [None] * len(ids)
        with res.store.session() as s:
            for sid, text, doc in s.exec(select(Node.id, Node.text, Node.document_id).where(
                    Node.workspace_id == ws, Node.kind == "statement")):
                if sid in srow:
                    stext[srow[sid]], sdoc[srow[sid]] = text, doc
            kinds = dict(s.exec(select(Node.id, Node.kind).where(
                Node.workspace_id == ws, col(Node.kind).in_(("entity", "relationship", "chunk")))).all())
            edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(Edge.workspace_id == ws, col(Edge.kind).in_(
                ("mentions", "in_topic", "derived_from", "subject", "object")))).all()
            crows = s.exec(select(Node.id, Node.document_id, Node.text).where(Node.workspace_id == ws,
                                                                              Node.kind == "chunk")).all()
            docs = {d: (x, t) for d, x, t in s.exec(select(Document.id, Document.external_id, Document.title)
                                                     .where(Document.workspace_id == ws)).all()}
        cdoc = {c: d for c, d, _ in crows if d}
        ctext = {c: t or "" for c, _, t in crows}
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
        E, C = unit_rows(vecs), unit_rows(cvecs)
        srow_chunk = np.array([next((crow[c] for c in cs if c in crow), -1) for cs in schunks], dtype=np.int64)
        has = srow_chunk >= 0
        esc = np.zeros(len(ids), dtype=np.float32)
        esc[has] = row_dots(E[has], C[srow_chunk[has]])
        MT = M.T.tocsr()
        sdoc = [next((cdoc[c] for c in cs if c in cdoc), d) for cs, d in zip(schunks, sdoc)]
        return cls(sids=list(ids), E=E, stext=stext, sdoc=sdoc, schunks=schunks, srow_chunk=srow_chunk, esc=esc,
                   C=C, cdoc=cdoc, ctext=ctext, crow=crow, eids=list(erow), erow=erow, M=M, MT=MT,
                   edeg=np.diff(MT.indptr), nbr=nbr, sfacts=sfacts,
                   fact_ends={f: (a, b) for f, (a, b) in ends.items() if f in kinds},
                   stopics=stopics, tids=list(tids), T=unit_rows(tvecs), tstmts=tstmts, docs=docs)


LEXICON: CacheKey[Lexicon] = CacheKey("hlg.lexicon")


def lexicon(res: Resources) -> Lexicon:
    """The lexicon of this Resources (built once in its cache; a Resources is cached per build version)."""
    return res.cached(LEXICON, lambda: Lexicon.load(res))
