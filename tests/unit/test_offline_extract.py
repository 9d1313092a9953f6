"""The offline extractor: entity spans and types, relationship predicates, statements, determinism, garbage input."""

from __future__ import annotations

import random
import time

import pytest

from core.config import ExtractSettings
from core.extract.offline import entity_type, extract_offline
from core.text import norm_key, split_sentences

TYPES = ExtractSettings().entity_types


def names(text: str, **kw) -> list[str]:
    return [e.name for e in extract_offline(text, TYPES, **kw).entities]


def types(text: str) -> dict[str, str]:
    return {e.name: e.type for e in extract_offline(text, TYPES).entities}


def triples(text: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.predicate, r.target) for r in extract_offline(text, TYPES).relationships]


# ------------------------------------------------------------------------------------------------------ spans
@pytest.mark.parametrize(
    "text,expected",
    [
        ("Amara Okafor studied at the University of Carrow in 1993.", ["Amara Okafor", "University of Carrow"]),
        ("She joined the Department of Civil Engineering last year.", ["Department of Civil Engineering"]),
        ("The Meren River flows past Port Halden.", ["Meren River", "Port Halden"]),
        ("We stop at Port Halden Central every hour.", ["Port Halden Central"]),
        ("He met Ludwig van Beethoven twice.", ["Ludwig van Beethoven"]),
    ],
)
def test_multi_word_names_with_connectors(text, expected):
    assert names(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The University of Carrow trained Amara Okafor.", ["University of Carrow", "Amara Okafor"]),
        ("However, Port Halden grew quickly.", ["Port Halden"]),
        ("In Kelmouth the river floods.", ["Kelmouth"]),
        ("Although Tomas Brandt objected, the plan went ahead.", ["Tomas Brandt"]),
        ("When Lena Marsh arrived, the work began.", ["Lena Marsh"]),
        ("It was opened by Lena Marsh.", ["Lena Marsh"]),
        ("This is a sentence with no names at all.", []),
    ],
)
def test_sentence_initial_function_words_never_start_a_name(text, expected):
    assert names(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("In March Amara Okafor joined Calder Ward Engineering.", ["Amara Okafor", "Calder Ward Engineering"]),
        ("Amara Okafor joined Calder Ward Engineering in March 2001.", ["Amara Okafor", "Calder Ward Engineering"]),
        ("On Monday Ingrid Solberg spoke.", ["Ingrid Solberg"]),
        ("Ingrid Solberg June spoke on Friday.", ["Ingrid Solberg"]),
        ("By December Tollmere had dried out.", ["Tollmere"]),
    ],
)
def test_month_and_day_names_are_not_glued_to_names(text, expected):
    got = names(text)
    assert got == expected
    for n in got:
        for w in ("March", "Monday", "June", "Friday", "December"):
            assert w not in n.split()


def test_markdown_headings_are_ignored():
    text = "# Halden Barrier Overview\n\n## Design Team\n\nThe barrier was designed by Amara Okafor.\n"
    ex = extract_offline(text, TYPES)
    assert [e.name for e in ex.entities] == ["Amara Okafor"]
    assert ex.statements == ["The barrier was designed by Amara Okafor."]
    # a '#' inside a line is not a heading
    assert "Kelmouth" in names("Item #3 was shipped to Kelmouth by rail.")


def test_quoted_titles_are_works():
    ex = extract_offline('He read "Why the Gates Rise" twice before the talk.', TYPES)
    assert [(e.name, e.type) for e in ex.entities] == [("Why the Gates Rise", "WORK")]


def test_possessive_is_stripped():
    assert names("Lena Marsh's bridge opened in 2011.") == ["Lena Marsh"]
    assert norm_key("Lena Marsh's") == norm_key("Lena Marsh") == "lena marsh"
    assert norm_key("The Okoro Institute") == "okoro institute"
    assert norm_key("Café Zürich") == "cafe zurich"


def test_capped_entities_and_relationships():
    text = " ".join(f"Alpha{i} Beta met Gamma{i} Delta." for i in range(60))
    ex = extract_offline(text, TYPES, max_entities=10, max_relationships=7)
    assert len(ex.entities) == 10
    assert len(ex.relationships) <= 7


