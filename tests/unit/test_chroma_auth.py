"""The Chroma server behind its proxy (tests/chroma_server.py: Debian's nginx with TLS in front of `chroma run`, the
deployment of docs/DEPLOY.md): no token or a wrong one gets HTTP 401 and no data, from a raw request and from the
chromadb client alike, and the app's check (`server_available`) says so in one line naming STRATA_CHROMA_TOKEN; the
right token (STRATA_CHROMA_TOKEN, over https trusting STRATA_CHROMA_CA) creates, adds and queries."""

from __future__ import annotations

import chromadb
import httpx
import pytest

from core.config import Settings
from core.index.chroma import VectorStoreUnavailable, connect_server, server_available
from tests.chroma_server import proxy

COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"


@pytest.fixture(scope="module")
def server():
    return proxy()


@pytest.fixture
def no_env_token(monkeypatch):
    monkeypatch.delenv("STRATA_CHROMA_TOKEN", raising=False)  # only what each call passes


def test_the_right_token_creates_adds_and_queries(server):
    settings = Settings.from_env()  # STRATA_CHROMA_TOKEN and STRATA_CHROMA_CA, as a deployment sets them
    assert settings.storage.chroma_token is not None and settings.storage.chroma_ca == server["ca"]
    assert "chroma_token" not in settings.model_dump()["storage"]  # never dumped
    assert server["url"].startswith("https://")
    client = connect_server(f"{server['url']}?database=auth_ok")
    col = client.get_or_create_collection("auth_probe", embedding_function=None)
    col.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["secret-doc-a", "secret-doc-b"])
    got = col.query(query_embeddings=[[0.9, 0.1]], n_results=1)
    assert got["ids"] == [["a"]]
    assert server_available(server["url"]) is None
    r = httpx.get(server["url"] + COLLECTIONS, headers={"Authorization": f"Bearer {server['token']}"},
                  verify=server["ca"])
    assert r.status_code == 200


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic eDp5"}])
def test_no_or_a_wrong_token_gets_401_and_no_data(server, headers):
    test_the_right_token_creates_adds_and_queries(server)  # there is data to leak
    for path in ("/api/v2/heartbeat", COLLECTIONS, "/api/v2/tenants/default_tenant/databases/auth_ok/collections"):
        r = httpx.get(server["url"] + path, headers=headers, verify=server["ca"])
        assert r.status_code == 401, (path, r.status_code)
        assert "auth_probe" not in r.text and "secret-doc" not in r.text
    # chroma run itself, had it been reachable, would have answered the same request: the proxy is what refuses
    assert httpx.get(server["backend"] + COLLECTIONS).status_code == 200


@pytest.mark.usefixtures("no_env_token")
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_the_chromadb_client_is_refused_in_one_line(server, token):
    with pytest.raises(Exception) as raw:  # chromadb's own client without our header: refused too
        chromadb.HttpClient(host=server["url"], port=int(server["url"].rsplit(":", 1)[1]), ssl=True,
                            headers={"Authorization": f"Bearer {token}"} if token else None,
                            settings=chromadb.config.Settings(anonymized_telemetry=False,
                                                              chroma_server_ssl_verify=server["ca"]))
    assert "401" in str(raw.value)
    with pytest.raises(VectorStoreUnavailable, match="STRATA_CHROMA_TOKEN"):
        connect_server(f"{server['url']}?database=auth_ok", token=token)
    msg = server_available(server["url"], token=token)
    assert msg is not None and "\n" not in msg and "STRATA_CHROMA_TOKEN" in msg and "401" in msg, msg
    assert ("refused the token" if token else "without a token") in msg
    assert "Traceback" not in msg and "<html>" not in msg


def test_the_message_never_shows_the_token_or_a_password(server, monkeypatch):
    monkeypatch.setenv("STRATA_CHROMA_TOKEN", "wrong-Sekr3t-token")
    url = server["url"].replace("https://", "https://user:Sekr3t-Pa55@")
    msg = server_available(url)
    assert msg is not None and "Sekr3t" not in msg and "user:***@" in msg, msg


def test_https_without_the_ca_is_one_line_too(server, monkeypatch):
    monkeypatch.delenv("STRATA_CHROMA_CA")
    msg = server_available(server["url"])
    assert msg is not None and "\n" not in msg and "STRATA_CHROMA_CA" in msg and "certificate" in msg, msg
