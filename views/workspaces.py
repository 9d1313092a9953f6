"""Workspaces & upload: pick or create a workspace, add documents, start a build."""

from __future__ import annotations

import streamlit as st

from core import access
from core.config import BACKEND_KINDS
from core.explore.build_counts import graph_counts
from core.ingest import SUPPORTED_EXTENSIONS
from core.ingest.uploads import recent_uploads, record_upload
from core.pipeline.runs import JobBusy, active_run
from core.protocols import BackendError
from core.store import StoreError
from core.workspace import delete_workspace, ingest_uploads, start_build
from ui import access_panel, guard, offered
from ui import resources as R
from ui.documents_panel import delete_documents_panel, open_document_panel
from ui.refusals import draw_duplicates, draw_refusals, draw_uploads
from ui.text import md_escape

store, settings = R.store(), R.settings()
st.title("Workspaces & upload")



def _create() -> None:
    """"Create": runs before the page is drawn again, so the new workspace can become the sidebar's choice."""
    try:
        ws_new = access.create(store, R.me(), (st.session_state.get("new_ws_name") or "").strip())
    except StoreError as exc:
        st.session_state["new_ws_error"] = str(exc)
        return
    R.select_workspace(ws_new.name)
    st.session_state["new_ws_name"] = ""


def _delete(name: str) -> None:
    ws_old = store.get_workspace(name)
    if ws_old is not None:
        try:
            access.require(store, R.me(), ws_old, "delete_workspace")
            delete_workspace(store, ws_old, settings)
        except (JobBusy, BackendError, access.Refused) as exc:  # a run of it is active, or the vector server does not answer
            st.session_state["delete_ws_error"] = str(exc)
            return
    R.select_workspace(None)


left, right = st.columns([2, 1])
with right:
    with st.form("new_ws"):
        st.markdown("**New workspace**")
        st.text_input("Name", placeholder="e.g. contracts-2024", max_chars=64, key="new_ws_name")
        st.form_submit_button("Create", icon=":material/add:", on_click=_create)
    if st.session_state.get("new_ws_error"):
        st.error(md_escape(st.session_state.pop("new_ws_error")))

ws = R.current_workspace()
with left:
    rows = []
    for w in R.visible_workspaces():
        assert w.id is not None  # a row read from or written to the store has its key
        c = graph_counts(store, w.id)  # the Build page's counts: entities after resolution, communities of methods
        run = active_run(store, w)
        rows.append({"workspace": w.name, "documents": c.documents, "chunks": c.chunks,
                     "entities": c.entities, "communities": c.communities,
                     "backend": w.backend if w.build_version else "—",
                     "status": "building" if run else ("built" if w.build_version else "not built"),
                     **({"your role": guard.role(w)} if settings.auth.mode != "none" else {})})
    st.dataframe(rows, hide_index=True, width="stretch")

if ws is None:
    st.info("Create a workspace to start.")
    st.stop()
assert ws.id is not None  # a row read from or written to the store has its key

access_panel.draw(ws)
can_upload = guard.allowed(ws, "upload")
st.subheader(f"Add documents to “{ws.name}”")
if not can_upload:
    st.caption(guard.why_not(ws, "upload"))
st.caption("txt, md, html, pdf, docx, csv and jsonl (one document per row, a text field and optional title/id), "
           "or zip archives of these. The same content is never added twice.")
files = st.file_uploader("Documents", type=[e.lstrip(".") for e in SUPPORTED_EXTENSIONS], accept_multiple_files=True, disabled=not can_upload,
                         key=f"upload_{ws.name}_{st.session_state.get('upload_round', 0)}")
backend = offered.one(st.radio, "Build with", list(BACKEND_KINDS), horizontal=True, key="upload_backend",
                   index=BACKEND_KINDS.index(settings.backend.kind),
                   help="offline: spaCy extraction (heuristics as fallback), no model server. ollama: the configured "
                        "Ollama host(s). openai: the configured OpenAI-compatible server(s) (llama-server, vLLM, "
                        "LM Studio).")
if st.button("Add and build", type="primary", disabled=not files or not can_upload, icon=":material/upload:") \
        and guard.check(ws, "upload"):
    with st.spinner("Reading files…"):
        report = ingest_uploads(store, ws, [(f.name, f.getvalue()) for f in files], settings)
        record_upload(store, ws.id, R.me().name, len(report.added), report.same_as, report.refusals)  # kept
    st.session_state["last_ingest"] = (ws.name, report)  # shown for this workspace only
    st.session_state["upload_round"] = st.session_state.get("upload_round", 0) + 1
    if report.added:
        try:
            start_build(store, R.me(), ws, settings, backend)
        except (BackendError, access.Refused) as exc:
            st.session_state["build_error"] = str(exc)
    st.rerun()

docs = store.documents(ws.id)
stored = {d.id: d.title for d in docs}
last = st.session_state.get("last_ingest")
shown = last[1] if last is not None and last[0] == ws.name else None
if shown is not None:
    (st.success if shown.added else st.info)(shown.summary())
    draw_duplicates(shown.same_as, len(shown.duplicates), stored)
    draw_refusals(shown.refusals)  # one line per reason, a few names each: never one per refused file
    if shown.added:
        st.caption("Only the new documents are chunked and extracted; the entities they share with earlier "
                   "documents, the layers, communities, reports (only those whose material changed) and indexes "
                   "are updated in place.")
        st.page_link("views/build.py", label="Watch the build", icon=":material/construction:")
if st.session_state.get("build_error"):
    st.error(md_escape(st.session_state.pop("build_error")))

draw_uploads(recent_uploads(store, ws), stored)  # kept: listed again after a reload or on a later visit

st.subheader(f"Documents ({len(docs)})")
if docs:
    open_document_panel(store, ws, docs)
    st.dataframe([{"title": d.title, "file": d.filename, "external id": d.external_id or "", "characters": d.n_chars,
                   "added": d.created_at.strftime("%Y-%m-%d %H:%M")} for d in docs[:2000]],
                 hide_index=True, width="stretch")
    if len(docs) > 2000:
        st.caption(f"Showing the first 2,000 of {len(docs):,} documents.")
    if guard.allowed(ws, "delete_documents"):
        delete_documents_panel(store, ws, settings, docs)

if guard.allowed(ws, "delete_workspace"):
    with st.expander("Danger zone"):
        confirm = st.text_input(f"Type “{ws.name}” to delete this workspace and everything built from it")
        st.button("Delete workspace", disabled=confirm != ws.name, icon=":material/delete:", on_click=_delete,
                  args=(ws.name,))
        if st.session_state.get("delete_ws_error"):
            st.error(md_escape(st.session_state.pop("delete_ws_error")))
