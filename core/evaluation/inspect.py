"""One question of an evaluation opened (the Evaluate page's question view): every strategy's retrieval of it, to
draw their paths side by side (the Ask page's drawing) with the gold nodes highlighted and to show their local /
bridge / global context, beside what the evaluation stored for it (the gold found, at which ranks).

The stored results keep ranked documents, not whole retrievals (a few hundred questions × every strategy would
be tens of megabytes), so the retrievals are made again here; `stale` says when the workspace was rebuilt since
the evaluation ran (the paths drawn are then today's, the stored ranks the evaluation's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlmodel import col, select

from core.evaluation import records
from core.models import Evaluation, Node
from core.protocols import RetrievalLLM
from core.retrieval.base import Resources, Retrieval, get_strategy


@dataclass
class QuestionView:
    index: int
    question: dict
    gold_documents: list[str]
    gold_nodes: set[str]  # the gold documents' ids and their chunks' ids: what to highlight on a path
    found: dict[str, list[int]]  # strategy -> stored rank of each gold entry (0: not found)
    retrievals: dict[str, Retrieval] = field(default_factory=dict)
    stale: bool = False


def gold_nodes(res: Resources, doc_ids: list[str]) -> set[str]:
    with res.store.session() as s:
        chunks = s.exec(select(Node.id).where(Node.workspace_id == res.ws_id, Node.kind == "chunk",
                                              col(Node.document_id).in_(doc_ids))).all()
    return set(doc_ids) | set(chunks)


def open_question(res: Resources, ev: Evaluation, index: int, strategies: list[str] | None = None,
                  llm: RetrievalLLM | None = None) -> QuestionView:
    """Question `index` of `ev` with each strategy's retrieval made now (all of the evaluation's by default; the
    page asks for the best few, leads.best_strategies, and adds others on demand with `retrieve`)."""
    if not 0 <= index < len(ev.questions):
        raise IndexError(f"evaluation {ev.id} has no question {index}")
    q = ev.questions[index]
    docs = list(dict.fromkeys(d for g in q["gold"] for d in g["docs"]))
    found = {r.strategy: list(r.found) for r in records.results(res.store, ev) if r.question == index}
    view = QuestionView(index, q, docs, gold_nodes(res, docs), found, stale=res.ws.build_version != ev.build_version)
    return retrieve(res, ev, view, ev.strategies if strategies is None else strategies, llm)


def retrieve(res: Resources, ev: Evaluation, view: QuestionView, strategies: list[str],
             llm: RetrievalLLM | None = None) -> QuestionView:
    """`view` with the retrievals of those of `strategies` (the evaluation's own only) it does not hold yet."""
    missing = [n for n in strategies if n in ev.strategies and n not in view.retrievals]
    if missing:
        settings = res.settings.model_copy(deep=True)
        settings.retrieval.max_sources = max(settings.retrieval.max_sources, max(ev.ks))
        res = res.with_settings(settings)
    for name in missing:
        view.retrievals[name] = get_strategy(name).retrieve(res, view.question["question"], llm=llm)
    return view
