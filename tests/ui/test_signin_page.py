"""The sign-in gate of app.py through Streamlit's AppTest: signed out, the app draws only the sign-in (no sidebar
picker, no page); signed in, the sidebar says who; without STRATA_AUTH nothing changes."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP, app_home, run


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    with app_home(tmp_path):
        yield tmp_path


def _app(monkeypatch, mode: str, **env: str) -> AppTest:
    import streamlit as st

    monkeypatch.setenv("STRATA_AUTH", mode)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    st.cache_resource.clear()  # the settings are read once per process
    return AppTest.from_file(str(APP), default_timeout=60)


def _only_sign_in(at: AppTest) -> None:
    assert [t.value for t in at.title] == ["Strata"]
    assert not at.sidebar.selectbox and not at.sidebar.caption  # no workspace picker, no status
    assert not at.tabs and not at.text_input and not at.subheader


AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32, "client_id": "strata",
        "client_secret": "s", "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}


def test_oidc_signed_out_shows_only_the_sign_in(home, monkeypatch):
    at = _app(monkeypatch, "oidc")
    at.user = {"is_logged_in": False}
    at.secrets = {"auth": AUTH}
    run(at)
    _only_sign_in(at)
    assert [b.label for b in at.button] == ["Sign in"]


def test_oidc_without_a_provider_says_so(home, monkeypatch):
    at = _app(monkeypatch, "oidc", STRATA_OIDC_PROVIDER="corp")
    at.user = {"is_logged_in": False}
    at.secrets = {"auth": AUTH}  # no [auth.corp]
    run(at)
    _only_sign_in(at)
    assert len(at.error) == 1 and "[auth.corp]" in at.error[0].value and not at.button


def test_oidc_signed_in_says_who(home, monkeypatch):
    at = _app(monkeypatch, "oidc")
    at.user = {"is_logged_in": True, "email": "a*b@example.org", "email_verified": True, "sub": "42"}
    run(at)
    assert "Sign in" not in [b.label for b in at.button]
    assert "Signed in as `a*b@example.org`" in [c.value for c in at.sidebar.caption]
    assert "Sign out" in [b.label for b in at.sidebar.button]
    assert [t.value for t in at.title] == ["Workspaces & upload"]


def test_oidc_an_unverified_email_is_refused(home, monkeypatch):
    """Signed in with the provider, but with an address it has not verified: one line, no workspace, and a way out
    (signing out, to sign in with another account)."""
    at = _app(monkeypatch, "oidc", STRATA_ADMINS="boss@example.org")
    at.user = {"is_logged_in": True, "email": "boss@example.org", "email_verified": False, "sub": "42",
               "iss": "https://idp.example.org"}
    run(at)
    _only_sign_in(at)
    assert len(at.error) == 1 and at.error[0].value.startswith("Refused") and "not verified" in at.error[0].value
    assert [b.label for b in at.button] == ["Sign out"]


def test_proxy_without_forwarded_allow_ips_refuses(home, monkeypatch):
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    at = run(_app(monkeypatch, "proxy"))
    _only_sign_in(at)
    assert len(at.error) == 1 and "FORWARDED_ALLOW_IPS=" in at.error[0].value


def test_proxy_without_header_has_no_identity(home, monkeypatch):
    at = run(_app(monkeypatch, "proxy", FORWARDED_ALLOW_IPS=""))
    _only_sign_in(at)
    assert len(at.error) == 1 and at.error[0].value.startswith("No identity")


def test_no_auth_is_as_before(home, monkeypatch):
    at = run(_app(monkeypatch, "none"))
    assert [t.value for t in at.title] == ["Workspaces & upload"]
    assert not [c.value for c in at.sidebar.caption if "Signed in" in c.value]
