"""The database, reached through SQLModel, and the few queries every layer needs: by default one SQLite file under
STRATA_HOME; with STRATA_DATABASE_URL a PostgreSQL server (`postgresql+psycopg://user:pw@host:5432/strata`), so
several app instances and workers share one database. SQL that differs between the two goes through the helpers
here (`is_sqlite`, `bulk_insert`, `driver_sql`, `insert_ignore`, `index_hint`, `without_hints`,
`join_in_order`, `like`, `json_field`, `from_json`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import JSON, event, func, text, update
from sqlalchemy.engine import URL, make_url
from sqlmodel import Session, SQLModel, col, create_engine, delete, select

from core.models import (
    IDLE_TRANSACTION_S,
    Artifact,
    BuildRun,
    Checkpoint,
    Community,
    CommunityVariant,
    Document,
    Edge,
    EntityMerge,
    Evaluation,
    EvaluationResult,
    FailedUnit,
    LLMCall,
    Member,
    Node,
    QueryLog,
    StageRun,
    UploadRecord,
    Workspace,
    add_new_columns,
    utcnow,
)
from core.secrets import private_dir, private_file

_HINT = re.compile(r" INDEXED BY \w+")
WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class StoreError(Exception):
    """A user-facing problem with stored data (missing workspace, bad name)."""


def content_id(*parts: str) -> str:
    """A stable id from content: the first 20 hex digits of a SHA-256 over the parts."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:20]


def is_sqlite(conn) -> bool:
    """Whether `conn` (an Engine, Connection or Session) talks to SQLite (else PostgreSQL)."""
    bind = conn.get_bind() if isinstance(conn, Session) else conn
    return bind.dialect.name == "sqlite"


def index_hint(conn, index: str) -> str:
    """` INDEXED BY <index>` on SQLite (its planner may pick a worse index on a big edge table), nothing elsewhere:
    PostgreSQL has no hints and its planner uses the statistics ANALYZE keeps."""
    return f" INDEXED BY {index}" if is_sqlite(conn) else ""


def without_hints(conn, sql: str) -> str:
    """`sql` as written on SQLite; elsewhere without its ` INDEXED BY <index>` hints (see `index_hint`)."""
    return sql if is_sqlite(conn) else _HINT.sub("", sql)


def like(conn, column, pattern: str):
    """`column LIKE pattern`, ignoring case on both databases: SQLite's LIKE ignores ASCII case, PostgreSQL's
    does not (its ILIKE does)."""
    return column.like(pattern) if is_sqlite(conn) else column.ilike(pattern)


def json_field(conn, column, key: str, as_text: bool = False):
    """The value at `key` of a JSON column, SQL NULL when absent or null: SQLite's `json_extract(column, '$.key')`
    (a number or a string, as stored); on PostgreSQL `column ->> 'key'` cast to a float, or left as text."""
    if is_sqlite(conn):
        return func.json_extract(column, f"$.{key}")
    return column[key].as_string() if as_text else column[key].as_float()


def from_json(raw, default=None):
    """A JSON column's value as read by raw SQL (`text(...)`): SQLite hands back the JSON text, psycopg the decoded
    value; both give the Python value here (`default` for NULL or empty text)."""
    if raw is None or raw == "":
        return default
    return json.loads(raw) if isinstance(raw, (str, bytes)) else raw


def join_in_order(conn) -> str:
    """`CROSS JOIN` on SQLite, where it joins in the written order (and may take an ON clause), a plain `JOIN` on
    PostgreSQL, where a CROSS JOIN takes no ON clause and the planner orders joins itself."""
    return "CROSS JOIN" if is_sqlite(conn) else "JOIN"


def driver_sql(conn, sql: str) -> str:
    """`sql` written with `?` placeholders (for `exec_driver_sql`) in the driver's own style: psycopg takes `%s`."""
    return sql if is_sqlite(conn) else sql.replace("?", "%s")


