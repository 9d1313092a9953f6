"""HLG entry points (hierarchical-lexical-graph.txt §4.1 Steps 1-2, Eq. 1-4; §4.2 top-down and bottom-up).

1. Keywords K (Eq. 1). The paper asks an LLM for keywords and synonyms and matches them exactly to entity names
   (its published code compares normalized search strings). Offline, the question's word n-grams (its content
   words and noun phrases) are the candidate keywords, matched exactly against normalized entity names by
   `res.names.find`, longest first; a name made only of stop words ("a", "the") is not a keyword. Asked with
   Ollama, the keywords, synonyms and entities come from the model (`query_terms`), matched whole.
2. Keyword retrieval (Eq. 2-3): Score_kw(s) = |K_s|, the number of keywords whose entities s mentions, ties by
   cos(e_Q, e_s); the top `keyword_k` are S_kw.
3. StatementGraphRAG vector search (Eq. 4): the `statement_k` statements nearest to the question (exact cosine) are
   S_vss. TopicGraphRAG top-down (§4.2 (1), §6.3.2): the `topic_k` topics nearest to the question give all their
   statements. S_init = S_kw ∪ S_vss.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.retrieval.base import Resources
from core.retrieval.hlg.graph import Lexicon, cosines
from core.text import STOPWORDS


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


def top_indices(sims: np.ndarray, k: int) -> np.ndarray:
    """The k best indices of sims, best first (ties by index)."""
    k = min(k, len(sims))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-sims, k - 1)[:k]
    return idx[np.lexsort((idx, -sims[idx]))]


@dataclass
class Entry:
    keywords: list[tuple[str, np.ndarray]]
    s_kw: np.ndarray  # keyword statements (Eq. 3)
    s_vss: np.ndarray  # nearest statements (Eq. 4), or the statements of the nearest topics (TopicGraphRAG)
    topics: list[tuple[str, float]]  # TopicGraphRAG: the nearest topics with their cosine
    s_init: np.ndarray  # S_kw ∪ S_vss, vector entries first


def entry_points(res: Resources, lx: Lexicon, question: str, q: np.ndarray, sims: np.ndarray, cfg, topics: bool,
                 llm=None) -> Entry:
    """S_init of StatementGraphRAG (topics=False) or TopicGraphRAG (topics=True)."""
    kws = keywords(res, lx, question, llm)
    s_kw = keyword_statements(lx, kws, sims, cfg.keyword_k)
    hits: list[tuple[str, float]] = []
    if topics:
        tsims = cosines(lx.T, q)
        hits = [(lx.tids[i], float(tsims[i])) for i in top_indices(tsims, cfg.topic_k)]
        s_vss = np.array([s for tid, _ in hits for s in lx.tstmts.get(tid, [])], dtype=np.int64)
    else:
        s_vss = top_indices(sims, cfg.statement_k)
    s_init = np.array(list(dict.fromkeys(s_vss.tolist() + s_kw.tolist())), dtype=np.int64)
    return Entry(kws, s_kw, s_vss, hits, s_init)
