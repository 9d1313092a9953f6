"""Answer generation from a Retrieval: the context sections and numbered sources go to the backend, which
answers with citations [n] to those sources (Ollama: generated; offline: extractive)."""

from __future__ import annotations

from dataclasses import dataclass

from core.protocols import ContextBlock, LanguageBackend
from core.retrieval.base import Retrieval, per_kind
from core.text import truncate

MAX_ITEM_CHARS = 1200
MAX_ITEMS = 20  # per kind of item in a section (`per_kind`)


@dataclass
class Answer:
    text: str
    context: ContextBlock


def context_block(r: Retrieval) -> ContextBlock:
    """Sections as text items, each prefixed with the [n] of the first ranked source that backs it."""
    number = {s.document_id: i + 1 for i, s in enumerate(r.sources)}

    def fmt(item) -> str:
        cite = next((number[d] for d in item.documents if d in number), None)
        body = f"{item.title}: {truncate(item.text, MAX_ITEM_CHARS)}" if item.kind != "chunk" else truncate(
            item.text, MAX_ITEM_CHARS)
        return f"[{cite}] {body}" if cite else body

    return ContextBlock(
        local=[fmt(i) for _, i in per_kind(r.sections["local"], MAX_ITEMS)[0]],
        bridge=[fmt(i) for _, i in per_kind(r.sections["bridge"], MAX_ITEMS)[0]],
        global_=[fmt(i) for _, i in per_kind(r.sections["global"], MAX_ITEMS)[0]],
        sources=[f"[{i + 1}] {s.title}" for i, s in enumerate(r.sources)],
    )


def answer(backend: LanguageBackend, r: Retrieval) -> Answer:
    ctx = context_block(r)
    return Answer(backend.answer(r.question, ctx), ctx)
