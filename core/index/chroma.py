"""Where the vectors live: chromadb embedded on disk (one directory per workspace, the default), or a Chroma server
(`chroma run`) named by STRATA_CHROMA_URL that serves every workspace of a team.

The server's URL is `http[s]://host[:port][/path]`, optionally with `?database=NAME`: the Chroma database (of the
default tenant) to use, created on first use; without it, Chroma's `default_database`. One database per team (or
per test home, tests/chroma_server.py) keeps same-named workspaces of different Strata homes apart on one server.

Collection names: embedded, `<kind>__<embedder>` inside the workspace's directory (unchanged, so existing stores
keep working); on a server, `<workspace>__<kind>__<embedder>`, the workspace's dots written `.-` so no name holds
Chroma's forbidden `..` and two workspaces never share a name. A server collection also carries its workspace in
its metadata (`strata_workspace`), which is what deleting a workspace's collections goes by, since a workspace's
name may itself contain `__`.

A server reached over a network sits behind a proxy (Debian's nginx, docs/DEPLOY.md) with TLS and a token check:
the client sends `Authorization: Bearer STRATA_CHROMA_TOKEN` and trusts the CA bundle STRATA_CHROMA_CA for an https
URL (both read from the environment unless passed; Chroma 1.x's own auth settings do nothing, chroma-core/chroma#4965).
A 401 or 403 from the proxy is one line naming STRATA_CHROMA_TOKEN. URLs in messages are redacted (core/secrets.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from core.protocols import BackendError
from core.secrets import private_dir, private_tree, redact_url

WORKSPACE_META = "strata_workspace"


class VectorStoreUnavailable(BackendError):
    """The Chroma server named by STRATA_CHROMA_URL does not answer (or the URL is not one)."""


@dataclass(frozen=True)
class ServerAuth:
    token: str | None = None  # sent as Authorization: Bearer TOKEN
    ca: str | None = None  # CA bundle trusted for https

    @classmethod
    def of(cls, token: str | None = None, ca: str | None = None) -> "ServerAuth":
        """`token` and `ca`, each else from the environment (STRATA_CHROMA_TOKEN, STRATA_CHROMA_CA)."""
        return cls(token or os.environ.get("STRATA_CHROMA_TOKEN") or None,
                   ca or os.environ.get("STRATA_CHROMA_CA") or None)

    @property
    def pair(self) -> tuple[str | None, str | None]:  # connect_server's token, ca
        return self.token, self.ca

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Authorization": f"Bearer {self.token}"} if self.token else None


def settings_auth(storage) -> ServerAuth:
    """The token and CA of StorageSettings `storage` (each else from the environment)."""
    token = storage.chroma_token.get_secret_value() if storage.chroma_token is not None else None
    return ServerAuth.of(token, storage.chroma_ca)


@dataclass(frozen=True)
class ServerAddress:
    url: str  # as given, for messages
    base: str  # scheme://host:port/path, what chromadb's HttpClient takes as its host
    port: int
    database: str | None


def parse_url(url: str) -> ServerAddress:
    """STRATA_CHROMA_URL -> where the server is and which database; a one-line error for anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise VectorStoreUnavailable(f"STRATA_CHROMA_URL={url!r} is not an http(s) URL such as http://127.0.0.1:8000")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8000)  # chroma run's default port
    except ValueError as exc:
        raise VectorStoreUnavailable(f"STRATA_CHROMA_URL={url!r}: {exc}") from None
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"database"})
    if unknown:
        raise VectorStoreUnavailable(f"STRATA_CHROMA_URL={url!r}: unknown parameter {unknown[0]!r} "
                                     f"(only ?database=NAME)")
    database = query.get("database", [None])[-1]
    path = parts.path.rstrip("/")
    return ServerAddress(url, f"{parts.scheme}://{parts.hostname}:{port}{path}", port, database)


def _chroma_settings(addr: ServerAddress | None = None, auth: ServerAuth | None = None):
    from chromadb.config import Settings as ChromaSettings

    if addr is None:
        return ChromaSettings(anonymized_telemetry=False)
    auth = auth or ServerAuth()
    https = addr.base.startswith("https:")
    return ChromaSettings(anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI",
                          chroma_server_host=addr.base, chroma_server_http_port=addr.port,
                          chroma_server_ssl_enabled=https, chroma_server_ssl_verify=(auth.ca if https else None),
                          chroma_server_headers=auth.headers)


def unavailable(addr: ServerAddress, exc: BaseException) -> VectorStoreUnavailable:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    cause: BaseException | None = exc
    while cause is not None:  # chromadb's "Could not connect" hides an untrusted certificate in its cause
        if "CERTIFICATE_VERIFY_FAILED" in str(cause):
            return VectorStoreUnavailable(f"the Chroma server at STRATA_CHROMA_URL={redact_url(addr.url)} has a TLS "
                                          f"certificate this host does not trust: set STRATA_CHROMA_CA to the CA "
                                          f"bundle (PEM) that signed it")
        cause = cause.__cause__ or cause.__context__
    return VectorStoreUnavailable(f"the Chroma server at STRATA_CHROMA_URL={redact_url(addr.url)} does not answer "
                                  f"({reason}); "
                                  f"start it (`chroma run --path DIR --host HOST --port PORT`) or unset "
                                  f"STRATA_CHROMA_URL to use the embedded store")


