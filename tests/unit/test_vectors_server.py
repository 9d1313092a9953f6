"""VectorIndex on a Chroma server (STRATA_CHROMA_URL): the URL and its database, workspace-named collections that
never meet another workspace's or another home's, deleting a workspace's collections only, requests within the
server's batch size, and a one-line error naming STRATA_CHROMA_URL when the server does not answer (library, CLI,
app). Runs against the real `chroma run` of tests/chroma_server.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from core.config import Settings
from core.index.chroma import VectorStoreUnavailable, parse_url, server_available, server_collection_name
from core.index.vectors import VectorIndex
from core.pipeline.factory import delete_vectors, open_index
from tests.chroma_server import server_url

ROOT = Path(__file__).resolve().parents[2]


def _unit(n: int, seed: int = 0, d: int = 16) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _dead_url() -> str:
    """An address on this machine where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _server_settings(home: Path, url: str | None = None) -> Settings:
    s = Settings()
    s.storage.home = home
    s.storage.chroma_url = url or server_url(home)
    return s


def test_the_url_names_server_port_and_database():
    a = parse_url("http://chroma.internal:9000/?database=team_a")
    assert (a.base, a.port, a.database) == ("http://chroma.internal:9000", 9000, "team_a")
    b = parse_url("http://10.0.0.5")
    assert (b.base, b.port, b.database) == ("http://10.0.0.5:8000", 8000, None)  # chroma run's default port
    assert parse_url("https://vectors.example.org/chroma").base == "https://vectors.example.org:443/chroma"
    for bad in ("127.0.0.1:8000", "ftp://h:1", "http://h:1?tenant=x", "http://h:99999"):
        with pytest.raises(VectorStoreUnavailable, match="STRATA_CHROMA_URL"):
            parse_url(bad)


def test_an_unreachable_server_is_one_line_naming_the_variable_and_url(tmp_path):
    url = _dead_url()
    with pytest.raises(VectorStoreUnavailable) as err:
        open_index(_server_settings(tmp_path, url), "w", "minilm")
    msg = str(err.value)
    assert f"STRATA_CHROMA_URL={url}" in msg and "\n" not in msg
    assert server_available(url) == msg  # what the app's banner shows (app.py)
    assert server_available(server_url()) is None


def test_the_cli_reports_an_unreachable_server_on_one_line_and_creates_nothing(tmp_path):
    url = _dead_url()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Tidewater Bridge crosses the Salt River.", encoding="utf-8")
    env = dict(os.environ, STRATA_HOME=str(tmp_path / "home"), STRATA_CHROMA_URL=url, STRATA_BACKEND="offline",
               PYTHONPATH=str(ROOT))
    env.pop("STRATA_DATABASE_URL", None)
    p = subprocess.run([sys.executable, "-m", "core", "build", "--workspace", "w", "--quiet", str(docs)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"STRATA_CHROMA_URL={url}" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    ws = subprocess.run([sys.executable, "-m", "core", "workspaces"], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=60)
    assert ws.returncode == 0 and "w" not in ws.stdout.split(), ws.stdout


def test_same_named_workspaces_of_two_homes_keep_their_own_vectors(tmp_path):
    a = VectorIndex(None, "minilm", url=server_url(tmp_path / "home_a"), workspace="w")
    b = VectorIndex(None, "minilm", url=server_url(tmp_path / "home_b"), workspace="w")
    a.upsert("entity", ["x", "y"], _unit(2))
    assert a.count("entity") == 2 and b.count("entity") == 0
    b.upsert("entity", ["z"], _unit(1, seed=1))
    assert sorted(a.existing("entity")) == ["x", "y"] and list(b.existing("entity")) == ["z"]


def test_workspace_names_map_to_distinct_valid_collection_names(tmp_path):
    """Dots are written `.-` (Chroma refuses `..`), so `a..b`, `a.b` and `a.-b` are three workspaces."""
    url = server_url(tmp_path)
    names = ["a..b", "a.b", "a.-b", "x" * 64]
    assert len({server_collection_name(n, "entity", "minilm") for n in names}) == len(names)
    for k, n in enumerate(names):
        VectorIndex(None, "minilm", url=url, workspace=n).upsert("entity", [f"id{k}"], _unit(1, seed=k))
    for k, n in enumerate(names):
        assert list(VectorIndex(None, "minilm", url=url, workspace=n).existing("entity")) == [f"id{k}"]


def test_deleting_a_workspace_drops_its_collections_and_only_those(tmp_path):
    """`a__b` starts with `a__` (workspace names may hold `__`): deleting `a` must leave it alone."""
    settings = _server_settings(tmp_path)
    for ws in ("a", "a__b"):
        idx = open_index(settings, ws, "minilm")
        idx.upsert("entity", ["e1", "e2"], _unit(2))
        idx.upsert("chunk", ["c1"], _unit(1))
    (settings.storage.vector_dir("a")).mkdir(parents=True)  # where the C-HNSW file lives, server or not
    delete_vectors(settings, "a")
    assert not settings.storage.vector_dir("a").exists()
    gone, kept = open_index(settings, "a", "minilm"), open_index(settings, "a__b", "minilm")
    assert gone.count("entity") == gone.count("chunk") == 0
    assert kept.count("entity") == 2 and kept.count("chunk") == 1


def test_requests_stay_within_the_servers_batch_size(tmp_path):
    idx = VectorIndex(None, "minilm", url=server_url(tmp_path), workspace="w")
    assert idx.batch == idx.client.get_max_batch_size() > 0
    idx.batch = 7  # as if the server allowed only 7 records a request
    col = idx.collection("entity")
    sizes: list[int] = []
    for name in ("upsert", "get", "delete"):
        real = getattr(col, name)

        def spy(*args, _real=real, **kw):
            sizes.append(len(kw.get("ids") or []) or kw.get("limit") or 0)
            return _real(*args, **kw)

        setattr(col, name, spy)
    ids = [f"n{i}" for i in range(30)]
    v = _unit(30)
    idx.upsert("entity", ids, v)
    assert len(idx.vectors("entity", ids)) == 30 and len(idx.existing("entity")) == 30
    assert idx.all_vectors("entity")[1].shape == (30, 16)
    idx.delete("entity", ids[:20])
    assert idx.count("entity") == 10
    assert sizes and max(sizes) <= 7


def test_the_app_shows_one_line_naming_the_url_instead_of_a_traceback(tmp_path, monkeypatch):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    url = _dead_url()
    for k, v in {"STRATA_HOME": str(tmp_path), "STRATA_CHROMA_URL": url, "STRATA_SAMPLE": "0",
                 "STRATA_BACKEND": "offline"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("STRATA_DATABASE_URL", raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and f"STRATA_CHROMA_URL={url}" in errors[0] and "\n" not in errors[0], errors
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


def test_many_clients_creating_one_new_database_at_once_all_connect():
    """Two workers of one home starting together both create its Chroma database: the loser of that race must
    connect, not fail its build ("Database ... already exists")."""
    import threading

    from core.index.chroma import connect_server
    from tests.chroma_server import server_url

    url = server_url() + "?database=race_" + str(threading.get_ident())
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def connect() -> None:
        barrier.wait()
        try:
            connect_server(url)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(repr(exc))

    threads = [threading.Thread(target=connect) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
