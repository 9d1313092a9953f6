"""HLG's statement diversity filter (hierarchical-lexical-graph.txt §4.3.1): drop near-duplicates of better items.

1. Preprocessing: numeric tokens are standardized (`NUM_<n>`, `FLOAT_<x.y>`, commas in numbers dropped, so
   "1,200" and "1200" are the same token), stop words and punctuation are removed, words are lower-cased and
   lemmatized. The paper (and its published code) lemmatizes with spaCy; here with spaCy's English rule lemmatizer
   tables from the installed en_core_web_sm (`core.extract.spacy_nlp.lemma_tables`), applied per word type without
   a tagger (`lemma`: exceptions, then suffix rules whose result is a known lemma, as noun, then verb, then
   adjective), each word type once (cached). Measured on 18,824 content tokens of 1,500 hotpotqa statements, it
   agrees with spaCy's lemma in context (tagger + lemmatizer, the published code's way) on 94.0 % of tokens, the
   former suffix rules on 84.7 % (docs/BENCHMARKS.md, issue 26); running the tagger itself costs ~10 s per 3,000
   statements, the per-type tables milliseconds. When spaCy or the model cannot load, the small suffix rules stand in
   (`rule_lemma`: plural and third-person "-s", "-ies" -> "-y", "-ches/-shes/-xes/-sses" -> stem).
2. Similarity: TF-IDF vectors of the preprocessed texts (scikit-learn's TfidfVectorizer defaults, smooth idf, l2
   norm) and their cosine similarity. `diversity_filter` fits them on the items being filtered, as the published
   code does; HLG retrieval fits them once on all the statements (or chunks) of the workspace and filters the
   ranked candidates lazily, until its context is full (`iter_diverse`).
3. Filtering: the paper's diversity threshold τ is "1 - (similarity threshold)": with τ = 0.5 % an item is a
   near-duplicate when its cosine to a better item is at least 0.995. Items arrive best first; an item is kept
   unless its cosine to an already kept item is >= 1 - τ (the paper's Eq. writes ">"; the equality case is a
   duplicate here, so identical texts are dropped even at τ = 0). Order is preserved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from core.extract.spacy_nlp import lemma_tables
from core.text import STOPWORDS

_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_TOLERANCE = 1e-9  # a cosine equal to the threshold up to rounding counts as reaching it
_BLOCK = 64  # rows compared per sparse product in iter_diverse (speed only)


def rule_lemma(word: str) -> str:
    """A light English lemma of a lower-case word (plural / third-person -s forms): the fallback without spaCy."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


@lru_cache(maxsize=1 << 18)
def lemma(word: str) -> str:
    """The lemma of a lower-case word by spaCy's English rule tables (noun, then verb, then adjective: an exception,
    else the first suffix rule giving a known lemma; a word that is itself a known noun stays), or `rule_lemma`
    without spaCy. Computed once per word type."""
    tables = lemma_tables()
    if tables is None:
        return rule_lemma(word)
    for pos in ("noun", "verb", "adj"):
        exc, rules, index = tables[pos]
        if word in exc:
            return exc[word][0]
        for old, new in rules:
            if word.endswith(old):
                form = word[:len(word) - len(old)] + new
                if form and form in index:
                    return form
        if pos == "noun" and word in index:
            return word
    return word


def preprocess(text: str) -> str:
    """Standardized numbers, no stop words or punctuation, lower-cased lemmas, space separated."""
    out: list[str] = []
    for tok in _TOKEN.findall(text or ""):
        if tok[0].isdigit():
            num = tok.replace(",", "").rstrip(".")
            out.append(f"FLOAT_{num}" if "." in num else f"NUM_{num}")
            continue
        w = tok.lower().replace("’", "'")
        w = re.sub(r"'s$", "", w)
        if w in STOPWORDS or len(w) < 2:
            continue
        out.append(lemma(w))
    return " ".join(out)


def tfidf_fit(prepared: list[str]):
    """(the fitted vectorizer, TF-IDF rows) of already preprocessed texts (scikit-learn defaults: smooth idf, l2
    norm); None when none has a term."""
    if not any(prepared):
        return None
    vec = TfidfVectorizer(lowercase=False, token_pattern=r"\S+")
    return vec, vec.fit_transform(prepared).tocsr()


def tfidf_matrix(prepared: list[str]):
    """TF-IDF rows (`tfidf_fit`) of already preprocessed texts, fitted on them; None when none has a term."""
    fit = tfidf_fit(prepared)
    return None if fit is None else fit[1]


def tfidf_cosine(texts: list[str]) -> np.ndarray:
    """Pairwise cosine similarity of the TF-IDF vectors of the preprocessed texts (n x n)."""
    m = tfidf_matrix([preprocess(t) for t in texts])
    if m is None:
        return np.zeros((len(texts), len(texts)))
    return np.asarray((m @ m.T).todense())


def iter_diverse(m, max_similarity: float) -> Iterator[int]:
    """Indices of the kept rows, in order, lazily (a caller filling a budget stops early): m holds the l2-normalized
    TF-IDF rows of the items, best first (None: no item has a term); a row whose cosine to an already kept row is
    >= max_similarity (= 1 - τ) is dropped as a near-duplicate. Rows are compared a block at a time (one sparse
    product per block; the result does not depend on the block size)."""
    if m is None:  # no terms at all: zero vectors, cosine 0 to everything
        return
    cut = max_similarity - _TOLERANCE
    kept: list[int] = []
    for b0 in range(0, m.shape[0], _BLOCK):
        rows = m[b0:b0 + _BLOCK]
        before = (rows @ m[kept].T).toarray() if kept else np.zeros((rows.shape[0], 0))
        within = (rows @ rows.T).toarray()
        new: list[int] = []
        for j in range(rows.shape[0]):
            if before.shape[1] and before[j].max() >= cut or new and within[j, new].max() >= cut:
                continue
            new.append(j)
            yield b0 + j
        kept += [b0 + j for j in new]


def diversity_filter(texts: list[str], max_similarity: float) -> list[int]:
    """Indices of the texts kept, in order: texts come best first; one whose TF-IDF cosine to an already kept
    text is >= max_similarity (= 1 - τ) is dropped as a near-duplicate."""
    if len(texts) <= 1:
        return list(range(len(texts)))
    m = tfidf_matrix([preprocess(t) for t in texts])
    return list(range(len(texts))) if m is None else list(iter_diverse(m, max_similarity))


def similarity_cutoff(tau: float) -> float:
    """The cosine at or above which two items are near-duplicates, for the paper's diversity threshold τ."""
    return 1.0 - float(tau)
