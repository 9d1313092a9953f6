"""A Chroma server for the tests (STRATA_TEST_CHROMA=server, tests/stores.py): one `chroma run` per pytest process,
started on first use on 127.0.0.1 and a free port, with its data in a temporary directory; stopped and removed
when the process ends.

In front of it, like a deployment (docs/DEPLOY.md), Debian's nginx (`nginx -p PREFIX -c CONF -g 'daemon off;'`, every
path in the same temporary directory) answers on another free port with TLS (a self-signed certificate made with
`openssl`) and returns 401 unless `Authorization: Bearer TOKEN` carries the session's random token; the URL the
tests get is the proxy's (https), and STRATA_CHROMA_TOKEN / STRATA_CHROMA_CA are set in this process's environment
(the workers it starts inherit them), so every server test goes through the token check. `proxy()` gives the
backend, the proxy URL, the token and the CA file to the tests of the check itself (tests/unit/test_chroma_auth.py).

Tests of different homes share the server but not their vectors: `server_url(home)` names one Chroma database per
test home (`?database=...`, created by the first VectorIndex that uses it), so the many tests that call their
workspace "w" or "sample" never see each other's collections, exactly as with one embedded directory per home.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tests import nginx
from tests.net import free_port, stop

_LOCK = threading.Lock()
_SERVER: dict[str, object] = {}
START_TIMEOUT_S = 90.0


def _answers(base: str, headers: dict | None = None, ca: str | None = None) -> bool:
    req = urllib.request.Request(f"{base}/api/v2/heartbeat", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ssl.create_default_context(cafile=ca) if ca else None) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen, data: str) -> None:
    stop(proc)
    shutil.rmtree(data, ignore_errors=True)


def _start_chroma() -> str:
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


PROXY = """\
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {tmp}/cert.pem;
        ssl_certificate_key {tmp}/key.pem;
        client_max_body_size 0;
        client_body_buffer_size 1m;
        location / {{
            if ($http_authorization != "Bearer {token}") {{ return 401; }}
            proxy_pass {backend};
            proxy_http_version 1.1;
            proxy_request_buffering off;
            proxy_set_header Host $host;
            proxy_read_timeout 600s;
        }}
    }}"""


def _start_proxy(backend: str, token: str) -> tuple[str, str]:
    """nginx with TLS and the token check in front of `backend`: (its https URL, the CA file that trusts it)."""
    tmp = Path(tempfile.mkdtemp(prefix="strata_chroma_proxy_"))
    tmp.chmod(0o755)  # under root nginx's workers run as nobody: they must reach their temp directories
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(tmp / "key.pem"),
                    "-out", str(tmp / "cert.pem")], check=True, capture_output=True)
    for _ in range(3):  # the free port may be taken before nginx binds it
        port = free_port()
        proc = nginx.start(tmp, nginx.config(tmp, PROXY.format(tmp=tmp, port=port, token=token, backend=backend)))
        atexit.register(nginx.stop, proc)
        atexit.register(shutil.rmtree, str(tmp), True)
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if _answers(url, {"Authorization": f"Bearer {token}"}, str(tmp / "cert.pem")):
                return url, str(tmp / "cert.pem")
            time.sleep(0.1)
        nginx.stop(proc)
    raise RuntimeError(f"the test nginx proxy did not start:\n{nginx.output(tmp)}")


def proxy() -> dict[str, str]:
    """The session's server and its proxy (both started on first call): backend (chroma run's own http URL),
    url (nginx's https URL), token, ca (the proxy certificate's file)."""
    with _LOCK:
        if "url" not in _SERVER:
            backend = _start_chroma()
            token = "strata-test-" + secrets.token_urlsafe(24)  # recognisable: tests/stages/test_no_secrets.py
            url, ca = _start_proxy(backend, token)
            _SERVER.update(backend=backend, url=url, token=token, ca=ca)
            os.environ["STRATA_CHROMA_TOKEN"] = token  # read by connect_server and inherited by the workers
            os.environ["STRATA_CHROMA_CA"] = ca
        return {k: str(_SERVER[k]) for k in ("backend", "url", "token", "ca")}


def server_url(home: str | Path | None = None) -> str:
    """The session's Chroma server, through its proxy (started on first call); with `home`, the URL of that home's
    own database."""
    base = proxy()["url"]
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
