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
