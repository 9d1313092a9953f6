"""The chromadb store keeps what VectorIndex writes bit for bit: a vector read back and written again (an undo
snapshot, a promoted variant) comes back unchanged, whichever runtime produced it; embedded on disk and through a
Chroma server's HTTP client alike (`store`: both, always, so the default run checks the server too)."""

from __future__ import annotations

import numpy as np
import pytest

from core.index.vectors import VectorIndex, settle


@pytest.fixture(params=["embedded", "server"])
def open_vectors(request, tmp_path):
    """open_vectors(embedder_name) -> a fresh VectorIndex in the store under test."""

    def _open(embedder_name: str) -> VectorIndex:
        if request.param == "embedded":
            return VectorIndex(tmp_path, embedder_name)
        from tests.chroma_server import server_url

        return VectorIndex(None, embedder_name, url=server_url(tmp_path), workspace="w")

    return _open


def _unit(rng, n: int, d: int = 384) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_a_raw_chroma_round_trip_is_not_exact_so_settling_is_needed(open_vectors):
    """The reason settle exists: written as they come, some vectors do not survive read -> write -> read."""
    idx = open_vectors("t")
    v = _unit(np.random.default_rng(1), 300)
    ids = [f"n{i}" for i in range(len(v))]
    col = idx.collection("entity")
    col.upsert(ids=ids, embeddings=v)
    first = idx.vectors("entity", ids)
    col.upsert(ids=ids, embeddings=np.stack([first[i] for i in ids]))
    second = idx.vectors("entity", ids)
    assert any(not np.array_equal(first[i], second[i]) for i in ids)


def test_written_vectors_read_back_exactly_and_survive_a_rewrite(open_vectors):
    idx = open_vectors("t")
    rng = np.random.default_rng(7)
    v = np.concatenate([_unit(rng, 500), rng.normal(size=(50, 384)).astype(np.float32) * 3])  # not unit: made so
    ids = [f"n{i}" for i in range(len(v))]
    idx.upsert("entity", ids, v)
    back = idx.vectors("entity", ids)
    settled = settle(v)
    assert all(np.array_equal(back[i], settled[k]) for k, i in enumerate(ids))
    assert float(np.abs(settled[:500] - v[:500]).max()) < 1e-6, "unit vectors move by float32 steps only"
    assert np.allclose(np.linalg.norm(settled, axis=1), 1.0, atol=1e-6)
    idx.delete("entity", ids[:10])
    idx.upsert("entity", ids, np.stack([back[i] for i in ids]))  # a snapshot written back
    again = idx.vectors("entity", ids)
    assert all(np.array_equal(again[i], back[i]) for i in ids)


def test_real_embeddings_survive_a_rewrite(open_vectors, embedder):
    idx = open_vectors(embedder.name)
    texts = [f"Entity {i}: a harbour town on the river Carrow, founded in {1700 + i}" for i in range(64)]
    ids = [f"e{i}" for i in range(len(texts))]
    idx.upsert("entity", ids, embedder.embed(texts))
    back = idx.vectors("entity", ids)
    idx.upsert("entity", ids, np.stack([back[i] for i in ids]))
    assert all(np.array_equal(idx.vectors("entity", ids)[i], back[i]) for i in ids)


def test_settle_keeps_zero_vectors_and_is_idempotent():
    v = np.zeros((2, 8), dtype=np.float32)
    assert np.array_equal(settle(v), v)
    u = settle(_unit(np.random.default_rng(3), 50))
    assert np.array_equal(settle(u), u)
