"""Deterministic, model-free extraction: entity spans and types, co-occurrence relationships, sentence statements.

Entities are runs of capitalised words (with inner connectors such as "of" or "de"), acronyms and quoted titles;
a sentence-initial function word never starts a name. Types come from cue words inside or right before the name.
Relationships link names that share a sentence (each name to its next two), the words between them as the
predicate when short, the sentence as the description. Every sentence of four words or more is a statement.
"""

from __future__ import annotations

import re

from core.protocols import ExtractedEntity, ExtractedRelationship, Extraction
from core.text import STOPWORDS, split_sentences

# Punctuation that ends a name is kept as a token of its own, so "Ada Finnegan, Tomas Brandt" is two names.
_BREAKS = frozenset(",;:!?()[]{}/\u2013\u2014")
# a word opens with a letter or digit of any script (Greek and Cyrillic names are capitalised too)
_TOKEN = re.compile(r"[^\W_][\w'\u2019\-\.&]*|[\"“”]|[,;:!?()\[\]{}/\u2013\u2014]")
# words that may sit inside one name ("University of Carrow", "Ludwig van Beethoven"); "and", "the" or "for"
# would glue two names together ("Carrow Gold and Meren Red"), so they end a name instead
_CONNECTORS = {"of", "de", "du", "la", "le", "van", "von", "der", "den", "del", "da", "di", "y"}
_NOT_NAMES = {
    w.capitalize()
    for w in STOPWORDS
    | set(
        """according although another because before during following however meanwhile moreover nevertheless
        since today yesterday tomorrow later earlier first second third last next finally also still yes no
        january february march april may june july august september october november december monday tuesday
        wednesday thursday friday saturday sunday mr mrs ms dr prof sir st""".split()
    )
}
_TYPE_CUES: list[tuple[str, set[str]]] = [
    (
        "ORGANIZATION",
        set(
            """university college institute school academy company corporation corp inc ltd llc plc labs lab
            laboratory laboratories trust foundation agency authority council ministry department bank group association society
            committee commission party band orchestra club fc records studios press network board union league
            federation museum library hospital church railway airlines""".split()
        ),
    ),
    (
        "LOCATION",
        set(
            """city town village county state province country river lake sea ocean island islands mountain mountains
            mount valley bay street road avenue square park bridge port harbour harbor delta coast district region
            station airport states kingdom republic farm estate""".split()
        ),
    ),
    (
        "EVENT",
        set("""festival war battle championship championships cup olympics election summit conference tour
            award awards prize games season""".split()),
    ),
]
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")  # markdown headings are titles, not sentences with names in them
_LOCATION_PREPS = {"in", "at", "near", "from", "to", "across", "outside", "inside"}


def _spans(sentence: str) -> list[tuple[str, int, str]]:
    """(name, token index, type hint) for each name-like span of a sentence."""
    toks = [m.group(0) for m in _TOKEN.finditer(sentence)]
    spans: list[tuple[str, int, str]] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in {'"', "“", "”"}:
            # a quoted title: "Katy Lied"
            j = i + 1
            while j < len(toks) and toks[j] not in {'"', "“", "”"} and j - i <= 8:
                j += 1
            inner = [t for t in toks[i + 1 : j] if t not in _BREAKS]
            if j < len(toks) and inner and inner[0][:1].isupper() and len(inner) <= 7:
                spans.append((" ".join(inner).strip(" .,"), i, "WORK"))
                i = j + 1
                continue
            i += 1
            continue
        if _is_cap(t) and t.rstrip(".") not in _NOT_NAMES:
            j = i + 1
            while j < len(toks):
                if _is_cap(toks[j]) and toks[j] not in {'"', "“", "”"} and toks[j].rstrip(".") not in _NOT_NAMES:
                    j += 1
                elif (
                    toks[j].lower() in _CONNECTORS
                    and j + 1 < len(toks)
                    and _is_cap(toks[j + 1])
                    and toks[j + 1].rstrip(".") not in _NOT_NAMES
                ):
                    j += 2
                else:
                    break
            name = " ".join(toks[i:j]).strip(" .,'’-")
            if name.endswith("'s") or name.endswith("’s"):
                name = name[:-2]
            if len(name) >= 2 and not name.isdigit():
                prev = toks[i - 1].lower() if i > 0 else ""
                spans.append((name, i, "LOCATION" if prev in _LOCATION_PREPS else ""))
            i = j
            continue
        i += 1
    return spans


def _is_cap(tok: str) -> bool:
    return bool(tok) and tok[0].isupper()


def head_cue_type(name: str, allowed: list[str]) -> str:
    """The type the last word of a name announces ("Veridian Labs", "Meren River", "Lantern Festival"), or ""."""
    words = name.split()
    head = words[-1].lower().strip(".") if words else ""
    return next((typ for typ, cues in _TYPE_CUES if head in cues and typ in allowed), "")


def entity_type(name: str, hint: str, allowed: list[str]) -> str:
    lower = {w.lower().strip(".") for w in name.split()}
    for typ, cues in _TYPE_CUES:
        if lower & cues and typ in allowed:
            return typ
    if hint and hint in allowed:
        return hint
    if name.isupper() and len(name) <= 6 and "ORGANIZATION" in allowed:
        return "ORGANIZATION"
    parts = name.split()
    if 2 <= len(parts) <= 3 and all(p[:1].isupper() and p.isalpha() for p in parts) and "PERSON" in allowed:
        return "PERSON"
    return "CONCEPT" if "CONCEPT" in allowed else (allowed[0] if allowed else "CONCEPT")


