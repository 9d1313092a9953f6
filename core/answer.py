"""Answer generation from a Retrieval: the context sections and numbered sources go to the backend, which
answers with citations [n] to those sources (Ollama: generated; offline: extractive)."""

from __future__ import annotations

from dataclasses import dataclass

from core.protocols import ContextBlock, LanguageBackend
from core.retrieval.base import Retrieval
from core.text import truncate

MAX_ITEM_CHARS = 1200
MAX_ITEMS = 20


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
        local=[fmt(i) for i in r.sections["local"][:MAX_ITEMS]],
        bridge=[fmt(i) for i in r.sections["bridge"][:MAX_ITEMS]],
        global_=[fmt(i) for i in r.sections["global"][:MAX_ITEMS]],
        sources=[f"[{i + 1}] {s.title}" for i, s in enumerate(r.sources)],
    )


def answer(backend: LanguageBackend, r: Retrieval) -> Answer:
    ctx = context_block(r)
    return Answer(backend.answer(r.question, ctx), ctx)
