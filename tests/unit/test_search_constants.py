"""Issue 37: the search constants as the papers' published code sets them, and each former value kept as a named
ablation (ArchRAG's candidate list and filter budget, NodeRAG's PPR update and degree cap, HiRAG's text units)."""

from __future__ import annotations

import numpy as np
import pytest

from core.algorithms.chnsw import CHNSW
from core.config import Settings
from core.explore.strategies import family, is_ablation
from core.retrieval.base import get_strategy


def test_archrag_searches_with_the_published_candidate_list_and_budget():
    cfg = Settings().retrieval.archrag
    assert cfg.ef == 40  # src/hchnsw_index.py: efSearch = 40 (was 256, Strata's own)
    assert cfg.max_tokens == 4000  # src/utils.py --max_tokens 4000 (was 8,000, GraphRAG's reduce budget)
    assert cfg.k_per_layer == 5 and cfg.upper_ef == 1


@pytest.mark.parametrize("name, field, value", [("archrag-efk", "ef", None), ("archrag-ef256", "ef", 256),
                                                ("archrag-8k", "max_tokens", 8000)])
def test_archrags_former_and_literal_values_are_named_ablations(name, field, value, monkeypatch):
    s = get_strategy(name)
    assert is_ablation(name) and family(name) == "archrag" and s.overrides == {field: value}
    seen = {}

    def search(cache, q, k, ef, visited=None, upper=1):  # what the strategy asks the C-HNSW for
        seen.update(k=k, ef=ef, upper=upper)
        raise RuntimeError("stop")

    import core.retrieval.archrag.strategy as mod

    monkeypatch.setattr(mod, "hierarchical_search", search)
    monkeypatch.setattr(mod, "chnsw_cache", lambda res: type("C", (), {"index": type("I", (), {"ids": [1]})()})())

    class Res:
        settings = Settings()
        view = None

        @staticmethod
        def embed_query(q):
            return np.ones(4, dtype=np.float32)

    for strategy, want in ((get_strategy("archrag"), 40), (s, value if field == "ef" else 40)):
        with pytest.raises(RuntimeError):
            strategy.retrieve(Res(), "q")
        assert seen["ef"] == want and seen["k"] == 5 and seen["upper"] == 1


def test_a_search_with_candidate_list_k_sees_fewer_nodes_than_with_forty():
    """The candidate list is what the ablations change: k = 5 evaluates fewer nodes than the published 40."""
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(400, 8)).astype(np.float32)
    index = CHNSW.build([([str(i) for i in range(400)], vecs)], m=4, seed=1)
    q = rng.normal(size=8).astype(np.float32)
    small, big = [set()], [set()]
    index.search_layers(q, 5, 5, small)
    index.search_layers(q, 5, 40, big)
    assert len(big[0]) > len(small[0])


def test_noderag_teleport_is_the_named_ablation_of_the_former_walk():
    cfg = Settings().retrieval.noderag
    assert cfg.ppr_update == "published" and cfg.degree_cap and cfg.alpha == 0.5 and cfg.iterations == 2
    s = get_strategy("noderag-teleport")
    assert s.teleport and is_ablation("noderag-teleport") and family("noderag-teleport") == "noderag"
    assert not get_strategy("noderag").teleport and not is_ablation("noderag")


def test_hirag_text_units_take_the_published_budget():
    assert Settings().retrieval.text_unit_tokens == 20000  # HiRAG's QueryParam.max_token_for_text_unit
