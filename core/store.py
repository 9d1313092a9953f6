"""The database: one SQLite file under STRATA_HOME, reached through SQLModel, and the few queries every layer needs."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import JSON, event, func, update
from sqlmodel import Session, SQLModel, col, create_engine, delete, select

from core.models import (
    BuildRun,
    Checkpoint,
    Community,
    CommunityVariant,
    Document,
    Edge,
    EntityMerge,
    LLMCall,
    Node,
    QueryLog,
    StageRun,
    Workspace,
)

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


def bulk_insert(conn, table, rows: list[dict]) -> None:
    """INSERT `rows` (dicts with the same keys, column names) into `table` through the driver's executemany, JSON
    columns serialized here as SQLAlchemy would. For large row counts: Core's per-row parameter processing cost
    more than SQLite's own work in big builds. `conn` is a SQLAlchemy Connection (`session.connection()`)."""
    if not rows:
        return
    cols = list(rows[0])
    as_json = {c.name for c in table.columns if isinstance(c.type, JSON)}
    names = ", ".join('"' + c + '"' for c in cols)
    marks = ", ".join("?" for _ in cols)
    sql = f'INSERT INTO "{table.name}" ({names}) VALUES ({marks})'
    dumps = json.dumps
    conn.exec_driver_sql(sql, [tuple(dumps(r[c]) if c in as_json else r[c] for c in cols) for r in rows])


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

    def __init__(self, db_path: Path):
        db_path = Path(db_path)
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self.path = db_path
        self.engine = create_engine(f"sqlite:///{db_path}", connect_args={"check_same_thread": False, "timeout": 60})
        event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine)
        _add_new_columns(self.engine)

    def analyze(self) -> None:
        """Refresh the query planner's statistics (after a build): without them SQLite may scan every edge instead
        of using `ix_edge_ws_dst` for lookups by target node. `analysis_limit` keeps this to a second or so."""
        with self.engine.connect() as conn:
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
            for table in (BuildRun, Checkpoint, Edge, Node, Community, Document, QueryLog, EntityMerge,
                          CommunityVariant):
                s.exec(delete(table).where(col(table.workspace_id) == ws.id))
            s.exec(delete(Workspace).where(col(Workspace.id) == ws.id))
            s.commit()

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

    def latest_run(self, ws_id: int, kinds: tuple[str, ...] | None = None) -> BuildRun | None:
        """The workspace's newest run (build or job), or its newest of `kinds` ("build", "promote", ...)."""
        q = select(BuildRun).where(BuildRun.workspace_id == ws_id)
        if kinds is not None:
            q = q.where(col(BuildRun.kind).in_(kinds))
        with self.session() as s:
            return s.exec(q.order_by(col(BuildRun.id).desc())).first()

    def bump_version(self, ws_id: int) -> int:
        """The workspace's build_version + 1 (its graph changed; the app's cached views reload). Returns the new one."""
        with self.session() as s:
            s.execute(update(Workspace).where(col(Workspace.id) == ws_id)
                      .values(build_version=Workspace.build_version + 1))
            s.commit()
            ws = s.get(Workspace, ws_id)
            return ws.build_version if ws is not None else 0

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


# columns added to a table after its first release: create_all makes missing tables, never missing columns, so a
# database from before them gains them here (table -> column -> SQLite column definition)
NEW_COLUMNS = {"buildrun": {"kind": "VARCHAR NOT NULL DEFAULT 'build'", "params": "JSON"}}


def _add_new_columns(engine) -> None:
    with engine.connect() as conn:
        for table, columns in NEW_COLUMNS.items():
            have = {row[1] for row in conn.exec_driver_sql(f'PRAGMA table_info("{table}")')}
            for name, ddl in columns.items():
                if have and name not in have:
                    conn.exec_driver_sql(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {ddl}')
        conn.commit()


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - exercised by every test
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
