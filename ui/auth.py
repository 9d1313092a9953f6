"""Who the visitor is (placeholder until the sign-in lands: mode none only)."""

from __future__ import annotations

import streamlit as st

from core.access import LOCAL, User, signed_in
from ui import resources as R


def user() -> User | None:
    a = R.settings().auth
    if a.mode == "none":
        return LOCAL
    if a.mode == "proxy":
        name = st.context.headers.get(a.proxy_header)
        return signed_in(R.settings(), name) if name else None
    return None


def gate() -> User:
    u = user()
    if u is None:
        st.error("Sign in first.")
        st.stop()
    return u
