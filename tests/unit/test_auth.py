"""Who is there (ui/auth.py): the proxy header believed only from a trusted proxy's address, and only in a process
whose server cannot be made to rewrite that address (FORWARDED_ALLOW_IPS set and empty); the OIDC user's name."""

from __future__ import annotations

import pytest

from core.config import AuthSettings, Settings
from ui.auth import FORWARDED_ENV, forwarding_problem, oidc_identity, peer_trusted, proxy_identity

SAFE = {FORWARDED_ENV: ""}


def headers(**values: list[str]):
    """`st.context.headers.get_all` of a request carrying `values` (header names case-insensitive)."""
    lower = {k.lower().replace("_", "-"): v for k, v in values.items()}
    return lambda name: list(lower.get(name.lower(), []))


def proxy(trusted: list[str], admins: tuple[str, ...] = ()) -> AuthSettings:
    return AuthSettings(mode="proxy", trusted_proxies=trusted, admins=list(admins))


@pytest.mark.parametrize(("peer", "trusted", "ok"), [
    ("10.0.0.5", ["10.0.0.5"], True),
    ("10.0.0.6", ["10.0.0.5"], False),
    ("10.0.3.7", ["10.0.0.0/16"], True),
    ("10.1.0.1", ["10.0.0.0/16"], False),
    ("fd00::7", ["fd00::/64"], True),
    ("fd01::7", ["fd00::/64"], False),
    (None, ["127.0.0.1/32"], True),        # Streamlit reports 127.0.0.1 and ::1 as None: loopback
    (None, ["::1"], True),
    (None, ["127.0.0.2"], False),          # loopback but not the proxy's own address
    (None, [], False),
    ("127.0.0.2", ["127.0.0.2"], True),
    ("10.0.0.5", ["not-an-address", "10.0.0.5"], True),
    ("10.0.0.5", ["not-an-address"], False),
    ("garbage", ["0.0.0.0/0"], False),
])
def test_peer_trusted(peer, trusted, ok):
    assert peer_trusted(peer, trusted) is ok


def test_forwarded_allow_ips_must_be_set_and_empty():
    assert forwarding_problem({}) is not None and FORWARDED_ENV in forwarding_problem({})
    assert forwarding_problem({FORWARDED_ENV: "127.0.0.1,::1"}) is not None
    assert forwarding_problem({FORWARDED_ENV: "*"}) is not None
    assert forwarding_problem({FORWARDED_ENV: ""}) is None


def test_header_from_a_trusted_proxy_names_the_user():
    who, problem = proxy_identity(headers(X_Forwarded_Email=["a@example.org"]), "10.0.0.5", proxy(["10.0.0.0/24"]),
                                  SAFE)
    assert problem is None and who is not None
    assert (who.name, who.unrestricted) == ("a@example.org", False)
    admin, _ = proxy_identity(headers(x_forwarded_email=[" boss@example.org "]), "10.0.0.5",
                              proxy(["10.0.0.5"], admins=("boss@example.org",)), SAFE)
    assert admin is not None and (admin.name, admin.unrestricted) == ("boss@example.org", True)


def test_header_from_elsewhere_is_refused():
    for peer in ("10.0.9.9", None):  # another host; this machine, when the proxy is 127.0.0.2
        who, problem = proxy_identity(headers(X_Forwarded_Email=["a@example.org"]), peer,
                                      proxy(["10.0.0.0/24", "127.0.0.2"]), SAFE)
        assert who is None
        assert problem is not None and problem.startswith("Refused") and "X-Forwarded-Email" in problem
        assert "\n" not in problem


def test_no_or_several_headers_is_no_identity():
    for values in ([], [""], ["a@example.org", "b@example.org"]):
        who, problem = proxy_identity(headers(X_Forwarded_Email=values), "10.0.0.5", proxy(["10.0.0.5"]), SAFE)
        assert who is None and problem is not None and "No identity came through the proxy" in problem


def test_configured_header():
    auth = proxy(["10.0.0.5"]).model_copy(update={"proxy_header": "X-Auth-User"})
    who, _ = proxy_identity(headers(X_Auth_User=["carol"], X_Forwarded_Email=["mallory"]), "10.0.0.5", auth, SAFE)
    assert who is not None and who.name == "carol"


def test_unsafe_server_refuses_even_a_trusted_proxy():
    for env in ({}, {FORWARDED_ENV: "127.0.0.1,::1"}):
        who, problem = proxy_identity(headers(X_Forwarded_Email=["a@example.org"]), "10.0.0.5", proxy(["10.0.0.5"]),
                                      env)
        assert who is None and problem is not None and FORWARDED_ENV in problem


def test_oidc_name_is_the_email_else_the_subject():
    auth = AuthSettings(mode="oidc", admins=["boss@example.org"])
    assert oidc_identity({"is_logged_in": False, "email": "a@example.org"}, auth) is None
    assert oidc_identity({"email": "a@example.org"}, auth) is None
    a = oidc_identity({"is_logged_in": True, "email": "a@example.org", "sub": "123"}, auth)
    assert a is not None and (a.name, a.unrestricted) == ("a@example.org", False)
    s = oidc_identity({"is_logged_in": True, "sub": "123"}, auth)
    assert s is not None and s.name == "123"
    boss = oidc_identity({"is_logged_in": True, "email": "boss@example.org"}, auth)
    assert boss is not None and boss.unrestricted


def test_settings_from_env():
    s = Settings.from_env({"STRATA_AUTH": "proxy", "STRATA_TRUSTED_PROXIES": "10.0.0.5, 10.1.0.0/16",
                           "STRATA_AUTH_HEADER": "X-Auth-User"})
    assert s.auth.mode == "proxy" and s.auth.trusted_proxies == ["10.0.0.5", "10.1.0.0/16"]
    assert s.auth.proxy_header == "X-Auth-User"
