"""core/store.py on a real PostgreSQL server (tests/pg.py starts one): the schema, workspaces, the fast bulk insert,
the new-columns migration of an old database, latest_run, atomic version bumps under concurrent threads, and the
portable SQL helpers. A URL or a path still opens SQLite as before (tested without the server)."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pytest
from sqlalchemy import inspect, text
from sqlmodel import SQLModel, select

from core.models import BuildRun, Checkpoint, Edge, Node, Workspace, sql_table
from core.store import Store, bulk_insert, insert_ignore, is_sqlite, json_field, like
from tests import pg


@pytest.fixture
def pg_store(tmp_path):
    store = Store(pg.database_for(tmp_path))
    yield store
    store.close()


def _node(ws_id: int, nid: str, **kw) -> dict:
    row = {"id": nid, "workspace_id": ws_id, "kind": "entity", "key": nid.lower(), "title": nid, "text": "",
           "type": "", "layer": 0, "weight": 1.0, "document_id": None, "ord": None, "data": {}}
    row.update(kw)
    return row


def test_a_path_or_a_sqlite_url_opens_sqlite(tmp_path):
    by_path = Store(tmp_path / "a" / "x.db")
    assert by_path.is_sqlite and by_path.path == tmp_path / "a" / "x.db" and (tmp_path / "a" / "x.db").exists()
    by_url = Store(f"sqlite:///{tmp_path / 'y.db'}")
    assert by_url.dialect == "sqlite" and by_url.path == tmp_path / "y.db"
    with by_url.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_schema_and_workspaces(pg_store, tmp_path):
    assert pg_store.dialect == "postgresql" and not pg_store.is_sqlite and not is_sqlite(pg_store.engine)
    have = set(inspect(pg_store.engine).get_table_names())
    assert set(SQLModel.metadata.tables) <= have
    a = pg_store.create_workspace("alpha")
    assert pg_store.create_workspace("alpha").id == a.id  # idempotent
    b = pg_store.create_workspace("beta")
    assert [w.name for w in pg_store.workspaces()] == ["alpha", "beta"]
    assert pg_store.require_workspace("beta").id == b.id
    pg_store.delete_workspace(a)
    assert pg_store.get_workspace("alpha") is None and [w.name for w in pg_store.workspaces()] == ["beta"]
    # a second Store on the same database (another process would do the same) finds the tables made
    again = Store(pg_store.url)
    assert again.get_workspace("beta").id == b.id
    again.close()


def test_path_names_the_database_without_its_password(tmp_path):
    url = pg.database_for(tmp_path).replace("postgres@", "postgres:s3cret@")  # trust auth ignores the password
    store = Store(url)
    assert "s3cret" not in str(store.path) and str(store.path).startswith("postgresql+psycopg://postgres:***@")
    assert store.url == url
    store.close()


def test_bulk_insert_keeps_json_nulls_and_the_id_sequence(pg_store):
    ws = pg_store.create_workspace("w")
    nodes = [_node(ws.id, f"N{i}", weight=i / 2, data={"i": i, "tags": ["a", "b"], "nested": {"x": None}},
                   document_id=None if i % 2 else "d1", ord=i if i % 3 else None) for i in range(1500)]
    with pg_store.session() as s:
        conn = s.connection()
        bulk_insert(conn, sql_table(Node), nodes)
        bulk_insert(conn, sql_table(Edge), [{"workspace_id": ws.id, "src": f"N{i}", "dst": f"N{i + 1}",
                                             "kind": "related", "weight": 1.0, "data": {"n": i}} for i in range(99)])
        s.commit()
    with pg_store.session() as s:
        got = {n.id: n for n in s.exec(select(Node).where(Node.workspace_id == ws.id))}
        assert len(got) == 1500
        assert got["N7"].data == {"i": 7, "tags": ["a", "b"], "nested": {"x": None}} and got["N7"].weight == 3.5
        assert got["N6"].document_id == "d1" and got["N6"].ord is None and got["N7"].ord == 7
        # COPY used the id sequence: an ORM insert after it gets the next id, not a clash
        s.add(Edge(workspace_id=ws.id, src="N0", dst="N5", kind="related"))
        s.commit()
        ids = sorted(s.exec(select(Edge.id).where(Edge.workspace_id == ws.id)))
    assert ids == list(range(ids[0], ids[0] + 100))
    assert pg_store.counts(ws.id) == {"entity": 1500, "document": 0, "community": 0, "edge": 100}


def test_portable_helpers(pg_store):
    ws = pg_store.create_workspace("w")
    with pg_store.session() as s:
        conn = s.connection()
        bulk_insert(conn, sql_table(Node), [_node(ws.id, "Alpha", data={"hnsw": 1, "by": "hnsw", "stale": None}),
                                            _node(ws.id, "beta", data={})])
        rows = [{"workspace_id": ws.id, "stage": "extract", "unit": u} for u in ("c1", "c2")]
        conn.execute(insert_ignore(conn, sql_table(Checkpoint)), rows)
        conn.execute(insert_ignore(conn, sql_table(Checkpoint)), rows + [{**rows[0], "unit": "c3"}])  # no clash
        s.commit()
        got = dict(s.exec(select(Node.id, json_field(s, Node.data, "hnsw"))).all())
        assert got == {"Alpha": 1.0, "beta": None}
        by = dict(s.exec(select(Node.id, json_field(s, Node.data, "by", as_text=True))).all())
        assert by == {"Alpha": "hnsw", "beta": None}
        stale = s.exec(select(Node.id).where(json_field(s, Node.data, "stale", as_text=True).is_not(None))).all()
        assert stale == []  # a JSON null counts as absent, as json_extract gives NULL on SQLite
        assert sorted(s.exec(select(Node.id).where(like(s, Node.title, "%ALP%")))) == ["Alpha"]  # case ignored
    assert pg_store.done_units(ws.id, "extract") == {"c1", "c2", "c3"}
    pg_store.analyze()


def test_an_old_buildrun_table_gains_the_new_columns(tmp_path):
    url = pg.database_for(tmp_path)
    store = Store(url)
    ws = store.create_workspace("w")
    with store.engine.begin() as conn:  # the table as it was before jobs, with one finished build in it
        conn.execute(text("ALTER TABLE buildrun DROP COLUMN kind"))
        conn.execute(text("ALTER TABLE buildrun DROP COLUMN params"))
        conn.execute(text("ALTER TABLE querylog DROP COLUMN asked_by"))  # and before questions named who asked
        conn.execute(text("INSERT INTO buildrun (workspace_id, status, backend, settings, stage, message, error, "
                          "created_at) VALUES (:ws, 'done', 'offline', '{}', '', '', '', '2024-01-01 00:00:00')"),
                     {"ws": ws.id})
    store.close()
    store = Store(url)
    assert {"kind", "params"} <= {c["name"] for c in inspect(store.engine).get_columns("buildrun")}
    assert "asked_by" in {c["name"] for c in inspect(store.engine).get_columns("querylog")}
    with store.session() as s:
        (old,) = s.exec(select(BuildRun)).all()
    assert old.kind == "build" and not old.params
    store.close()


def test_latest_run(pg_store):
    ws = pg_store.create_workspace("w")
    other = pg_store.create_workspace("o")
    assert pg_store.latest_run(ws.id) is None
    with pg_store.session() as s:
        for kind in ("build", "promote", "build", "whatif"):
            s.add(BuildRun(workspace_id=ws.id, kind=kind))
            s.commit()
        s.add(BuildRun(workspace_id=other.id, kind="build"))
        s.commit()
        ids = [r.id for r in s.exec(select(BuildRun).where(BuildRun.workspace_id == ws.id).order_by(BuildRun.id))]
    assert pg_store.latest_run(ws.id).id == ids[3]
    assert pg_store.latest_run(ws.id, ("build",)).id == ids[2]
    assert pg_store.latest_run(ws.id, ("promote", "nothing")).id == ids[1]


def test_concurrent_version_bumps_are_never_lost(pg_store):
    ws = pg_store.create_workspace("w")
    threads, bumps = 8, 25
    seen: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work():
        start.wait()
        for _ in range(bumps):
            v = pg_store.bump_version(ws.id)
            with lock:
                seen.append(v)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert pg_store.get_workspace("w").build_version == threads * bumps
    assert sorted(seen) == list(range(1, threads * bumps + 1))  # each bump returned its own new version


def test_timestamps_stay_utc_whatever_the_server_zone(tmp_path):
    url = pg.database_for(tmp_path)
    name = url.rsplit("/", 1)[1]
    with Store(url).engine.connect() as conn:
        conn.execute(text(f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'"))
        conn.commit()
    store = Store(url)
    at = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)
    with store.session() as s:
        s.add(Workspace(name="w", created_at=at))
        s.commit()
    assert store.get_workspace("w").created_at.replace(tzinfo=None) == at.replace(tzinfo=None)
    store.close()


def test_a_title_or_id_with_control_characters_goes_in_cleaned(pg_store, tmp_path):
    """PostgreSQL refuses NUL in text: a hostile row's title, id and file name are stored cleaned, not a crash that
    loses the rest of the upload."""
    from core.config import Settings
    from core.workspace import ingest_uploads

    settings = Settings()
    settings.storage.home = tmp_path
    ws = pg_store.create_workspace("w")
    rows = [{"id": "a\u0000b", "title": "T\u0000it\u0007le", "text": "Alpha Beta works at Gamma Corp in Delta City."},
            {"id": "2", "title": "ok", "text": "Zed visits Omega Town."}]
    report = ingest_uploads(pg_store, ws, [("ro\x00ws.jsonl", "\n".join(json.dumps(r) for r in rows).encode())],
                            settings)
    assert len(report.added) == 2 and not report.refusals
    got = {d.external_id: (d.title, d.filename) for d in pg_store.documents(ws.id)}
    assert got == {"ab": ("Title", "rows.jsonl"), "2": ("ok", "rows.jsonl")}
