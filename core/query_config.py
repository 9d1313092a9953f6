"""The retrieval strategies' query-time settings (`Settings.retrieval`): GraphRAG local and global, NodeRAG, ArchRAG,
HLG and HiRAG's caps. Defaults from the papers and their code; docs/CONSTANTS.md gives each one's origin (a test
fails when a setting has no row there: tests/unit/test_constants_table.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator


class GraphRAGLocalSettings(BaseModel):
    """GraphRAG local search (hierarchical-graph-rag.md "Local retrieval"): caps and the token budget."""

    top_entities: int = Field(10, description="Entry entities: exact name matches and entity-index hits.")
    oversample: int = Field(2, description="Entity-index hits fetched per entry entity, layer-0 ones kept first.")
    top_chunks: int = Field(10, description="topChunks: chunks that mention the entry entities, kept after ranking.")
    top_communities: int = Field(5, description="topCommunities: community reports kept after ranking.")
    community_level: int = Field(2, description="Each entity counts for its finest Leiden community of level <= "
                                                "this, 0 = coarsest (GraphRAG's --community-level roll-up).")
    top_inside_rels: int = Field(20, description="topInsideRels: relationships between two entry entities.")
    top_outside_rels: int = Field(20, description="topOutsideRels: relationships from an entry entity outward.")
    max_tokens: int = Field(12000, description="Token budget of the whole context; lowest-ranked items drop first "
                                              "(GraphRAG's local search default, 12,000).")
    text_unit_prop: float = Field(0.5, description="Share of max_tokens for chunks (GraphRAG text_unit_prop).")
    community_prop: float = Field(0.1, description="Share of max_tokens for community reports (GraphRAG "
                                                   "community_prop, 0.1); the rest is for entities and relationships.")


class GraphRAGGlobalSettings(BaseModel):
    """GraphRAG global search (hierarchical-graph-rag.md "Global retrieval"): map-reduce over community reports."""

    top_communities: int = Field(10, description="Communities first taken from the community-summary index.")
    expand_children: bool = Field(True, description="Expand by level: add the child communities of those found.")
    max_reports: int = Field(20, description="Reports sent to the map step after expansion.")
    points_per_report: int = Field(5, description="Map step: at most this many rated points per report.")
    min_importance: int = Field(1, description="Points rated below this (0-100 scale as GraphRAG) are filtered out.")
    max_tokens: int = Field(12000, description="Token budget of the points sent to the reduce step (GraphRAG's "
                                              "global search data_max_tokens, 12,000).")
    top_entities: int = Field(10, description="Local section: members of the chosen communities nearest the question.")
    member_sharpness: float = Field(1.0, description="Sources (GraphRAG global returns none of its own): a member's "
                                                     "chunks count rating x similarity to this power; 1 = plain "
                                                     "weighting (16 had been chosen on hotpotqa alone).")


class NodeRAGQuerySettings(BaseModel):
    """NodeRAG search (noderag.txt §2.5, Appendix C.4): dual search, shallow PPR, per-kind caps."""

    entry_k: int = Field(10, description="Vector search: nearest T/S/A/H nodes taken as entry points (over the four "
                         "kinds together, or per kind when joint_entries is off): the published code's 10 (5 had "
                         "been chosen on two sets).")
    alpha: float = Field(0.5, description="PPR alpha (the published config's ppr_alpha 0.5): the walk probability "
                         "of the published update, the restart probability of the teleport one.")
    iterations: int = Field(2, description="PPR power iterations (shallow; the published config's ppr_max_iter 2).")
    ppr_update: Literal["published", "teleport"] = Field(
        "published", description="PPR update: 'published' = NodeRAG's PPR.py, p <- alpha P^T p + (1 - alpha) p; "
        "'teleport' = p <- alpha e + (1 - alpha) P^T p (Strata's before issue 37; the ablation noderag-teleport).")
    cross_nodes: int = Field(10, description="Top cross nodes kept from the PPR ranking, per retrievable type "
                             "(T, S, A, H) with cross_per_kind.")
    cross_per_kind: bool = Field(True, description="Cross nodes are the top cross_nodes of each retrievable type "
                                 "(§2.5); off = cross_nodes over the four types together (the published code).")
    top_entity: int = Field(10, description="Top entities by PPR (not returned; their attributes are).")
    top_relationship: int = Field(30, description="Top relationships by PPR, returned.")
    top_high_level: int = Field(10, description="Top overview titles by PPR (not returned; their high-level "
                                "elements are).")
    joint_entries: bool = Field(True, description="Vector entries: the entry_k nearest over all retrievable kinds "
                                "together (one HNSW, as in the paper) instead of entry_k per kind.")
    degree_cap: bool = Field(True, description="Cap each link weight at 1/degree of its ends before the walk "
                             "(the published code's unbalance_adjust, on in its Node_config.yaml; not in the paper; "
                             "off in the ablation noderag-teleport).")
    exact_weight: float = Field(1.0, description="Personalization weight of an exact-match entry relative to a "
                                "vector entry (the published code's accuracy_weight / similarity_weight: 1 / 1).")
    chunk_entity_links: bool = Field(False, description="Not in the paper (T links to S only): also walk a chunk's "
                                     "`mentions` edges to entities.")
    relationship_chunk_links: bool = Field(False, description="Not in the paper: also walk a relationship's "
                                           "`derived_from` edges to the chunks it was extracted from.")
    statement_relationship_links: bool = Field(False, description="Not in the paper (S links to N, R to N): also "
                                               "walk the HLG lexical stage's statement -> relationship `mentions`.")
    proper_names_only: bool = Field(True, description="Exact matching keeps only names that start in upper case "
                                    "or with a digit in the question (offline stand-in for LLM entity extraction).")


class ArchRAGQuerySettings(BaseModel):
    """ArchRAG search (archrag.txt §3.2): C-HNSW hierarchical search, then adaptive filtering per layer."""

    k_per_layer: int = Field(5, description="k nearest nodes taken on every C-HNSW layer (the paper's k = 5, §4).")
    ef: int | None = Field(40, description="SearchLayer candidate list (>= k) on the target C-HNSW layer: the "
                                           "published code's efSearch 40 (src/hchnsw_index.py). None = k, as "
                                           "Algorithm 2 line 6 writes SearchLayer(G_l, q, s, k, l) (the ablation "
                                           "archrag-efk); 256 was Strata's own (the ablation archrag-ef256).")
    upper_ef: int | None = Field(1, description="SearchLayer candidate list on the layers above the target "
                                                "(Algorithm 2 line 3: 1); None = enter each layer from the layer "
                                                "above's own top-k search.")
    max_tokens: int = Field(4000, description="Adaptive filtering's text limit: the best rated points are kept "
                                              "within this many tokens (the paper names no number; the published "
                                              "code's --max_tokens 4000, src/utils.py, where prep_reduce_content "
                                              "cuts its sorted points; 8000, GraphRAG's reduce budget, was used "
                                              "before issue 37: the ablation archrag-8k).")


class HLGQuerySettings(BaseModel):
    """HLG StatementGraphRAG / TopicGraphRAG (hierarchical-lexical-graph.txt §4, §6.3-6.4)."""

    statement_k: int = Field(50, description="StatementGraphRAG: statements taken by vector search (entry points; "
                                             "with keyword_k, the paper's 100 initial statements, §6.3.2).")
    keyword_k: int = Field(50, description="Statements taken by keyword (entity) matching (entry points).")
    topic_k: int = Field(50, description="TopicGraphRAG: topics taken by vector search; their statements enter "
                                         "(§6.3.2: 50).")
    beam_width: int = Field(50, description="Beam search width B (§6.3.2: 50): paths kept per start and depth; also "
                                            "the neighbours of an expanded statement scored (nearest to the question).")
    depth: int = Field(3, description="Beam search depth D_max (§6.3.2: 3; statement -> entity -> statement hops).")
    context_tokens: int = Field(3000, description="Statement variants: the reranked, diversity-filtered statements "
                                                  "kept while they fit in this many tokens (§6.3: a context window of "
                                                  "10 chunks, about 3,000 tokens); with Ollama, what the model reranks.")
    top_k: int = Field(10, description="Chunk variants: unique chunks kept after the diversity filter (§6.4: up to "
                                       "10); also the beam paths, bridge items (2x) and topics shown.")
    rerank: Literal["statement", "hybrid", "chunk-blend"] = Field(
        "statement", description="Score_rank of Eq. 9 offline, where the paper's cross-encoder is not bundled: "
        "'statement' (default) = no reranker: the statement's cosine to the question, the score the vector search "
        "ranked by, so S_final is ranked by similarity and TopicGraphRAG's beam is similarity-guided (with a model "
        "backend the model reranks all of S_final); 'hybrid' (ablations hlg-*-hybrid) = the mean of that cosine and the "
        "statement's TF-IDF cosine to the question and its keywords (graphrag-toolkit's offline tfidf reranker), "
        "not better on every set (docs/CONSTANTS.md); 'chunk-blend' (ablation: the statement's cosine blended with "
        "its chunk's).")
    diversity_threshold: float = Field(
        0.005, description="Diversity threshold τ (the paper's 0.5 %): an item whose TF-IDF cosine to a kept, "
                           "better item is >= 1 - τ is dropped as a near-duplicate; 0 keeps all but exact repeats.")

    @field_validator("rerank", mode="before")
    @classmethod
    def _old_rerank(cls, v):
        """A run's settings stored before issue 26 say 'context' (the then default, now the chunk-blend ablation):
        read as today's default, so a worker resuming such a run does not fail on its settings."""
        return "statement" if v == "context" else v


