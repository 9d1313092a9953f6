"""A question's vector is embedded once for the strategies asked side by side (core/retrieval/base.py
QueryVectors): the same vector each time, a copy the caller may change, the oldest questions forgotten."""

from __future__ import annotations

import numpy as np

from core.retrieval.base import QueryVectors


def test_a_question_is_embedded_once_and_each_caller_gets_its_own_copy():
    calls: list[str] = []

    def embed(q: str):
        return lambda: (calls.append(q), np.arange(4, dtype=np.float32) + len(q))[1]

    kept = QueryVectors(size=2)
    a = kept.get("who?", embed("who?"))
    a[0] = 99.0  # a caller's change reaches no other caller
    b = kept.get("who?", embed("who?"))
    assert calls == ["who?"] and b.tolist() == [4.0, 5.0, 6.0, 7.0]
    kept.get("where?", embed("where?"))
    kept.get("when?", embed("when?"))  # the least recently asked ("who?") is forgotten
    kept.get("who?", embed("who?"))
    assert calls == ["who?", "where?", "when?", "who?"]
    kept.clear()
    kept.get("when?", embed("when?"))
    assert calls[-1] == "when?" and len(calls) == 5


def test_an_evaluation_times_each_strategy_with_its_own_embedding():
    """The evaluate job measures every strategy on a question one after another: each one's ms include embedding the
    question (core/evaluation/job.py `measure`), none reuses the vector the strategy before it made."""
    from types import SimpleNamespace

    from core.evaluation.job import measure
    from core.retrieval.base import Resources

    calls: list[str] = []
    embedder = SimpleNamespace(embed=lambda texts: (calls.extend(texts), [np.ones(4, dtype=np.float32)])[1])
    res = Resources(store=None, ws=None, settings=None, embedder=embedder, index=None)  # type: ignore[arg-type]
    strategy = SimpleNamespace(retrieve=lambda res, q, llm=None: (res.embed_query(q), SimpleNamespace(sources=[]))[1])
    for _ in range(3):
        measure(res, strategy, {"question": "who?"})  # type: ignore[arg-type]
    assert calls == ["who?"] * 3
    res.embed_query("who?")
    res.embed_query("who?")  # outside an evaluation, the strategies asked side by side share it
    assert calls == ["who?"] * 3