def insert_ignore(conn, table):
    """`INSERT ... ` that skips rows clashing with a unique key: SQLite's `INSERT OR IGNORE`, PostgreSQL's
    `ON CONFLICT DO NOTHING`. Execute it with a list of row dicts."""
    if is_sqlite(conn):
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects import postgresql

    return postgresql.insert(table).on_conflict_do_nothing()


def bulk_insert(conn, table, rows: list[dict]) -> None:
    """INSERT `rows` (dicts with the same keys, column names) into `table` as fast as the database takes them,
    JSON columns serialized here as SQLAlchemy would. On SQLite through the driver's executemany: Core's per-row
    parameter processing cost more than SQLite's own work in big builds. On PostgreSQL through COPY, one round
    trip for all rows. `conn` is a SQLAlchemy Connection (`session.connection()`)."""
    if not rows:
        return
    cols = list(rows[0])
    as_json = {c.name for c in table.columns if isinstance(c.type, JSON)}
    names = ", ".join('"' + c + '"' for c in cols)
    dumps = json.dumps
    values = [tuple(dumps(r[c]) if c in as_json else r[c] for c in cols) for r in rows]
    if is_sqlite(conn):
        marks = ", ".join("?" for _ in cols)
        conn.exec_driver_sql(f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})', values)
        return
    with conn.connection.driver_connection.cursor() as cur, cur.copy(f'COPY "{table.name}" ({names}) FROM STDIN') as cp:
        for v in values:
            cp.write_row(v)