def _predicate(sentence: str, a: str, b: str) -> str:
    ia, ib = sentence.find(a), sentence.find(b)
    if ia < 0 or ib < 0 or ib <= ia:
        return "related to"
    between = sentence[ia + len(a) : ib].strip(" ,;:()'\"")
    n = len(between.split())
    if 1 <= n <= 6 and not any(ch in between for ch in ".;") and any(ch.isalpha() for ch in between):
        return between.lower()
    return "related to"



class Elements:
    """One chunk's entities (by lower-cased name, descriptions grown from their sentences) and co-occurrence
    relationships (weights added up, at most 10), each capped; shared by both offline extractors."""

    def __init__(self, max_entities: int, max_relationships: int):
        self.entities: dict[str, ExtractedEntity] = {}
        self.rels: dict[tuple[str, str], ExtractedRelationship] = {}
        self.max_entities, self.max_relationships = max_entities, max_relationships

    def entity(self, name: str, typ, sentence: str) -> str:
        """The kept name of `name` ("" once the cap is reached); `typ` is a type or a function giving it."""
        key = name.lower()
        if key not in self.entities:
            if len(self.entities) >= self.max_entities:
                return ""
            self.entities[key] = ExtractedEntity(name=name, type=typ() if callable(typ) else typ, description=sentence)
        elif len(self.entities[key].description) < 300 and sentence not in self.entities[key].description:
            self.entities[key].description += " " + sentence
        return self.entities[key].name

    def relate(self, a: str, b: str, predicate: str, sentence: str, weight: float) -> None:
        if not a or not b or a.lower() == b.lower() or len(self.rels) >= self.max_relationships:
            return
        k = (a.lower(), b.lower())
        if k in self.rels:
            self.rels[k].weight = min(10.0, self.rels[k].weight + weight)
            return
        self.rels[k] = ExtractedRelationship(source=a, target=b, predicate=predicate, description=sentence,
                                             weight=weight)

def extract_offline(
    text: str,
    entity_types: list[str],
    subject: str | None = None,
    max_entities: int = 40,
    max_relationships: int = 60,
) -> Extraction:
    """Extract entities, relationships and statements from `text` without a model.

    `subject` is the document's title when it names what the text is about (an encyclopedia page): it becomes an
    entity related to every name of the text, as the page's own subject is.
    """
    found = Elements(max_entities, max_relationships)
    entities, rels, add_rel = found.entities, found.rels, found.relate
    statements: list[str] = []

    def add_entity(name: str, hint: str, sentence: str) -> str:
        return found.entity(name, lambda: entity_type(name, hint, entity_types), sentence)

    subj_name = ""
    if subject and _spans(subject):
        subj_name = add_entity(subject.strip(), "", subject.strip())
    body = "\n".join(line for line in text.splitlines() if not _HEADING.match(line))
    sentences = split_sentences(body)
    spans = [_spans(s) for s in sentences]
    # a lone capitalised word that opens a sentence ("Several", "Trains") is a name only if the text also
    # capitalises it where capitals are not forced
    inner = {name for sp in spans for name, pos, _ in sp if pos > 0}
    for sentence, sp in zip(sentences, spans):
        if len(sentence.split()) >= 4:
            statements.append(sentence)
        names = []
        for name, pos, hint in sp:
            if pos == 0 and " " not in name and name not in inner and not name.isupper():
                continue
            kept = add_entity(name, hint, sentence)
            if kept and kept not in names:
                names.append(kept)
        for i, a in enumerate(names):
            for b in names[i + 1 : i + 3]:
                add_rel(a, b, _predicate(sentence, a, b), sentence, 1.0)
        if subj_name:
            for a in names:
                add_rel(subj_name, a, "mentions", sentence, 0.5)
    if subj_name and entities.get(subj_name.lower()) and statements:
        e = entities[subj_name.lower()]
        if e.description == subj_name:
            e.description = statements[0]
    return Extraction(entities=list(entities.values()), relationships=list(rels.values()), statements=statements)


def title_names_entity(name: str, opening: str) -> bool:
    """The heuristics' reading of `spacy_extract.title_names_entity`: a row's title names an entity when the page's
    opening uses it word for word, or when it is one whole capitalised name (a headline is a sentence, not a name)."""
    low = " ".join(name.lower().split())
    if not low:
        return False
    if re.search(r"(?<!\w)" + re.escape(low) + r"(?!\w)", " ".join(opening.lower().split())):
        return True
    return any(" ".join(n.lower().split()) == low for n, _, _ in _spans(name))


def heading_subject(title: str, opening: str) -> str | None:
    """The name a page's heading is about, by the heuristics: the longest name of the page's opening that the heading
    contains, else the heading's own longest name; none when the heading holds no name."""
    low = " ".join(title.lower().split())
    opening = "\n".join(line for line in opening.splitlines() if not _HEADING.match(line))
    for names in ([n for s in split_sentences(opening) for n, _, _ in _spans(s)], [n for n, _, _ in _spans(title)]):
        found = [n for n in names if re.search(r"(?<!\w)" + re.escape(n.lower()) + r"(?!\w)", low)]
        if found:
            return max(found, key=lambda n: (len(n.split()), len(n)))
    return None
