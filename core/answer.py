"""Answer generation from a Retrieval: the context sections and numbered sources go to the backend, which
answers with citations [n] to those sources (Ollama: generated; offline: extractive).

The context is bounded twice: at most MAX_ITEMS items of each kind per section (`per_kind`), and, given a token
budget (the model's context window less what the prompt and the answer need, `context_budget`), items taken in
turns across every section and kind (each stream best first) while they fit. A model server cuts a prompt longer than
its window from the front, which would lose the instructions and the question; the turns keep the best items of
every section and kind instead of filling the window with the first section.

Citations are per sentence (core/explore/evidence.py): given the retrieved documents' texts, an item is split into
pieces, each prefixed with the [n] of the source document that contains its sentences, and a sentence no retrieved
document contains carries no [n]. Without the texts, only an item backed by a single source document is cited.

`answer` given the query's Resources also records in the trace what answered (`answered_by`: "offline" or the model),
the best evidence (offline: the sentence(s) that most likely answer, `best_evidence`; with a model: the best
sentences of the documents its answer cites) and the evidence chain on the graph (core/explore/chain.py)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from core.explore.chain import Chain, evidence_chain
from core.explore.evidence import (
    Evidence,
    Locator,
    Reading,
    add_similarity,
    best_evidence,
    cited_pieces,
    norm,
    read_sources,
)
from core.ingest import count_tokens
from core.protocols import ContextBlock, LanguageBackend, RetrievalLLM
from core.retrieval.base import ContextItem, Resources, Retrieval, per_kind
from core.text import truncate

MAX_ITEM_CHARS = 1200
MAX_ITEMS = 20  # per kind of item in a section (`per_kind`)
PROMPT_RESERVE = 1536  # tokens of the context window kept for the prompt's instructions, question, sources and answer


@dataclass
class Answer:
    text: str
    context: ContextBlock
    evidence: list[Evidence] = field(default_factory=list)


def context_budget(num_ctx: int) -> int:
    """Tokens the context sections may take in a window of `num_ctx` tokens (at least 256)."""
    return max(num_ctx - PROMPT_RESERVE, 256)


def item_lines(item: ContextItem, number: dict[str, int], locator: Locator | None, plain: bool = False) -> list[str]:
    """An item as context lines: `[n] title: sentences` per run of sentences one source document holds (module
    doc); a chunk, or an item titled by the start of its own text (a statement), has no title; a line of sentences
    no source holds has no [n]. `plain` (the offline answer, which reads a title only up to its first full stop):
    a title's full stops as one-dot leaders ("S. P. L. Sørensen" -> "S․ P․ L․ Sørensen")."""
    title = item.title.replace(".", "\u2024") if plain else item.title
    own = norm(item.text).startswith(norm(item.title).rstrip("…").rstrip())
    label = f"{title}: " if item.kind != "chunk" and not own else ""
    body = truncate(item.text, MAX_ITEM_CHARS)
    if locator is None:
        docs = set(item.documents)
        cite = number.get(item.documents[0]) if len(docs) == 1 else None
        return [f"[{cite}] {label}{body}" if cite else f"{label}{body}"]
    pieces = cited_pieces(body, locator, item.documents)
    return [(f"[{number[d]}] " if d in number else "") + label + text for d, text in pieces] or [f"{label}{body}"]


