"""Model-free extraction with a maintained NLP library: spaCy named entities and noun phrases.

This follows GraphRAG's fast (NLP) graph extraction (graphrag/index/operations/build_noun_graph): nodes are the noun
phrases of a text unit, found by `SyntacticNounPhraseExtractor` as named entities (DATE excluded) plus the noun
chunks of the dependency parse, a chunk kept when it is a named entity or, after dropping DET/PRON/INTJ/X tokens,
stopwords and punctuation, has more than one token each at most 15 characters; edges join the nodes that occur in
the same text unit. Here, as in the rest of Strata:

* entities are the named entities (PERSON, ORG, GPE, LOC, FAC, NORP, EVENT, WORK_OF_ART, LAW, PRODUCT, LANGUAGE)
  with their types mapped to the project's; dates, times, numbers, money, percentages and quantities are not
  entities (a year would join every text that names it). A one-word name must be a proper noun or an acronym,
  so a capitalised sentence opener ("Several", "Trains") never is one;
* noun phrases are CONCEPT entities by GraphRAG's filter above, kept only when they hold no named entity and end in a
  common noun ("storm surge", "record producer"), after the named entities of the text;
* a short form (a surname, a first name, "Halden" beside "Port Halden", "Jeff Porcaro" beside "Jeffrey Porcaro")
  that matches exactly one longer name of the same text, or the text's subject, is that name, not a new entity;
* relationships are co-occurrence within a sentence: each named entity to the next two, each noun phrase to its
  nearest named entity, the sentence as the description, the words between as the predicate when short;
* statements are the sentences of four words or more.

This module holds the text spaCy reads (`body_text`), the sentence units, the extraction itself (`extract_doc`:
entities, relationships, statements) and the subject a page's title or heading names (`heading_subject`,
`title_names_entity`, `strip_qualifier`); finding the names and linking short forms to them is
core/extract/spacy_names.py.

Deterministic: the same text gives the same extraction (spaCy's CPU inference is deterministic).
"""

from __future__ import annotations

import re
from typing import Any

from core.extract.offline import Elements, entity_type, head_cue_type
from core.extract.spacy_names import (
    LABEL_TYPES,
    link_short_forms,
    name_tokens,
    named_entities,
    noun_phrases,
    person_cues,
)
from core.protocols import Extraction

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s.*$", re.MULTILINE)  # markdown headings are titles, not sentences
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


def body_text(text: str) -> str:
    """The text spaCy reads: markdown heading lines dropped, no leading blank lines (they change what the tagger
    sees in the first sentence)."""
    return _HEADING.sub("", text).strip()


def sentence_units(doc) -> list:
    """The parser's sentences, also cut at line breaks (a heading or list line is not part of the next sentence);
    empty pieces dropped."""
    out = []
    for sent in doc.sents:
        start = sent.start
        for t in sent:
            if t.is_space and "\n" in t.text:
                if t.i > start:
                    out.append(doc[start : t.i])
                start = t.i + 1
        if start < sent.end:
            out.append(doc[start : sent.end])
    return [u for u in out if u.text.strip()]


def _predicate(doc, a, b) -> str:
    """The words between two mentions of one sentence when short (1-6 words), else "related to"."""
    if a.end >= b.start:
        return "related to"
    between = doc[a.end : b.start]
    words = [t.text for t in between if not t.is_punct]
    if 1 <= len(words) <= 6 and not any(t.text in ".;" for t in between) and any(w.isalpha() for w in words):
        return " ".join(words).lower()
    return "related to"



def heading_subject(title: str, docs) -> str | None:
    """The entity a page's heading names: the longest named entity of the heading or of the page's opening (`docs`,
    parsed) that the heading contains ("How the Sluice Gates of the Halden Barrier Were Designed" -> "Halden
    Barrier"); none when the heading names no entity. The opening is read too because a title-cased heading misleads
    the tagger ("Halden Barrier Were Designed")."""
    low = " ".join(title.lower().split())
    title_doc, *opening = docs
    for source in (*opening, title_doc):  # the page's own names first, the heading's only when those fail
        best: tuple | None = None
        for order, (name, _label, _span) in enumerate(named_entities(source)):
            if re.search(r"(?<!\w)" + re.escape(name.lower()) + r"(?!\w)", low) is None:
                continue
            rank = (len(name_tokens(name)), len(name), -order)
            if best is None or rank > best[0]:
                best = (rank, name)
        if best:
            return best[1]
    return None


def title_names_entity(name: str, docs, opening: str) -> bool:
    """Whether a row's title, without its qualifier (`name`), names an entity rather than saying something about one:
    the page's opening uses it word for word ("Forbidden Ground is a Hungarian film"), or the tagger reads the whole
    title, or a name of the opening, as that one name ("Jeff Porcaro"). A news headline ("The FTX trial is bigger
    than Sam Bankman-Fried") is a real title but names no single entity, so it marks no subject. `docs`: the title
    and the opening, parsed."""
    key = _plain(name)
    if not key:
        return False
    if re.search(r"(?<!\w)" + re.escape(key) + r"(?!\w)", _plain(opening)):
        return True
    title_doc, *opening_docs = docs
    if any(_plain(e.text) == key for e in title_doc.ents if e.label_ in LABEL_TYPES):
        return True
    return any(_plain(n) == key for d in opening_docs for n, _label, _span in named_entities(d))


