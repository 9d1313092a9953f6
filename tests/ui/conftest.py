"""Helpers of the AppTest page tests: the app pointed at a STRATA_HOME, a run that fails on any exception, a page
opened the way the router opens it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "app.py"


@contextlib.contextmanager
def app_home(home: Path) -> Iterator[None]:
    """The app's settings read `home` (offline backend, no hub): st.cache_resource / st.cache_data live for the
    whole process, so they are emptied on the way in and out, and no other test's store leaks in."""
    from tests.stores import home_url, postgres

    mp = pytest.MonkeyPatch()
    env = {"STRATA_HOME": str(home), "STRATA_BACKEND": "offline", "HF_HUB_OFFLINE": "1",
           "STRATA_WARM_UP": "0"}  # no background loads between one test's pages and the next test's home
    if postgres():  # the home's database on the test server (tests/pg.py)
        env["STRATA_DATABASE_URL"] = home_url(home)
    for k, v in env.items():
        mp.setenv(k, v)
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        yield
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()
        mp.undo()


def run(at: AppTest) -> AppTest:
    """Run the script and fail on any exception the page raised."""
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_lazy(at: AppTest) -> AppTest:
    """Open every expander whose contents are drawn only when opened (ui/retrieval_view.py `lazy_expander`), as a
    person clicking each one would, and run."""
    from ui.lazy import LAZY

    keys = [k for k in at.session_state if str(k).startswith(LAZY)]
    assert keys, "no lazy expander on the page"
    for k in keys:
        at.session_state[k] = True
    return run(at)


def open_page(page: str, title: str, timeout: float = 120) -> AppTest:
    """A fresh session of the app, then `page` (e.g. "views/graph.py"), whose title must be `title`."""
    at = run(AppTest.from_file(str(APP), default_timeout=timeout))
    at.switch_page(page)
    run(at)
    assert [t.value for t in at.title] == [title]
    return at


def wait_for_job(store, ws_name: str, timeout: float = 400):
    """The newest job (core/worker.py) of the workspace once the background worker has finished it; the page
    that started it says its outcome at its next run."""
    import time

    from core.pipeline.runs import FINISHED

    ws = store.require_workspace(ws_name)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = store.latest_run(ws.id, ("promote", "whatif", "reembed"))
        if run is not None and run.status in FINISHED:
            return run
        time.sleep(0.5)
    raise AssertionError(f"no job of {ws_name!r} finished within {timeout:.0f} s")


def sample_copy(tmp_path_factory, sample_built, name: str):
    """A private copy of the built sample (its home, database and vectors) for a module's page tests: (home, its
    Store). The tests' pages and jobs change the copy, never the session's sample."""
    import shutil

    from core.store import Store
    from tests.stores import copy_db

    settings, store, _ws, _emb = sample_built
    if store.is_sqlite:  # the copy reads the file
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    home = tmp_path_factory.mktemp(name) / "home"
    shutil.copytree(settings.storage.home, home)
    return home, Store(copy_db(settings.storage.database_url, home) or home / "strata.db")