def connection_errors() -> tuple[type[BaseException], ...]:
    """What chromadb's HTTP client raises when the server is down or stops answering mid-way."""
    import httpx

    return (httpx.TransportError, ConnectionError)


def refused(addr: ServerAddress, auth: ServerAuth) -> VectorStoreUnavailable | None:
    """The one-line error when the server (its proxy) refuses this client's token (HTTP 401 or 403), else None."""
    import httpx

    try:
        r = httpx.get(f"{addr.base}/api/v2/heartbeat", headers=auth.headers, timeout=10,
                      verify=auth.ca if auth.ca and addr.base.startswith("https:") else True)
    except (httpx.HTTPError, OSError):
        return None
    if r.status_code not in (401, 403):
        return None
    which = "refused the token" if auth.token else "refused a request without a token"
    return VectorStoreUnavailable(f"the Chroma server at {redact_url(addr.url)} {which} (HTTP {r.status_code}): "
                                  f"set STRATA_CHROMA_TOKEN to the token its proxy checks")


def connect_server(url: str, token: str | None = None, ca: str | None = None):
    """A chromadb HttpClient on the server and database of `url`, the database created when missing; `token` and
    `ca` (else STRATA_CHROMA_TOKEN, STRATA_CHROMA_CA) authenticate it to the server's proxy."""
    addr, auth = parse_url(url), ServerAuth.of(token, ca)
    try:
        return _connect(addr, auth)
    except VectorStoreUnavailable:
        raise
    except Exception:  # a proxy's 401 comes as chromadb's bare Exception(HTML body), or a ChromaError
        if (no := refused(addr, auth)) is not None:
            raise no from None
        raise


def _connect(addr: ServerAddress, auth: ServerAuth):
    import chromadb
    from chromadb.errors import NotFoundError

    try:
        if addr.database:
            admin = chromadb.AdminClient(_chroma_settings(addr, auth))
            try:
                admin.get_database(addr.database)
            except NotFoundError:
                try:
                    admin.create_database(addr.database)
                except Exception as exc:  # noqa: BLE001 - another process created it between the two calls
                    if "already exists" not in str(exc):
                        raise
        from chromadb.config import DEFAULT_DATABASE

        return chromadb.HttpClient(host=addr.base, port=addr.port, settings=_chroma_settings(addr, auth),
                                   ssl=addr.base.startswith("https:"), headers=auth.headers,
                                   database=addr.database or DEFAULT_DATABASE)
    except connection_errors() as exc:
        raise unavailable(addr, exc) from None
    except ValueError as exc:  # chromadb's own "Could not connect to a Chroma server"
        if "connect" not in str(exc).lower():
            raise
        raise unavailable(addr, exc) from None


def connect_embedded(path: Path):
    """chromadb on disk in folder `path`, private (0700, core/secrets.py; chromadb writes its files with the usual
    modes: `VectorIndex` closes what each write adds)."""
    import chromadb

    private_dir(path)
    client = chromadb.PersistentClient(path=str(path), settings=_chroma_settings())
    private_tree(path)
    return client


def server_collection_name(workspace: str, kind: str, embedder_name: str) -> str:
    return f"{workspace.replace('.', '.-')}__{kind}__{embedder_name}"


def server_available(url: str, token: str | None = None, ca: str | None = None) -> str | None:
    """None when the server of `url` answers (and takes the token), else the one-line reason (the app's banner)."""
    try:
        connect_server(url, token, ca).heartbeat()
    except VectorStoreUnavailable as exc:
        return str(exc)
    except connection_errors() as exc:
        return str(unavailable(parse_url(url), exc))
    except Exception:  # noqa: BLE001 - refused mid-way (the proxy's token changed): its one line, else raised
        if (no := refused(parse_url(url), ServerAuth.of(token, ca))) is not None:
            return str(no)
        raise
    return None


def drop_server_workspace(url: str, workspace: str, token: str | None = None, ca: str | None = None) -> int:
    """Delete every collection of `workspace` on the server of `url`; returns how many."""
    client = connect_server(url, token, ca)
    prefix = f"{workspace.replace('.', '.-')}__"  # what server_collection_name starts with
    gone = 0
    try:
        for col in client.list_collections():
            if col.name.startswith(prefix) and (col.metadata or {}).get(WORKSPACE_META) == workspace:
                client.delete_collection(col.name)
                gone += 1
    except connection_errors() as exc:
        raise unavailable(parse_url(url), exc) from None
    return gone
