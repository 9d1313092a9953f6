"""HLG as published (issues 26, 37): the reranker of Eq. 9 scores the statement alone, with a model over all of
S_final; offline there is no reranker (the cosine the vector search ranked by, and the strategies say so), and the
dense + lexical hybrid and the chunk-blended score are named ablations; TopicGraphRAG's beam is guided by the score
at each step (hierarchical-lexical-graph.txt §4.2)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

from core.config import Settings
from core.retrieval.base import get_strategy, strategy_names
from core.retrieval.cache import BuildCache
from core.retrieval.hlg.beam import beam_search, reranker_beam
from core.retrieval.hlg.graph import Lexicon
from core.retrieval.hlg.rank import llm_rerank, rerank_batches, rerank_scores

STATEMENTS = ["The Halden Barriers were finished in 1931 after a decade of work.",
              "Lena Marsh studied civil engineering at the Oslo polytechnic.",
              "The harbour master keeps a log of every ship."]
QUESTION = "Where did Lena Marsh study civil engineering?"


def _lexicon_with_chunks() -> SimpleNamespace:
    """Three statements, each extracted from a chunk (rows 0, 1, 0 of C); e_s . e_chunk per statement; their TF-IDF
    (the real `Lexicon.lexical_scores` over the texts)."""
    lx = SimpleNamespace(srow_chunk=np.array([0, 1, 0]), esc=np.array([0.2, 0.5, 0.9], dtype=np.float32),
                         stext=STATEMENTS, sids=["s0", "s1", "s2"], _tfidf=BuildCache(), _tokens={})
    lx._statement_fit = lambda: Lexicon._statement_fit(lx)
    lx.lexical_scores = lambda text: Lexicon.lexical_scores(lx, text)
    lx.statement_tokens = lambda s: Lexicon.statement_tokens(lx, s)
    return lx


def test_offline_there_is_no_reranker_and_the_hybrid_ablation_changes_the_order():
    sims = np.array([0.62, 0.55, 0.1])  # cos(e_Q, e_s): the vector search puts statement 0 first
    csims = np.array([0.9, -0.2])  # cos(e_Q, e_chunk): a chunk close to the question must not lift its statements
    assert Settings().retrieval.hlg.rerank == "statement"  # the default: the vector search's own order
    lx = _lexicon_with_chunks()
    np.testing.assert_array_equal(rerank_scores(lx, sims, csims, "statement"), sims)
    for name in ("hlg-statement", "hlg-topic"):  # and the strategies do not claim a reranker offline
        assert "offline no reranker" in get_strategy(name).description
    mode = "hybrid"  # the ablations hlg-*-hybrid
    lexical = lx.lexical_scores(QUESTION + " Lena Marsh")
    assert lexical[1] > 0.3 and lexical[0] == 0.0 and lexical[2] == 0.0  # only statement 1 shares the question's words
    out = rerank_scores(lx, sims, csims, mode, QUESTION + " Lena Marsh")
    np.testing.assert_allclose(out, (sims + lexical) / 2)
    assert list(np.argsort(-sims)) == [0, 1, 2] and list(np.argsort(-out)) == [1, 0, 2]  # the rerank moved it


class _Model:
    """A listwise reranker that scores by how many question words a statement holds, and records its calls."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def rerank(self, question: str, passages: list[str]) -> list[float]:
        self.calls.append(passages)
        words = set(question.lower().strip("?").split())
        return [float(len(words & set(p.lower().strip(".").split()))) for p in passages]


def test_a_model_reranks_all_of_s_final_a_window_per_call():
    lx = _lexicon_with_chunks()
    ranked = np.array([0, 2, 1])  # the offline order: the statement the model prefers comes last
    tokens = max(lx.statement_tokens(s) for s in range(3)) + 1  # one statement per call
    assert [b.tolist() for b in rerank_batches(lx, ranked, tokens)] == [[0], [2], [1]]
    model = _Model()
    out = llm_rerank(model, QUESTION, lx, ranked, tokens)
    assert len(model.calls) == 3 and sorted(p for c in model.calls for p in c) == sorted(STATEMENTS)  # every one
    assert out.tolist()[0] == 1  # the last of the pool, beyond the first window, reranked to the top
    model = _Model()
    assert llm_rerank(model, QUESTION, lx, ranked, 10_000).tolist()[0] == 1 and len(model.calls) == 1


