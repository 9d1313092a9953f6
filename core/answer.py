"""Answer generation from a Retrieval: the context sections and numbered sources go to the backend, which
answers with citations [n] to those sources (Ollama: generated; offline: extractive).

The context is bounded twice: at most MAX_ITEMS items of each kind per section (`per_kind`), and, given a token
budget (the model's context window less what the prompt and the answer need, `context_budget`), items taken in
turns across every section and kind (each stream best first) while they fit. A model server cuts a prompt longer than
its window from the front, which would lose the instructions and the question; the turns keep the best items of
every section and kind instead of filling the window with the first section."""

from __future__ import annotations

from dataclasses import dataclass

from core.ingest import count_tokens
from core.protocols import ContextBlock, LanguageBackend
from core.retrieval.base import Retrieval, per_kind
from core.text import truncate

MAX_ITEM_CHARS = 1200
MAX_ITEMS = 20  # per kind of item in a section (`per_kind`)
PROMPT_RESERVE = 1536  # tokens of the context window kept for the prompt's instructions, question, sources and answer


@dataclass
class Answer:
    text: str
    context: ContextBlock


def context_budget(num_ctx: int) -> int:
    """Tokens the context sections may take in a window of `num_ctx` tokens (at least 256)."""
    return max(num_ctx - PROMPT_RESERVE, 256)


def context_block(r: Retrieval, max_tokens: int | None = None) -> ContextBlock:
    """Sections as text items, each prefixed with the [n] of the first ranked source that backs it; with
    `max_tokens`, only the items taken in turns across sections and kinds while they fit (module doc)."""
    number = {s.document_id: i + 1 for i, s in enumerate(r.sources)}

    def fmt(item) -> str:
        cite = next((number[d] for d in item.documents if d in number), None)
        body = f"{item.title}: {truncate(item.text, MAX_ITEM_CHARS)}" if item.kind != "chunk" else truncate(
            item.text, MAX_ITEM_CHARS)
        return f"[{cite}] {body}" if cite else body

    names = ("local", "bridge", "global")
    texts = {sec: [(pos, it.kind, fmt(it)) for pos, it in per_kind(r.sections[sec], MAX_ITEMS)[0]] for sec in names}
    if max_tokens is not None:
        streams = [[(sec, pos, text) for pos, kind, text in texts[sec] if kind == k]
                   for sec in names for k in dict.fromkeys(kind for _, kind, _ in texts[sec])]
        kept: set[tuple[str, int]] = set()
        left = max_tokens
        for turn in range(max((len(st) for st in streams), default=0)):
            for st in streams:
                if turn < len(st):
                    sec, pos, text = st[turn]
                    n = count_tokens(text)
                    if n <= left:  # an item too long for what is left is skipped, shorter ones may still fit
                        kept.add((sec, pos))
                        left -= n
        texts = {sec: [t for t in texts[sec] if (sec, t[0]) in kept] for sec in names}
    return ContextBlock(
        local=[t for _, _, t in texts["local"]],
        bridge=[t for _, _, t in texts["bridge"]],
        global_=[t for _, _, t in texts["global"]],
        sources=[f"[{i + 1}] {s.title}" for i, s in enumerate(r.sources)],
    )


def answer(backend: LanguageBackend, r: Retrieval, max_tokens: int | None = None) -> Answer:
    ctx = context_block(r, max_tokens)
    return Answer(backend.answer(r.question, ctx), ctx)
