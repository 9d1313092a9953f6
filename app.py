"""Strata: explore a document set through a hierarchical knowledge graph. Router and shared sidebar only."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from core.pipeline import active_run
from ui import resources as R

st.set_page_config(page_title="Strata", page_icon=str(Path(__file__).parent / "ui" / "icon.png"), layout="wide")

R.bootstrap()
store = R.store()
settings = R.settings()

with st.sidebar:
    st.markdown("### Strata")
    names = [w.name for w in store.workspaces()]
    ws = R.current_workspace()
    if names:
        st.selectbox("Workspace", names, key=R.WS_KEY, index=names.index(ws.name) if ws else 0)
        ws = R.current_workspace()
    if ws is not None:
        run = active_run(store, ws)
        if run is not None:
            st.info(f"Building… {run.stage or 'queued'}", icon=":material/construction:")
        elif ws.build_version:
            st.caption(f"Built with the **{ws.backend}** backend ({ws.chat_model or 'heuristic'}), "
                       f"embedder **{ws.embedder}** · build {ws.build_version}")
        else:
            st.caption("Not built yet.")
    b = settings.backend
    if b.kind == "ollama":
        status = R.ollama_status(b.ollama_host, b.chat_model, b.embed_model)
        if status["reachable"] and not status["missing"]:
            st.success(f"Backend: Ollama at {b.ollama_host} ({b.chat_model})", icon=":material/bolt:")
        else:
            st.warning(status["message"], icon=":material/warning:")
    else:
        st.success("Backend: offline (heuristic extraction, extractive answers)", icon=":material/offline_bolt:")

pages = [
    st.Page("views/workspaces.py", title="Workspaces & upload", icon=":material/folder_open:", default=True),
    st.Page("views/build.py", title="Build", icon=":material/construction:"),
    st.Page("views/hierarchy.py", title="Hierarchy", icon=":material/donut_large:"),
    st.Page("views/graph.py", title="Graph", icon=":material/hub:"),
    st.Page("views/ask.py", title="Ask", icon=":material/question_answer:"),
    st.Page("views/quality.py", title="Quality", icon=":material/troubleshoot:"),
]
st.navigation(pages).run()