# ------------------------------------------------------------------------------------------------------ types
@pytest.mark.parametrize(
    "text,name,typ",
    [
        ("Lena Marsh studied at the Okoro Institute.", "Okoro Institute", "ORGANIZATION"),
        ("Lena Marsh studied at the University of Carrow.", "University of Carrow", "ORGANIZATION"),
        ("Funding came from the Meridian Trust.", "Meridian Trust", "ORGANIZATION"),
        ("Boats sail up the Meren River.", "Meren River", "LOCATION"),
        ("Crowds came to the Halden Lantern Festival.", "Halden Lantern Festival", "EVENT"),
        ("Priya Raman coordinated the trials.", "Priya Raman", "PERSON"),
        ("The farm lies near Tollmere.", "Tollmere", "LOCATION"),
        ("The NASA team visited.", "NASA", "ORGANIZATION"),
        ("Models were tested in the Solberg Hydraulics Laboratory.", "Solberg Hydraulics Laboratory", "ORGANIZATION"),
    ],
)
def test_types_from_cue_words(text, name, typ):
    assert types(text)[name] == typ


def test_entity_type_respects_the_allowed_types():
    assert entity_type("Okoro Institute", "", ["PERSON", "CONCEPT"]) in ("PERSON", "CONCEPT")
    assert entity_type("Okoro Institute", "", ["CONCEPT"]) == "CONCEPT"
    assert entity_type("Okoro Institute", "", TYPES) == "ORGANIZATION"
    assert entity_type("Kelmouth", "LOCATION", TYPES) == "LOCATION"
    assert entity_type("Kelmouth", "", TYPES) == "CONCEPT"
    assert entity_type("Kelmouth", "", ["PERSON"]) == "PERSON"


# ------------------------------------------------------------------------------------------------------ relationships
def test_predicate_is_the_words_between():
    assert triples("Amara Okafor studied at the University of Carrow.") == [
        ("Amara Okafor", "studied at the", "University of Carrow")]
    assert triples("The Meren River flows past Port Halden.") == [("Meren River", "flows past", "Port Halden")]


def test_long_gaps_give_a_generic_predicate():
    t = triples("Amara Okafor, after many long years of careful study and travel abroad, joined Veridian Labs.")
    assert t == [("Amara Okafor", "related to", "Veridian Labs")]


def test_each_name_links_to_its_next_two():
    t = triples("Ada Finnegan, Tomas Brandt, Lena Marsh, Ravi Kumar met.")
    pairs = {(a, b) for a, _, b in t}
    assert pairs == {("Ada Finnegan", "Tomas Brandt"), ("Ada Finnegan", "Lena Marsh"),
                     ("Tomas Brandt", "Lena Marsh"), ("Tomas Brandt", "Ravi Kumar"), ("Lena Marsh", "Ravi Kumar")}
    rel = extract_offline("Ada Finnegan met Tomas Brandt.", TYPES).relationships[0]
    assert rel.description == "Ada Finnegan met Tomas Brandt." and rel.weight == 1.0


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Ada Finnegan, Tomas Brandt, Lena Marsh, Ravi Kumar met.",
         ["Ada Finnegan", "Tomas Brandt", "Lena Marsh", "Ravi Kumar"]),
        ("Funders: Meridian Trust; Port Halden City Council (Esterby).",
         ["Meridian Trust", "Port Halden City Council", "Esterby"]),
        ("Routes run Kelmouth/Arden Vale \u2014 Tollmere.", ["Kelmouth", "Arden Vale", "Tollmere"]),
    ],
)
def test_punctuation_separates_names(text, expected):
    assert names(text) == expected


def test_sentence_initial_word_is_a_name_only_if_capitalised_elsewhere():
    assert names("Several trains stop here. Trains link Esterby to Kelmouth.") == ["Esterby", "Kelmouth"]
    assert names("Kelmouth has a port. Ships leave Kelmouth daily.") == ["Kelmouth"]


def test_punctuation_alone_is_no_predicate():
    assert triples("Trains link Kelmouth / Arden Vale") == [("Kelmouth", "related to", "Arden Vale")]
    assert triples("Ada Finnegan, Tomas Brandt.") == [("Ada Finnegan", "related to", "Tomas Brandt")]


