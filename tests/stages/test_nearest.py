"""`Resources.nearest`: the strategies' vector searches are exact (every stored vector of the kind scored by cosine),
ordered by score then id, with the metadata filter applied, on the store under test (embedded, or a Chroma server)."""

from __future__ import annotations

import numpy as np


def _brute(res, kind, q, k, where=None):
    ids, vecs, metas = res.index.all_entries(kind)
    qn = q.astype(np.float64) / np.linalg.norm(q)
    rows = [(-float(vecs[i].astype(np.float64) @ qn), ids[i]) for i in range(len(ids))
            if not where or all(metas[i].get(a) == b for a, b in where.items())]
    return [(i, -s) for s, i in sorted(rows)[:k]]


def test_nearest_is_the_exact_top_k_by_cosine_then_id(sample_resources):
    res = sample_resources
    for question in ("Who approved Carrow Gold?", "When did the Halden barrier's sluice gates close?"):
        q = res.embed_query(question)
        for kind, k in (("chunk", 10), ("entity", 20), ("statement", 10), ("attribute", 5)):
            got = res.nearest(kind, q, k)
            want = _brute(res, kind, q, k)
            assert [h.id for h in got] == [i for i, _ in want], f"{kind}: the exact top {k}, ties by id"
            assert all(abs(h.score - s) < 1e-6 for h, (_, s) in zip(got, want))
            assert len(got) == min(k, res.index.count(kind))
        leiden = res.nearest("community", q, 5, where={"method": "leiden"})
        assert leiden and all(h.meta.get("method") == "leiden" for h in leiden)
        assert [h.id for h in leiden] == [i for i, _ in _brute(res, "community", q, 5, {"method": "leiden"})]
    assert res.nearest("chunk", q, 0) == [] and res.nearest("community", q, 3, where={"method": "none"}) == []
