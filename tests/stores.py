"""Which database and vector store the tests run on. By default every test gets its own SQLite file and embedded
chromadb directory under its home. `make test` runs the stage and retrieval tests again with

* STRATA_TEST_DATABASE=postgres: each test home gets a fresh database on a PostgreSQL server the tests start
  themselves (tests/pg.py), and
* STRATA_TEST_CHROMA=server: the vectors go to a Chroma server the tests start themselves (tests/chroma_server.py),

so the same assertions hold on both. `configure(settings)` applies the choice to a test's Settings.
"""

from __future__ import annotations

import os


def configure(settings):
    """`settings` (its storage.home already set) pointed at the database and vector store under test."""
    if os.environ.get("STRATA_TEST_DATABASE", "sqlite") == "postgres":
        from tests.pg import database_for

        settings.storage.database_url = database_for(settings.storage.home)
    if os.environ.get("STRATA_TEST_CHROMA", "embedded") == "server":
        from tests.chroma_server import server_url

        settings.storage.chroma_url = server_url(settings.storage.home)  # one Chroma database per test home
    return settings


def postgres() -> bool:
    return os.environ.get("STRATA_TEST_DATABASE", "sqlite") == "postgres"


def home_url(home) -> str:
    """The database URL of the test home `home`: its SQLite file, or its database on the test PostgreSQL server."""
    from pathlib import Path

    if postgres():
        from tests.pg import database_for

        return database_for(home)
    return f"sqlite:///{Path(home) / 'strata.db'}"


def copy_database(src_url: str, home):
    """A copy of the database at `src_url` as the database of the test home `home` (a Store on it): SQLite's online
    backup of the file, or every row copied table by table on PostgreSQL (id sequences moved past the copied ids)."""
    import sqlite3
    from pathlib import Path

    from sqlalchemy import Integer, text
    from sqlmodel import SQLModel

    from core.store import Store

    if not postgres():
        src, dst = sqlite3.connect(Store(src_url).path), sqlite3.connect(Path(home) / "strata.db")
        src.backup(dst)
        src.close()
        dst.close()
        return Store(Path(home) / "strata.db")
    source, store = Store(src_url), Store(home_url(home))
    with source.engine.connect() as a, store.engine.begin() as b:
        for table in SQLModel.metadata.sorted_tables:
            rows = [dict(r._mapping) for r in a.execute(table.select())]
            if rows:
                b.execute(table.insert(), rows)
            if "id" in table.c and isinstance(table.c.id.type, Integer):  # a SERIAL id
                b.execute(text(f"SELECT setval(pg_get_serial_sequence('\"{table.name}\"', 'id'), "
                               f"(SELECT coalesce(max(id), 0) + 1 FROM \"{table.name}\"), false)"))
    source.close()
    return store



def copy_db(src_url: str | None, home) -> str | None:
    """The database of a copy of a test home (the tests that copy a built home, then change the copy): None on
    SQLite (the copied directory holds the file: checkpoint its WAL before copying), else the URL of `home`'s own
    database on the test server, filled with a copy of every row of `src_url`'s."""
    if not src_url:
        return None
    return copy_database(src_url, home).url
