"""HLG's statement diversity filter (hierarchical-lexical-graph.txt §4.3.1): drop near-duplicates of better items.

1. Preprocessing: numeric tokens are standardized (`NUM_<n>`, `FLOAT_<x.y>`, commas in numbers dropped, so
   "1,200" and "1200" are the same token), stop words and punctuation are removed, words are lower-cased and
   lemmatized. The paper (and its published code) lemmatizes with spaCy, which is not installed here: a small
   rule-based lemmatizer stands in (plural and third-person "-s", "-ies" -> "-y", "-ches/-shes/-xes/-sses" ->
   stem), which is what matters for spotting the same statement worded twice.
2. Similarity: TF-IDF vectors of the preprocessed texts (fitted on the items being filtered, as the published code
   does: scikit-learn's TfidfVectorizer defaults, smooth idf, l2 norm) and their cosine similarity.
3. Filtering: the paper's diversity threshold τ is "1 - (similarity threshold)": with τ = 0.5 % an item is a
   near-duplicate when its cosine to a better item is at least 0.995. Items arrive best first; an item is kept
   unless its cosine to an already kept item is >= 1 - τ (the paper's Eq. writes ">"; the equality case is a
   duplicate here, so identical texts are dropped even at τ = 0). Order is preserved.
"""

from __future__ import annotations

import re

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from core.extract.text import STOPWORDS

_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_TOLERANCE = 1e-9  # a cosine equal to the threshold up to rounding counts as reaching it


def lemma(word: str) -> str:
    """A light English lemma of a lower-case word (plural / third-person -s forms)."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
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


def tfidf_cosine(texts: list[str]) -> np.ndarray:
    """Pairwise cosine similarity of the TF-IDF vectors of the preprocessed texts (n x n)."""
    docs = [preprocess(t) for t in texts]
    if not any(docs):
        return np.zeros((len(texts), len(texts)))
    vec = TfidfVectorizer(lowercase=False, token_pattern=r"\S+")
    m = vec.fit_transform(docs)
    return np.asarray((m @ m.T).todense())


def diversity_filter(texts: list[str], max_similarity: float) -> list[int]:
    """Indices of the texts kept, in order: texts come best first; one whose TF-IDF cosine to an already kept
    text is >= max_similarity (= 1 - τ) is dropped as a near-duplicate."""
    if len(texts) <= 1:
        return list(range(len(texts)))
    sim = tfidf_cosine(texts)  # an empty text has a zero vector: cosine 0 to everything
    kept: list[int] = []
    for i in range(len(texts)):
        if not kept or float(sim[i, kept].max()) < max_similarity - _TOLERANCE:
            kept.append(i)
    return kept


def similarity_cutoff(tau: float) -> float:
    """The cosine at or above which two items are near-duplicates, for the paper's diversity threshold τ."""
    return 1.0 - float(tau)