def _plain(text: str) -> str:
    """Lower case, single spaces, without a leading article: how a title and a name are compared."""
    return re.sub(r"^(the|a|an) ", "", " ".join(text.lower().split()))


def strip_qualifier(title: str) -> str:
    """"Steve Smith (musician)" -> "Steve Smith": the name without its disambiguating qualifier."""
    return _QUALIFIER.sub("", title).strip() or title.strip()


def extract_doc(doc, entity_types: list[str], subject: str | None = None, max_entities: int = 40,
                max_relationships: int = 60) -> Extraction:
    """Entities, relationships and statements of one parsed text (see the module docstring)."""
    def typed(label: str, name: str) -> str:
        t = head_cue_type(name, entity_types) or LABEL_TYPES.get(label, "")
        return t if t in entity_types else entity_type(name, "", entity_types)

    ents = named_entities(doc, subject)
    links = link_short_forms([(n, lab) for n, lab, _ in ents], subject)
    found = Elements(max_entities, max_relationships)
    entities, rels, add_entity, add_rel = found.entities, found.rels, found.entity, found.relate

    label_of: dict[str, str] = {}
    for n, lab, _ in ents:
        label_of.setdefault(n, lab)
    for n in person_cues(ents):
        label_of[n] = "PERSON"
    # a lone word left unlinked (two Porcaros) that ends a person's name of the text is a surname: a person
    surnames = {name_tokens(n)[-1] for n, lab in label_of.items() if lab == "PERSON" and len(name_tokens(n)) > 1}
    for n in label_of:
        if n not in links and len(name_tokens(n)) == 1 and name_tokens(n)[0] in surnames:
            label_of[n] = "PERSON"
    subj = ""
    if subject:
        subj = add_entity(subject, typed(label_of.get(subject, ""), subject), subject)
    statements: list[str] = []
    by_sent: dict[int, list[tuple[str, str, Any]]] = {}
    sents = sentence_units(doc)
    unit_of = {t: s.start for s in sents for t in range(s.start, s.end)}
    for name, lab, span in ents:
        canon = links.get(name, name)
        by_sent.setdefault(unit_of.get(span.start, -1), []).append((canon, lab, span))
    taken = {t.i for _, _, span in ents for t in span}
    # named entities first, over the whole text, so noun phrases only fill what the cap leaves
    texts = {s.start: " ".join(s.text.split()) for s in sents}
    names_in: dict[int, list[tuple[str, Any]]] = {}
    for s in sents:
        for canon, lab, span in by_sent.get(s.start, []):
            kept = add_entity(canon, typed(label_of.get(canon, lab), canon), texts[s.start])
            if kept and all(kept != k for k, _ in names_in.get(s.start, [])):
                names_in.setdefault(s.start, []).append((kept, span))
    for s in sents:
        sentence = texts[s.start]
        if len(sentence.split()) >= 4:
            statements.append(sentence)
        names = names_in.get(s.start, [])
        for i, (a, sa) in enumerate(names):
            for b, sb in names[i + 1 : i + 3]:
                add_rel(a, b, _predicate(doc, sa, sb), sentence, 1.0)
        if subj:
            for a, _ in names:
                add_rel(subj, a, "mentions", sentence, 0.5)
    # the doc's noun chunks, each under the sentence unit holding it whole (Span.noun_chunks would walk the whole doc
    # again for every sentence)
    end_of = {s.start: s.end for s in sents}
    chunks_in: dict[int, list] = {}
    for c in doc.noun_chunks:
        u = unit_of.get(c.start)
        if u is not None and c.end <= end_of[u]:
            chunks_in.setdefault(u, []).append(c)
    for s in sents:
        names = names_in.get(s.start, [])
        for phrase, chunk in noun_phrases(chunks_in.get(s.start, []), taken):
            kept = add_entity(phrase, "CONCEPT" if "CONCEPT" in entity_types else typed("", phrase), texts[s.start])
            if not kept:
                break
            if names:
                near, span = min(names, key=lambda p: (abs(p[1].start - chunk.start), p[1].start))
                pair = (near, kept) if span.start < chunk.start else (kept, near)
                add_rel(pair[0], pair[1], _predicate(doc, *((span, chunk) if span.start < chunk.start
                                                            else (chunk, span))), texts[s.start], 1.0)
    if subj and entities[subj.lower()].description == subj and statements:
        entities[subj.lower()].description = statements[0]
    return Extraction(entities=list(entities.values()), relationships=list(rels.values()), statements=statements)
