"""The structures strategies derive from a Resources (core/retrieval/cache.py) on the built sample workspace: two
sessions asking at once build each once and share it; other settings share what does not depend on them; a new
Resources (the app opens one per build version) starts empty."""

from __future__ import annotations

import threading

import pytest

from core.algorithms.chnsw import CHNSW, CHNSW_ARTIFACT
from core.graph.hetero import EdgeList
from core.retrieval import noderag
from core.retrieval.archrag.search import chnsw_cache
from core.retrieval.base import HETERO, VIEW, Resources, get_strategy
from core.retrieval.hlg import graph as hlg_graph
from core.retrieval.noderag import NodeRAGStrategy

Q = "Which university trained the engineer who designed the Halden Barrier's sluice gates?"


def fresh(res: Resources) -> Resources:
    return Resources(res.store, res.ws, res.settings, res.embedder, res.index)


def at_once(fn, n: int = 4) -> list:
    """fn() in n threads released together; their results."""
    start = threading.Barrier(n)
    out: list = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return out


def counting(monkeypatch, owner, name: str) -> list:
    """Replace classmethod `owner.name` by one that records each call, then loads as before."""
    calls: list = []
    real = getattr(owner, name)

    def load(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, load)
    return calls


def test_two_sessions_asking_for_the_walk_at_once_build_it_once(sample_resources, monkeypatch):
    res = fresh(sample_resources)
    loads = counting(monkeypatch, EdgeList, "load")
    walks = counting(monkeypatch, noderag, "Walk")
    got = at_once(lambda: NodeRAGStrategy.walk(res))
    assert len(loads) == 1 and len(walks) == 1
    assert all(w is got[0] for w in got)
    assert got[0].h is res.hetero  # the walk reads the one heterograph of this Resources


def test_two_sessions_asking_for_the_lexicon_at_once_build_it_once(sample_resources, monkeypatch):
    res = fresh(sample_resources)
    loads = counting(monkeypatch, hlg_graph.Lexicon, "load")
    got = at_once(lambda: hlg_graph.lexicon(res))
    assert len(loads) == 1 and all(lx is got[0] for lx in got)
    tfidf = at_once(got[0].statement_tfidf)
    assert all(m is tfidf[0] for m in tfidf)


def test_concurrent_questions_give_the_answers_of_one_session(sample_resources):
    """Every strategy that caches a structure, asked by four sessions at once on a cold Resources, returns what a
    single session gets (same sources in the same order, same scores)."""
    for name in ("noderag", "hlg-statement", "archrag", "naive", "graphrag-local"):
        strat = get_strategy(name)
        alone = strat.retrieve(fresh(sample_resources), Q)
        res = fresh(sample_resources)
        got = at_once(lambda s=strat, r=res: s.retrieve(r, Q))
        for r in got:
            assert [(s.document_id, s.score) for s in r.sources] == \
                [(s.document_id, s.score) for s in alone.sources], name
            assert {k: [(i.id, i.score) for i in v] for k, v in r.sections.items()} == \
                {k: [(i.id, i.score) for i in v] for k, v in alone.sections.items()}, name


def test_the_chnsw_cache_is_one_per_resources_and_reloads_when_the_stored_index_changes(sample_resources):
    res = fresh(sample_resources)
    got = at_once(lambda: chnsw_cache(res))
    assert all(c is got[0] for c in got) and got[0].index is not None
    assert chnsw_cache(fresh(sample_resources)) is not got[0]
    store, ws_id = sample_resources.store, sample_resources.ws_id
    stored = store.artifact(ws_id, CHNSW_ARTIFACT)
    assert stored is not None and stored[0] == got[0].digest
    changed = CHNSW.from_bytes(stored[1])
    changed.meta = {**changed.meta, "rebuilt": True}  # another build (on another host) stored a new index
    try:
        store.put_artifact(ws_id, CHNSW_ARTIFACT, changed.to_bytes())
        again = chnsw_cache(res)
        assert again is not got[0] and again.digest != got[0].digest and again.row == got[0].row
        assert again.index is not None and again.index.meta["rebuilt"] is True
        assert chnsw_cache(res) is again
    finally:
        store.put_artifact(ws_id, CHNSW_ARTIFACT, stored[1])


def test_other_settings_share_the_graph_but_not_the_walk(sample_resources):
    res = fresh(sample_resources)
    base = NodeRAGStrategy.walk(res)
    settings = res.settings.model_copy(deep=True)
    settings.retrieval.noderag.chunk_entity_links = True
    other = res.with_settings(settings)
    assert other.settings is settings and res.settings is not settings
    assert other.hetero is res.hetero and other.view is res.view
    assert NodeRAGStrategy.walk(other) is not base and NodeRAGStrategy.walk(res) is base


@pytest.mark.parametrize("key", [VIEW, HETERO])
def test_a_new_resources_starts_with_an_empty_cache(sample_resources, key):
    a, b = fresh(sample_resources), fresh(sample_resources)
    assert a.cache.peek(key) is None
    va = a.view if key is VIEW else a.hetero
    assert a.cache.peek(key) is va
    assert b.cache.peek(key) is None
    vb = b.view if key is VIEW else b.hetero
    assert vb is not va
