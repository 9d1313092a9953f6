"""Who the names of a parsed text are, for the spaCy extractor (core/extract/spacy_extract.py, whose docstring
describes the method: GraphRAG's fast NLP graph extraction, graphrag/index/operations/build_noun_graph):

* `named_entities`: the named entities worth a node (spaCy labels mapped to Strata's types by `LABEL_TYPES`; a
  one-word name must be a proper noun or an acronym, so a capitalised sentence opener never is one);
* `noun_phrases`: the noun chunks GraphRAG's `SyntacticNounPhraseExtractor` keeps (more than one token, each at
  most 15 characters, after dropping DET/PRON/INTJ/X tokens, stopwords and punctuation), outside the named entities
  and made of common nouns only;
* `link_short_forms`: a short form (a surname, "Halden" beside "Port Halden") to the one longer name it stands for;
* `person_cues`: the names the text treats as people whatever their spaCy label;
* `name_tokens`: a name's words, as names are compared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core.text import STOPWORDS

# spaCy (OntoNotes) label -> Strata entity type; labels not here (DATE, TIME, PERCENT, MONEY, QUANTITY, ORDINAL,
# CARDINAL) are not entities
LABEL_TYPES = {
    "PERSON": "PERSON", "ORG": "ORGANIZATION", "NORP": "ORGANIZATION", "GPE": "LOCATION", "LOC": "LOCATION",
    "FAC": "LOCATION", "EVENT": "EVENT", "WORK_OF_ART": "WORK", "LAW": "WORK", "PRODUCT": "CONCEPT",
    "LANGUAGE": "CONCEPT",
}  # fmt: skip
_NP_DROP_POS = {"DET", "PRON", "INTJ", "X", "PUNCT", "SPACE", "NUM", "SYM", "PART", "CCONJ", "ADP"}
_MAX_WORD = 15  # GraphRAG's max_word_length
# adjectives that quantify or point rather than describe: "several trains" is no concept
_QUANTIFIERS = frozenset("""several various numerous certain other another same such own many few more most
    much less least last next first second third former latter main major minor whole entire different similar
    particular specific new old""".split())
_QUOTES = frozenset('"“”\'‘’')


def _clean(span) -> str:
    """A name's surface form: leading determiners and lower-case words, trailing possessives and punctuation
    dropped ("the national Ministry of Transport's" -> "Ministry of Transport")."""
    toks = list(span)
    while toks and (toks[0].pos_ in ("DET", "PUNCT") or toks[0].is_space or toks[0].text[:1].islower()):
        toks.pop(0)
    while toks and (toks[-1].tag_ == "POS" or toks[-1].is_punct or toks[-1].is_space):
        toks.pop()
    if not toks:
        return ""
    return " ".join(span.doc[toks[0].i : toks[-1].i + 1].text.split())


def _pieces(ent) -> list:
    """An entity span cut at line breaks and at "and" (the tagger runs a list line into the next line's name,
    and joins "Ashby Fen and Tollmere")."""
    out, start = [], ent.start
    for t in ent:
        if (t.is_space and "\n" in t.text) or t.pos_ == "CCONJ":
            if t.i > start:
                out.append(ent.doc[start : t.i])
            start = t.i + 1
    if start < ent.end:
        out.append(ent.doc[start : ent.end])
    return out


def _line_start(tok) -> bool:
    """The token opens a sentence or a line (capitals there are forced, not evidence of a name)."""
    i = tok.i
    while i > 0 and tok.doc[i - 1].is_punct and tok.doc[i - 1].text in _QUOTES | {"(", "["}:
        i -= 1
    return i == 0 or tok.doc[i].is_sent_start or "\n" in tok.doc[i - 1].text_with_ws


def named_entities(doc, subject: str | None = None) -> list[tuple[str, str, Any]]:
    """(name, spaCy label, span) of the named entities worth a node, in text order. A one-word name that opens a
    sentence counts when the text capitalises it elsewhere or it is a word of a longer name (of the text or the
    subject): "Berlioz" on the page of Hector Berlioz."""
    out: list[tuple[str, str, Any]] = []
    inner = {t.text for t in doc if t.text[:1].isupper() and not _line_start(t)}
    inner |= {t.text for ent in doc.ents if len(ent) > 1 for t in ent} | set((subject or "").split())
    for whole in doc.ents:
        if whole.label_ not in LABEL_TYPES:
            continue
        for ent in _pieces(whole):
            _add_named(out, ent, whole.label_, inner)
    return out


def _add_named(out: list, ent, label: str, inner: set[str]) -> None:
    name = _clean(ent)
    if len(name) < 2 or not any(c.isalpha() for c in name) or name.lower() == name:
        return
    words = [t for t in ent if not (t.is_punct or t.is_space or t.pos_ == "DET" or t.tag_ == "POS")]
    if len(words) == 1:
        tok = words[0]
        acronym = tok.text.isupper() and len(tok.text) >= 2
        # one word: a proper noun or an acronym, not a nationality adjective ("American"); opening a sentence
        # or a line, only if the text also capitalises it where capitals are not forced ("Several", "Trains")
        if not (tok.pos_ == "PROPN" or acronym) or (_line_start(tok) and tok.text not in inner and not acronym):
            return
    doc = ent.doc
    quoted = (ent.start > 0 and doc[ent.start - 1].text in _QUOTES and ent.end < len(doc)
              and doc[ent.end].text in _QUOTES)
    out.append((name, "WORK_OF_ART" if quoted else label, ent))  # a quoted name is a title


def noun_phrases(chunks: Iterable[Any], taken: set[int]) -> list[tuple[str, Any]]:
    """(phrase, span) of the noun chunks (spaCy's, in order) GraphRAG's syntactic extractor keeps, outside the named
    entities (`taken`: their token indices)."""
    out = []
    for chunk in chunks:
        if any(t.i in taken for t in chunk) or chunk.root.pos_ != "NOUN":
            continue
        toks = [t for t in chunk if t.pos_ not in _NP_DROP_POS and t.lower_ not in STOPWORDS and not t.is_punct
                and t.lower_ not in _QUANTIFIERS]
        if len(toks) < 2 or any(len(t.text) > _MAX_WORD or not t.text.replace("-", "").isalpha() for t in toks):
            continue
        # compound nouns ("storm surge", "record producer"); a proper noun inside is a name the tagger missed ("the
        # Steely Dan album"), an adjective mostly a passing description ("real weather"), a dropped number or
        # hyphen a phrase cut apart ("first-class degree")
        if any(t.pos_ != "NOUN" for t in toks) or any(t.pos_ in ("NUM", "PUNCT") for t in chunk):
            continue
        out.append((" ".join(t.lower_ for t in toks), chunk))
    return out


def name_tokens(name: str) -> list[str]:
    return [w for w in re.split(r"[\s\-]+", name.lower()) if w and w not in ("the", "a", "an")]


def _is_short_of(short: list[str], long: list[str]) -> bool:
    """`short` is a prefix or suffix of `long` ("porcaro" of "jeff porcaro"), or the same person with a shortened
    first name ("jeff porcaro" of "jeffrey thomas porcaro")."""
    if not short or len(short) >= len(long):
        return _first_name_variant(short, long)
    return long[: len(short)] == short or long[-len(short):] == short


def _first_name_variant(a: list[str], b: list[str]) -> bool:
    return (len(a) >= 2 and len(b) >= 2 and a != b and a[-1] == b[-1] and len(a) <= len(b)
            and b[0].startswith(a[0]) and len(a[0]) >= 3)


def link_short_forms(names: list[tuple[str, str]], subject: str | None) -> dict[str, str]:
    """name -> the longer name it stands for, among `names` ((name, spaCy label), text order) and the subject.

    A candidate must share the short form's label, or be a PERSON when the short form is one word (the tagger often
    labels a lone surname ORG or GPE). The subject wins when it is a candidate; otherwise the short form is linked
    only when exactly one longer name matches (two Smiths leave "Smith" alone)."""
    pool = list(dict.fromkeys(n for n, _ in names))
    label: dict[str, str] = {}
    for n, lab in names:
        label.setdefault(n, lab)
    if subject and subject not in label:
        pool.append(subject)
        label[subject] = "PERSON" if len(name_tokens(subject)) >= 2 else ""
    links: dict[str, str] = {}
    for short in pool:
        st = name_tokens(short)
        cands = []
        for long in pool:
            if long == short or long.lower() == short.lower():
                continue
            lt = name_tokens(long)
            if not _is_short_of(st, lt):
                continue
            same = label[long] == label[short] or long == subject
            if same or (len(st) == 1 and label[long] == "PERSON"):
                cands.append(long)
        if subject and short != subject and label[short] == "PERSON" and _first_name_variant(name_tokens(subject), st):
            cands.append(subject)  # "Jeffrey Thomas Porcaro" on the page titled "Jeff Porcaro"
        if not cands:
            continue
        if subject in cands:
            links[short] = subject
        elif len(cands) == 1:
            links[short] = cands[0]
        elif len({c for c in cands
                  if not any(_is_short_of(name_tokens(c), name_tokens(o)) for o in cands if o != c)}) == 1:
            links[short] = next(c for c in cands if not any(_is_short_of(name_tokens(c), name_tokens(o))
                                                            for o in cands if o != c))
    # follow chains ("Porcaro" -> "Jeff Porcaro" -> "Jeffrey Porcaro")
    for k in list(links):
        seen = {k}
        while links[k] in links and links[k] not in seen:
            seen.add(links[k])
            links[k] = links[links[k]]
    return links


_PERSONAL = frozenset({"he", "she"})
_PERSONAL_ANY = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
_WHO = frozenset({"who", "whom", "whose"})


_AGENT = re.compile(r"[a-z]{3,}(?:er|or|ist|ian)s?$")  # agent nouns: engineer, director, geneticist, historian
_ROLE_NOUNS = frozenset("chief head founder owner member partner wife husband son daughter mother father".split())


def _role(tok) -> bool:
    """A common noun naming what a person is or does ("engineer", "director", "the agronomist")."""
    return tok.pos_ == "NOUN" and tok.text.islower() and (bool(_AGENT.match(tok.text)) or tok.text in _ROLE_NOUNS)


def _has_role(span) -> bool:
    """The name stands in apposition to a role noun ("the engineer Amara Okafor", "Maeve Donnelly, a lecturer") or
    is the subject of "is a ... <role>" ("Amara Okafor is a civil engineer")."""
    root = span.root
    if span.start > 0 and _role(span.doc[span.start - 1]):  # "the mechanical engineer Peter Lund"
        return True
    if root.dep_ == "appos" and _role(root.head):
        return True
    # "appointed Amara Okafor as independent adviser"
    if root.dep_ == "dobj" and any(c.dep_ == "prep" and c.lower_ == "as" and any(_role(g) for g in c.children)
                                   for c in root.head.children):
        return True
    if any(c.dep_ == "appos" and _role(c) for c in root.children):
        return True
    verb = root.head
    return (root.dep_ == "nsubj" and verb.lower_ in ("is", "was", "are", "were", "be", "been")
            and any(c.dep_ == "attr" and _role(c) for c in verb.children))


def person_cues(ents) -> set[str]:
    """Names the text treats as people whatever their label (the small model calls "Amara Okafor" a place). A name
    shaped like a person's (two or three proper nouns) is one when it stands beside a role noun (`_has_role`), when a
    non-restrictive "who" clause follows it ("Marcus Lindqvist, who previously ran ...") or when it is the subject of its sentence and the next sentence's
    subject is "he" or "she", or a personal pronoun follows it in its own sentence before any other name (a pronoun
    prefers the subject as its antecedent: centering)."""
    out = set()
    for name, _label, span in ents:
        words = [t for t in span if not (t.is_punct or t.pos_ == "DET")]
        if not 2 <= len(words) <= 3 or any(t.pos_ != "PROPN" for t in words):
            continue
        doc, root = span.doc, span.root
        if _has_role(span) or (span.end + 1 < len(doc) and doc[span.end].text == ","
                               and doc[span.end + 1].lower_ in _WHO):
            out.add(name)
            continue
        sent = span.sent
        if root.dep_ not in ("nsubj", "nsubjpass"):
            continue
        # the subject, and a personal pronoun later in its sentence before any other name: "X drew on her ..."
        later = doc[span.end : sent.end]
        first = next((t for t in later if t.lower_ in _PERSONAL_ANY or t.ent_type_), None)
        if first is not None and first.lower_ in _PERSONAL_ANY:
            out.add(name)
            continue
        if root.head != sent.root or sent.end >= len(doc):
            continue
        nxt = doc[sent.end].sent
        if any(t.lower_ in _PERSONAL and t.dep_ in ("nsubj", "nsubjpass") and t.head == nxt.root for t in nxt):
            out.add(name)
    return out
