"""Lexical matching for retrieval: an Okapi BM25 index over a set of texts, and exact name matching of graph
names (entity and overview names) inside a question.

BM25 (Robertson & Zaragoza): score(q, d) = Σ_t idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)), over lower-cased content words (stop words removed).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from core.text import content_words, norm_key


@dataclass
class BM25:
    ids: list[str]
    vocab: dict[str, int]
    idf: np.ndarray
    weights: sp.csc_matrix  # term x doc saturated tf weights (already length-normalized)

    @classmethod
    def build(cls, ids: list[str], texts: list[str], k1: float = 1.5, b: float = 0.75) -> "BM25":
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        lengths = np.zeros(len(texts))
        for j, text in enumerate(texts):
            toks = content_words(text)
            lengths[j] = len(toks)
            tf: dict[int, int] = defaultdict(int)
            for t in toks:
                tf[vocab.setdefault(t, len(vocab))] += 1
            for term, n in tf.items():
                rows.append(term)
                cols.append(j)
                vals.append(n)
        n_docs = max(len(texts), 1)
        avgdl = float(lengths.mean()) if len(texts) else 1.0
        tf_m = sp.csc_matrix((np.array(vals, dtype=np.float64), (rows, cols)), shape=(len(vocab), len(texts)))
        df = np.diff(sp.csr_matrix(tf_m).indptr)
        idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        coo = tf_m.tocoo()
        norm = k1 * (1 - b + b * lengths[coo.col] / max(avgdl, 1e-9))
        sat = coo.data * (k1 + 1) / (coo.data + norm)
        weights = sp.csr_matrix((sat, (coo.row, coo.col)), shape=tf_m.shape)
        return cls(ids=list(ids), vocab=vocab, idf=idf, weights=weights)

    def scores(self, query: str) -> np.ndarray:
        terms = [self.vocab[t] for t in dict.fromkeys(content_words(query)) if t in self.vocab]
        if not terms:
            return np.zeros(len(self.ids))
        return np.asarray(self.weights[terms].T @ self.idf[terms]).ravel()

    def top(self, query: str, k: int) -> list[tuple[str, float]]:
        s = self.scores(query)
        if not s.any():
            return []
        k = min(k, int((s > 0).sum()))
        idx = np.argpartition(-s, k - 1)[:k]
        idx = idx[np.lexsort((idx, -s[idx]))]
        return [(self.ids[i], float(s[i])) for i in idx]


class NameIndex:
    """Normalized names (entity names, overview titles) -> node ids, matched as whole word n-grams of a text."""

    def __init__(self, names: dict[str, list[str]], max_words: int = 8):
        self.names = names
        self.max_words = max_words

    def find(self, text: str) -> list[tuple[str, list[str]]]:
        """(name, node ids) of every indexed name that occurs in `text` as whole words, longest first; a name
        inside a longer matched name is not reported again ("new york" within "new york city")."""
        toks = norm_key(text).split()
        spans: list[tuple[int, int, str]] = []
        for n in range(min(self.max_words, len(toks)), 0, -1):
            for i in range(len(toks) - n + 1):
                key = " ".join(toks[i:i + n])
                if key in self.names and not any(a <= i and i + n <= b for a, b, _ in spans):
                    spans.append((i, i + n, key))
        return [(key, self.names[key]) for _, _, key in spans]

    def lookup(self, names: list[str]) -> list[tuple[str, list[str]]]:
        """(name, node ids) of each given name that is indexed as a whole, after normalization (a model's list of
        the question's entities), in the given order, each once."""
        out: dict[str, list[str]] = {}
        for n in names:
            key = norm_key(n)
            if key in self.names and key not in out:
                out[key] = self.names[key]
        return list(out.items())
