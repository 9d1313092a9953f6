"""Who is there, and the sign-in every page shows instead of itself while nobody is.

`STRATA_AUTH` (core/config.py `AuthSettings`): "none" (one laptop: the local user, nothing shown), "oidc" (Streamlit's
own `st.login` / `st.user` with the OpenID Connect provider of `.streamlit/secrets.toml`; the user named by an email
the provider verified, else by subject and issuer: `oidc_name`), "proxy" (the user named by a header that an
authenticating proxy sets, believed only on a connection from one of `trusted_proxies`). What a workspace lets that
user do is core/access.py's business; this module only says who they are.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping

import streamlit as st

from core.access import LOCAL, User
from core.config import AuthSettings
from ui import resources as R
from ui.text import md_name

# Streamlit's OIDC sign-in returns to the app's root; the link a signed-out visitor opened waits in the tab's
# sessionStorage (written by the sign-in page, read once by the first signed-in page, which goes there). Only a path
# on this server is kept or followed: "/..." but not "//..." or "/\..." (both lead to another host).
AFTER_SIGN_IN = "strata.after_sign_in"
_SAFE = r"/^\/(?![\/\\])/.test(w)"
KEEP_LINK = (f"<script>try{{const l=window.location,w=l.pathname+l.search;if({_SAFE})"
             f"sessionStorage.setItem('{AFTER_SIGN_IN}',w)}}catch(e){{}}</script>")
FOLLOW_LINK = (f"<script>try{{const s=sessionStorage,w=s.getItem('{AFTER_SIGN_IN}'),l=window.location;"
               f"if(w!==null){{s.removeItem('{AFTER_SIGN_IN}');if({_SAFE}&&w!==l.pathname+l.search)l.replace(w)}}}}"
               "catch(e){}</script>")
_FOLLOWED = "after_sign_in_followed"  # session state: this session has looked for a link to go back to


# Streamlit serves through uvicorn, whose ProxyHeadersMiddleware rewrites the connection's peer address from
# X-Forwarded-For when the TCP peer is in FORWARDED_ALLOW_IPS (default "127.0.0.1,::1"): any local process could then
# claim to come from a trusted proxy. Only an empty FORWARDED_ALLOW_IPS leaves the peer the TCP peer.
FORWARDED_ENV = "FORWARDED_ALLOW_IPS"
FORWARDED_FIX = (f"Proxy sign-in needs the app started with {FORWARDED_ENV}= (set and empty), so that the server "
                 "does not take the peer address from X-Forwarded-For; see the README's Sign-in section.")


def forwarding_problem(environ: Mapping[str, str]) -> str | None:
    """Why proxy sign-in cannot be trusted in a process with this environment, or None."""
    if environ.get(FORWARDED_ENV) is None or environ[FORWARDED_ENV].strip():
        return FORWARDED_FIX
    return None


def peer_trusted(peer: str | None, trusted: list[str]) -> bool:
    """Whether a connection from `peer` (Streamlit's `st.context.ip_address`: None for 127.0.0.1 and ::1) comes from
    one of `trusted` (addresses or networks). An entry that is neither trusts nothing."""
    try:
        ip = ipaddress.ip_address(peer) if peer else ipaddress.ip_address("127.0.0.1")
    except ValueError:
        return False
    loopback = peer is None
    for entry in trusted:
        try:
            net = ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            continue
        if ip in net or (loopback and ipaddress.ip_address("::1") in net):
            return True
    return False


def proxy_identity(headers_get_all, peer: str | None, auth: AuthSettings,
                   environ: Mapping[str, str]) -> tuple[User | None, str | None]:
    """(the user the proxy names, None) or (None, the one line that says why nobody is signed in).

    `headers_get_all(name)` lists every value the request carried for a header (Streamlit's
    `st.context.headers.get_all`)."""
    if problem := forwarding_problem(environ):
        return None, problem
    values = [v.strip() for v in headers_get_all(auth.proxy_header)]
    if not peer_trusted(peer, auth.trusted_proxies):
        where = peer or "this machine (127.0.0.1)"
        if any(values):
            return None, (f"Refused: the {auth.proxy_header} header came from {where}, which is not a trusted proxy "
                          "(STRATA_TRUSTED_PROXIES). Open Strata through the sign-in proxy.")
        return None, f"No identity: {where} is not a trusted proxy. Open Strata through the sign-in proxy."
    names = [v for v in values if v]
    if len(names) != 1:
        what = "no" if not names else "more than one"
        return None, (f"No identity came through the proxy: the request carried {what} {auth.proxy_header} header. "
                      "Open Strata through the sign-in proxy.")
    return User(names[0], unrestricted=names[0] in auth.admins), None


def email_verified(claims: Mapping[str, object]) -> bool:
    """Whether the provider vouches for the email claim: `email_verified` true (JSON true, or the string "true"
    that some providers send); false, anything else or no such claim: not verified."""
    flag = claims.get("email_verified")
    return flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")


def oidc_name(claims: Mapping[str, object]) -> tuple[str | None, str | None]:
    """(the name of the person these ID-token claims sign in, None) or (None, the one line why they are refused).

    * An email claim is the name only when the provider says it verified it (`email_verified`): many providers let
      people type any address, so an address the provider does not vouch for (false, or no `email_verified` at all)
      is refused rather than believed, and is never anyone's name (a member's, or an admin's of STRATA_ADMINS).
    * No email claim (or an empty one): the subject and its issuer, `SUB@ISSUER` (the issuer as the token names it,
      e.g. `2f9c…@https://idp.example.org/realms/team`): a subject is unique only within its issuer, and the
      issuer's "://" keeps every such name apart from every email address.
    """
    email = claims.get("email")
    if isinstance(email, str):
        email = email.strip() or None
    if email is not None:
        if not isinstance(email, str) or not _address(email):
            return None, "Refused: the sign-in's email claim is not an email address. Ask your administrator."
        if not email_verified(claims):
            return None, (f"Refused: your sign-in provider has not verified the address {md_name(email)}, and "
                          "Strata names people only by an address their provider has verified. Verify it with the "
                          "provider, or sign in with another account.")
        return email, None
    sub, iss = (str(claims.get(k) or "").strip() for k in ("sub", "iss"))
    if not sub or not iss:
        return None, "Refused: the sign-in named no one (no verified email, no subject and issuer)."
    return f"{sub}@{iss}", None


def _address(email: str) -> bool:
    """`local@domain` with a domain that could be a host's (no "/", ":" or space): never a `SUB@ISSUER` name."""
    local, _, domain = email.rpartition("@")
    return bool(local) and bool(domain) and not any(c in domain for c in "/\\: \t")


def oidc_identity(claims: Mapping[str, object], auth: AuthSettings) -> tuple[User | None, str | None]:
    """(the user of a signed-in `st.user`, None), (None, the one line why the sign-in is refused), or (None, None)
    while nobody has signed in. Named by `oidc_name`; an admin of STRATA_ADMINS only by that name, so an address
    there is matched only by a sign-in whose provider verified it."""
    if not claims.get("is_logged_in"):
        return None, None
    name, problem = oidc_name(claims)
    if name is None:
        return None, problem
    return User(name, unrestricted=name in auth.admins), None


def _who() -> tuple[User | None, str | None]:
    auth = R.settings().auth
    if auth.mode == "oidc":
        return oidc_identity(st.user.to_dict(), auth)
    if auth.mode == "proxy":
        peer = st.context.ip_address
        peer = peer if peer is None or isinstance(peer, str) else "an unknown address"
        return proxy_identity(st.context.headers.get_all, peer, auth, os.environ)
    return LOCAL, None


def user() -> User | None:
    """The current visitor, or None while nobody is signed in."""
    return _who()[0]


def gate() -> User:
    """The signed-in user; else only the sign-in is drawn and the script stops there (every page, deep links too)."""
    auth = R.settings().auth
    who, problem = _who()
    if who is not None:
        if auth.mode != "none":
            _signed_in(who, auth)
        return who
    st.title("Strata")
    if auth.mode == "oidc" and problem:  # signed in with the provider, but as no one Strata may take them for
        st.error(problem, icon=":material/lock:")
        if st.button("Sign out", icon=":material/logout:", key="sign_out"):
            st.logout()
    elif auth.mode == "oidc" and (missing := _oidc_unset(auth.oidc_provider)):
        st.error(missing, icon=":material/lock:")
    elif auth.mode == "oidc":
        st.write("Strata holds your team's documents: sign in with your organisation's account to see the "
                 "workspaces shared with you.")
        st.html(KEEP_LINK, unsafe_allow_javascript=True)  # this page's link, to come back to after the provider
        if st.button("Sign in", type="primary", icon=":material/login:"):
            if auth.oidc_provider:
                st.login(auth.oidc_provider)
            else:
                st.login()
    else:
        st.error(problem or "No identity came through the proxy.", icon=":material/lock:")
    st.stop()
    raise AssertionError("st.stop() returned")  # (it raises; this line only tells the type checker)


def _oidc_unset(provider: str | None) -> str | None:
    """The one line saying the sign-in's provider is not configured, or None."""
    try:
        section = st.secrets.get("auth")
    except FileNotFoundError:  # no secrets file at all
        section = None
    if provider and isinstance(section, Mapping):
        section = section.get(provider)
    if isinstance(section, Mapping):
        return None
    name = f"[auth.{provider}]" if provider else "[auth]"
    return (f"Sign-in is not set up: .streamlit/secrets.toml has no {name} section (STRATA_AUTH=oidc; see the "
            "README's Sign-in section).")


def _signed_in(who: User, auth: AuthSettings) -> None:
    with st.sidebar:
        st.caption(f"Signed in as {md_name(who.name)}")
        if auth.mode == "oidc" and not st.session_state.get(_FOLLOWED):
            st.session_state[_FOLLOWED] = True
            st.html(FOLLOW_LINK, unsafe_allow_javascript=True)  # back to the link opened before signing in
        if auth.mode == "oidc" and st.button("Sign out", icon=":material/logout:", key="sign_out"):
            st.logout()
