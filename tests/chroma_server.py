"""A Chroma server for the tests (STRATA_TEST_CHROMA=server, tests/stores.py): one `chroma run` per pytest process,
started on first use on 127.0.0.1 and a free port, with its data in a temporary directory; stopped and removed
when the process ends.

Tests of different homes share the server but not their vectors: `server_url(home)` names one Chroma database per
test home (`?database=...`, created by the first VectorIndex that uses it), so the many tests that call their
workspace "w" or "sample" never see each other's collections, exactly as with one embedded directory per home.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tests.net import free_port

_LOCK = threading.Lock()
_SERVER: dict[str, object] = {}
START_TIMEOUT_S = 90.0


def _answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/api/v2/heartbeat", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen, data: str) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    shutil.rmtree(data, ignore_errors=True)


def _start() -> str:
    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        raise RuntimeError(f"no `chroma` command next to {sys.executable}: pip install chromadb")
    data = tempfile.mkdtemp(prefix="strata_chroma_server_")
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    for _ in range(3):  # another process may take the free port between choosing it and the server binding it
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = open(Path(data) / "server.log", "ab")  # noqa: SIM115 - handed to the server
        proc = subprocess.Popen([str(chroma), "run", "--path", str(Path(data) / "db"), "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        atexit.register(_stop, proc, data)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None:
            if _answers(base):
                return base
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=15)
    tail = (Path(data) / "server.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the test Chroma server did not start:\n{tail}")


def server_url(home: str | Path | None = None) -> str:
    """The session's Chroma server (started on first call); with `home`, the URL of that home's own database."""
    with _LOCK:
        if "base" not in _SERVER:
            _SERVER["base"] = _start()
        base = str(_SERVER["base"])
    if home is None:
        return base
    return f"{base}?database={database_name(home)}"


def database_name(home: str | Path) -> str:
    """One Chroma database per test home: a short, stable, valid name derived from its path."""
    return "home_" + hashlib.sha1(str(Path(home).resolve()).encode()).hexdigest()[:20]


def copy_vectors(src_url: str | None, home: str | Path) -> str | None:
    """The vector store of a copy of a test home (the tests that copy a built home, then change the copy): None when
    the vectors are embedded (the copied directory holds them), else the URL of `home`'s own database on the server,
    filled with a copy of every collection of `src_url`'s database: same names, metadata, ids, vectors (written
    as read: they are the store's fixed points, see core/index/vectors.py `settle`) and metadatas."""
    if not src_url:
        return None
    from core.index.chroma import connect_server

    dst_url = server_url(home)
    src, dst = connect_server(src_url), connect_server(dst_url)
    step = src.get_max_batch_size()
    for col in src.list_collections():
        new = dst.get_or_create_collection(col.name, metadata=col.metadata, embedding_function=None)
        for off in range(0, col.count(), step):
            got = col.get(limit=step, offset=off, include=["embeddings", "metadatas"])
            if got["ids"]:
                new.upsert(ids=got["ids"], embeddings=got["embeddings"], metadatas=got["metadatas"])
    return dst_url
