"""No secret is stored or shown (core/secrets.py): with a recognisable password in every secret setting (the
database URL's password, on the test PostgreSQL server with a role of that password; the OpenAI API key, against
tests/fake_openai.py; a password in the OpenAI server's URL; the Chroma token, the test proxy's when the vectors are
on its server), a build and a what-if job run by background workers (which take the secrets from their
environment, not from the run's stored settings), a question, the exports, the CLI and the app's Build page with
its sidebar: the password appears in no table of the database, no file of the home (logs included), no export, no
CLI output and no page element."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import MetaData, create_engine, select

from core.access import LOCAL
from core.config import Settings
from core.secrets import public_settings, redact_text, redact_url

SECRET = "Sekr3t-Pa55-XYZ"
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(900)


def test_redact_url_and_text():
    assert redact_url(f"postgresql+psycopg://strata:{SECRET}@db:5432/strata") == "postgresql+psycopg://strata:***@db:5432/strata"
    assert redact_url(f"https://h:8000/x?database=d&token={SECRET}") == "https://h:8000/x?database=d&token=***"
    assert redact_url("http://127.0.0.1:8000?database=d") == "http://127.0.0.1:8000?database=d"
    text = f"could not reach http://u:{SECRET}@h/v1 (key sk-{SECRET})"
    assert SECRET not in redact_text(text, {f"sk-{SECRET}"}) and "http://u:***@h/v1" in redact_text(text)


def test_a_stored_run_holds_no_password(tmp_path):
    """SQLite cannot hold a password: a SQLite-stored run made with settings whose database_url has one."""
    from core.pipeline.runner import create_run
    from core.store import Store

    s = Settings()
    s.storage.home = tmp_path
    s.storage.database_url = f"postgresql+psycopg://strata:{SECRET}@db.example:5432/strata"
    s.storage.chroma_url = f"https://chroma.example?token={SECRET}"
    s.backend.api_key, s.storage.chroma_token = SecretStr(f"sk-{SECRET}"), SecretStr(f"t-{SECRET}")
    store = Store(tmp_path / "strata.db")
    run = create_run(store, store.create_workspace("w"), s)
    store.close()
    dump = "\n".join(_sqlite_dump(tmp_path / "strata.db"))
    assert SECRET not in dump and "strata:***@db.example" in dump and "token=***" in dump
    assert run.settings == public_settings(s) and SECRET not in str(run.settings)


def _sqlite_dump(path: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _secret_database(home: Path) -> str:
    """A database on the test PostgreSQL server owned by a role whose password is SECRET (the server trusts
    127.0.0.1, so the password is carried, not checked): its URL holds the password."""
    from tests import pg

    if not pg.available():
        pytest.skip("no PostgreSQL binaries (Debian's postgresql): the database password part needs a server")
    srv = pg.server()
    srv._admin(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'strata_sekr') THEN "
               f"CREATE ROLE strata_sekr LOGIN PASSWORD '{SECRET}'; END IF; END $$")
    name = "nosecret_" + hashlib.sha1(str(home).encode()).hexdigest()[:12]
    srv.create_database(name)
    srv._admin(f'ALTER DATABASE "{name}" OWNER TO strata_sekr')
    return f"postgresql+psycopg://strata_sekr:{SECRET}@127.0.0.1:{srv.port}/{name}"


def _database_text(url: str) -> str:
    engine = create_engine(url)
    meta = MetaData()
    meta.reflect(engine)
    out = []
    with engine.connect() as conn:
        for table in meta.sorted_tables:
            out.extend(repr(tuple(row)) for row in conn.execute(select(table)))
    engine.dispose()
    return "\n".join(out)


def _wait(store, run_id: int, home: Path, timeout: float = 500):
    from core.pipeline.runs import FINISHED, get_run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = get_run(store, run_id)
        if run is not None and run.status in FINISHED:
            log = (home / "logs" / f"run-{run_id}.log").read_text(errors="replace")
            assert run.status == "done", (run.status, run.message, log[-3000:])
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish: {(home / 'logs' / f'run-{run_id}.log').read_text()[-3000:]}")


def _page_text(node) -> str:
    parts = [str(getattr(node, "proto", ""))]
    for child in getattr(node, "children", {}).values():
        parts.append(_page_text(child))
    return "\n".join(parts)


def test_no_secret_is_stored_or_shown(tmp_path, tiny_corpus, monkeypatch, embedder):
    from core.export import communities_csv, graph_export, traces_json
    from core.pipeline.factory import make_backend
    from core.quality.variants import VariantSettings
    from core.store import Store
    from core.worker import start_variant
    from core.workspace import ask, ingest_paths, open_resources, start_build
    from tests.fake_openai import FakeOpenAI
    from tests.stores import configure

    home = tmp_path / "h"
    home.mkdir()
    db_url = _secret_database(home)
    chroma_url = configure(Settings(storage={"home": home})).storage.chroma_url  # type: ignore[arg-type]
    on_server = bool(chroma_url)
    token = os.environ["STRATA_CHROMA_TOKEN"] if on_server else f"chroma-{SECRET}"  # the proxy's own, on a server
    needles = [SECRET, token]
    with FakeOpenAI() as fake:
        base = fake.base_url.replace("://", f"://bench:{SECRET}@", 1)  # a password in the server's URL too
        env = {"STRATA_HOME": str(home), "STRATA_DATABASE_URL": db_url, "STRATA_BACKEND": "openai",
               "STRATA_OPENAI_BASE_URL": base, "STRATA_OPENAI_API_KEY": f"sk-{SECRET}", "STRATA_CHROMA_TOKEN": token,
               "STRATA_SAMPLE": "0", "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        if on_server:
            monkeypatch.setenv("STRATA_CHROMA_URL", str(chroma_url))
        else:
            monkeypatch.delenv("STRATA_CHROMA_URL", raising=False)
        settings = Settings.from_env()
        settings.backend.timeout_s, settings.backend.retries, settings.backend.backoff_s = 10.0, 2, 0.01
        store = Store(settings.storage.db_url)
        ws = store.create_workspace("w")
        ingest_paths(store, ws, [tiny_corpus], settings)

        build = _wait(store, start_build(store, LOCAL, ws, settings).id, home)  # a background worker, its own process
        assert fake.bodies(), "the build called the OpenAI server"
        ws = store.require_workspace("w")
        job = _wait(store, start_variant(store, LOCAL, ws, "res-2", VariantSettings(resolution=2.0), settings).id, home)

        res = open_resources(store, ws, settings, embedder)
        _, answer = ask(res, make_backend(settings, store), "Who conducts the Kelmouth Choir?", "hirag")
        assert answer.text.strip()
        exports = [graph_export(store, ws.id, fmt) for fmt in ("graphml", "gexf", "json")]
        exports += [communities_csv(store, ws.id), traces_json(store, ws.id)]

        cli = []
        for args in (["workspaces"], ["stats", "--workspace", "w"], ["history", "--workspace", "w"],
                     ["export", "--workspace", "w", "--format", "json", "--out", str(tmp_path / "out.json")],
                     ["build", "--workspace", "w2", str(tmp_path / "missing")]):
            p = subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                               timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            cli.append(p.stdout + p.stderr)

        pages = _app_pages(home)
        store.close()

    found = {}
    for needle in needles:
        where = [name for name, text in (("database", _database_text(db_url)), ("CLI", "\n".join(cli)),
                                         ("pages", pages), ("build.settings", str(build.settings)),
                                         ("job.params", str(job.params)))
                 if needle in text]
        where += [f"export {i}" for i, data in enumerate(exports) if needle.encode() in data]
        where += [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                  if p.is_file() and needle.encode() in p.read_bytes()]
        if where:
            found[needle] = where
    assert not found, found
    assert build.settings["storage"]["database_url"] == db_url.replace(SECRET, "***")
    assert "Backend: OpenAI-compatible server at http://bench:***@127.0.0.1" in pages  # the sidebar shows the host


def _app_pages(home: Path) -> str:
    """Every element of the app's Build page and its sidebar, as their protos' text."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.run()
        at.switch_page("views/build.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return _page_text(at._tree)
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()
