"""Retrieval evaluation over a queries file: recall@k of ranked source documents against gold ids, and
retrieval latency percentiles. Gold ids are matched to documents' external ids."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlmodel import select

from core.models import Document
from core.protocols import RetrievalLLM
from core.retrieval.base import Resources, get_strategy


@dataclass
class Query:
    id: str
    question: str
    gold: set[str]


def load_queries(path: Path, limit: int | None = None) -> list[Query]:
    out: list[Query] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                gold = {str(g) for g in d.get("gold_ids", [])}
                out.append(Query(str(d.get("id", n)), d["question"], gold))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:  # AttributeError: not an object
                raise ValueError(f"{path}:{n}: not a query line ({exc})") from exc
            if limit and len(out) >= limit:
                break
    if not out:
        raise ValueError(f"{path}: no queries")
    return out


def recall_at(ranked: list, gold: set[str], k: int) -> float:
    """Share of `gold` found in the top k; an entry of `ranked` is an id or the set of ids one document has."""
    if not gold:
        return 0.0
    found: set[str] = set()
    for r in ranked[:k]:
        found |= r if isinstance(r, set) else {r}
    return len(found & gold) / len(gold)


def gold_ranks(ranked: list, gold: set[str]) -> list[int]:
    """Per gold id (sorted), the 1-based rank of the first entry of `ranked` holding it, 0 when none does; its
    recall@k is the share of ranks in 1..k, as `recall_at`."""
    first: dict[str, int] = {}
    for i, r in enumerate(ranked, 1):
        for d in r if isinstance(r, set) else {r}:
            first.setdefault(d, i)
    return [first.get(g, 0) for g in sorted(gold)]


def document_ids(store, ws_id: int) -> dict[str, set[str]]:
    """Every id a stored document answers to: its external id and those of identical passages merged into it."""
    with store.session() as s:
        rows = s.exec(select(Document.id, Document.external_id, Document.meta).where(Document.workspace_id == ws_id))
        return {d: ({x} if x is not None else {d}) | set((m or {}).get("external_ids", [])) for d, x, m in rows}


def evaluate(res: Resources, queries: list[Query], strategies: list[str], ks: list[int],
             on_progress: Callable[[str, int, int], None] | None = None,
             llm: RetrievalLLM | None = None) -> dict[str, dict]:
    """{strategy: {"recall@k": mean, ..., "latency_ms_p50", "latency_ms_p95", "warmup_ms", "queries": n,
    "found": per query, the 1-based rank of each gold id (sorted) among the sources, 0 when absent}}, and
    "llm": the model, when `llm` (a model backend) ran the strategies' language steps, as `core.workspace.ask`
    hands it to them (GraphRAG's map, ArchRAG's filter, HLG's keywords and rerank, NodeRAG's question entities).

    Each strategy first answers the first question once, untimed in the percentiles: that call pays the one-off
    loading of what the strategy reads (graph view, heterograph, BM25 index, C-HNSW), which the app caches per
    build version; its time is reported as `warmup_ms`."""
    out: dict[str, dict] = {}
    assert res.ws.id is not None  # a stored row has its key
    ids_of = document_ids(res.store, res.ws.id)
    for name in strategies:
        strat = get_strategy(name)
        recalls: dict[int, list[float]] = {k: [] for k in ks}
        lat: list[float] = []
        found: list[list[int]] = []
        t0 = time.perf_counter()
        strat.retrieve(res, queries[0].question, llm=llm)
        warmup_ms = (time.perf_counter() - t0) * 1000
        res.queries.clear()  # each strategy's latency includes embedding its questions (Resources.embed_query)
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            r = strat.retrieve(res, q.question, llm=llm)
            lat.append((time.perf_counter() - t0) * 1000)
            ranked = [ids_of.get(s.document_id, {s.document_id}) for s in r.sources]
            for k in ks:
                recalls[k].append(recall_at(ranked, q.gold, k))
            found.append(gold_ranks(ranked, q.gold))
            if on_progress:
                on_progress(name, i + 1, len(queries))
        row: dict[str, float | int | str | list] = {f"recall@{k}": round(float(np.mean(v)), 4) for k, v in recalls.items()}
        row["latency_ms_p50"] = round(float(np.percentile(lat, 50)), 2)
        row["latency_ms_p95"] = round(float(np.percentile(lat, 95)), 2)
        row["warmup_ms"] = round(warmup_ms, 1)
        row["queries"] = len(queries)
        row["found"] = found
        if llm is not None:
            row["llm"] = llm.model
        out[name] = row
    return out


def iter_rows(result: dict[str, dict], ks: list[int]) -> Iterator[list[str]]:
    yield ["strategy"] + [f"R@{k}" for k in ks] + ["p50 ms", "p95 ms", "queries"]
    for name, row in result.items():
        yield [name] + [f"{row[f'recall@{k}']:.3f}" for k in ks] + [
            f"{row['latency_ms_p50']:.1f}", f"{row['latency_ms_p95']:.1f}", str(row["queries"])]