def release_memory() -> None:
    """Hand memory a finished stage let go of back to the system: a full garbage collection, then glibc's
    malloc_trim (a no-op elsewhere). Without it the build process keeps every stage's high-water mark: on the
    1M-token corpus the resident set stayed 200-570 MB above what the next stage needed, stage after stage."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def check_workspace_name(name: str) -> str:
    if not WORKSPACE_NAME.match(name or ""):
        raise StoreError(
            f"invalid workspace name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit"
        )
    return name


class Store:
    """Owns the engine. Create one per process (the app keeps it in st.cache_resource)."""

    def __init__(self, url_or_path: str | Path, idle_transaction_s: float = IDLE_TRANSACTION_S):
        """`url_or_path`: a SQLAlchemy URL (`sqlite:///...`, `postgresql+psycopg://...`) or a path to a SQLite file.
        `path` names the database for caches keyed on it: the SQLite file, or the URL without its password."""
        url = database_url(url_or_path)
        if url.get_backend_name() == "sqlite":
            db_path = Path(url.database or ":memory:")
            if url.database and url.database != ":memory:":  # private: STRATA_HOME (strata.db's folder) 0700, made
                # so or closed (core/secrets.py), the file 0600 before SQLite opens it (its -wal, -shm get its mode)
                private_dir(db_path.parent, close=db_path.name == "strata.db")
                for path, create in ((db_path, True), *((Path(f"{db_path}{x}"), False) for x in ("-wal", "-shm"))):
                    private_file(path, create)
            self.path: Path | str = db_path
            self.engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 60})
            event.listen(self.engine, "connect", _sqlite_pragmas)
            SQLModel.metadata.create_all(self.engine)
        else:
            self.path = url.render_as_string(hide_password=True)
            # pre-ping: a restart or timeout must not fail the next query; UTC as on SQLite; IDLE_TRANSACTION_S (models)
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10, connect_args={
                "options": f"-c timezone=UTC -c idle_in_transaction_session_timeout={int(idle_transaction_s * 1000)}"})
            with self.engine.begin() as conn:  # several processes may start at once: one creates the tables
                conn.execute(text("SELECT pg_advisory_xact_lock(1936028001)"))
                SQLModel.metadata.create_all(conn)
        self.url = url.render_as_string(hide_password=False)
        add_new_columns(self.engine)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def close(self) -> None:
        """Close the engine's pooled connections (a PostgreSQL server counts them)."""
        self.engine.dispose()

    def analyze(self) -> None:
        """Refresh the query planner's statistics (after a build): without them SQLite may scan every edge instead
        of using `ix_edge_ws_dst` for lookups by target node. `analysis_limit` keeps this to a second or so."""
        with self.engine.connect() as conn:
            if self.is_sqlite:
                conn.exec_driver_sql("PRAGMA analysis_limit=2000")
            conn.exec_driver_sql("ANALYZE")
            conn.commit()

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s:
            yield s

    # -- workspaces -------------------------------------------------------------------------------------------
    def workspaces(self) -> list[Workspace]:
        with self.session() as s:
            return list(s.exec(select(Workspace).order_by(Workspace.name)))

    def get_workspace(self, name: str) -> Workspace | None:
        with self.session() as s:
            return s.exec(select(Workspace).where(Workspace.name == name)).first()

    def require_workspace(self, name: str) -> Workspace:
        ws = self.get_workspace(name)
        if ws is None:
            raise StoreError(f"no workspace named {name!r}")
        return ws

    def create_workspace(self, name: str) -> Workspace:
        check_workspace_name(name)
        with self.session() as s:
            ws = s.exec(select(Workspace).where(Workspace.name == name)).first()
            if ws is None:
                ws = Workspace(name=name)
                s.add(ws)
                s.commit()
                s.refresh(ws)
            return ws

    def delete_workspace(self, ws: Workspace) -> None:
        with self.session() as s:
            runs = [r.id for r in s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id))]
            if runs:
                s.exec(delete(StageRun).where(col(StageRun.run_id).in_(runs)))
            for table in (FailedUnit, BuildRun, Checkpoint, Edge, Node, Community, Document, QueryLog, EntityMerge,
                          CommunityVariant, Artifact, Member, EvaluationResult, Evaluation, UploadRecord):
                s.exec(delete(table).where(col(table.workspace_id) == ws.id))
            s.exec(delete(Workspace).where(col(Workspace.id) == ws.id))
            s.commit()

    # -- artifacts: binaries a build derives (core/models.py Artifact) -----------------------------------------
    def put_artifact(self, ws_id: int, name: str, data: bytes | None) -> str | None:
        """Store (replace) the workspace's artifact `name`, or remove it when `data` is None; returns its digest."""
        digest = None if data is None else hashlib.sha256(data).hexdigest()[:20]
        with self.session() as s:
            s.exec(delete(Artifact).where(col(Artifact.workspace_id) == ws_id, col(Artifact.name) == name))
            if data is not None and digest is not None:
                s.add(Artifact(workspace_id=ws_id, name=name, digest=digest, data=data))
            s.commit()
        return digest

    def artifact_digest(self, ws_id: int, name: str) -> str | None:
        """The stored artifact's digest (cheap: the bytes are not read), None when there is none."""
        with self.session() as s:
            return s.exec(select(Artifact.digest).where(Artifact.workspace_id == ws_id, Artifact.name == name)).first()

    def artifact(self, ws_id: int, name: str) -> tuple[str, bytes] | None:
        """(digest, bytes) of the stored artifact, None when there is none."""
        with self.session() as s:
            row = s.exec(select(Artifact.digest, Artifact.data).where(Artifact.workspace_id == ws_id,
                                                                      Artifact.name == name)).first()
        return (row[0], bytes(row[1])) if row is not None else None

    # -- reads used by several layers -------------------------------------------------------------------------
    def counts(self, ws_id: int) -> dict[str, int]:
        """Node counts by kind, plus documents, communities and edges."""
        with self.session() as s:
            out = {
                kind: n
                for kind, n in s.exec(
                    select(Node.kind, func.count()).where(Node.workspace_id == ws_id).group_by(Node.kind)
                )
            }
            out["document"] = s.exec(select(func.count()).select_from(Document).where(Document.workspace_id == ws_id)).one()
            out["community"] = s.exec(
                select(func.count()).select_from(Community).where(Community.workspace_id == ws_id)
            ).one()
            out["edge"] = s.exec(select(func.count()).select_from(Edge).where(Edge.workspace_id == ws_id)).one()
            return out

    def documents(self, ws_id: int) -> list[Document]:
        with self.session() as s:
            return list(s.exec(select(Document).where(Document.workspace_id == ws_id).order_by(col(Document.created_at))))

    def text_chars(self, ws_id: int) -> int:
        """Characters of the workspace's documents' text, all together."""
        with self.session() as s:
            return int(s.exec(select(func.coalesce(func.sum(func.length(Document.text)), 0))
                              .where(Document.workspace_id == ws_id)).one())

    def nodes_by_id(self, ws_id: int, ids: Iterable[str]) -> dict[str, Node]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, Node] = {}
        with self.session() as s:
            for i in range(0, len(ids), 500):
                part = ids[i : i + 500]
                for n in s.exec(select(Node).where(Node.workspace_id == ws_id, col(Node.id).in_(part))):
                    out[n.id] = n
        return out

    def documents_by_id(self, ws_id: int, ids: Iterable[str]) -> dict[str, Document]:
        ids = list(dict.fromkeys(ids))
        with self.session() as s:
            rows = s.exec(select(Document).where(Document.workspace_id == ws_id, col(Document.id).in_(ids)))
            return {d.id: d for d in rows}

    def now(self) -> datetime:
        """The database's clock, in UTC: what heartbeats are written with and leases measured against, so hosts
        sharing a PostgreSQL server agree whatever their own clocks say (SQLite: this host's clock, the file's)."""
        if self.is_sqlite:
            return utcnow()
        with self.engine.connect() as conn:
            t = conn.execute(select(db_now(conn))).scalar_one()
        return t.replace(tzinfo=timezone.utc)

    def latest_run(self, ws_id: int, kinds: tuple[str, ...] | None = None) -> BuildRun | None:
        """The workspace's newest run (build or job), or its newest of `kinds` ("build", "promote", ...)."""
        q = select(BuildRun).where(BuildRun.workspace_id == ws_id)
        if kinds is not None:
            q = q.where(col(BuildRun.kind).in_(kinds))
        with self.session() as s:
            return s.exec(q.order_by(col(BuildRun.id).desc())).first()

    def bump_version(self, ws_id: int) -> int:
        """The workspace's build_version + 1 (its graph changed; the app's cached views reload). Returns the new one."""
        with self.session() as s:  # one atomic UPDATE ... RETURNING: concurrent bumps are never lost
            new = s.execute(update(Workspace).where(col(Workspace.id) == ws_id)
                            .values(build_version=Workspace.build_version + 1)
                            .returning(col(Workspace.build_version))).scalar()
            s.commit()
            return new or 0

    def stage_runs(self, run_id: int) -> list[StageRun]:
        with self.session() as s:
            return list(s.exec(select(StageRun).where(StageRun.run_id == run_id).order_by(col(StageRun.ordinal))))

    def done_units(self, ws_id: int, stage: str) -> set[str]:
        with self.session() as s:
            return set(s.exec(select(Checkpoint.unit).where(Checkpoint.workspace_id == ws_id, Checkpoint.stage == stage)))


    def cached_call(self, key: str) -> LLMCall | None:
        with self.session() as s:
            return s.get(LLMCall, key)

    def save_call(self, call: LLMCall) -> None:
        with self.session() as s:
            s.merge(call)
            s.commit()


def database_url(url_or_path: str | Path) -> URL:
    """A SQLAlchemy URL from a URL string or a SQLite file path (a Path, or a string without `://`)."""
    if isinstance(url_or_path, Path) or "://" not in str(url_or_path):
        return URL.create("sqlite", database=str(url_or_path))
    return make_url(str(url_or_path))


# columns added to a table after its first release: create_all makes missing tables, never missing columns, so a
# database from before them gains them here (table -> column -> column definition, valid on SQLite and PostgreSQL)
def db_now(conn):
    """The database's current UTC time (naive) for a statement on `conn`: PostgreSQL's own clock (an SQL expression),
    on SQLite this host's (a value): heartbeats and lease cut-offs are measured by it (see `Store.now`)."""
    if is_sqlite(conn):
        return utcnow()
    return func.timezone("UTC", func.statement_timestamp())


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - exercised by every test
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
