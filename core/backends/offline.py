"""The offline language backend: deterministic heuristics that need no model server.

Extraction is `core.extract.offline`; reports are extractive (central sentences, key names as the title);
answers are extractive (the context sentences that best cover the question, with their source markers).
"""

from __future__ import annotations

import re
from collections import Counter

from core.backends.base import ContextBlock, Extraction, Finding, Report, Summary
from core.extract.offline import extract_offline
from core.extract.text import (
    central_sentences,
    content_words,
    idf_table,
    overlap_score,
    split_sentences,
    strip_label,
    truncate,
)

_CITE = re.compile(r"^\[(\d+)\]\s*")


class OfflineBackend:
    name = "offline"
    model = "heuristic"

    def __init__(self, max_entities: int = 40, max_relationships: int = 60):
        self.max_entities = max_entities
        self.max_relationships = max_relationships

    def extract(self, text: str, entity_types: list[str], subject: str | None = None) -> Extraction:
        return extract_offline(text, entity_types, subject, self.max_entities, self.max_relationships)

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

    def answer(self, question: str, context: ContextBlock) -> str:
        """The sentences of the context that best cover the question's words, each keeping its [n] citation."""
        q = set(content_words(question))
        candidates: list[tuple[str, str, int]] = []  # (sentence, citation, section rank)
        for rank, section in enumerate((context.local, context.bridge, context.global_)):
            for item in section:
                m = _CITE.match(item)
                cite = f"[{m.group(1)}]" if m else ""
                body = strip_label(item[m.end():] if m else item)
                for s in split_sentences(body):
                    candidates.append((s, cite, rank))
        if not candidates or not q:
            return "The retrieved context does not contain an answer to this question."
        idf = idf_table(content_words(s) for s, _, _ in candidates)
        scored = sorted(
            ((overlap_score(q, s, idf) - 0.02 * rank, i) for i, (s, _, rank) in enumerate(candidates)),
            key=lambda p: (-p[0], p[1]),
        )
        picked: list[str] = []
        used: set[str] = set()
        for score, i in scored:
            if score <= 0 or len(picked) >= 3:
                break
            s, cite, _ = candidates[i]
            key = " ".join(s.lower().split())
            if any(key in u or u in key for u in used):  # the same sentence seen through another item
                continue
            used.add(key)
            picked.append(f"{s} {cite}".strip())
        if not picked:
            return "The retrieved context does not contain an answer to this question."
        return " ".join(picked)


def _title(names: list[str]) -> str:
    if not names:
        return "Untitled group"
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    return f"{names[0]}, {names[1]} and {names[2]}"
