"""The Workspaces page's documents: one opened (its text, entities, communities and what it contributed:
core/explore/document_detail.py), and deleting documents from a built workspace: pick documents, see what only they
support, confirm, and the delete job (core/pipeline/delete.py) runs in the background worker; the graph is then
updated."""

from __future__ import annotations

import streamlit as st

from core import access
from core.explore.document_detail import DocEntity, DocumentDetail, document_detail
from core.pipeline.delete import preview
from core.pipeline.runs import JobBusy
from core.quality.data import METHODS
from core.text import truncate
from core.worker import start_delete
from ui import offered
from ui import resources as R
from ui.text import md_escape, md_label

TEXT_SHOWN = 40_000  # characters of an opened document drawn on the page


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


def _names(ents: list[DocEntity], n: int = 30) -> str:
    return ", ".join(md_label(e.title, 60) for e in ents[:n]) + (f", … ({len(ents) - n:,} more)" if len(ents) > n
                                                                 else "")


def _detail(d: DocumentDetail) -> None:
    st.markdown(f"#### {md_escape(d.title)}")
    facts = [f"file {d.filename}", f"external id {d.external_id}" if d.external_id else "",
             f"{d.n_chars:,} characters", f"added {d.created_at:%Y-%m-%d %H:%M} UTC"]
    st.caption(md_escape(" · ".join(f for f in facts if f)))
    cols = st.columns(6)
    for col, (label, value, help_) in zip(cols, (
            ("Chunks", d.chunks, "Passages the document was cut into."),
            ("Statements", d.statements, "Statements extracted from its passages."),
            ("Relationships", d.relationships, "Relationships derived from its passages."),
            ("Entities", len(d.entities), "Entities its passages mention."),
            ("Introduced", len(d.introduced), "Entities no document added before it mentions."),
            ("Only here", len(d.only_here), "Entities no other document mentions: deleting it removes them."))):
        col.metric(label, f"{value:,}", help=help_)
    tabs = st.tabs(["Text", f"Entities ({len(d.entities):,})", f"Communities ({len(d.communities):,})",
                    "Contributed"])
    with tabs[0], st.container(height=360, border=True):
        st.markdown(md_escape(d.text[:TEXT_SHOWN]))
        if len(d.text) > TEXT_SHOWN:
            st.caption(f"The first {TEXT_SHOWN:,} of {len(d.text):,} characters.")
    with tabs[1]:
        if d.entities:
            st.dataframe([{"entity": e.title, "type": e.type, "passages here": e.passages,
                           "documents mentioning it": e.documents, "introduced here": e.introduced}
                          for e in d.entities], hide_index=True, width="stretch", height=300)
        else:
            st.caption("Its passages mention no entity (not built yet, or nothing was extracted).")
    with tabs[2]:
        if d.communities:
            st.dataframe([{"method": METHODS.get(c.method, c.method), "level": c.level, "community": c.title or c.id,
                           "members": c.size, "of them mentioned here": c.members_here} for c in d.communities],
                         hide_index=True, width="stretch", height=300)
        else:
            st.caption("Its entities are in no community yet.")
    with tabs[3]:
        st.markdown(f"- {d.chunks:,} chunk(s), {d.statements:,} statement(s), {d.topics:,} topic(s) and "
                    f"{d.relationships:,} relationship(s) come from this document.\n"
                    f"- Entities it introduced (first mentioned here): {len(d.introduced):,}"
                    + (f": {_names(d.introduced)}" if d.introduced else "") + "\n"
                    f"- Entities only it mentions: {len(d.only_here):,}"
                    + (f": {_names(d.only_here)}" if d.only_here else ""))


def open_document_panel(store, ws, docs) -> None:
    """Pick a document of the workspace and see it (its id is one of `docs`, the workspace's own, and is read again
    within the workspace by core: an id the browser makes up opens nothing)."""
    label = {d.id: f"{truncate(d.title, 90)} ({truncate(d.filename, 40)})" for d in docs}
    chosen = offered.maybe(st.selectbox, "Open a document", list(label), format_func=lambda i: label.get(i, i),
                           key=f"open_doc_{ws.name}", placeholder="pick or type part of a title")
    if chosen is None:
        return
    detail = document_detail(store, ws.id, chosen)
    if detail is None:
        st.info("That document is no longer in this workspace.")
        return
    with st.container(border=True, key="doc_view"):
        _detail(detail)