def test_the_chunk_blend_is_an_ablation_that_does_blend():
    sims = np.array([0.1, 0.6, 0.3])
    csims = np.array([0.9, -0.2])
    out = rerank_scores(_lexicon_with_chunks(), sims, csims, "chunk-blend")
    # cos(e_Q, e_s + e_c) for unit vectors: (cos_s + cos_c) / |e_s + e_c| = (cos_s + cos_c) / sqrt(2 + 2 e_s.e_c)
    np.testing.assert_allclose(out, [(0.1 + 0.9) / np.sqrt(2.4), (0.6 - 0.2) / np.sqrt(3.0), (0.3 + 0.9) / np.sqrt(3.8)],
                               rtol=1e-6)
    assert int(np.argmax(out)) == 0  # the chunk lifted statement 0 above the statement nearest to the question
    with pytest.raises(ValueError):
        rerank_scores(_lexicon_with_chunks(), sims, csims, "context")  # the old name is no mode any more


def test_chunk_blended_hybrid_and_path_beam_variants_are_registered_as_named_ablations():
    names = strategy_names()
    for name, attr, value in (("hlg-statement-chunkblend", "rerank", "chunk-blend"),
                              ("hlg-topic-chunkblend", "rerank", "chunk-blend"),
                              ("hlg-topic-pathbeam", "path_beam", True),
                              ("hlg-statement-hybrid", "rerank", "hybrid"),
                              ("hlg-topic-hybrid", "rerank", "hybrid")):
        assert name in names
        s = get_strategy(name)
        assert "ablation" in s.label.lower() and "Ablation" in s.description
        assert getattr(s, attr) == value
    for paper in ("hlg-statement", "hlg-topic", "hlg-statement-chunk", "hlg-topic-chunk"):
        s = get_strategy(paper)
        assert s.rerank is None and not s.path_beam and "ablation" not in s.label.lower()


def _graph():
    """Statement 0 has neighbours 1 and 2 (Eq. 5); 2 is nearer to the question (Eq. 7 prefers it), while the
    reranker prefers 1."""
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    E = np.array([[0.6, 0.8, 0.0], [0.5, 0.0, 0.866], [0.9, 0.436, 0.0]], dtype=np.float32)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    nbr = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], dtype=np.float32))
    return q, E, nbr


def test_the_reranker_guides_each_step_of_the_beam():
    q, E, nbr = _graph()
    guide = np.array([0.2, 0.95, 0.1])  # Score_rank: statement 1 is the one the reranker wants
    plain = beam_search(q, E, nbr, np.array([0]), width=1, depth=1)
    assert plain.paths[1].tolist() == [[0, 2]]  # Eq. 7: the child nearest to the question
    guided = reranker_beam(guide, nbr, np.array([0]), width=2, depth=1)
    assert guided.paths[0].tolist() == [[0]]
    assert guided.paths[1].tolist() == [[0, 1]]  # §4.2: the child the reranker scores best, taken first
    assert guided.scores[1].tolist() == [pytest.approx(0.95)]
    # no improvement rule (the published RerankingBeamGraphSearch): children below their parent are taken too
    low = reranker_beam(np.array([0.9, 0.3, 0.1]), nbr, np.array([0]), width=3, depth=1)
    assert low.paths[1].tolist() == [[0, 1], [0, 2]]  # best first
    assert len(reranker_beam(guide, nbr, np.array([0]), width=3, depth=0).paths) == 1  # D_max = 0: no hop


def test_the_guided_beam_takes_b_statements_best_first_and_keeps_every_start():
    n = 6
    adj = np.zeros((n, n), dtype=np.float32)
    adj[0, 1:] = adj[1:, 0] = 1
    nbr = sp.csr_matrix(adj)
    guide = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.9])
    beam = reranker_beam(guide, nbr, np.array([0]), width=3, depth=2)
    assert beam.paths[1].tolist() == [[0, 5], [0, 4]]  # B = 3 taken: the start, then its two best neighbours
    # every start stays in S_init (paths[0]), but the B taken statements come best first across starts and hops
    guide = np.array([0.8, 0.1, 0.2, 0.3, 0.4, 0.9])
    beam = reranker_beam(guide, nbr, np.array([1, 2]), width=2, depth=1)
    assert sorted(beam.paths[0].ravel().tolist()) == [1, 2]
    assert [p.tolist() for p in beam.paths[1:]] == [[[2, 0]]]  # 2 (0.2) is taken, then its neighbour 0 (0.8), not 1


def test_a_run_s_settings_stored_with_the_old_rerank_name_still_load():
    """A run stored before the change (rerank "context") is read with today's default: a worker resuming it
    validates its settings (core/worker.py) and must not fail on them."""
    from core.config import Settings

    stored = Settings().model_dump()
    stored["retrieval"]["hlg"]["rerank"] = "context"
    assert Settings.model_validate(stored).retrieval.hlg.rerank == "statement"  # read as today's default
