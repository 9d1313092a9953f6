"""The pages' side of core/access.py: may the visitor do this to the current workspace (to enable a button, or to
refuse an attempt in one logged line), and the deep link `?workspace=NAME` that opens a workspace they may see."""

from __future__ import annotations

import streamlit as st

from core import access
from core.models import Workspace
from ui import resources as R
from ui.text import md_escape

LINK = "workspace"  # the query parameter of a deep link
_SEEN = "_link_seen"  # session state: the deep link already followed


def role(ws: Workspace) -> str | None:
    return access.role_of(R.store(), R.me(), ws)


def allowed(ws: Workspace, action: str) -> bool:
    """May the visitor `action` the workspace (nothing logged: for enabling a button)."""
    return access.allows(role(ws), action)


def why_not(ws: Workspace, action: str) -> str:
    """The one line said beside a control the visitor's role does not allow."""
    return (f"Your role in “{ws.name}” is {role(ws) or 'none'}: to {access.WHAT[action]} it takes "
            f"{access.ACTIONS[action]}.")


def check(ws: Workspace, action: str) -> bool:
    """True when the visitor may `action` the workspace; else the refusal, logged, shown as one line."""
    try:
        access.require(R.store(), R.me(), ws, action)
        return True
    except access.Refused as exc:
        st.error(md_escape(str(exc)), icon=":material/block:")
        return False


def follow_link() -> None:
    """Open the workspace a deep link names (`?workspace=NAME`), once per link, if the visitor may see it; else one
    line (logged) that never says whether it exists."""
    name = st.query_params.get(LINK)
    if not name or st.session_state.get(_SEEN) == name:
        return
    st.session_state[_SEEN] = name
    try:
        ws = access.find(R.store(), R.me(), name)
    except access.Refused as exc:
        st.session_state["_link_refused"] = str(exc)
        return
    R.select_workspace(ws.name)


def show_refused_link() -> None:
    if msg := st.session_state.pop("_link_refused", None):
        st.error(md_escape(msg), icon=":material/block:")
