"""What STRATA_HOME holds is its owner's alone (core/secrets.py `private_dir`, `private_file`, `private_tree`): the
home and its folders 0700, the SQLite database and its -wal/-shm 0600 (SQLite gives them the database's mode), the
chromadb folder of each workspace closed after chromadb writes (it writes with the usual modes), derived/ and logs/;
an older home that others may enter is closed, in one line of the log; a folder that is not this user's own, or a
shared one (sticky, like /tmp), is left as it is and said so once."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pytest

from core.secrets import private_dir, private_file, private_tree

OPEN = 0o077  # any bit of group or others


@pytest.fixture(autouse=True)
def usual_umask():
    """The usual umask (022), under which files and folders are made readable by everyone unless made otherwise."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def open_to_others(home: Path) -> list[str]:
    """Everything at or below `home` (links aside) that someone else could read or enter."""
    out = []
    for p in [home, *home.rglob("*")]:
        st = p.lstat()
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & OPEN:
            out.append(f"{oct(stat.S_IMODE(st.st_mode))} {p.relative_to(home.parent)}")
    return out


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_a_new_home_is_its_owners_alone(tmp_path, make_settings, monkeypatch):
    """A home made by Strata (and the folders above it that were missing): its database, the vectors of two kinds
    (a second collection made after the first write) and of a workspace only read, the Graph page's derived index
    and a worker's log."""
    from core.explore.explore_index import load_index
    from core.index.vectors import VectorIndex
    from core.pipeline import runs
    from core.store import Store

    home = tmp_path / "srv" / "strata"
    settings = make_settings(home)
    settings.storage.database_url, settings.storage.chroma_url = None, None  # this test is about the files
    store = Store(settings.storage.db_url)
    ws = store.create_workspace("w")
    index = VectorIndex(settings.storage.vector_dir("w"), "test")
    rng = np.random.default_rng(7)
    index.upsert("chunk", [f"c{i}" for i in range(1500)], rng.random((1500, 8), dtype=np.float32))
    index.upsert("entity", [f"e{i}" for i in range(20)], rng.random((20, 8), dtype=np.float32))
    index.delete("chunk", [f"c{i}" for i in range(10)])
    VectorIndex(settings.storage.vector_dir("read-only"), "test").count("chunk")  # opened, never written
    load_index(store, ws.id, home / "derived")

    started = []
    monkeypatch.setattr(runs.subprocess, "Popen", lambda *a, **k: started.append(k["stdout"]))
    runs.launch_worker(settings, 7)
    started[0].close()

    made = {p.relative_to(home).as_posix() for p in home.rglob("*")}
    assert {"strata.db", "strata.db-wal", "vectors/w/chroma.sqlite3", "vectors/read-only/chroma.sqlite3",
            "logs/run-7.log"} <= made, made
    assert any(m.startswith("derived/explore-") for m in made), made
    assert sum(1 for m in made if m.endswith("/data_level0.bin")) == 2, made  # the two collections' files
    assert not open_to_others(tmp_path / "srv"), open_to_others(tmp_path / "srv")
    assert mode(home) == mode(tmp_path / "srv") == 0o700 and mode(home / "strata.db") == 0o600


def test_an_older_home_open_to_others_is_closed_once(tmp_path, caplog):
    from core.store import Store

    home = tmp_path / "workspaces"
    home.mkdir(mode=0o755)
    old = sqlite3.connect(home / "strata.db")  # a database of an older Strata, in WAL mode, open when it stopped
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    (home / "logs").mkdir(mode=0o755)
    (home / "logs" / "run-1.log").write_text("an old log")
    assert mode(home / "strata.db") == mode(home / "strata.db-wal") == 0o644

    with caplog.at_level(logging.WARNING, logger="core.secrets"):
        Store(home / "strata.db")
        Store(home / "strata.db")  # the second time there is nothing left to say
    old.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(home.resolve()) in said[0] and "now 700" in said[0], said
    assert mode(home) == 0o700
    assert mode(home / "strata.db") == mode(home / "strata.db-wal") == mode(home / "strata.db-shm") == 0o600
    assert mode(home / "logs") == 0o755  # left as it was, unreachable now through the home (closed when next used)


def test_only_strata_home_is_closed_and_never_a_shared_folder(tmp_path, caplog):
    """A SQLite file of another name (STRATA_DATABASE_URL=sqlite:///…) does not make its folder Strata's to close;
    a sticky folder (like /tmp) is never closed, only said so, once."""
    from core.store import Store

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    Store(f"sqlite:///{elsewhere / 'other.db'}")
    assert mode(elsewhere) == 0o755 and mode(elsewhere / "other.db") == 0o600

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with caplog.at_level(logging.WARNING, logger="core.secrets"):
        Store(shared / "strata.db")
        Store(shared / "strata.db")
    assert mode(shared) == 0o1777 and mode(shared / "strata.db") == 0o600
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "left so (a shared folder)" in said[0], said


def test_the_helpers(tmp_path):
    made = private_dir(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == mode(made) == 0o700
    kept = tmp_path / "a" / "open"
    kept.mkdir(mode=0o755)
    private_dir(kept, close=False)
    assert mode(kept) == 0o755

    f = private_file(made / "f")
    assert f.read_bytes() == b"" and mode(f) == 0o600
    g = made / "g"
    g.write_text("x")
    assert mode(g) == 0o644
    private_file(g)
    assert mode(g) == 0o600 and g.read_text() == "x"  # closed, not emptied
    assert not private_file(made / "missing", create=False).exists()

    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "run.sh").write_text("")
    (tree / "sub" / "run.sh").chmod(0o755)
    (tree / "data").write_text("")
    (tree / "link").symlink_to(tmp_path / "a" / "open")
    private_tree(tree)
    assert mode(tree) == mode(tree / "sub") == mode(tree / "sub" / "run.sh") == 0o700  # owner's bits kept
    assert mode(tree / "data") == 0o600
    assert mode(kept) == 0o755  # a link is not followed
