"""Typed settings. One model per section; every field is documented once, here.

Settings are plain pydantic models passed explicitly into stages and strategies. Nothing reads them at import
time: `Settings.from_env()` is called by the entry points (CLI, app, worker) and the result is passed down.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field, SecretStr

from core.query_config import RetrievalSettings


class StorageSettings(BaseModel):
    home: Path = Field(Path("workspaces"), description="Root folder for the database and vector stores (STRATA_HOME).")
    sample_on_start: bool = Field(True, description="Create and build the bundled `sample` workspace on the app's "
                                                    "first start (STRATA_SAMPLE=0 turns it off).")
    database_url: str | None = Field(None, description="SQLAlchemy URL of the database (STRATA_DATABASE_URL), e.g. "
                                                       "postgresql+psycopg://user:pw@host:5432/strata; unset: the "
                                                       "SQLite file STRATA_HOME/strata.db.")
    chroma_url: str | None = Field(None, description="A Chroma server (STRATA_CHROMA_URL), e.g. http://127.0.0.1:8000, "
                                                     "started with `chroma run`; unset: the embedded store under "
                                                     "STRATA_HOME/vectors.")
    chroma_token: SecretStr | None = Field(None, exclude=True, description="STRATA_CHROMA_TOKEN: sent to the Chroma "
                                           "server as `Authorization: Bearer TOKEN` (its proxy checks it); never "
                                           "dumped: a build's worker reads the same environment.")
    chroma_ca: str | None = Field(None, description="STRATA_CHROMA_CA: a CA bundle (PEM) trusted for an https "
                                                    "STRATA_CHROMA_URL, e.g. a proxy's self-signed certificate.")

    @property
    def db_path(self) -> Path:
        return self.home / "strata.db"

    @property
    def db_url(self) -> str:
        """Where the database is: `database_url`, else the SQLite file under `home`."""
        return self.database_url or f"sqlite:///{self.db_path}"

    def vector_dir(self, workspace: str) -> Path:
        return self.home / "vectors" / workspace


class IngestSettings(BaseModel):
    """Limits of what an upload may hold (each refusal names the limit and its variable, core/ingest/limits.py)."""

    max_file_bytes: int = Field(50 * 1024 * 1024, description="Files larger than this are refused (STRATA_MAX_FILE_MB).")
    max_zip_members: int = Field(2000, description="Zip archives with more members are refused "
                                                   "(STRATA_MAX_ZIP_MEMBERS).")
    max_zip_total_bytes: int = Field(500 * 1024 * 1024, description="Uncompressed size limit of one zip archive "
                                                                    "(STRATA_MAX_ZIP_MB).")
    max_archive_members: int = Field(10_000, description="Members read from one uploaded file's archives, the zips "
                                     "inside it included; the rest of the file is refused in one line "
                                     "(STRATA_MAX_ARCHIVE_MEMBERS).")
    min_chars: int = Field(1, description="Documents with fewer non-space characters are refused as empty.")
    upload_budget_bytes: int = Field(200 * 1024 * 1024, description="Total bytes of the files of one upload; files "
                                     "past it are refused (STRATA_UPLOAD_BUDGET_MB; .streamlit/config.toml's "
                                     "server.maxUploadSize says the same).")
    max_docx_xml_bytes: int = Field(100 * 1024 * 1024, description="Decompressed size of a DOCX's parts "
                                    "(STRATA_MAX_DOCX_XML_MB).")
    max_table_rows: int = Field(200_000, description="Rows of one CSV/TSV/JSONL/JSON file (STRATA_MAX_TABLE_ROWS).")
    max_pdf_pages: int = Field(2000, description="Pages of one PDF (STRATA_MAX_PDF_PAGES).")
    parse_timeout_s: float = Field(60.0, gt=0, description="Time one file's parsing may take in the parsing process "
                                   "(STRATA_PARSE_TIMEOUT_S).")
    parse_memory_bytes: int = Field(2048 * 1024 * 1024, description="Address space of the parsing process "
                                    "(STRATA_PARSE_MEMORY_MB); a file that needs more is refused.")
    isolate: bool = Field(True, description="Parse uploads in a child process (STRATA_PARSE_ISOLATE=0: in the "
                          "app's own process, no time or memory limit).")


# environment variable -> (IngestSettings field, factor from the variable's unit)
INGEST_ENV: dict[str, tuple[str, float]] = {
    "STRATA_MAX_FILE_MB": ("max_file_bytes", 1024 * 1024),
    "STRATA_MAX_ZIP_MEMBERS": ("max_zip_members", 1),
    "STRATA_MAX_ZIP_MB": ("max_zip_total_bytes", 1024 * 1024),
    "STRATA_MAX_ARCHIVE_MEMBERS": ("max_archive_members", 1),
    "STRATA_UPLOAD_BUDGET_MB": ("upload_budget_bytes", 1024 * 1024),
    "STRATA_MAX_DOCX_XML_MB": ("max_docx_xml_bytes", 1024 * 1024),
    "STRATA_MAX_TABLE_ROWS": ("max_table_rows", 1),
    "STRATA_MAX_PDF_PAGES": ("max_pdf_pages", 1),
    "STRATA_PARSE_TIMEOUT_S": ("parse_timeout_s", 1),
    "STRATA_PARSE_MEMORY_MB": ("parse_memory_bytes", 1024 * 1024),
}
# environment variable -> the setting ("group.field") it sets to its text as written
TEXT_ENV = {"STRATA_BACKEND": "backend.kind", "STRATA_CHAT_MODEL": "backend.chat_model",
            "STRATA_EMBED_MODEL": "backend.embed_model", "STRATA_EMBEDDER": "embed.embedder",
            "STRATA_MINILM_RUNTIME": "embed.minilm_runtime", "STRATA_DATABASE_URL": "storage.database_url",
            "STRATA_CHROMA_URL": "storage.chroma_url", "STRATA_CHROMA_CA": "storage.chroma_ca",
            "STRATA_OIDC_PROVIDER": "auth.oidc_provider", "STRATA_AUTH_HEADER": "auth.proxy_header",
            "STRATA_SERVICE_USER": "auth.service_user"}
# environment variable -> the switch ("group.field") that 0, false, no or off turns off
OFF_ENV = {"STRATA_SAMPLE": "storage.sample_on_start", "STRATA_PARSE_ISOLATE": "ingest.isolate",
           "STRATA_WARM_UP": "retrieval.warm_up"}


class ChunkSettings(BaseModel):
    size_tokens: int = Field(300, description="Target chunk length in tokens of the bundled tokenizer (HLG: 300).")
    overlap: float = Field(0.2, ge=0.0, lt=0.9, description="Fraction of a chunk repeated at the start of the next.")


BackendKind = Literal["offline", "ollama", "openai"]
BACKEND_KINDS: tuple[str, ...] = get_args(BackendKind)  # what the pages offer


class BackendSettings(BaseModel):
    kind: BackendKind = Field("offline", description="Backend that builds and answers (offline, Ollama, OpenAI API).")
    ollama_host: str = Field("http://127.0.0.1:11434", description="Ollama server (OLLAMA_HOST).")
    openai_base_url: str = Field("http://127.0.0.1:8080/v1", description="Base URL of the OpenAI-compatible server, "
                                 "ending in /v1 (STRATA_OPENAI_BASE_URL, else OPENAI_BASE_URL).")
    api_key: SecretStr | None = Field(None, exclude=True, description="Its key (STRATA_OPENAI_API_KEY, else "
                                      "OPENAI_API_KEY); never dumped: a build's worker reads the same environment.")
    hosts: list[str] = Field(default_factory=list, description="Servers of the backend's kind sharing a build's calls "
                             "(STRATA_HOSTS, comma-separated); empty: the one ollama_host or openai_base_url.")
    chat_model: str = Field("llama3.1:8b", description="Ollama model for extraction, summaries and answers.")
    embed_model: str = Field("nomic-embed-text", description="Ollama embedding model (embedder 'ollama').")
    num_ctx: int = Field(8192, description="Context window asked of Ollama; an answer's context fits it, less 1,536.")
    timeout_s: float = Field(120.0, description="Timeout of one request; a stall past it is one failed attempt.")
    retries: int = Field(12, description="Retries of a failed, stalled or bad reply: 30 % faults fail 0.3^13 of calls.")
    backoff_s: float = Field(0.5, description="First pause of retries on a host, doubled per retry to 15 s, jittered.")
    concurrency: int = Field(2, description="Parallel requests sent to Ollama during a build.")
    temperature: float = Field(0.0, description="Sampling temperature; 0 keeps builds repeatable.")
    max_tokens: int = Field(2048, description="Bound of every reply (max_tokens, Ollama's num_predict), in tokens.")

    def endpoints(self, kind: str | None = None) -> list[str]:
        """The servers of `kind` ("ollama", "openai"; default the backend's): `hosts` if set for it, else the one."""
        if self.hosts and (kind or self.kind) == self.kind:
            return list(dict.fromkeys(h.rstrip("/") for h in self.hosts))
        return [(self.openai_base_url if (kind or self.kind) == "openai" else self.ollama_host).rstrip("/")]

    @property
    def parallel_calls(self) -> int:  # requests a build may have in flight: `concurrency` per host
        return max(1, int(self.concurrency)) * len(self.endpoints())


class EmbedSettings(BaseModel):
    embedder: Literal["minilm", "ollama", "openai"] = Field(
        "minilm", description="Bundled all-MiniLM-L6-v2, Ollama's /api/embed or an OpenAI-compatible /v1/embeddings.")
    batch_size: int = Field(64, description="Texts embedded per call.")
    title_prefix: bool = Field(
        True, description="Embed each chunk with its document's title before its text (and each statement of a "
                          "document about one entity with that title, core/index/embedding.py `statement_rows`), as "
                          "the shared sets' dense reference embeds title + text; off for the title ablation.")
    minilm_runtime: Literal["auto", "exact", "torch-bf16", "onnx", "sentence-transformers"] = Field(
        "auto", description="The bundled MiniLM's runtime for a new workspace (STRATA_MINILM_RUNTIME); a workspace "
                            "keeps the runtime its vectors were written with (core/index/writer.py).")


class ExtractSettings(BaseModel):
    max_entities_per_chunk: int = Field(40, description="Cap on entities kept from one chunk.")
    max_relationships_per_chunk: int = Field(60, description="Cap on relationships kept from one chunk.")
    entity_types: list[str] = Field(
        ["PERSON", "ORGANIZATION", "LOCATION", "EVENT", "WORK", "DATE", "CONCEPT"],
        description="Entity types the extractor may assign.",
    )
    title_subject: bool = Field(
        True, description="Treat a document's real title (a row's title field, a titled Markdown/HTML page) as the "
                          "subject its chunks are about; off for an ablation.")
    offline_extractor: Literal["spacy", "heuristic"] = Field(
        "spacy", description="Offline extraction: the spaCy pipeline (named entities, noun phrases; falls back to "
                                 "the heuristics when spaCy or its model cannot be imported) or the capitalised-span "
                                 "heuristics.")


class LayerSettings(BaseModel):
    """HiRAG HiIndex (hirag.txt §4.1): summary layers over the entities."""

    enabled: bool = Field(True, description="Build HiRAG summary layers.")
    max_layers: int = Field(50, description="Safety cap on summary layers (HiRAG's code loops at most 50); the "
                                            "paper's change-rate rule normally stops far earlier.")
    membership_threshold: float = Field(0.1, description="Soft GMM membership: posterior at or above this joins "
                                                         "(RAPTOR's 0.1).")
    max_components: int = Field(50, description="BIC tries k up to min(n, this) - 1 (HiRAG's and RAPTOR's "
                                                "max_clusters 50).")
    reduce_dim: int = Field(2, description="UMAP dimensions before the Gaussian mixture (HiRAG's code: "
                                           "reduction_dimension 2).")
    change_rate_stop: float = Field(0.05, description="ε: stop when CS_i changes by at most this share (hirag.txt "
                                                      "§5.4).")
    min_entities: int = Field(3, description="A layer with fewer entities is not clustered (HiRAG's code stops "
                                             "at <= 2).")
    meta_summary_concepts: list[str] = Field(
        ["organization", "person", "location", "event", "product", "technology", "industry", "mathematics",
         "social sciences"],
        description="Meta summary entities X guiding the model's summary entities (hirag.txt §4.1; HiRAG's list).")
    seed: int = Field(42, description="Seed of UMAP and the Gaussian mixtures.")


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
    knn_percentile: float = Field(0.7, description="KNN augmentation (§3.1 \"a threshold\", no value): a new link's "
                                  "cosine must exceed this percentile of the existing links' cosines (the published "
                                  "code's `wx_weight` default 0.7, src/utils.py `compute_distance`).")
    knn_degree_scale: float = Field(1.0, description="KNN augmentation: each node gains at most m_du links, the mean "
                                    "degree of the non-isolated nodes times this (the published code's `m_du_scale`, 1).")
    knn_search_scale: float = Field(1.5, description="KNN augmentation: candidates per node, int(this x m_du) nearest "
                                    "(the published code's `search_k`, 1.5).")
    resolution: float = Field(1.0, description="Resolution of the weighted Leiden run on each level's graph.")
    max_cluster_size: int = Field(15, ge=0, description="GCluster: a Leiden community larger than this is split by "
                                  "Leiden on its own subgraph until none is (the published code's hierarchical Leiden "
                                  "with `max_cluster_size` 15, src/attr_cluster.py `compute_leiden_max_size`); 0: no cap.")
    max_levels: int = Field(4, description="Termination: at most this many community levels (the published code's "
                            "`max_level` 4; archrag.txt §3.1 \"reaching the specified level limit\").")
    min_clusters: int = Field(5, ge=1, description="Termination: a clustering into fewer communities than this is not "
                              "kept and ends the hierarchy (the published code's `min_clusters` 5; archrag.txt §3.1 "
                              "\"insufficient nodes\").")
    chnsw_m: int = Field(32, description="C-HNSW: intra-layer nearest-neighbour links per node (M; §3.1.3 \"a "
                         "predefined value\", none given: the published code's M = 32, src/hchnsw_index.py).")
    seed: int = Field(42, description="Seed of Leiden and of the C-HNSW construction.")


class NodeRAGSettings(BaseModel):
    """NodeRAG heterograph augmentation and enrichment (noderag.txt §2.3-2.4, Appendix C)."""

    enabled: bool = Field(True, description="Add attribute, high-level element and overview nodes and semantic edges.")
    community_resolution: float = Field(1.0, description="Resolution of the flat Leiden run over the heterograph "
                                        "(N, R, S, A) whose communities get high-level elements (§2.3; the "
                                        "published code's modularity partition: 1).")
    community_iterations: int = Field(2, description="Leiden iterations of that run (leidenalg's find_partition "
                                      "default, which the published code uses: 2).")
    min_community_size: int = Field(2, ge=1, description="Nodes a Leiden community needs to be stored and "
                                    "summarized: a node no heterograph edge reaches is a one-node community of "
                                    "Leiden's output, not an aggregation.")
    betweenness_samples: int = Field(10, description="Pivot nodes of the sampled betweenness centrality (NodeRAG: 10).")
    max_attributes: int | None = Field(None, description="Cap on attribute nodes, most important entities first; "
                                       "None: every important entity (the paper and its published code cap none).")
    hcluster_size: int = Field(39, description="Semantic matching runs K-means only when the nodes per cluster "
                               "exceed this; else a high-level element matches its whole community (the published "
                               "code's `Hcluster_size`).")
    hnsw_m: int = Field(50, description="HNSW M: base-layer links per node become semantic edges (2*M at most; the "
                        "published code's `m: 50`, Node_config.yaml).")
    hnsw_ef: int = Field(200, description="HNSW candidate list while inserting (efConstruction; the published "
                         "code's `ef: 200`).")
    seed: int = Field(42, description="Seed of betweenness sampling, K-means and HNSW.")


class LexicalSettings(BaseModel):
    """HLG lexical graph (hierarchical-lexical-graph.txt §3): facts linking statements, topics per document."""

    enabled: bool = Field(True, description="Link statements to facts and group them into topics.")
    topics: Literal["model", "clustering"] = Field(
        "model", description="How statements are grouped into topics: \"model\" as the paper does (§6.2 (3)): the "
                             "model relates each chunk's statements to topics it titles and summarizes; offline, "
                             "where no model is configured, the clustering stands in. \"clustering\": the "
                             "clustering with any backend (a model then only titles and summarizes each group).")
    topic_similarity: float = Field(
        0.35, description="Average-linkage cosine similarity at which statements of one document join one topic "
                          "(the clustering that stands in for the paper's model-made topics offline or with "
                          "topics = \"clustering\", §6.2; no paper value).")
    max_topic_statements: int = Field(12, description="A topic of the clustering holds at most this many statements "
                                                      "(no paper value; a model's topics are not capped).")


class QualitySettings(BaseModel):
    """Community quality metrics and their flags (the Quality page, core/quality/metrics.py)."""

    tiny_size: int = Field(2, ge=1, description="A community with at most this many members counts as tiny.")
    weak_conductance: float = Field(0.5, ge=0.0, le=1.0, description="Conductance at or above which a community is "
                                    "called weakly connected (0.5: its members send at least half their link "
                                    "weight outside it).")
    mixed_lift: float = Field(0.1, ge=-1.0, le=1.0, description="Coherence above chance, (p - p0) / (1 - p0) with p "
                              "the members' mean pairwise cosine and p0 that of the whole level (0 = no more alike "
                              "than a random group of the same size, 1 = identical), below which a community is "
                              "called mixed themes.")
    worst_listed: int = Field(15, ge=1, description="Worst-ranked communities listed per level on the Quality page.")


class GraphSettings(BaseModel):
    """The Graph page (core/explore/explorer.py): levels of detail over big heterographs."""

    max_nodes: int = Field(1500, description="Most nodes the Graph page ever sends to the browser; a workspace with "
                                             "more drawable nodes opens on its communities as super-nodes.")
    default_nodes: int = Field(500, description="Initial position of the page's node cap slider (at most max_nodes).")
    edges_per_node: int = Field(4, description="At most this many edges per drawn node, heaviest first.")
    derived_cache: bool = Field(True, description="Keep the explorer's index (community sizes, memberships, "
                                                  "aggregated links) in STRATA_HOME/derived, computed once per build.")


class WorkerSettings(BaseModel):
    """Background workers sharing one database (core/pipeline/lease.py)."""

    lease_s: float = Field(45.0, gt=0, description="A run whose worker renewed no heartbeat for this long is stale: "
                                                   "another worker may take it over (STRATA_WORKER_LEASE_S). Workers "
                                                   "renew every min(5 s, lease/3).")
    poll_s: float = Field(2.0, gt=0, description="How often an idle `worker --serve` looks for a run to claim.")


AuthMode = Literal["none", "oidc", "proxy"]


class AuthSettings(BaseModel):
    """Who is there (ui/auth.py) and what they may do (core/access.py)."""

    mode: AuthMode = Field("none", description="STRATA_AUTH: none (one laptop: no sign-in, everyone may do "
                           "everything), oidc (Streamlit's st.login with the provider of .streamlit/secrets.toml), "
                           "proxy (the user named by a header an authenticating proxy sets).")
    oidc_provider: str | None = Field(None, description="STRATA_OIDC_PROVIDER: the [auth.NAME] section of "
                                      "secrets.toml to sign in with; unset: the [auth] section itself.")
    proxy_header: str = Field("X-Forwarded-Email", description="STRATA_AUTH_HEADER: the header naming the user "
                              "(oauth2-proxy: X-Forwarded-Email or X-Forwarded-User).")
    trusted_proxies: list[str] = Field(default_factory=lambda: ["127.0.0.1/32", "::1/128"],
                                       description="STRATA_TRUSTED_PROXIES (comma-separated addresses or networks): "
                                                   "the header is believed only on a connection from these.")
    service_user: str = Field("strata-service", description="STRATA_SERVICE_USER: who the CLI and the workers act "
                              "as (workspaces they create belong to it).")
    admins: list[str] = Field(default_factory=list, description="STRATA_ADMINS (comma-separated users): may see and "
                              "act on every workspace, and read the whole audit log.")


class Settings(BaseModel):
    auth: AuthSettings = AuthSettings()
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
    quality: QualitySettings = QualitySettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    graph: GraphSettings = GraphSettings()
    worker: WorkerSettings = WorkerSettings()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        """Defaults, overridden by the STRATA_* variables of README (and OLLAMA_HOST, OPENAI_BASE_URL, OPENAI_API_KEY)."""
        env = dict(os.environ if env is None else env)
        s = cls()
        if env.get("STRATA_HOME"):
            s.storage.home = Path(env["STRATA_HOME"])
        if env.get("STRATA_WORKER_LEASE_S"):
            s.worker.lease_s = float(env["STRATA_WORKER_LEASE_S"])
        if env.get("OLLAMA_HOST"):
            host = env["OLLAMA_HOST"]
            s.backend.ollama_host = host if "://" in host else f"http://{host}"
        s.backend.openai_base_url = (env.get("STRATA_OPENAI_BASE_URL") or env.get("OPENAI_BASE_URL")
                                     or s.backend.openai_base_url)
        if env.get("STRATA_HOSTS"):
            s.backend.hosts = [h if "://" in h else f"http://{h}" for h in env["STRATA_HOSTS"].replace(",", " ").split()]
        for var, path in TEXT_ENV.items():
            if env.get(var):
                group, name = path.split(".")
                setattr(getattr(s, group), name, env[var])
        for var, path in OFF_ENV.items():
            if env.get(var, "").strip().lower() in ("0", "false", "no", "off"):
                group, name = path.split(".")
                setattr(getattr(s, group), name, False)
        for var, (name, unit) in INGEST_ENV.items():
            if env.get(var):
                value = float(env[var]) * unit
                setattr(s.ingest, name, value if name == "parse_timeout_s" else int(value))
        if env.get("STRATA_AUTH"):
            s.auth.mode = env["STRATA_AUTH"].strip().lower()  # type: ignore[assignment]
        if "STRATA_TRUSTED_PROXIES" in env:
            s.auth.trusted_proxies = env["STRATA_TRUSTED_PROXIES"].replace(",", " ").split()
        if env.get("STRATA_MAX_QUESTION_CHARS"):
            s.retrieval.max_question_chars = int(env["STRATA_MAX_QUESTION_CHARS"])
        if env.get("STRATA_ADMINS"):
            s.auth.admins = env["STRATA_ADMINS"].replace(",", " ").split()
        out = cls.model_validate(s.model_dump())
        key = env.get("STRATA_OPENAI_API_KEY") or env.get("OPENAI_API_KEY")
        out.backend.api_key = SecretStr(key) if key else None  # excluded from model_dump, so set after it
        token = env.get("STRATA_CHROMA_TOKEN")
        out.storage.chroma_token = SecretStr(token) if token else None
        return out
