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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from core.protocols import BackendError

WORKSPACE_META = "strata_workspace"


class VectorStoreUnavailable(BackendError):
    """The Chroma server named by STRATA_CHROMA_URL does not answer (or the URL is not one)."""


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


def _chroma_settings(addr: ServerAddress | None = None):
    from chromadb.config import Settings as ChromaSettings

    if addr is None:
        return ChromaSettings(anonymized_telemetry=False)
    return ChromaSettings(anonymized_telemetry=False, chroma_api_impl="chromadb.api.fastapi.FastAPI",
                          chroma_server_host=addr.base, chroma_server_http_port=addr.port)


def unavailable(addr: ServerAddress, exc: BaseException) -> VectorStoreUnavailable:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return VectorStoreUnavailable(f"the Chroma server at STRATA_CHROMA_URL={addr.url} does not answer ({reason}); "
                                  f"start it (`chroma run --path DIR --host HOST --port PORT`) or unset "
                                  f"STRATA_CHROMA_URL to use the embedded store")


def connection_errors() -> tuple[type[BaseException], ...]:
    """What chromadb's HTTP client raises when the server is down or stops answering mid-way."""
    import httpx

    return (httpx.TransportError, ConnectionError)


def connect_server(url: str):
    """A chromadb HttpClient on the server and database of `url`, the database created when missing."""
    import chromadb
    from chromadb.errors import NotFoundError

    addr = parse_url(url)
    try:
        if addr.database:
            admin = chromadb.AdminClient(_chroma_settings(addr))
            try:
                admin.get_database(addr.database)
            except NotFoundError:
                try:
                    admin.create_database(addr.database)
                except Exception as exc:  # noqa: BLE001 - another process created it between the two calls
                    if "already exists" not in str(exc):
                        raise
        from chromadb.config import DEFAULT_DATABASE

        return chromadb.HttpClient(host=addr.base, port=addr.port, settings=_chroma_settings(addr),
                                   database=addr.database or DEFAULT_DATABASE)
    except connection_errors() as exc:
        raise unavailable(addr, exc) from None
    except ValueError as exc:  # chromadb's own "Could not connect to a Chroma server"
        if "connect" not in str(exc).lower():
            raise
        raise unavailable(addr, exc) from None


def connect_embedded(path: Path):
    import chromadb

    Path(path).mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=_chroma_settings())


def server_collection_name(workspace: str, kind: str, embedder_name: str) -> str:
    return f"{workspace.replace('.', '.-')}__{kind}__{embedder_name}"


def server_available(url: str) -> str | None:
    """None when the server of `url` answers, else the one-line reason (for the app's banner)."""
    try:
        connect_server(url).heartbeat()
    except VectorStoreUnavailable as exc:
        return str(exc)
    except connection_errors() as exc:
        return str(unavailable(parse_url(url), exc))
    return None


def drop_server_workspace(url: str, workspace: str) -> int:
    """Delete every collection of `workspace` on the server of `url`; returns how many."""
    client = connect_server(url)
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
