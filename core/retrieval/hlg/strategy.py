"""HLG StatementGraphRAG and TopicGraphRAG, with their chunk-based variants (hierarchical-lexical-graph.txt §4, §6.3-6.4).

StatementGraphRAG (§4.1, Algorithm 1): keywords K and keyword statements S_kw (Eq. 1-3) with the statements nearest
to the question S_vss (Eq. 4) are the entry points S_init (core/retrieval/hlg/entry.py); a beam search over the
statements sharing entities (Eq. 5-8, width B = 50, depth D_max = 3: §6.3.2; core/retrieval/hlg/beam.py) gives
S_beam; S_final = S_init ∪ S_beam is reranked (Eq. 9-10) and the diversity filter (§4.3.1, τ = 0.5 %;
core/retrieval/diversity.py) drops near-duplicates while the context fills (core/retrieval/hlg/rank.py).
TopicGraphRAG (§4.2): top-down, the statements of the `topic_k` topics nearest to the question (§6.3.2: 50); bottom-up,
the keyword statements; then a beam search "guided by a reranker at each step" (§4.2 (3): best first by Score_rank of
Eq. 9 as the published code's RerankingBeamGraphSearch, core/retrieval/hlg/beam.py `reranker_beam`; with Ollama the
offline score guides the steps and the model reranks the final pool, as the paper's C.1.3 found an LLM at every
expansion "prohibitively slow"), then the same rerank and diversity filter.

The reranker (Eq. 9) scores the statement alone (core/retrieval/hlg/rank.py): with a model, the model over all of
S_final. Offline there is no reranker (the paper's is a cross-encoder, not bundled): S_final is ranked by the
statement's cosine to the question and TopicGraphRAG's beam is similarity-guided, and the strategies say so. Ablations,
not the paper's strategies: hlg-statement-hybrid and hlg-topic-hybrid rerank offline with a dense + TF-IDF hybrid
(issue 37's stand-in, not better on every set: docs/CONSTANTS.md);
hlg-statement-chunkblend and hlg-topic-chunkblend rerank (and, for the topic one, guide the beam with) the statement
blended with its chunk; hlg-topic-pathbeam runs TopicGraphRAG's beam on Eq. 7 (StatementGraphRAG's) instead of the
reranker.

What each variant returns (the context, `local`):
- hlg-statement, hlg-topic: the top statements, reranked and diversity-filtered, while they fit in the paper's
  context window (§6.3: "fixed at 10 chunks, which corresponds to approximately 3,000 tokens": `context_tokens`).
- hlg-statement-chunk, hlg-topic-chunk (§6.4, §7.2): "the top-ranked statements are traced back to their source
  chunks. We select up to 10 unique chunks and apply a diversity filter": the chunks of the reranked statements,
  first seen first, the first `top_k` that pass the diversity filter.

Sources (what recall@k is computed on) are the documents of that context, in its rank order: the document of each
kept statement (statement variants) or kept chunk (chunk variants), first seen first. Nothing else ranks them.

bridge = the entities shared along the best beam paths through kept statements and the facts their statements state
about them; global = the topics of the kept statements (TopicGraphRAG: the retrieved topics). Path: the hops
(beam), keyword entities and entry statements (entry), other kept statements (result), topics, chunks.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from core.retrieval.base import Resources, Retrieval, RetrievalLLM, Timer, register
from core.retrieval.diversity import similarity_cutoff
from core.retrieval.hlg.assemble import path, sections
from core.retrieval.hlg.beam import Beam, beam_search, path_embedding, path_score, reranker_beam
from core.retrieval.hlg.entry import entry_points, keyword_statements, keywords
from core.retrieval.hlg.graph import Lexicon, cosines, lexicon, unit_rows
from core.retrieval.hlg.rank import (
    kept_hops,
    llm_rerank,
    ranked_pool,
    rerank_scores,
    select_chunks,
    select_statements,
    sources_in_order,
)

__all__ = ["Beam", "Lexicon", "beam_search", "keyword_statements", "keywords", "lexicon", "path_embedding",
           "path_score", "StatementGraphRAG", "TopicGraphRAG", "StatementGraphRAGChunks", "TopicGraphRAGChunks",
           "StatementGraphRAGChunkBlend", "TopicGraphRAGChunkBlend", "TopicGraphRAGPathBeam", "StatementGraphRAGHybrid",
           "TopicGraphRAGHybrid", "ABLATIONS"]


class HLGStrategy:
    """The pipeline shared by the four variants; `topics` picks TopicGraphRAG's entry, `chunks` the chunk context."""

    name = ""
    label = ""
    description = ""
    topics = False  # TopicGraphRAG: topics are the vector entry
    chunks = False  # chunk-based variant: chunks are the context
    rerank: str | None = None  # None: the setting retrieval.hlg.rerank; an ablation names its own mode
    path_beam = False  # ablation: TopicGraphRAG's beam on Eq. 7 instead of the reranker (§4.2)

    def retrieve(self, res: Resources, question: str, llm: RetrievalLLM | None = None) -> Retrieval:
        # many small matrix products: OpenBLAS threads cost more than they give there (10x on a busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            return self.run(res, question, llm)

    def run(self, res: Resources, question: str, llm: RetrievalLLM | None) -> Retrieval:
        cfg = res.settings.retrieval.hlg
        r = Retrieval(self.name, question)
        t = Timer(r.trace)
        lx = lexicon(res)
        t.lap("load_lexicon")
        q = unit_rows(np.asarray(res.embed_query(question))[None])[0]
        sims = cosines(lx.E, q)
        t.lap("embed_query")
        if not lx.sids:
            return r
        entry = entry_points(res, lx, question, q, sims, cfg, self.topics, llm)
        t.lap("entry_points")
        mode = self.rerank or cfg.rerank
        query_text = " ".join([question] + [name for name, _ in entry.keywords])
        score = rerank_scores(lx, sims, cosines(lx.C, q), mode, query_text)
        guided = self.topics and not self.path_beam  # §4.2 (3): the reranker guides TopicGraphRAG's beam
        beam = (reranker_beam(score, lx.nbr, entry.s_init, cfg.beam_width, cfg.depth) if guided
                else beam_search(q, lx.E, lx.nbr, entry.s_init, cfg.beam_width, cfg.depth))
        t.lap("beam_search")
        ranked = ranked_pool(beam, sims, score)
        if llm is not None:
            ranked = llm_rerank(llm, question, lx, ranked, cfg.context_tokens, res.settings.backend.concurrency)
            r.trace["llm"] = {"model": llm.model, "reranked": int(len(ranked))}
        t.lap("rerank")
        cut = similarity_cutoff(cfg.diversity_threshold)
        tokens = 0
        if self.chunks:
            picked = select_chunks(lx, ranked, cut, cfg.top_k)
            kept_chunks = [c for c, _ in picked]
            kept = list(dict.fromkeys(s for _, s in picked))  # each chunk's best statement
            units = [(lx.cdoc.get(c), [c], float(score[s])) for c, s in picked]
            items = [(c, "chunk", sc, [d] if d else []) for (c, _), (d, _, sc) in zip(picked, units)]
        else:
            kept, tokens = select_statements(lx, ranked, cut, cfg.context_tokens)
            kept_chunks = []
            units = [(lx.sdoc[s], lx.schunks[s], float(score[s])) for s in kept]
            items = [(lx.sids[s], "statement", sc, [d] if d else []) for s, (d, _, sc) in zip(kept, units)]
        t.lap("diversity")
        r.sources = sources_in_order(lx, units, res.settings.retrieval.max_sources)
        t.lap("sources")
        hops = kept_hops(lx, beam, sims, kept, cfg.top_k)
        nodes = sections(res, lx, r, items, kept, hops, entry.topics, score, cfg.top_k, self.topics)
        path(lx, r, entry.keywords, entry.topics, kept, kept_chunks, set(entry.s_init.tolist()), hops,
             {i: n.title for i, n in nodes.items()}, self.topics)
        by_id = {p.id: p for p in r.path_nodes if p.kind == "entity" and p.id not in nodes}  # keyword entities
        for i, n in res.store.nodes_by_id(res.ws_id, list(by_id)).items():
            by_id[i].label = n.title[:80]
        t.lap("assemble")
        # what guided TopicGraphRAG's beam: the offline score (a model reranks only the final pool, C.1.3)
        r.trace["beam"] = ("similarity" if mode == "statement" else f"reranker ({mode})") if guided else "path (Eq. 7)"
        r.trace["rerank"] = mode
        r.trace["keywords"] = [name for name, _ in entry.keywords]
        r.trace["counts"] = {"keywords": len(entry.keywords), "keyword_statements": len(entry.s_kw),
                             "vector_statements": len(entry.s_vss), "topics": len(entry.topics),
                             "start_statements": len(entry.s_init),
                             "beam_paths": int(sum(len(p) for p in beam.paths[1:])), "beam_depth": len(beam.paths) - 1,
                             "final_statements": len(ranked), "kept_statements": len(kept),
                             "context_tokens": int(tokens), **{k: len(v) for k, v in r.sections.items()},
                             "sources": len(r.sources)}
        return r


