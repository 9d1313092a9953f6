"""The offline backend's extractive answers and reports."""

from __future__ import annotations

from core.backends.base import ContextBlock
from core.backends.offline import OfflineBackend


def test_answer_keeps_citations_and_says_each_sentence_once():
    ctx = ContextBlock(
        local=["[1] Tamsin Achterberg: In 1998 the keeper Tamsin Achterberg restored the Fresnel lens.",
               "[1] Fresnel: In 1998 the keeper Tamsin Achterberg restored the Fresnel lens."],
        bridge=["[2] Tamsin Achterberg — learned at — Pellow Glassworks: She learned lens grinding at Pellow Glassworks."],
    )
    text = OfflineBackend().answer("Who restored the Fresnel lens, and where did she learn lens grinding?", ctx)
    assert text.count("restored the Fresnel lens") == 1
    assert "[1]" in text and "[2]" in text and "Pellow Glassworks" in text
    assert "Fresnel:" not in text and "Tamsin Achterberg:" not in text  # item labels are not sentences


def test_answer_without_support_says_so():
    text = OfflineBackend().answer("What is the airspeed of a swallow?", ContextBlock(local=["[1] Kelmouth: A town."]))
    assert "does not contain" in text


def test_report_title_from_names_and_summary_from_material():
    rep = OfflineBackend().report("Lena Marsh; Tidewater Bridge; Kelmouth", [
        "Lena Marsh (PERSON): Lena Marsh designed the Tidewater Bridge at Kelmouth in 2009.",
        "Tidewater Bridge (LOCATION): The Tidewater Bridge opened in 2011 and crosses the Salt River.",
        "Lena Marsh — designed — Tidewater Bridge: Lena Marsh designed the Tidewater Bridge at Kelmouth in 2009.",
    ])
    assert rep.title == "Lena Marsh, Tidewater Bridge and Kelmouth"
    assert "Tidewater Bridge" in rep.summary and "(PERSON)" not in rep.summary
    assert rep.findings and all(0 <= f.importance <= 10 for f in rep.findings)
