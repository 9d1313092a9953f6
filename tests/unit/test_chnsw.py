"""C-HNSW (archrag.txt §3.1.3, Algorithms 2 and 3): exact answers on small layers, links as defined, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from core.algorithms.chnsw import CHNSW, exact_knn, knn_blocks, unit_rows

M = 5


def _layers(vecs: np.ndarray, sizes: list[int]) -> list[tuple[list[str], np.ndarray]]:
    out, start = [], 0
    for n in sizes:
        out.append(([f"L{len(out)}-{i}" for i in range(n)], vecs[start : start + n]))
        start += n
    return out


def _brute(index: CHNSW, q: np.ndarray, layer: int, k: int) -> list[str]:
    lo, hi = index.offsets[layer], index.offsets[layer + 1]
    sims = index.vecs[lo:hi] @ unit_rows(q[None])[0]
    return [str(index.ids[lo + i]) for i in np.argsort(-sims, kind="stable")[:k]]


@pytest.fixture(scope="module")
def random_index() -> CHNSW:
    rng = np.random.default_rng(7)
    vecs = unit_rows(rng.standard_normal((300, 16)))
    return CHNSW.build(_layers(vecs, [200, 70, 30]), m=M, seed=11)


@pytest.fixture(scope="module")
def clustered_layers() -> list[tuple[list[str], np.ndarray]]:
    """Tight, far-apart clusters: an exact 5-NN graph of them falls apart into pieces."""
    rng = np.random.default_rng(3)
    centres = unit_rows(rng.standard_normal((12, 32)))
    vecs = unit_rows(np.repeat(centres, 25, axis=0) + 0.05 * rng.standard_normal((300, 32)))
    return _layers(vecs[rng.permutation(300)], [200, 70, 30])


def _check_exact_answers(index: CHNSW, rng: np.random.Generator, dim: int, trials: int = 150) -> None:
    for _ in range(trials):
        q = rng.standard_normal(dim).astype(np.float32)
        per_layer = index.search_layers(q, 5)
        for layer in range(index.top + 1):
            want = _brute(index, q, layer, 5)
            got = index.query(q, 5, layer)
            assert [i for i, _ in got] == want, f"layer {layer}"
            assert [i for i, _ in per_layer[layer]] == want, f"hierarchical search, layer {layer}"
            sims = [s for _, s in got]
            assert sims == sorted(sims, reverse=True) and -1.0001 <= sims[-1] <= sims[0] <= 1.0001


def _check_links(index: CHNSW) -> None:
    sizes = index.layer_sizes
    for g in range(len(index.ids)):
        layer = index.layer_of(g)
        nb = index.neighbours(g)
        assert len(nb) >= min(index.m, sizes[layer] - 1), "at least M intra-layer links"
        assert all(index.layer_of(x) == layer for x in nb), "intra-layer links stay in their layer"
        assert all(g in index.neighbours(x) for x in nb), "intra-layer links are undirected"
        if layer == 0:
            assert index.inter[g] == -1
            continue
        lo, hi = index.offsets[layer - 1], index.offsets[layer]
        truth = lo + int(np.argmax(index.vecs[lo:hi] @ index.vecs[g]))
        assert index.inter[g] == truth, "the inter-layer link points to the true nearest node one layer down"


def _connected(index: CHNSW, layer: int) -> bool:
    lo, hi = int(index.offsets[layer]), int(index.offsets[layer + 1])
    seen, stack = {lo}, [lo]
    while stack:
        for x in index.neighbours(stack.pop()):
            if x not in seen:
                seen.add(x)
                stack.append(x)
    return len(seen) == hi - lo


def test_greedy_insertion_answers_exactly_and_links_as_defined(random_index):
    assert random_index.layer_sizes == [200, 70, 30]
    assert random_index.meta["exact_above"] >= 200, "these layers were built by Algorithm 3's insertion"
    _check_exact_answers(random_index, np.random.default_rng(1), 16)
    _check_links(random_index)
    assert all(_connected(random_index, la) for la in range(3))
    assert random_index.n_inter_links == 100
    assert random_index.layer_of(int(random_index.entry)) == 2, "queries start in the top layer"


def test_exact_knn_layers_are_joined_into_one_piece_and_answer_exactly(clustered_layers):
    index = CHNSW.build(clustered_layers, m=M, seed=5, exact_above=20)  # every layer by exact kNN
    _check_links(index)
    assert all(_connected(index, la) for la in range(3)), "stray kNN pieces are joined to the largest one"
    for layer, (_, vecs) in enumerate(clustered_layers):  # intra links include the exact M nearest neighbours
        lo = int(index.offsets[layer])
        idx, _ = exact_knn(unit_rows(vecs), M)
        for i in range(len(idx)):
            assert set((lo + idx[i]).tolist()) <= set(index.neighbours(lo + i))
    # greedy search over a kNN graph of far-apart clusters is approximate: every node finds itself, and queries
    # near the data find almost all of their true 5 nearest neighbours
    for g in range(len(index.ids)):
        layer = index.layer_of(g)
        assert index.query(index.vecs[g], 1, layer)[0][0] == index.ids[g]
    rng, hits = np.random.default_rng(2), 0
    for _ in range(100):
        q = index.vecs[rng.integers(200)] + 0.1 * rng.standard_normal(32).astype(np.float32)
        hits += len(set(_brute(index, q, 0, 5)) & {i for i, _ in index.query(q, 5, 0)})
    assert hits >= 0.95 * 500
    # the attributed stage hands over the kNN it already computed: same index
    given = {la: exact_knn(unit_rows(v), 8)[0] for la, (_, v) in enumerate(clustered_layers)}
    again = CHNSW.build(clustered_layers, m=M, seed=5, exact_above=20, knn=given)
    assert np.array_equal(again.indices, index.indices) and np.array_equal(again.inter, index.inter)


def test_greedy_insertion_also_keeps_clustered_layers_connected(clustered_layers):
    index = CHNSW.build(clustered_layers, m=M, seed=5)
    _check_links(index)
    assert all(_connected(index, la) for la in range(3))


def test_stored_and_loaded_it_gives_identical_answers(random_index):
    loaded = CHNSW.from_bytes(random_index.to_bytes())
    assert loaded.layer_sizes == random_index.layer_sizes and loaded.m == M and loaded.entry == random_index.entry
    assert np.array_equal(loaded.indices, random_index.indices) and np.array_equal(loaded.inter, random_index.inter)
    rng = np.random.default_rng(9)
    for _ in range(50):
        q = rng.standard_normal(16).astype(np.float32)
        assert loaded.search_layers(q, 4) == random_index.search_layers(q, 4)
        assert loaded.query(q, 3, 1) == random_index.query(q, 3, 1)


def test_knn_blocks_skip_self_even_among_duplicates():
    rng = np.random.default_rng(4)
    base = unit_rows(rng.standard_normal((20, 8)))
    vecs = np.vstack([base, base[:5]])  # rows 20..24 duplicate rows 0..4
    idx, sims = exact_knn(vecs, 3, block=7)
    assert not (idx == np.arange(len(vecs))[:, None]).any(), "a node is never its own neighbour"
    for i in range(5):
        assert idx[i, 0] == 20 + i and idx[20 + i, 0] == i and sims[i, 0] == pytest.approx(1.0, abs=1e-5)
    whole = np.vstack([b for _, b, _ in knn_blocks(vecs, 3, block=100)])
    assert np.array_equal(whole[:, :1], idx[:, :1]), "blocking does not change the answer"
    small, _ = exact_knn(vecs[:3], 5)
    assert (small[:, 2:] == -1).all() and (small[:, :2] >= 0).all(), "missing neighbours are -1"


def test_hierarchical_search_runs_algorithm_2_per_layer_with_list_1_above_the_target(random_index, monkeypatch):
    """archrag.txt Algorithm 2: for target layer l, "c ← SearchLayer(G_i, q, s, 1, i)" on every layer above l from
    the top entry, then "K ← SearchLayer(G_l, q, s, k, l)"; the hierarchical search (§3.2.1) does this for each
    layer. The old walk searched every layer once with one list of max(k, ef)."""
    calls: list[tuple[int, int, int]] = []
    plain = CHNSW._search

    def spy(self, layer, q, entry, ef, visited_out=None):
        calls.append((layer, entry, ef))
        return plain(self, layer, q, entry, ef, visited_out)

    monkeypatch.setattr(CHNSW, "_search", spy)
    q = np.random.default_rng(5).normal(size=random_index.vecs.shape[1]).astype(np.float32)
    found = random_index.search_layers(q, 4, None, None, upper=1)
    entry = int(random_index.entry)
    assert [(la, ef) for la, _, ef in calls] == [(2, 64), (2, 1), (1, 64), (2, 1), (1, 1), (0, 64)]
    assert [e for la, e, _ in calls if la == 2] == [entry, entry, entry]  # each target's run starts at the top
    assert [len(f) for f in found] == [4, 4, 4]
    calls.clear()
    random_index.search_layers(q, 4, 4, None, upper=1)  # ef = k: the paper's list on the target
    assert [(la, ef) for la, _, ef in calls] == [(2, 4), (2, 1), (1, 4), (2, 1), (1, 1), (0, 4)]


def test_insertion_searches_each_layer_with_a_list_of_m(monkeypatch):
    """Algorithm 3 line 12: R <- SearchLayer(G_l, q, s, M, l), the candidate list is M (no longer 40)."""
    import core.algorithms.chnsw as chnsw

    lists: list[int] = []
    real = chnsw.search_layer

    def spy(vecs, neighbours, q, entries, ef, *a, **kw):
        lists.append(ef)
        return real(vecs, neighbours, q, entries, ef, *a, **kw)

    monkeypatch.setattr(chnsw, "search_layer", spy)
    rng = np.random.default_rng(4)
    index = CHNSW.build(_layers(unit_rows(rng.standard_normal((120, 16))), [80, 30, 10]), m=M, seed=2)
    assert index.meta["ef_construction"] == M
    assert lists and set(lists) <= {1, M}  # 1: the descent of line 6 (when the build uses it), M: line 12
    assert M in lists