_DESCRIPTION = ("local: the {unit}, after keyword + vector entry ({entry}), beam search over shared entities, rerank "
                "(with a model backend; offline no reranker: ranked by similarity to the question) and the TF-IDF "
                "diversity filter; bridge: the entities and facts shared along the beam hops used; global: {glob}. "
                "Sources: the documents of the local items, in their order.")


@register
class StatementGraphRAG(HLGStrategy):
    name = "hlg-statement"
    label = "HLG StatementGraphRAG"
    description = _DESCRIPTION.format(unit="top statements (about 3,000 tokens)", entry="the nearest statements",
                                      glob="the topics of the kept statements")


@register
class TopicGraphRAG(HLGStrategy):
    name = "hlg-topic"
    label = "HLG TopicGraphRAG"
    description = _DESCRIPTION.format(unit="top statements (about 3,000 tokens)",
                                      entry="the nearest topics' statements", glob="the topics nearest to the question")
    topics = True


@register
class StatementGraphRAGChunks(HLGStrategy):
    name = "hlg-statement-chunk"
    label = "HLG StatementGraphRAG (chunk-based)"
    description = _DESCRIPTION.format(unit="chunks behind the top statements", entry="the nearest statements",
                                      glob="the topics of the statements behind the chunks")
    chunks = True


