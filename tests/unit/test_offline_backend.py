"""The offline backend's extractive answers and reports."""

from __future__ import annotations

from core.backends.offline import OfflineBackend
from core.protocols import ContextBlock


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
    local, bridge, global_ = text.split("\n")
    assert local == "Local (from “Tamsin Achterberg”): In 1998 the keeper Tamsin Achterberg restored the Fresnel lens. [1]"
    assert bridge.startswith("Bridge (from “Tamsin Achterberg — learned at — Pellow Glassworks”): She learned")
    assert bridge.endswith("[2]") and global_ == "Global: nothing at this level."


def test_answer_leads_each_level_with_its_own_best_evidence():
    """Two strategies that found different things answer differently: each line is its level's best sentence."""
    q = "Which university trained the engineer who designed the sluice gates?"
    report = "[3] Halden Barrier engineers: The barrier's engineers mostly trained at the University of Carrow."
    a = OfflineBackend().answer(q, ContextBlock(
        local=["[1] Amara Okafor: Amara Okafor designed the sluice gates of the Halden Barrier."],
        bridge=["[2] Amara Okafor — studied at — University of Carrow: Amara Okafor trained as an engineer at the "
                "University of Carrow."], global_=[report]))
    b = OfflineBackend().answer(q, ContextBlock(
        local=["[1] # How the Gates Were Designed The design team chose rising sector gates for the sluice gates.",
               "[1] # How the Gates Were Designed The design team chose rising sector gates for the sluic…"]))
    assert a != b
    assert [line.split(" ")[0].rstrip(":") for line in a.split("\n")] == ["Local", "Bridge", "Global"]
    assert "University of Carrow. [2]" in a and "[3]" in a
    assert b.split("\n")[1:] == ["Bridge: nothing at this level.", "Global: nothing at this level."]
    assert "#" not in b and b.count("rising sector gates") == 1  # headings dropped, a cut copy said once


def test_a_level_without_the_question_words_says_so():
    text = OfflineBackend().answer("Who restored the Fresnel lens?", ContextBlock(
        local=["[1] Tamsin Achterberg: In 1998 the keeper Tamsin Achterberg restored the Fresnel lens."],
        global_=["[2] Saltmere: The town holds a summer festival on its harbour wall."]))
    assert text.split("\n")[2] == "Global: 1 item(s), none on the question's words."


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
