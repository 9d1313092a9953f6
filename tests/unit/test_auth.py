"""Who is there (ui/auth.py): the proxy header believed only from a trusted proxy's address, and only in a process
whose server cannot be made to rewrite that address (FORWARDED_ALLOW_IPS set and empty); the OIDC user's name (an
email the provider verified, else subject@issuer; an email it did not verify is refused)."""

from __future__ import annotations

import pytest

from core.config import AuthSettings, Settings
from ui.auth import FORWARDED_ENV, forwarding_problem, oidc_identity, oidc_name, peer_trusted, proxy_identity

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


ISS = "https://idp.example.org/realms/team"


def signed_in(**claims: object) -> dict[str, object]:
    """`st.user` of a signed-in person: the ID token's claims (issuer and subject always there) and Streamlit's
    is_logged_in."""
    return {"is_logged_in": True, "iss": ISS, "sub": "2f9c-sub"} | claims


def test_oidc_a_verified_email_names_the_user():
    auth = AuthSettings(mode="oidc", admins=["boss@example.org"])
    for flag in (True, "true", " TRUE "):  # a JSON true; some providers send the string
        who, problem = oidc_identity(signed_in(email="a@example.org", email_verified=flag), auth)
        assert problem is None and who is not None and (who.name, who.unrestricted) == ("a@example.org", False)
    boss, _ = oidc_identity(signed_in(email=" boss@example.org ", email_verified=True), auth)
    assert boss is not None and (boss.name, boss.unrestricted) == ("boss@example.org", True)


@pytest.mark.parametrize("flag", [False, "false", None, "yes", 1, "missing"])
def test_oidc_an_email_not_verified_is_refused(flag):
    """email_verified false, absent or anything but true: refused in one line, as nobody; an admin's address is no
    exception (STRATA_ADMINS is matched only by a verified one)."""
    auth = AuthSettings(mode="oidc", admins=["boss@example.org"])
    claims = signed_in(email="boss@example.org") | ({} if flag == "missing" else {"email_verified": flag})
    who, problem = oidc_identity(claims, auth)
    assert who is None
    assert problem is not None and problem.startswith("Refused") and "not verified" in problem
    assert "boss@example.org" in problem and "\n" not in problem
    assert oidc_name(claims)[0] is None


def test_oidc_without_an_email_the_subject_at_its_issuer():
    auth = AuthSettings(mode="oidc", admins=["2f9c-sub@idp.example.org"])
    for claims in (signed_in(), signed_in(email=""), signed_in(email="  ", email_verified=True)):
        who, problem = oidc_identity(claims, auth)
        assert problem is None and who is not None
        assert (who.name, who.unrestricted) == (f"2f9c-sub@{ISS}", False)  # not the admin's look-alike address
    # the same subject at another issuer is another person
    other, _ = oidc_identity(signed_in(iss="https://idp.example.org/realms/guests"), auth)
    assert other is not None and other.name == "2f9c-sub@https://idp.example.org/realms/guests"
    # a subject that looks like an address is not taken for one
    sneaky, _ = oidc_identity(signed_in(sub="boss@example.org"), AuthSettings(mode="oidc", admins=["boss@example.org"]))
    assert sneaky is not None and sneaky.name == f"boss@example.org@{ISS}" and not sneaky.unrestricted


def test_oidc_a_name_made_of_subject_and_issuer_is_never_an_address():
    """No verified email can equal a SUB@ISSUER name: an email claim whose domain holds what no host name does
    ("/", ":") is refused, verified or not."""
    for email in (f"2f9c-sub@{ISS}", "a@b/c", "a@[::1]", "no-at-sign", "@example.org", 42):
        who, problem = oidc_identity(signed_in(email=email, email_verified=True), AuthSettings(mode="oidc"))
        assert who is None and problem is not None and "not an email address" in problem, email


def test_oidc_signed_out_or_naming_no_one():
    auth = AuthSettings(mode="oidc")
    out = oidc_identity({"is_logged_in": False, "email": "a@example.org", "email_verified": True}, auth)
    assert out == (None, None)
    assert oidc_identity({"email": "a@example.org", "email_verified": True}, auth) == (None, None)
    for claims in ({"is_logged_in": True}, {"is_logged_in": True, "sub": "1"}, {"is_logged_in": True, "iss": ISS}):
        who, problem = oidc_identity(claims, auth)
        assert who is None and problem is not None and problem.startswith("Refused")


def test_settings_from_env():
    s = Settings.from_env({"STRATA_AUTH": "proxy", "STRATA_TRUSTED_PROXIES": "10.0.0.5, 10.1.0.0/16",
                           "STRATA_AUTH_HEADER": "X-Auth-User"})
    assert s.auth.mode == "proxy" and s.auth.trusted_proxies == ["10.0.0.5", "10.1.0.0/16"]
    assert s.auth.proxy_header == "X-Auth-User"