class RetrievalSettings(BaseModel):
    graphrag_local: GraphRAGLocalSettings = GraphRAGLocalSettings()
    graphrag_global: GraphRAGGlobalSettings = GraphRAGGlobalSettings()
    noderag: NodeRAGQuerySettings = NodeRAGQuerySettings()
    archrag: ArchRAGQuerySettings = ArchRAGQuerySettings()
    hlg: HLGQuerySettings = HLGQuerySettings()
    max_question_chars: int = Field(2000, description="The longest question accepted (STRATA_MAX_QUESTION_CHARS): "
                                    "a question is stored in the workspace's history.")
    warm_up: bool = Field(True, description="Once the Ask page is drawn, the app loads what its default strategy's "
                          "first question reads in a background thread, so that question does not wait for it "
                          "(STRATA_WARM_UP=0: it loads when a question asks).")
    top_n_entities: int = Field(20, description="HiRAG n: entities retrieved for the local level.")
    top_m_key_entities: int = Field(10, description="HiRAG m: key entities taken per retrieved community.")
    max_communities: int | None = Field(None, description="HiRAG: None keeps every community that holds a retrieved "
                                        "entity (Eq. 13); a number keeps that many, most-hit first (an option; "
                                        "was 8, not in the paper).")
    text_unit_tokens: int = Field(20000, description="HiRAG local text units: the token budget of its code's "
                                  "QueryParam.max_token_for_text_unit (hirag/base.py, 20,000); 4,000 was nano-graphrag's "
                                  "local_max_token_for_text_unit, a field HiRAG's QueryParam does not have.")
    naive_top_k: int = Field(10, description="Chunks returned by naive vector search.")
    max_sources: int = Field(10, description="Ranked sources returned by every strategy.")
    max_bridge_paths: int | None = Field(None, description="HiRAG: None searches the shortest path between every "
                                         "consecutive pair of key entities (Eq. 15); a number caps the paths (an "
                                         "option; was 30, not in the paper).")