def test_names_in_different_sentences_are_not_related():
    assert triples("Ada Finnegan sang in the choir. Tomas Brandt built the flume.") == []


def test_repeated_pairs_add_weight():
    ex = extract_offline("Ada Finnegan met Tomas Brandt. Later Ada Finnegan met Tomas Brandt again.", TYPES)
    assert len(ex.relationships) == 1 and ex.relationships[0].weight == 2.0


def test_subject_links_to_every_name():
    ex = extract_offline("Tomas Brandt leads the lab. It sits in Kelmouth.", TYPES, subject="Okoro Institute")
    assert ex.entities[0].name == "Okoro Institute"
    assert ex.entities[0].description == "Tomas Brandt leads the lab."
    mentions = {(r.source, r.target) for r in ex.relationships if r.predicate == "mentions"}
    assert mentions == {("Okoro Institute", "Tomas Brandt"), ("Okoro Institute", "Kelmouth")}


# ------------------------------------------------------------------------------------------------------ statements
def test_statements_are_sentences_of_four_words_or_more():
    text = "Short one. Too short! This sentence has five words. Dr. Ada Finnegan, the conductor, retired in 2020."
    ex = extract_offline(text, TYPES)
    assert ex.statements == ["This sentence has five words.", "Dr. Ada Finnegan, the conductor, retired in 2020."]
    assert all(len(s.split()) >= 4 for s in ex.statements)
    assert "Ada Finnegan" in [e.name for e in ex.entities]


def test_split_sentences_keeps_abbreviations_and_initials():
    text = "Mr. Brandt met J. R. Okoro in St. Ives. They talked.\n\nA new paragraph starts here"
    assert split_sentences(text) == ["Mr. Brandt met J. R. Okoro in St. Ives.", "They talked.",
                                     "A new paragraph starts here"]


def test_extraction_is_deterministic():
    text = ("Lena Marsh designed the Tidewater Bridge at Kelmouth. The Okoro Institute tested models of it. "
            "Tomas Brandt, who leads the Department of Hydraulics, advised Lena Marsh.") * 3
    a = extract_offline(text, TYPES).model_dump()
    b = extract_offline(text, TYPES).model_dump()
    assert a == b
    assert a["entities"] and a["relationships"] and a["statements"]


# ------------------------------------------------------------------------------------------------------ garbage
def _binary_like(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return bytes(rng.randrange(256) for _ in range(n)).decode("latin-1")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n\t  ",
        "\x00\x01\x02 Abc \x00 Def \ufffd\ufffd",
        '"' * 500 + ' "A' * 300,
        "#" * 1000,
        "....!!!???,,,;;;",
        "ALLCAPS " * 200,
    ],
    ids=["empty", "blank", "control-chars", "quotes", "hashes", "punctuation", "caps"],
)
def test_odd_input_does_not_crash(text):
    ex = extract_offline(text, TYPES)
    assert all(e.name for e in ex.entities)
    assert all(len(s.split()) >= 4 for s in ex.statements)
    assert extract_offline(text, TYPES) == ex


def test_empty_input_gives_nothing():
    ex = extract_offline("", TYPES)
    assert ex.entities == [] and ex.relationships == [] and ex.statements == []


def test_binary_looking_text():
    ex = extract_offline(_binary_like(20_000), TYPES)
    assert len(ex.entities) <= 40 and len(ex.relationships) <= 60


@pytest.mark.parametrize("kind", ["words", "noise"])
def test_200kb_single_line(kind):
    rng = random.Random(1)
    if kind == "words":
        vocab = ["Alpha", "beta", "Gamma", "delta", "of", "the", "Epsilon", "and", "Kelmouth", "river"]
        text = " ".join(rng.choice(vocab) for _ in range(40_000))
    else:
        text = "".join(rng.choice("AbC dE.fG,h\"I ") for _ in range(200_000))
    assert len(text) >= 200_000 and "\n" not in text
    t0 = time.perf_counter()
    ex = extract_offline(text, TYPES)
    assert time.perf_counter() - t0 < 10
    assert len(ex.entities) <= 40 and len(ex.relationships) <= 60