def context_block(r: Retrieval, max_tokens: int | None = None, docs: dict[str, str] | None = None,
                  plain: bool = False) -> ContextBlock:
    """Sections as text lines cited per sentence by the source document that holds it (`docs`: the sources'
    texts; module doc); with `max_tokens`, only the items taken in turns across sections and kinds while they
    fit (module doc); `plain`: titles for the offline answer (`item_lines`)."""
    order = [s.document_id for s in r.sources]
    number = {d: i + 1 for i, d in enumerate(order)}
    locator = Locator(docs, order) if docs is not None else None

    names = ("local", "bridge", "global")
    texts = {sec: [(pos, it.kind, item_lines(it, number, locator, plain)) for pos, it in per_kind(r.sections[sec],
                                                                                           MAX_ITEMS)[0]]
             for sec in names}
    if max_tokens is not None:
        streams = [[(sec, pos, lines) for pos, kind, lines in texts[sec] if kind == k]
                   for sec in names for k in dict.fromkeys(kind for _, kind, _ in texts[sec])]
        kept: set[tuple[str, int]] = set()
        left = max_tokens
        for turn in range(max((len(st) for st in streams), default=0)):
            for st in streams:
                if turn < len(st):
                    sec, pos, lines = st[turn]
                    n = count_tokens("\n".join(lines))
                    if n <= left:  # an item too long for what is left is skipped, shorter ones may still fit
                        kept.add((sec, pos))
                        left -= n
        texts = {sec: [t for t in texts[sec] if (sec, t[0]) in kept] for sec in names}
    return ContextBlock(
        local=[line for _, _, lines in texts["local"] for line in lines],
        bridge=[line for _, _, lines in texts["bridge"] for line in lines],
        global_=[line for _, _, lines in texts["global"] for line in lines],
        sources=[f"[{i + 1}] {s.title}" for i, s in enumerate(r.sources)],
    )


_CITED = re.compile(r"\[(\d+)\]")


def cited_numbers(text: str, n_sources: int) -> list[int]:
    """The source numbers an answer cites ([n], n among the sources), in the order first cited."""
    return list(dict.fromkeys(int(m) for m in _CITED.findall(text) if 1 <= int(m) <= n_sources))


def explain(res: Resources, r: Retrieval, answer_text: str, by_model: bool, reading: Reading | None = None,
            similarity: bool = True) -> list[Evidence]:
    """The best evidence of `r` (offline: the sentence(s) that most likely answer; with a model, those of the
    documents its answer cites) and its evidence chain, recorded in `r.trace` ("evidence", "chain")."""
    reading = reading or read_sources(res.store, res.ws_id, r)
    if similarity:
        add_similarity(reading, res, r.question)
    if by_model:  # the model's answer cites these sources: its evidence is read in them only
        cited = {r.sources[n - 1].document_id for n in cited_numbers(answer_text, len(r.sources))}
        reading = Reading(reading.docs, {d: v for d, v in reading.sentences.items() if d in cited},
                          reading.similarity)
    evidence = best_evidence(r.question, r, reading)
    r.trace["evidence"] = [e.to_dict() for e in evidence]
    r.trace["chain"] = evidence_chain(res, r.question, evidence, [s.title for s in r.sources]).to_dict()
    return evidence


def recorded(res: Resources | None, r: Retrieval, answer_text: str, by_model: bool) -> tuple[list[Evidence], Chain]:
    """The best evidence and chain recorded in `r.trace`; for a result from before they were recorded, made now
    with `res` (nothing without it)."""
    if "evidence" not in r.trace and res is not None:
        explain(res, r, answer_text, by_model)
    return [Evidence(**e) for e in r.trace.get("evidence", [])], Chain.from_dict(r.trace.get("chain"))


def answer(backend: LanguageBackend, r: Retrieval, max_tokens: int | None = None,
           res: Resources | None = None) -> Answer:
    """The backend's answer from `r`'s context (cited per sentence when `res` gives the sources' texts), and with
    `res` the best evidence and its chain in `r.trace` (`explain`)."""
    reading = read_sources(res.store, res.ws_id, r) if res is not None else None
    by_model = isinstance(backend, RetrievalLLM)
    ctx = context_block(r, max_tokens, reading.docs if reading is not None else None, plain=not by_model)
    text = backend.answer(r.question, ctx)
    r.trace["answered_by"] = str(getattr(backend, "model", None) or backend.name) if by_model else "offline"
    evidence: list[Evidence] = []
    if res is not None:
        t = time.perf_counter()
        evidence = explain(res, r, text, by_model, reading)
        r.trace["timings_ms"]["evidence"] = round((time.perf_counter() - t) * 1000, 2)
    return Answer(text, ctx, evidence)
