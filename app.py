"""Strata: explore a document set through a hierarchical knowledge graph. Router and shared sidebar only."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui import guard
from ui import resources as R
from ui.auth import gate
from ui.sidebar import sidebar

st.set_page_config(page_title="Strata", page_icon=str(Path(__file__).parent / "ui" / "icon.png"), layout="wide")

gate()  # signed out (STRATA_AUTH oidc or proxy): only the sign-in, on every page and deep link

R.bootstrap()
guard.follow_link()  # ?workspace=NAME

sidebar()
guard.show_refused_link()

if problem := R.vector_store_problem(R.settings().storage.chroma_url):  # every page needs the vectors
    st.error(problem, icon=":material/cloud_off:")
    st.stop()

pages = [
    st.Page("views/workspaces.py", title="Workspaces & upload", icon=":material/folder_open:", default=True),
    st.Page("views/build.py", title="Build", icon=":material/construction:"),
    st.Page("views/hierarchy.py", title="Hierarchy", icon=":material/donut_large:"),
    st.Page("views/graph.py", title="Graph", icon=":material/hub:"),
    st.Page("views/ask.py", title="Ask", icon=":material/question_answer:"),
    st.Page("views/quality.py", title="Quality", icon=":material/troubleshoot:"),
    st.Page("views/evaluate.py", title="Evaluate", icon=":material/leaderboard:"),
]
st.navigation(pages).run()
