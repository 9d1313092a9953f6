"""Deleting documents from a built workspace (the Workspaces page): pick documents, see what only they support,
confirm, and the delete job (core/build/delete.py) runs in the background worker; the graph is then updated."""

from __future__ import annotations

import streamlit as st

from core import access
from core.build.delete import preview
from core.build.runs import JobBusy
from core.worker import start_delete
from ui import offered
from ui import resources as R
from ui.text import md_escape


def _n(count: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count:,} {noun if count == 1 else plural}"


def delete_documents_panel(store, ws, settings, docs) -> None:
    if st.session_state.pop("delete_docs_reset", False):  # the last delete's picks, cleared before drawn again
        st.session_state.pop(f"delete_docs_{ws.name}", None)
        st.session_state.pop(f"delete_docs_sure_{ws.name}", None)
    done = st.session_state.get("deleted_docs")
    if done is not None and done[0] == ws.name:
        st.success(f"Deleting {done[1]} document(s): the graph is updated in the background.")
        st.page_link("views/build.py", label="Watch the delete", icon=":material/construction:")
    with st.expander("Delete documents"):
        label = {d.id: f"{d.title} ({d.filename})" for d in docs}
        chosen = offered.many(st.multiselect, "Documents to delete", list(label), format_func=lambda i: label.get(i, i),
                                key=f"delete_docs_{ws.name}")
        if not chosen:
            st.caption("Pick the documents to delete: what only they support goes with them, nothing else.")
            return
        p = preview(store, ws.id, chosen)
        names = ", ".join(f"**{md_escape(label[i])}**" for i in chosen[:5]) + (" …" if len(chosen) > 5 else "")
        st.warning(f"Deleting {p['documents']} document(s) ({names}) removes {_n(p['chunks'], 'chunk')}, "
                   f"{_n(p['statements'], 'statement')}, and the {_n(p['entities_only_theirs'], 'entity')} and "
                   f"{_n(p['relationships_only_theirs'], 'relationship')} only they support. "
                   f"{_n(p['entities_shared'], 'entity')} they share with other documents stay, with the other "
                   "documents' support only. The "
                   "layers, communities, reports and indexes are then updated; reports of changed communities are "
                   "marked stale until they are written again.", icon=":material/delete:")
        sure = st.checkbox("Delete these documents", key=f"delete_docs_sure_{ws.name}")
        if st.button("Delete", type="primary", disabled=not sure, icon=":material/delete:",
                     key=f"delete_docs_go_{ws.name}"):
            try:
                start_delete(store, R.me(), ws, settings, list(chosen))
            except (JobBusy, access.Refused) as exc:
                st.error(md_escape(str(exc)))
                return
            st.session_state["deleted_docs"] = (ws.name, len(chosen))
            st.session_state["delete_docs_reset"] = True
            st.rerun()
