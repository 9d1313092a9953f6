"""Words in any script (core/text.py): what BM25, GraphRAG global's offline map step, ArchRAG's filter and the offline
summaries read from documents and questions, and BM25 (core/retrieval/lexicon.py) finding documents by them."""

from __future__ import annotations

from core.algorithms.layers import meta_summary_concepts
from core.config import ExtractSettings
from core.extract.offline import extract_offline
from core.pipeline.noderag_communities import keyword_title
from core.retrieval.lexicon import BM25
from core.text import content_words, fold, words


def test_accented_latin_words_are_whole_and_folded():
    assert content_words("Zürich, München, Kraków and São Paulo") == ["zurich", "munchen", "krakow", "sao", "paulo"]
    # a query typed without the accents, or in capitals, or decomposed, reads the same words
    assert content_words("ZURICH, Munchen, Krakow") == ["zurich", "munchen", "krakow"]
    assert content_words("Zu\u0308rich") == ["zurich"]
    assert content_words("Straße, Łódź, Søren, ﬁne") == ["strasse", "lodz", "soren", "fine"]


def test_ascii_words_are_read_as_before():
    text = "O'Neill's well-known students' don't stop_words at 1,000 ships in 2024."
    assert content_words(text) == ["o'neill's", "well-known", "students'", "don't", "stop", "words", "000", "ships",
                                   "2024"]


def test_greek_and_cyrillic_words():
    assert content_words("Η Αθήνα είναι η πρωτεύουσα της Ελλάδας") == [
        "αθηνα", "ειναι", "πρωτευουσα", "τησ", "ελλαδασ"]  # one-letter "η" dropped as "a" is; final ς folds to σ
    assert content_words("\u0391\u0398\u0397\u039d\u0391") == content_words("αθηνα") == ["αθηνα"]
    assert content_words("Москва — столица России") == ["москва", "столица", "россии"]


def test_unspaced_scripts_give_character_bigrams():
    assert content_words("東京は日本の首都です。") == ["東京", "京は", "は日", "日本", "本の", "の首", "首都", "都で", "です"]
    assert content_words("2024年") == ["2024", "年"]  # a lone character is a word
    assert content_words("北京") == ["北京"]
    assert content_words("が") == ["が"]  # the voicing mark is not an accent: が stays が, not か
    assert fold("がか") == "がか"
    assert content_words("กินข้าว") == ["กิน", "นข้", "ข้า", "าว"]  # bigrams of whole characters, vowel marks kept
    assert content_words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # virama and vowel signs stay inside the word


def test_display_words_keep_accents():
    assert words("Zürich Αθήνα", folded=False) == ["zürich", "αθήνα"]
    assert keyword_title("Zürich and München: the Αθήνα link") == "Zürich München Αθήνα link"


def test_bm25_finds_accented_greek_and_japanese_documents():
    docs = {
        "zurich": "Zürich is the largest city in Switzerland, on Lake Zürich.",
        "munich": "Munich is the capital of Bavaria; its beer halls are famous.",
        "athens": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
        "tokyo": "東京は日本の首都です。",
        "paris": "Paris is the capital of France.",
    }
    bm = BM25.build(list(docs), list(docs.values()))
    assert bm.top("Zurich", 1)[0][0] == "zurich"
    assert bm.top("Zürich", 1)[0][0] == "zurich"
    assert bm.top("Which lake is at ZÜRICH?", 1)[0][0] == "zurich"
    assert bm.top("Αθήνα", 1)[0][0] == "athens"
    assert bm.top("αθηνα", 1)[0][0] == "athens"
    assert bm.top("首都の東京", 1)[0][0] == "tokyo"
    assert [i for i, _ in bm.top("Zurich", 5)] == ["zurich"]  # no other document has the word


def test_offline_summaries_and_extraction_read_non_ascii_words():
    texts = ["Der Zürichsee liegt bei Zürich.", "Zürich hat viele Brücken.", "In Zürich gibt es Banken."]
    assert "zürich" in meta_summary_concepts(texts)
    ex = extract_offline("Yesterday Νίκος Παππάς met the engineer Ада Лавлейс in Zürich.", ExtractSettings().entity_types)
    names = {e.name for e in ex.entities}
    assert {"Νίκος Παππάς", "Ада Лавлейс", "Zürich"} <= names
