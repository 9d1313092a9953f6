"""Typed settings. One model per section; every field is documented once, here.

Settings are plain pydantic models passed explicitly into stages and strategies. Nothing reads them at import
time: `Settings.from_env()` is called by the entry points (CLI, app, worker) and the result is passed down.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class StorageSettings(BaseModel):
    home: Path = Field(Path("workspaces"), description="Root folder for the database and vector stores (STRATA_HOME).")

    @property
    def db_path(self) -> Path:
        return self.home / "strata.db"

    def vector_dir(self, workspace: str) -> Path:
        return self.home / "vectors" / workspace


class IngestSettings(BaseModel):
    max_file_bytes: int = Field(50 * 1024 * 1024, description="Files larger than this are refused.")
    max_zip_members: int = Field(2000, description="Zip archives with more members are refused.")
    max_zip_total_bytes: int = Field(500 * 1024 * 1024, description="Uncompressed size limit of one zip archive.")
    min_chars: int = Field(1, description="Documents with fewer non-space characters are refused as empty.")


class ChunkSettings(BaseModel):
    size_tokens: int = Field(300, description="Target chunk length in tokens of the bundled tokenizer (HLG: 300).")
    overlap: float = Field(0.2, ge=0.0, lt=0.9, description="Fraction of a chunk repeated at the start of the next.")


class BackendSettings(BaseModel):
    kind: Literal["offline", "ollama"] = Field("offline", description="Language backend used to build and answer.")
    ollama_host: str = Field("http://127.0.0.1:11434", description="Ollama server (OLLAMA_HOST).")
    chat_model: str = Field("llama3.1:8b", description="Ollama model for extraction, summaries and answers.")
    embed_model: str = Field("nomic-embed-text", description="Ollama embedding model (embedder 'ollama').")
    num_ctx: int = Field(8192, description="Context window asked of Ollama; must hold the longest prompt.")
    timeout_s: float = Field(120.0, description="Timeout of one Ollama request.")
    retries: int = Field(2, description="Retries of a failed or malformed Ollama reply before giving up.")
    concurrency: int = Field(2, description="Parallel requests sent to Ollama during a build.")
    temperature: float = Field(0.0, description="Sampling temperature; 0 keeps builds repeatable.")


class EmbedSettings(BaseModel):
    embedder: Literal["minilm", "ollama"] = Field("minilm", description="Bundled all-MiniLM-L6-v2 or Ollama.")
    batch_size: int = Field(64, description="Texts embedded per call.")


class ExtractSettings(BaseModel):
    max_entities_per_chunk: int = Field(40, description="Cap on entities kept from one chunk.")
    max_relationships_per_chunk: int = Field(60, description="Cap on relationships kept from one chunk.")
    entity_types: list[str] = Field(
        ["PERSON", "ORGANIZATION", "LOCATION", "EVENT", "WORK", "DATE", "CONCEPT"],
        description="Entity types the extractor may assign.",
    )


class LayerSettings(BaseModel):
    """HiRAG HiIndex (hirag.txt §4.1): summary layers over the entities."""

    enabled: bool = Field(True, description="Build HiRAG summary layers.")
    max_layers: int = Field(4, description="Hard cap on summary layers.")
    membership_threshold: float = Field(0.1, description="Soft GMM membership: posterior at or above this joins.")
    max_components: int = Field(50, description="Upper bound of the BIC search for the number of clusters.")
    reduce_dim: int = Field(10, description="PCA dimensions before the Gaussian mixture.")
    sparsity_stop: float = Field(0.98, description="Stop when cluster sparsity CS_i reaches this.")
    change_rate_stop: float = Field(0.05, description="Stop when CS_i changes by at most this share.")
    min_entities: int = Field(4, description="Stop when a layer has fewer entities than this.")
    seed: int = Field(42, description="Seed of the PCA and the Gaussian mixture.")


class CommunitySettings(BaseModel):
    resolution: float = Field(1.0, description="Leiden resolution (gamma) of the modularity objective.")
    max_cluster_size: int = Field(10, description="Communities larger than this are split again one level down.")
    max_levels: int = Field(4, description="Deepest community level built (level 0 is the coarsest).")
    use_weights: bool = Field(True, description="Use relationship weights in Leiden.")
    min_component_size: int = Field(2, description="WCC components smaller than this are recorded, not clustered.")
    seed: int = Field(42, description="Seed of every randomised step of community detection.")


class ResolveSettings(BaseModel):
    """Entity resolution beyond same-name merging: candidates by name, type and embedding similarity."""

    enabled: bool = Field(True, description="Look for merge candidates after the entities are embedded.")
    name_similarity: float = Field(0.85, description="Name similarity (0-1) at or above which two names are candidates.")
    embedding_similarity: float = Field(0.90, description="Cosine at or above which two same-type entities are candidates.")
    auto_merge: float = Field(0.97, description="Evidence score at or above which a candidate is merged during the build.")
    neighbours: int = Field(10, description="Nearest entities compared per entity when looking for candidates.")


class ArchRAGSettings(BaseModel):
    """ArchRAG attributed communities (archrag.txt §3.1, Algorithm 1) and the C-HNSW index (§3.1.3)."""

    enabled: bool = Field(True, description="Build attributed communities and the C-HNSW index.")
    knn: int = Field(10, description="KNN augmentation: each node is linked to its k most similar nodes.")
    min_similarity: float = Field(0.5, description="KNN links below this cosine similarity are not added.")
    resolution: float = Field(1.0, description="Resolution of the weighted Leiden run on each level's graph.")
    max_levels: int = Field(5, description="Termination: at most this many community levels (ArchRAG uses 4-6).")
    min_nodes: int = Field(4, description="Termination: stop when a level's graph has fewer nodes than this.")
    chnsw_m: int = Field(5, description="C-HNSW: intra-layer nearest-neighbour links per node (M).")
    seed: int = Field(42, description="Seed of Leiden and of the C-HNSW construction.")


class NodeRAGSettings(BaseModel):
    """NodeRAG heterograph augmentation and enrichment (noderag.txt §2.3-2.4, Appendix C)."""

    enabled: bool = Field(True, description="Add attribute, high-level element and overview nodes and semantic edges.")
    community_level: int = Field(0, description="Leiden level whose communities get high-level elements (0 = flat).")
    betweenness_samples: int = Field(10, description="Pivot nodes of the sampled betweenness centrality (NodeRAG: 10).")
    max_attributes: int = Field(2000, description="Cap on attribute nodes, most important entities first.")
    hnsw_m: int = Field(8, description="HNSW M: base-layer links per node become semantic edges (2*M at most).")
    seed: int = Field(42, description="Seed of betweenness sampling, K-means and HNSW.")


class LexicalSettings(BaseModel):
    """HLG lexical graph (hierarchical-lexical-graph.txt §3): facts linking statements, topics per document."""

    enabled: bool = Field(True, description="Link statements to facts and group them into topics.")
    topic_similarity: float = Field(
        0.35, description="Average-linkage cosine similarity at which statements of one document join one topic.")
    max_topic_statements: int = Field(12, description="A topic holds at most this many statements.")


class RetrievalSettings(BaseModel):
    top_n_entities: int = Field(20, description="HiRAG n: entities retrieved for the local level.")
    top_m_key_entities: int = Field(10, description="HiRAG m: key entities taken per retrieved community.")
    max_communities: int = Field(8, description="Communities kept for the global level, most-hit first.")
    naive_top_k: int = Field(10, description="Chunks returned by naive vector search.")
    max_sources: int = Field(10, description="Ranked sources returned by every strategy.")
    max_bridge_paths: int = Field(30, description="Cap on shortest paths searched for the bridge level.")


class Settings(BaseModel):
    storage: StorageSettings = StorageSettings()
    ingest: IngestSettings = IngestSettings()
    chunk: ChunkSettings = ChunkSettings()
    backend: BackendSettings = BackendSettings()
    embed: EmbedSettings = EmbedSettings()
    extract: ExtractSettings = ExtractSettings()
    layers: LayerSettings = LayerSettings()
    community: CommunitySettings = CommunitySettings()
    resolve: ResolveSettings = ResolveSettings()
    archrag: ArchRAGSettings = ArchRAGSettings()
    noderag: NodeRAGSettings = NodeRAGSettings()
    lexical: LexicalSettings = LexicalSettings()
    retrieval: RetrievalSettings = RetrievalSettings()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        """Defaults, overridden by STRATA_HOME, STRATA_BACKEND, OLLAMA_HOST, STRATA_CHAT_MODEL, STRATA_EMBEDDER."""
        env = dict(os.environ if env is None else env)
        s = cls()
        if env.get("STRATA_HOME"):
            s.storage.home = Path(env["STRATA_HOME"])
        if env.get("STRATA_BACKEND"):
            s.backend.kind = env["STRATA_BACKEND"]  # type: ignore[assignment]
        if env.get("OLLAMA_HOST"):
            host = env["OLLAMA_HOST"]
            s.backend.ollama_host = host if "://" in host else f"http://{host}"
        if env.get("STRATA_CHAT_MODEL"):
            s.backend.chat_model = env["STRATA_CHAT_MODEL"]
        if env.get("STRATA_EMBED_MODEL"):
            s.backend.embed_model = env["STRATA_EMBED_MODEL"]
        if env.get("STRATA_EMBEDDER"):
            s.embed.embedder = env["STRATA_EMBEDDER"]  # type: ignore[assignment]
        return cls.model_validate(s.model_dump())
