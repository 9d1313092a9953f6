"""A PostgreSQL server the tests start themselves: Debian's PostgreSQL binaries (package `postgresql`), one server
per pytest process, started on first use and stopped + removed when the process exits.

* `server()` -> the session's `PgServer` (started on first call): `.url(dbname)` is a SQLAlchemy URL
  (`postgresql+psycopg://postgres@127.0.0.1:PORT/dbname`), `.create_database(name)` makes an empty database and
  returns its URL, `.drop_database(name)` drops one.
* `database_for(home)` -> the URL of a fresh database for one test home (its name derives from a hash of the
  path; the same home gets the same database within the process).
* `available()` -> whether the PostgreSQL binaries are installed (tests that need a server skip without them).

The cluster lives in a temporary directory: initdb with trust authentication, listening on 127.0.0.1 on a free
port, its unix socket in the same directory, fsync off (a test server need not survive a power cut). PostgreSQL
refuses to run as root, so under root (CI) the binaries run as the `postgres` user through `runuser`, on a
directory that user owns.
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from tests.net import free_port

USER = "postgres"  # the cluster's superuser role (trust auth: no password)


def bin_dir() -> Path | None:
    """The directory of initdb/pg_ctl: STRATA_TEST_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else PATH."""
    if os.environ.get("STRATA_TEST_PG_BIN"):
        return Path(os.environ["STRATA_TEST_PG_BIN"])
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).parent if which else None


def available() -> bool:
    b = bin_dir()
    return b is not None and (b / "initdb").exists() and (b / "pg_ctl").exists()


class PgServer:
    """One throwaway PostgreSQL cluster. `start()` once, `stop()` removes everything."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="strata-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = 0
        self._prefix: list[str] = []
        self._bin = bin_dir()
        self._lock = threading.Lock()
        self.running = False

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [*self._prefix, str(self._bin / args[0]), *args[1:]]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> PgServer:
        if not available():
            raise RuntimeError("PostgreSQL binaries not found (install Debian's `postgresql` package, or set "
                               "STRATA_TEST_PG_BIN to the directory holding initdb and pg_ctl)")
        if os.geteuid() == 0:
            # postgres refuses root: run the binaries as the `postgres` user on a directory it owns
            shutil.chown(self.dir, user=USER)
            self._prefix = ["runuser", "-u", USER, "--"]
        self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8", "--locale=C",
                  "--no-sync", "--no-instructions")
        last = ""
        for _ in range(5):  # the free port may be taken between choosing it and binding it: try another
            self.port = free_port()
            opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir} "
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 "
                    "-c shared_buffers=32MB")
            r = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60",
                          "start", check=False)
            if r.returncode == 0:
                self.running = True
                atexit.register(self.stop)
                return self
            last = r.stdout + r.stderr + (self.log.read_text(errors="replace") if self.log.exists() else "")
        self.stop()
        raise RuntimeError(f"PostgreSQL did not start:\n{last}")

    def stop(self) -> None:
        """Stop the server (immediately: its databases are thrown away) and remove its directory."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            self.running = False
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- databases ----------------------------------------------------------------------------------------------
    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{dbname}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with self._lock, psycopg.connect(host="127.0.0.1", port=self.port, user=USER, dbname="postgres",
                                         autocommit=True) as conn:
            conn.execute(sql)

    def create_database(self, name: str) -> str:
        """An empty database `name` (dropped first if it exists); returns its URL."""
        self.drop_database(name)
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\' STRATEGY file_copy')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_server: PgServer | None = None
_homes: dict[str, str] = {}
_guard = threading.Lock()


def server() -> PgServer:
    """The process's PostgreSQL server, started on first call, stopped and removed at exit."""
    global _server
    with _guard:
        if _server is None:
            _server = PgServer().start()
        return _server


def database_for(home) -> str:
    """The URL of a fresh database for the test home `home` (same home, same database within this process)."""
    key = str(Path(home).resolve())
    srv = server()
    with _guard:
        if key not in _homes:
            name = "t_" + hashlib.sha256(key.encode()).hexdigest()[:24]
            _homes[key] = srv.create_database(name)
        return _homes[key]
