"""HLG's TF-IDF diversity filter (core/retrieval/diversity.py): preprocessing, the threshold's two sides, order."""

from __future__ import annotations

import math

import pytest

from core.config import Settings
from core.retrieval.diversity import (
    diversity_filter,
    preprocess,
    similarity_cutoff,
    tfidf_cosine,
)


def test_preprocess_standardizes_numbers_drops_stop_words_and_lemmatizes():
    out = preprocess("The company reported 1,200 employees and 3.5 billion dollars in 2021; the cities grew.")
    assert out.split() == ["company", "report", "NUM_1200", "employee", "FLOAT_3.5", "billion", "dollar",
                           "NUM_2021", "city", "grow"]
    assert preprocess("1200 Boxes") == preprocess("1,200 boxes")  # same number, same lemma
    assert preprocess("the of and") == ""


def _known_cosine() -> float:
    """TF-IDF cosine of "alpha beta" and "alpha gamma" fitted on these two texts (smooth idf, l2 norm):
    idf(alpha) = ln(3/3) + 1 = 1, idf(beta) = idf(gamma) = ln(3/2) + 1, so cos = 1 / (1 + idf(beta)^2)."""
    idf = math.log(3 / 2) + 1
    return 1 / (1 + idf * idf)


def test_tfidf_cosine_matches_the_formula():
    sim = tfidf_cosine(["alpha beta", "alpha gamma"])
    assert sim[0, 1] == pytest.approx(_known_cosine(), abs=1e-12)
    assert sim[0, 0] == pytest.approx(1.0)


def test_an_item_at_the_threshold_is_dropped_and_one_just_below_it_is_kept():
    texts = ["alpha beta", "alpha gamma"]
    c = _known_cosine()
    assert diversity_filter(texts, c) == [0]  # cosine == threshold: a near-duplicate of the better item
    assert diversity_filter(texts, c + 1e-6) == [0, 1]  # cosine just below the threshold: kept
    assert diversity_filter(texts, c - 1e-6) == [0]


def test_order_is_preserved_and_only_kept_items_remove_others():
    texts = ["Apple sold 1,200 phones in Norway.", "Pears grow in the orchard.", "apple sold 1200 phones in norway",
             "The river floods every spring.", "Pear grows in the orchards!"]
    assert diversity_filter(texts, similarity_cutoff(0.005)) == [0, 1, 3]
    # a chain a ~ b ~ c with a !~ c: b goes (a is kept and better), c stays (its only near-duplicate, b, went)
    chain = ["red green blue", "red green blue yellow orange", "blue yellow orange"]
    sim = tfidf_cosine(chain)
    t = min(sim[0, 1], sim[1, 2])
    assert sim[0, 2] < t
    assert diversity_filter(chain, t) == [0, 2]


def test_edge_cases_and_the_papers_default():
    assert diversity_filter([], 0.5) == []
    assert diversity_filter(["only one"], 0.0) == [0]
    assert diversity_filter(["", "", "words here"], 0.995) == [0, 1, 2]  # empty texts have no terms to match
    assert similarity_cutoff(0.005) == pytest.approx(0.995)
    assert Settings().retrieval.hlg.diversity_threshold == pytest.approx(0.005)  # the paper's tau = 0.5 %


def test_lemmas_come_from_spacys_english_tables():
    from core.extract.spacy_nlp import lemma_tables
    from core.retrieval.diversity import lemma

    assert lemma_tables() is not None  # spaCy and en_core_web_sm are installed (requirements.txt)
    # irregular and past forms the former suffix rules left alone, and -s forms they cut wrongly
    for word, want in (("children", "child"), ("reported", "report"), ("grew", "grow"), ("went", "go"),
                       ("written", "write"), ("series", "series"), ("studies", "study"), ("bus", "bus"),
                       ("mice", "mouse"), ("analyses", "analysis")):
        assert lemma(word) == want, word
    assert preprocess("Children wrote it") == preprocess("a child writes") == "child write"


def test_without_spacy_the_suffix_rules_stand_in(monkeypatch):
    import core.retrieval.diversity as div

    monkeypatch.setattr(div, "lemma_tables", lambda: None)
    div.lemma.cache_clear()
    try:
        assert div.lemma("studies") == "study" and div.lemma("children") == "children"
    finally:
        div.lemma.cache_clear()
