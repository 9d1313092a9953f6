"""Same results either way: the tiny corpus built once with the embedded store and once on the Chroma server
(tests/chroma_server.py) holds the same ids and the same vectors, bit for bit, in every collection, and every
retrieval strategy answers a few questions with the same items, sources, paths and scores (to 1e-6)."""

from __future__ import annotations

import math

import pytest

from core.index import chroma
from core.retrieval.base import get_strategy, strategy_names
from core.workspace import open_resources
from tests.chroma_server import server_url
from tests.conftest import write_tiny_docs

QUESTIONS = [
    "Who designed the Tidewater Bridge?",
    "Where did the designer of the Tidewater Bridge study, and who was her adviser?",
    "What does Harwick Engineering build in Kelmouth?",
]


@pytest.fixture(scope="module")
def both(tmp_path_factory, tiny_docs_dir, embedder):
    """(embedded build, server build) of the tiny corpus, whatever STRATA_TEST_CHROMA says."""
    from tests.conftest import _settings, build_workspace

    out = []
    for url in (None, "server"):
        home = tmp_path_factory.mktemp(f"strata_chroma_{'server' if url else 'embedded'}")
        s = _settings(home)
        s.storage.chroma_url = server_url(home) if url else None
        out.append(build_workspace(home, [tiny_docs_dir], embedder, name="w", settings=s))
    return tuple(out)


@pytest.fixture(scope="module")
def tiny_docs_dir(tmp_path_factory):
    return write_tiny_docs(tmp_path_factory.mktemp("tiny_docs"))


def _kinds(index) -> set[str]:
    """The node kinds that have a collection of the index's embedder."""
    names = [c.name for c in index.client.list_collections()]
    if index.server is not None:
        prefix = chroma.server_collection_name(index.workspace, "", "")[: -2]
        names = [n[len(prefix):] for n in names if n.startswith(prefix)]
    return {n.rsplit("__", 1)[0] for n in names if n.endswith(f"__{index.embedder_name}")}


def _same(a, b, where: str = "") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=0, abs_tol=1e-6), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_the_builds_ran_on_the_stores_asked_for(both):
    embedded, server = both
    assert embedded.settings.storage.chroma_url is None
    assert server.settings.storage.chroma_url.startswith(server_url())
    assert (embedded.settings.storage.vector_dir("w") / "chroma.sqlite3").exists()
    assert not (server.settings.storage.vector_dir("w") / "chroma.sqlite3").exists()


def test_every_collection_holds_the_same_ids_and_vectors(both):
    import numpy as np

    idx = [open_resources(b.store, b.ws, b.settings, b.embedder).index for b in both]
    kinds = _kinds(idx[0])
    assert {"entity", "chunk", "community"} <= kinds and _kinds(idx[1]) == kinds
    for kind in sorted(kinds):
        (ia, va), (ib, vb) = idx[0].all_vectors(kind), idx[1].all_vectors(kind)
        assert sorted(ia) == sorted(ib) and ia, kind
        rows_b = {i: r for r, i in enumerate(ib)}
        assert np.array_equal(va, vb[[rows_b[i] for i in ia]]), f"{kind}: vectors differ"
        assert idx[0].existing(kind) == idx[1].existing(kind), f"{kind}: content hashes differ"


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_retrieves_the_same(both, strategy):
    res = [open_resources(b.store, b.ws, b.settings, b.embedder) for b in both]
    for q in QUESTIONS:
        got = [get_strategy(strategy).retrieve(r, q).to_dict() for r in res]
        for d in got:
            d["trace"].pop("timings_ms", None)
        assert any(got[0]["sections"].values()), f"{strategy} found nothing for {q!r}"
        _same(got[0], got[1], f"{strategy} {q!r}")