@register
class TopicGraphRAGChunks(HLGStrategy):
    name = "hlg-topic-chunk"
    label = "HLG TopicGraphRAG (chunk-based)"
    description = _DESCRIPTION.format(unit="chunks behind the top statements", entry="the nearest topics' statements",
                                      glob="the topics nearest to the question")
    topics = True
    chunks = True


# -- ablations: named for what departs from the paper --------------------------------------------------------------
_BLEND = (" Ablation, not the paper: the reranker (Eq. 9) scores the statement blended with its chunk, "
          "cos(e_Q, e_s + e_chunk).")


@register
class StatementGraphRAGChunkBlend(StatementGraphRAG):
    name = "hlg-statement-chunkblend"
    label = "HLG StatementGraphRAG (ablation: chunk-blended rerank)"
    description = StatementGraphRAG.description + _BLEND
    rerank = "chunk-blend"


@register
class TopicGraphRAGChunkBlend(TopicGraphRAG):
    name = "hlg-topic-chunkblend"
    label = "HLG TopicGraphRAG (ablation: chunk-blended rerank)"
    description = TopicGraphRAG.description + _BLEND
    rerank = "chunk-blend"


@register
class TopicGraphRAGPathBeam(TopicGraphRAG):
    name = "hlg-topic-pathbeam"
    label = "HLG TopicGraphRAG (ablation: Eq. 7 beam, no reranker guidance)"
    description = TopicGraphRAG.description + (" Ablation, not the paper: the beam ranks paths by Eq. 7 "
                                                "(StatementGraphRAG's), not by the reranker at each step (§4.2).")
    path_beam = True


_HYBRID = (" Ablation (issue 37's offline reranker): Score_rank is the mean of cos(e_Q, e_s) and the statement's "
           "TF-IDF cosine to the question and its keywords{beam}; not better on every set.")


@register
class StatementGraphRAGHybrid(StatementGraphRAG):
    name = "hlg-statement-hybrid"
    label = "HLG StatementGraphRAG (ablation: dense + TF-IDF rerank offline)"
    description = StatementGraphRAG.description + _HYBRID.format(beam="")
    rerank = "hybrid"


@register
class TopicGraphRAGHybrid(TopicGraphRAG):
    name = "hlg-topic-hybrid"
    label = "HLG TopicGraphRAG (ablation: dense + TF-IDF rerank offline)"
    description = TopicGraphRAG.description + _HYBRID.format(beam=", which also guides the beam")
    rerank = "hybrid"


ABLATIONS = ("hlg-statement-chunkblend", "hlg-topic-chunkblend", "hlg-topic-pathbeam", "hlg-statement-hybrid",
             "hlg-topic-hybrid")
