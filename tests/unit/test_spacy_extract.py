"""The spaCy offline extractor: named entities with their full names, short forms linked to them, no dates, no
capitalised sentence openers, noun phrases as concepts, co-occurrence within a sentence; and the backend's switch
between spaCy and the heuristics."""

from __future__ import annotations

from core.backends.offline import OfflineBackend
from core.config import ExtractSettings
from core.extract import spacy_nlp
from core.extract.offline import extract_offline
from core.extract.spacy_names import link_short_forms

TYPES = ExtractSettings().entity_types


def _ex(text: str, subject: str | None = None):
    return OfflineBackend(extractor="spacy").extract(text, TYPES, subject=subject)


def _names(ex) -> set[str]:
    return {e.name for e in ex.entities}


def test_the_spacy_pipeline_runs_and_says_so():
    b = OfflineBackend(extractor="spacy")
    assert b.uses_spacy
    assert b.model.startswith("spaCy ") and "en_core_web_sm" in b.model
    assert OfflineBackend(extractor="heuristic").model == "heuristic"
    assert not OfflineBackend(extractor="heuristic").uses_spacy


def test_full_name_kept_and_surname_linked_to_it():
    ex = _ex("Ada Lovelace worked with Charles Babbage in London. Lovelace later wrote the first published "
             "algorithm, and Babbage admired it.")
    names = _names(ex)
    assert {"Ada Lovelace", "Charles Babbage", "London"} <= names
    assert "Lovelace" not in names and "Babbage" not in names  # the surnames are the people already named
    types = {e.name: e.type for e in ex.entities}
    assert types["Ada Lovelace"] == "PERSON" and types["London"] == "LOCATION"
    # the second sentence links the two people again, through their full names: one relationship, met twice
    pair = [r for r in ex.relationships if {r.source, r.target} == {"Ada Lovelace", "Charles Babbage"}]
    assert [r.weight for r in pair] == [2.0]


def test_a_page_subject_absorbs_the_longer_and_shorter_forms_of_its_name():
    text = ("Jeffrey Thomas Porcaro was an American drummer and record producer. Porcaro was best known for his "
            "work with the rock band Toto.")
    ex = _ex(text, subject="Jeff Porcaro")
    names = _names(ex)
    assert "Jeff Porcaro" in names
    assert not {"Porcaro", "Jeffrey Thomas Porcaro"} & names
    assert "Toto" in names
    assert any(r.source == "Jeff Porcaro" and r.target == "Toto" for r in ex.relationships)


def test_dates_numbers_and_sentence_openers_are_not_entities():
    ex = _ex("Several engineers met in Manchester on 5 June 1833. Twelve of them stayed for 3 weeks and paid "
             "$400 each. Trains then carried them back to London.")
    names = _names(ex)
    assert {"Manchester", "London"} <= names
    assert not {n for n in names if any(ch.isdigit() for ch in n)}, names  # no date, money or number
    assert not {"Several", "Twelve", "Trains"} & names


def test_noun_phrases_are_concepts_and_statements_are_sentences():
    text = "The storm surge damaged the sluice gates of the Thames Barrier. Engineers repaired the sluice gates."
    ex = _ex(text)
    concepts = {e.name for e in ex.entities if e.type == "CONCEPT"}
    assert {"storm surge", "sluice gates"} <= concepts
    assert ex.statements == ["The storm surge damaged the sluice gates of the Thames Barrier.",
                             "Engineers repaired the sluice gates."]
    assert all(r.description in ex.statements for r in ex.relationships)


def test_short_forms_link_only_when_unambiguous():
    names = [("John Smith", "PERSON"), ("Mary Smith", "PERSON"), ("Smith", "PERSON"), ("Mary", "PERSON")]
    links = link_short_forms(names, None)
    assert "Smith" not in links  # two Smiths: left alone
    assert links["Mary"] == "Mary Smith"
    assert link_short_forms([("Smith", "ORG")], "John Smith") == {"Smith": "John Smith"}


def test_extraction_is_deterministic_and_batches_give_the_same_result():
    texts = ["Ada Lovelace met Charles Babbage in London.", "Marie Curie worked in Paris with Pierre Curie.",
             "Nothing to see here."]
    b = OfflineBackend(extractor="spacy")
    one = [b.extract(t, TYPES) for t in texts]
    many = b.extract_many(texts, TYPES, [None, None, None])
    assert one == many == b.extract_many(texts, TYPES, [None, None, None])


def test_the_subject_of_a_page_heading_is_the_name_it_holds():
    b = OfflineBackend(extractor="spacy")
    text = "# The Thames Barrier: An Overview\n\nThe Thames Barrier protects London from storm surges."
    assert b.subject_of("The Thames Barrier: An Overview", "heading", text) == "Thames Barrier"
    assert b.subject_of("Steve Smith (musician)", "field", "Steve Smith is a drummer.") == "Steve Smith"
    assert b.subject_of("Notes on Gardening", "heading", "# Notes on Gardening\n\nWater the plants daily.") is None


def test_a_name_the_text_treats_as_a_person_is_a_person():
    """The small model often calls an unfamiliar name a place; a role beside it, a "who" clause or a pronoun that
    takes it up makes it a person."""
    for text in ("The gates were designed by the engineer Tamsin Okonjo, and the barrier opened in 1990.",
                 "Tamsin Okonjo is a civil engineer. She designed the gates of the barrier.",
                 "The review was led by Tamsin Okonjo, who had designed the gates."):
        types = {e.name: e.type for e in _ex(text).entities}
        assert types.get("Tamsin Okonjo") == "PERSON", (text, types)


def test_without_a_model_the_heuristics_run_and_the_status_says_why(monkeypatch):
    nlp, status = spacy_nlp.try_load(("no_such_spacy_model",))
    assert nlp is None
    assert status.startswith("heuristics (") and "no_such_spacy_model" in status
    monkeypatch.setattr(spacy_nlp, "load_pipeline", lambda: None)
    monkeypatch.setattr(spacy_nlp, "extractor_status", lambda: status)
    b = OfflineBackend(extractor="spacy")
    assert not b.uses_spacy and b.model == status
    text = "Ada Lovelace met Charles Babbage in London."
    assert b.extract(text, TYPES) == extract_offline(text, TYPES)


TITLED_ROWS = [  # (title field, opening of the text, the subject the spaCy extractor marks)
    ("Steve Smith (musician)", "Steve Smith (born 1954) is an American drummer.", "Steve Smith"),
    ("Jeff Porcaro", "Jeffrey Thomas Porcaro (April 1, 1954 – August 5, 1992) was an American drummer.",
     "Jeff Porcaro"),
    ("Forbidden Ground", "Forbidden Ground is a Hungarian film directed by Pál Gábor.", "Forbidden Ground"),
    ("Algeria", "Location: Northern Africa, bordering the Mediterranean Sea.", "Algeria"),
    ("The FTX trial is bigger than Sam Bankman-Fried", "The trial of Sam Bankman-Fried is likely to be more "
     "consequential than just whether the man himself is convicted.", None),
    ("Donald Trump defrauded banks with 'fantasy' to build his real estate empire, judge rules",
     "A judge ruled Tuesday that Donald Trump committed fraud for years.", None),
]


def test_a_title_field_marks_a_subject_only_when_it_is_a_name():
    spacy_backend, heuristic = OfflineBackend(extractor="spacy"), OfflineBackend(extractor="heuristic")
    for title, opening, subject in TITLED_ROWS:
        assert spacy_backend.subject_of(title, "field", opening) == subject, title
        assert (heuristic.subject_of(title, "field", opening) is None) == (subject is None), title
