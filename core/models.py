"""SQLModel tables: the durable state of every workspace.

The graph is stored once: `Node` holds chunks, statements, entities, relationships, attributes and topics;
`Document` and `Community` hold the two node kinds that carry a record of their own (an upload, a detected
community with its report). `Edge` links any two of them by id. Every other structure is a view of these rows.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, LargeBinary, Table, UniqueConstraint, inspect
from sqlmodel import Field, SQLModel

from core.config import WorkerSettings
from core.liveness import holder_gone

LEASE_S: float = WorkerSettings.model_fields["lease_s"].default  # a run row's lease when none was recorded
# PostgreSQL ends a transaction left idle this long (core/store.py): a process frozen inside one (SIGSTOP, a paused
# VM; seen in CI between a heartbeat's UPDATE and its COMMIT) would otherwise hold its run's row lock and block every
# takeover of the run. No transaction of Strata waits that long between two of its statements.
IDLE_TRANSACTION_S = 60.0


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Workspace(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    created_at: datetime = Field(default_factory=utcnow)
    backend: str = "offline"  # backend of the last successful build
    embedder: str = "minilm"
    chat_model: str = ""
    build_version: int = 0  # bumped after each successful build; keys the app's read caches
    salted_ids: bool = False  # ids salted with the row number (built before content-only ids, core/ids.py)


class Document(SQLModel, table=True):
    """An uploaded source. `id` is the content hash (scoped to the workspace), so re-uploading adds nothing."""

    __table_args__ = (UniqueConstraint("workspace_id", "content_hash"),)
    id: str = Field(primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    content_hash: str
    external_id: Optional[str] = Field(default=None, index=True)
    title: str
    filename: str
    mime: str
    n_chars: int
    text: str
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)


class Node(SQLModel, table=True):
    """A graph node of kind chunk, statement, entity, relationship, attribute or topic."""

    __table_args__ = (
        Index("ix_node_ws_kind", "workspace_id", "kind"),
        Index("ix_node_ws_doc", "workspace_id", "document_id", "ord"),
    )
    id: str = Field(primary_key=True)
    workspace_id: int = Field(foreign_key="workspace.id")
    kind: str
    key: str = ""  # normalized name for entities, subject|predicate|object for relationships
    title: str = ""
    text: str = ""  # chunk text, statement, entity description, relationship description
    type: str = ""  # entity type, relationship predicate
    layer: int = 0  # HiRAG layer for entities (0 = extracted)
    weight: float = 1.0  # mention count for entities, strength for relationships
    document_id: Optional[str] = None  # provenance for chunks and statements
    ord: Optional[int] = None  # position of a chunk in its document, of a statement in its chunk
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class Edge(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint("workspace_id", "src", "dst", "kind"),
        Index("ix_edge_ws_dst", "workspace_id", "dst"),
        Index("ix_edge_ws_kind", "workspace_id", "kind"),
    )
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(foreign_key="workspace.id")
    src: str
    dst: str
    kind: str
    weight: float = 1.0
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class Community(SQLModel, table=True):
    """A community found by `method` at `level` (0 = coarsest), with its report; members link by in_community edges."""

    __table_args__ = (Index("ix_comm_ws_method_level", "workspace_id", "method", "level"),)
    id: str = Field(primary_key=True)
    workspace_id: int = Field(foreign_key="workspace.id")
    method: str  # wcc, leiden, ...
    level: int
    parent_id: Optional[str] = None
    size: int = 0
    title: str = ""
    summary: str = ""
    report: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # findings, rating, keywords
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


class EntityMerge(SQLModel, table=True):
    """A merge candidate between two entities and what became of it. A merge moves every edge of `merged_id` onto
    `kept_id` (each moved edge remembers where it came from) and keeps the removed node in `snapshot`, so it can be
    reviewed and undone."""

    __table_args__ = (UniqueConstraint("workspace_id", "kept_id", "merged_id"),
                      Index("ix_merge_ws_status", "workspace_id", "status"))
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(foreign_key="workspace.id")
    kept_id: str
    merged_id: str
    score: float = 0.0  # evidence score 0-1
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # name, type, cosine, ...
    status: str = "candidate"  # candidate, merged, rejected, undone
    auto: bool = False  # merged by the build rather than by a reviewer
    snapshot: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # removed node + moved edges
    created_at: datetime = Field(default_factory=utcnow)
    decided_at: Optional[datetime] = None


class BuildRun(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    status: str = "queued"  # queued, running, cancelling, done, failed, cancelled
    kind: str = "build"  # build, or a job of core/worker.py: promote, whatif, reembed
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # a job's parameters
    backend: str = "offline"
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    stage: str = ""
    message: str = ""
    error: str = ""
    pid: Optional[int] = None
    worker: Optional[str] = None  # the lease holder, "host:pid:start.nonce" (core/liveness.py); None: not claimed yet
    heartbeat: Optional[datetime] = None  # the holder's last sign of life, by the database's clock
    # silent this long, the run is stale: worker.lease_s of whoever created or claimed it (NULL in rows of older
    # releases: the default)
    lease_s: Optional[float] = Field(default=LEASE_S, sa_column_kwargs={"server_default": str(LEASE_S)})
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: Optional[datetime] = None
    version: Optional[int] = None  # a finished build's number: the workspace's build_version it made (core/pipeline/runs.py)


UNFINISHED = ("queued", "running", "cancelling")


def is_active(run: BuildRun, now: datetime) -> bool:
    """Unfinished, its worker (or, while queued, its creation) sent a sign of life within the run's own lease
    (`lease_s`, by the database's clock `now`, `Store.now()`), and the holder's process, when it ran on this host, is
    still there: the one rule for whether a run holds its workspace (core/pipeline/runs.py says what becomes of a dead
    one)."""
    if run.status not in UNFINISHED or holder_gone(run.worker):
        return False
    beat = run.heartbeat or run.created_at
    return (_aware(now) - _aware(beat)).total_seconds() <= (run.lease_s or LEASE_S)


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)  # read back without its zone: UTC


class StageRun(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("run_id", "stage"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: int = Field(index=True, foreign_key="buildrun.id")
    workspace_id: int = Field(foreign_key="workspace.id")
    stage: str
    ordinal: int = 0
    status: str = "pending"  # pending, running, done, failed
    done: int = 0
    total: int = 0
    seconds: float = 0.0
    counts: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    message: str = ""
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None


class Checkpoint(SQLModel, table=True):
    """One finished unit of a stage (a document chunked, a chunk extracted), so an interrupted build resumes."""

    workspace_id: int = Field(primary_key=True, foreign_key="workspace.id")
    stage: str = Field(primary_key=True)
    unit: str = Field(primary_key=True)


class FailedUnit(SQLModel, table=True):
    """A unit of a stage (a chunk's extraction, a community's report, ...) whose language call still failed after its
    retries: recorded instead of an empty result, retried by the next build (core/pipeline/failures.py); the row goes
    when the unit succeeds. `run_id`: the run it failed in last."""

    __table_args__ = (UniqueConstraint("workspace_id", "stage", "unit"), Index("ix_failedunit_run", "run_id"))
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(foreign_key="workspace.id")
    run_id: Optional[int] = None
    stage: str
    unit: str  # a stable key: chunk id, community id, document id, ...
    label: str = ""  # what the unit is, for people
    reason: str = ""
    attempts: int = 0
    failed_at: datetime = Field(default_factory=utcnow)


class Artifact(SQLModel, table=True):
    """A binary a build derives and retrieval reads (ArchRAG's C-HNSW index), kept in the database beside the graph
    it indexes, so every worker and app host sharing the database reads the one the last build wrote."""

    workspace_id: int = Field(foreign_key="workspace.id", primary_key=True)
    name: str = Field(primary_key=True)
    digest: str  # content hash of `data`: readers reload when it changes
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class LLMCall(SQLModel, table=True):
    """Cache of language-backend calls keyed by a hash of (backend, model, prompt, schema, options)."""

    key: str = Field(primary_key=True)
    backend: str
    model: str
    task: str
    request: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    response: str
    ms: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class QueryLog(SQLModel, table=True):
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    question: str
    strategy: str
    answer: str = ""
    result: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    ms: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    asked_by: Optional[str] = None  # the signed-in user's name; None without sign-in (and in rows from before)


class CommunityVariant(SQLModel, table=True):
    """A what-if re-run of community detection (core/quality/variants.py): its settings, its metrics per level and
    its partition (entity ids once, then every community as [level, parent index, member indices]); the stored
    `leiden` communities stay untouched until a variant is promoted. No foreign key to Workspace, so deleting a
    workspace never trips on it; variants older than their workspace (a deleted one's id reused) are ignored."""

    __table_args__ = (UniqueConstraint("workspace_id", "name"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True)
    name: str
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))  # level -> figures
    partition: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    build_version: int = 0  # of the workspace when it ran
    seconds: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class Evaluation(SQLModel, table=True):
    """A retrieval evaluation of a workspace (core/evaluation): its question set (with the gold documents resolved),
    what it measured (build version, backend, embedder, partition, strategies, ks) and its job run; one
    `EvaluationResult` row per question and strategy measured."""

    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    name: str = ""
    status: str = "queued"  # queued, running, done (a stopped or failed run: its BuildRun says so)
    run_id: Optional[int] = None  # the job that measures it (the last one, when resumed)
    questions: list[Any] = Field(default_factory=list, sa_column=Column(JSON))
    question_hash: str = Field(default="", index=True)  # sha256 of the question set's canonical JSON
    strategies: list[Any] = Field(default_factory=list, sa_column=Column(JSON))
    baselines: list[Any] = Field(default_factory=list, sa_column=Column(JSON))
    ks: list[Any] = Field(default_factory=list, sa_column=Column(JSON))
    build_version: int = 0
    backend: str = ""
    embedder: str = ""
    partition: str = ""  # the Leiden partition's variant name ("" : the built one)
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: Optional[datetime] = None


class EvaluationResult(SQLModel, table=True):
    """One question measured with one strategy: the ranked documents, which gold entries were found, the latency,
    and whether the given answer appears in the retrieved context (None: no answer given)."""

    __table_args__ = (UniqueConstraint("evaluation_id", "question", "strategy"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    evaluation_id: int = Field(index=True)
    question: int  # its index in the evaluation's question set
    strategy: str
    ranked: list[Any] = Field(default_factory=list, sa_column=Column(JSON))  # document ids, best first
    found: list[Any] = Field(default_factory=list, sa_column=Column(JSON))  # rank (1-based) of each gold entry, or 0
    ms: float = 0.0
    answer_in_context: Optional[bool] = None


class Member(SQLModel, table=True):
    """Someone's role in a workspace (core/access.py): viewer, editor or owner; user "*" is everyone signed in."""

    __table_args__ = (UniqueConstraint("workspace_id", "user"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True, foreign_key="workspace.id")
    user: str
    role: str
    added_by: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class AuditEvent(SQLModel, table=True):
    """Who did (or was refused) what, when, to which workspace (core/access.py). No foreign key: the log outlives a
    deleted workspace (its name is kept)."""

    id: Optional[int] = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    user: str = Field(index=True)
    action: str
    workspace_id: Optional[int] = Field(default=None, index=True)
    workspace: str = ""
    allowed: bool = False
    detail: str = ""


class UploadRecord(SQLModel, table=True):
    """One upload to a workspace and what became of it (core/ingest/uploads.py): documents added, duplicates (the
    same content already stored: file, title, the stored document's id), refusals (Refusals.to_json: bounded), kept
    so the Workspaces page lists them after a reload. No foreign key, as CommunityVariant: records older than their
    workspace (a deleted one's id reused) are ignored."""

    id: Optional[int] = Field(default=None, primary_key=True)
    workspace_id: int = Field(index=True)
    created_at: datetime = Field(default_factory=utcnow)
    user: str = ""
    added: int = 0
    duplicates: list[Any] = Field(default_factory=list, sa_column=Column(JSON))  # [file, title, document id]
    n_duplicates: int = 0  # all of them (the list keeps the first few hundred)
    refusals: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))


def sql_table(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table behind a table model, for bulk inserts and updates (`insert(sql_table(Node))`)."""
    t: Table = model.__table__  # type: ignore[attr-defined]  # set by SQLModel's metaclass, absent from its stubs
    return t


NEW_COLUMNS = {"buildrun": {"kind": "VARCHAR NOT NULL DEFAULT 'build'", "params": "JSON", "worker": "VARCHAR",
                             "lease_s": f"FLOAT DEFAULT {LEASE_S}", "version": "INTEGER"},
               "querylog": {"asked_by": "VARCHAR"},
               # a workspace from before content-only ids keeps making its ids as it did (core/ids.py)
               "workspace": {"salted_ids": "BOOLEAN NOT NULL DEFAULT TRUE"}}


def add_new_columns(engine) -> None:
    """Add the columns of NEW_COLUMNS that an older database lacks (Store() calls it on opening)."""
    with engine.connect() as conn:
        found = inspect(conn)
        for table, columns in NEW_COLUMNS.items():
            if not found.has_table(table):
                continue
            have = {c["name"] for c in found.get_columns(table)}
            for name, ddl in columns.items():
                if name not in have:
                    conn.exec_driver_sql(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {ddl}')
        conn.commit()
