"""Who has access to a workspace (the Workspaces page): its members and their roles for everyone who may see it;
for its owners, a form to share it or take access away, and its audit log (who did or was refused what)."""

from __future__ import annotations

import streamlit as st

from core import access
from core.models import Workspace
from ui import guard, offered
from ui import resources as R
from ui.text import md_escape, md_name


def _share(ws: Workspace) -> None:
    name = (st.session_state.get("share_user") or "").strip()
    choice = st.session_state.get("share_role") or "viewer"
    try:
        access.share(R.store(), R.me(), ws, name, None if choice == "remove access" else choice)
    except access.Refused as exc:
        st.session_state["share_error"] = str(exc)
        return
    st.session_state["share_user"] = ""
    where = md_escape(ws.name)
    st.session_state["share_done"] = (f"{md_name(name)} is now {choice} of “{where}”" if choice != "remove access"
                                      else f"{md_name(name)} no longer has access to “{where}”")


def draw(ws: Workspace) -> None:
    if R.settings().auth.mode == "none":
        return  # one laptop: no people, no roles
    with st.expander(f"Access · your role: {guard.role(ws) or 'none'}", icon=":material/group:"):
        st.dataframe([{"member": "everyone signed in" if m.user == access.EVERYONE else m.user, "role": m.role,
                       "added by": m.added_by, "since": m.created_at.strftime("%Y-%m-%d %H:%M")}
                      for m in access.members(R.store(), ws)], hide_index=True, width="stretch")
        if not guard.allowed(ws, "share"):
            st.caption(guard.why_not(ws, "share"))
            return
        with st.form("share_form"):
            a, b = st.columns([3, 2])
            a.text_input("Person", placeholder="their sign-in email or user name; * for everyone", key="share_user")
            offered.one(b.selectbox, "Role", [*access.ROLES, "remove access"], key="share_role",
                        help="viewer: browse and ask · editor: also upload, build, merge review, what-if, delete "
                             "documents · owner: also share and delete the workspace")
            st.form_submit_button("Share", icon=":material/person_add:", on_click=_share, args=(ws,))
        if err := st.session_state.pop("share_error", None):
            st.error(md_escape(err), icon=":material/block:")
        if done := st.session_state.pop("share_done", None):
            st.success(done)  # (built with md_name and md_escape already)
        events = access.audit_log(R.store(), ws, 200)
        st.markdown("**Audit log** (newest first)")
        with st.container(key="audit_log"):
            st.dataframe([{"when": e.at.strftime("%Y-%m-%d %H:%M:%S"), "who": e.user, "what": e.action,
                           "outcome": "allowed" if e.allowed else "refused", "detail": e.detail} for e in events],
                         hide_index=True, width="stretch")
