"""Issue 39 §3: Quality's reference lines and plain readings (core/quality/readings.py): each metric's verdict
against its good and poor lines, coherence's lines from the level's own chance value, and one line per method."""

from __future__ import annotations

import math

import pytest

from core.config import QualitySettings
from core.quality.metrics import chance_coherence
from core.quality.readings import FAIR, GOOD, NONE, POOR, coherence_at, reading, references

CFG = QualitySettings()
FIG = {"communities": 40.0, "modularity": 0.71, "coverage": 0.8, "conductance_mean": 0.2, "coherence_mean": 0.8,
       "calinski_harabasz": 12.0, "cluster_sparsity": 0.97, "singleton_share": 0.12, "tiny_share": 0.25,
       "pairwise_cosine": 0.2, "size_median": 5.0}


def test_every_shown_metric_has_a_reference_with_its_source():
    refs = references(FIG, CFG)
    assert set(refs) == {"modularity", "coverage", "conductance_mean", "coherence_mean", "calinski_harabasz",
                         "cluster_sparsity", "singleton_share", "tiny_share"}
    assert "Newman" in refs["modularity"].source and refs["modularity"].good == 0.3
    assert "rule of thumb" in refs["singleton_share"].source and "rule of thumb" in refs["coverage"].source
    assert refs["conductance_mean"].poor == CFG.weak_conductance and "weak_conductance" in refs["conductance_mean"].source
    assert refs["cluster_sparsity"].good is None and refs["cluster_sparsity"].poor is None


@pytest.mark.parametrize(("key", "value", "verdict"), [
    ("modularity", 0.71, GOOD), ("modularity", 0.3, GOOD), ("modularity", 0.12, POOR), ("modularity", -0.1, POOR),
    ("coverage", 0.6, GOOD), ("coverage", 0.4, FAIR), ("coverage", 0.1, POOR),
    ("conductance_mean", 0.1, GOOD), ("conductance_mean", 0.4, FAIR), ("conductance_mean", 0.5, POOR),
    ("singleton_share", 0.12, GOOD), ("singleton_share", 0.3, FAIR), ("singleton_share", 0.8, POOR),
    ("tiny_share", 0.7, POOR), ("calinski_harabasz", 0.8, POOR), ("calinski_harabasz", 30.0, NONE),
    ("cluster_sparsity", 0.99, NONE), ("modularity", math.nan, NONE), ("modularity", None, NONE)])
def test_verdicts(key, value, verdict):
    assert references(FIG, CFG)[key].verdict(value) == verdict


def test_coherence_lines_come_from_the_level_itself():
    ref = references(FIG, CFG)["coherence_mean"]
    chance = float(chance_coherence([5.0], 0.2)[0])
    assert ref.poor == pytest.approx(chance), "poor: what a random group of the median size has"
    assert ref.good == pytest.approx(coherence_at(0.3, 5, 0.2)) and ref.good > ref.poor
    assert coherence_at(0.0, 5, 0.2) == pytest.approx(chance) and coherence_at(1.0, 5, 0.2) == pytest.approx(1.0)
    assert ref.verdict(0.9) == GOOD and ref.verdict(chance - 0.01) == POOR
    no_vectors = references({**FIG, "pairwise_cosine": math.nan}, CFG)["coherence_mean"]
    assert no_vectors.verdict(0.5) == NONE


def test_reading_is_one_plain_line():
    assert reading("HiRAG", FIG, CFG) == "HiRAG: modularity 0.71, very well separated; 12 % singletons, fine."
    weak = {**FIG, "modularity": 0.12, "singleton_share": 0.64, "conductance_mean": 0.7, "coherence_mean": 0.3}
    line = reading("Leiden (GraphRAG)", weak, CFG)
    assert line == ("Leiden (GraphRAG): modularity 0.12, weakly separated: little more structure than chance; "
                    "64 % singletons, too many: most communities are one entity; mean conductance 0.70: most of a "
                    "community's links leave it; mean coherence 0.30: members no more alike than random entities.")
    assert reading("X", {**FIG, "modularity": 0.45, "singleton_share": 0.3}, CFG) == \
        "X: modularity 0.45, well separated; 30 % singletons, many."
    assert reading("X", {**FIG, "modularity": math.nan}, CFG).startswith("X: no links to measure separation;")
    assert reading("X", {"communities": 0.0}, CFG) == "X: no communities at this level."
