"""Query history of a workspace: the questions asked (one `QueryLog` row per question and strategy, written by
core/workspace.py `ask`), listed newest first with their answer as one line, re-opened as a `Retrieval`, and exported
as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlmodel import col, select

from core.ids import owned
from core.models import QueryLog
from core.retrieval.base import Retrieval
from core.store import Store


@dataclass
class QueryEntry:
    id: int
    created_at: datetime
    strategy: str
    question: str
    ms: float
    n_sources: int
    asked_by: str | None = None  # the signed-in user who asked; None without sign-in
    answer: str = ""  # what the page shows as its answer (`shown_answer`)


def shown_answer(answer: str, result: dict | None) -> str:
    """A past answer as one line: offline, its best evidence ("Best evidence: … [n]", recorded in the result's
    trace); with a model, or from before evidence was recorded, the answer's text."""
    trace = (result or {}).get("trace") or {}
    evidence = trace.get("evidence") or []
    if trace.get("answered_by") == "offline" and evidence:
        return "Best evidence: " + " ".join(
            f"{e.get('sentence', '')}" + (f" [{e['cite']}]" if e.get("cite") else "") for e in evidence)
    return " ".join((answer or "").split())


def utc(dt: datetime) -> datetime:
    """SQLite hands datetimes back without their zone; they were written in UTC."""
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def list_queries(store: Store, ws_id: int, limit: int = 50, only: str | None = None) -> list[QueryEntry]:
    """The workspace's latest `limit` questions, newest first; `only`: those this person asked."""
    with store.session() as s:
        newest = (col(QueryLog.created_at).desc(), col(QueryLog.id).desc())
        sel = select(QueryLog).where(QueryLog.workspace_id == ws_id)
        if only is not None:
            sel = sel.where(QueryLog.asked_by == only)
        rows = s.exec(sel.order_by(*newest).limit(limit)).all()
        entries: list[QueryEntry] = []
        for q in rows:
            assert q.id is not None  # a row read from the store has its key
            entries.append(QueryEntry(q.id, utc(q.created_at), q.strategy, q.question, q.ms,
                                      len((q.result or {}).get("sources", [])), q.asked_by,
                                      shown_answer(q.answer, q.result)))
        return entries


def count_queries(store: Store, ws_id: int, only: str | None = None) -> int:
    from sqlalchemy import func

    q = select(func.count()).select_from(QueryLog).where(QueryLog.workspace_id == ws_id)
    with store.session() as s:
        return s.exec(q.where(QueryLog.asked_by == only) if only is not None else q).one()


def open_query(store: Store, ws_id: int, query_id: int, only: str | None = None) -> tuple[Retrieval, str] | None:
    """A past result as it was returned (the stored Retrieval) and its answer; None when absent or unreadable (or,
    with `only`, asked by someone else)."""
    with store.session() as s:
        q = owned(s, QueryLog, ws_id, query_id)
        if q is None or not q.result or (only is not None and q.asked_by != only):
            return None
        try:
            return Retrieval.from_dict(q.result), q.answer
        except (KeyError, TypeError):  # a row written by an older result format
            return None


def export_rows(store: Store, ws_id: int, only: str | None = None) -> list[dict]:
    """Every question of the workspace (`only`: this person's), oldest first: question, strategy, answer, the full
    retrieval result, retrieval ms, time asked (ISO 8601, UTC) and who asked (null without sign-in)."""
    q = select(QueryLog).where(QueryLog.workspace_id == ws_id)
    with store.session() as s:
        rows = s.exec((q.where(QueryLog.asked_by == only) if only is not None else q)
                      .order_by(col(QueryLog.created_at), col(QueryLog.id))).all()
        return [{"id": q.id, "created_at": utc(q.created_at).isoformat(), "question": q.question,
                 "strategy": q.strategy, "answer": q.answer, "ms": q.ms, "result": q.result,
                 "asked_by": q.asked_by} for q in rows]


def export_json(store: Store, ws_id: int, only: str | None = None) -> str:
    """export_rows as a JSON document {"workspace_id", "queries": [...]}."""
    return json.dumps({"workspace_id": ws_id, "queries": export_rows(store, ws_id, only)}, ensure_ascii=False,
                      indent=1)
